r"""Griffe extension: render the reStructuredText parts of our Google-style docstrings in MkDocs.

The library's docstrings are Google style (sections ``Args:``, ``Returns:``, ...), with a few
reStructuredText/Sphinx constructs that mkdocstrings does not render by itself. Once every module
is loaded, this extension rewrites each docstring's text, before it is parsed, as follows:

* ``.. math::`` blocks become ``$$ ... $$`` blocks for ``pymdownx.arithmatex`` (MathJax). As in
  ``sphinx.ext.mathjax``, blank lines separate equations, and an equation containing ``\\`` is
  wrapped in ``\begin{split} ... \end{split}``. The inline role ``:math:`x``` becomes ``\(x\)``.
* ``.. note::``, ``.. warning::``, ``.. seealso::`` (and the other Sphinx admonitions) become
  Material admonitions (``!!! note``).
* A paragraph ending in ``::`` followed by an indented block becomes a paragraph ending in ``:``
  and a fenced Python code block.
* Python roles (``:func:``, ``:class:``, ``:meth:``, ``:mod:``, ``:attr:``, ...) become mkdocs-autorefs
  cross-references when the target is part of the documented public API: the target is resolved
  like Sphinx does (relative to the object, its parents and its module; ``~`` shows the last
  component only), then mapped from its canonical path (e.g. ``rules._linalg.qr``) to its public
  path (``rules.qr``). A target that exists but is private (``rules._small.closed_form_inv``) or
  belongs to another package (``jax.Array``) is shown as code. A target in one of our packages
  that does not exist is a warning, so ``mkdocs build --strict`` fails on a broken reference.
* ``` ``literal`` ``` needs no change: it is already a Markdown code span.

The public API is the names listed in ``__all__`` of ``public_modules`` (option), and the members
of the classes among them.
"""
from __future__ import annotations

import logging
import re
import textwrap
from typing import Any

import griffe

# MkDocs counts warnings of loggers under "mkdocs" (and fails in strict mode).
_log = logging.getLogger("mkdocs.plugins.griffe_rst")

DEFAULT_PUBLIC_MODULES = ("rules", "rules.testing", "rules.internal", "geometric", "geometric.optim")
OUR_PACKAGES = ("rules", "geometric", "examples")

_ROLE = re.compile(
    r":(?:py:)?(?P<kind>func|meth|class|mod|attr|data|obj|exc|const|type|math|ref|doc):"
    r"`(?P<body>[^`]+)`")
_EXPLICIT_TITLE = re.compile(r"^(?P<title>.+?)\s*<(?P<target>[^<>]+)>$", re.S)
_DIRECTIVE = re.compile(r"^(?P<indent>\s*)\.\.\s+(?P<name>[\w-]+)::\s*(?P<arg>.*)$")
_ADMONITIONS = {"note": "note", "warning": "warning", "seealso": 'info "See also"', "tip": "tip",
                "important": "important", "caution": "warning", "danger": "danger",
                "attention": "warning", "hint": "tip", "error": "failure"}


def _indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _block(lines: list[str], start: int, indent: int) -> int:
    """End (exclusive) of the block of lines after ``start`` indented more than ``indent``."""
    end = start
    i = start
    while i < len(lines):
        if lines[i].strip() == "":
            i += 1
            continue
        if _indent_of(lines[i]) <= indent:
            break
        i += 1
        end = i
    return end


def math_to_markdown(body: str) -> list[str]:
    """The ``$$`` lines of one ``.. math::`` directive's (dedented) content, as Sphinx would."""
    parts = [p.strip("\n") for p in re.split(r"\n\s*\n", body) if p.strip()]
    out: list[str] = []
    for part in parts:
        text = part.strip()
        if r"\\" in text and not text.startswith(r"\begin"):
            text = r"\begin{split}" + "\n" + text + "\n" + r"\end{split}"
        out += ["$$", *text.splitlines(), "$$", ""]
    return out


def convert_blocks(text: str) -> str:
    """Directives (math, admonitions) and ``::`` literal blocks to Markdown; roles untouched."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        directive = _DIRECTIVE.match(line)
        if directive:
            indent = len(directive["indent"])
            name, arg = directive["name"], directive["arg"].strip()
            end = _block(lines, i + 1, indent)
            content = [ln for ln in lines[i + 1:end] if not re.match(r"^\s*:[\w-]+:", ln)]
            body = textwrap.dedent("\n".join(content))
            pad = " " * indent
            if name == "math":
                body = (arg + "\n" + body) if arg else body
                new = math_to_markdown(body)
            elif name in _ADMONITIONS:
                body = (arg + "\n" + body) if arg else body
                new = [f"!!! {_ADMONITIONS[name]}", ""] + ["    " + ln if ln else "" for ln in
                                                           convert_blocks(body).splitlines()] + [""]
            else:
                _log.warning("griffe_rst: unsupported directive '.. %s::' left as text", name)
                new = lines[i:end]
                pad = ""
            if out and out[-1].strip():
                out.append("")
            out += [pad + ln if ln else "" for ln in new]
            i = end
            continue
        if line.rstrip().endswith("::") and i + 1 < len(lines):
            indent = _indent_of(line)
            end = _block(lines, i + 1, indent)
            if end > i + 1:
                head = line.rstrip()[:-2].rstrip()
                if head.strip():
                    out.append(head + ":")
                code = textwrap.dedent("\n".join(lines[i + 1:end])).strip("\n")
                pad = " " * indent
                out += ["", pad + "```python", *[pad + ln if ln else "" for ln in code.splitlines()],
                        pad + "```", ""]
                i = end
                continue
        out.append(line)
        i += 1
    return "\n".join(out)


class RstToMarkdown(griffe.Extension):
    """See the module docstring."""

    def __init__(self, public_modules: list[str] | tuple[str, ...] = DEFAULT_PUBLIC_MODULES):
        super().__init__()
        self.public_modules = tuple(public_modules)
        self._public: dict[str, str] | None = None
        self._collection = None
        self._pending: list[griffe.Module] = []
        self._done: set[str] = set()
        self._loading = False
        self._originals: dict[int, tuple[griffe.Docstring, str]] = {}  # keeps the objects alive
        self._converted: set[int] = set()

    # -- public API map -------------------------------------------------------------------------

    def _lookup(self, path: str):
        """The object at the absolute dotted ``path``, or None."""
        if self._collection is None:
            return None
        top, _, rest = path.partition(".")
        obj = self._collection.members.get(top)
        if obj is None:
            return None
        try:
            return obj[rest] if rest else obj
        except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            return None

    def public_map(self) -> dict[str, str]:
        """``{canonical path: public path}`` for every documented object."""
        if self._public is not None:
            return self._public
        public: dict[str, str] = {}
        for mod_path in self.public_modules:
            module = self._lookup(mod_path)
            if module is None:
                continue
            public.setdefault(module.path, mod_path)
            names = module.exports if module.exports is not None else [
                n for n in module.members if not n.startswith("_")]
            for name in names:
                name = name if isinstance(name, str) else getattr(name, "name", str(name))
                try:
                    member = module[name]
                    target = member.final_target if member.is_alias else member
                except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
                    continue
                pub = f"{mod_path}.{name}"
                public.setdefault(target.path, pub)
                if target.is_class:
                    for sub in target.all_members:
                        if not sub.startswith("_"):
                            public.setdefault(f"{target.path}.{sub}", f"{pub}.{sub}")
        self._public = public
        return public

    # -- roles ----------------------------------------------------------------------------------

    def _resolve(self, obj, target: str):
        """Resolve ``target`` as Sphinx does from ``obj``: its members, its parents', absolute."""
        target = target.lstrip(".")
        scope = obj
        while scope is not None:
            if scope.is_module or scope.is_class:
                try:
                    found = scope[target]
                    return found.final_target if found.is_alias else found
                except (KeyError, ValueError, griffe.AliasResolutionError,
                        griffe.CyclicAliasError):
                    pass
            scope = scope.parent
        found = self._lookup(target)
        if found is not None and found.is_alias:
            try:
                found = found.final_target
            except (griffe.AliasResolutionError, griffe.CyclicAliasError):
                return None
        return found

    def convert_role(self, obj, kind: str, body: str) -> str:
        if kind == "math":
            return rf"\({body}\)"
        explicit = _EXPLICIT_TITLE.match(body)
        title, target = (explicit["title"], explicit["target"]) if explicit else (None, body)
        short = target.startswith("~")
        target = target.lstrip("~")
        if title is None:
            title = target.rsplit(".", 1)[-1] if short else target
        if kind in ("ref", "doc"):
            _log.warning("griffe_rst: %s: role :%s:`%s` is not supported; use a Markdown link",
                         obj.path, kind, body)
            return f"`{title}`"
        found = self._resolve(obj, target)
        if found is None:
            if target.split(".")[0] in OUR_PACKAGES or "." not in target:
                _log.warning("griffe_rst: %s: cannot resolve :%s:`%s`", obj.path, kind, body)
            return f"`{title}`"
        public = self.public_map().get(found.path)
        return f"[`{title}`][{public}]" if public else f"`{title}`"

    def convert_text(self, obj, text: str) -> str:
        text = convert_blocks(text)
        return _ROLE.sub(lambda m: self.convert_role(obj, m["kind"], m["body"]), text)

    # -- griffe hooks ---------------------------------------------------------------------------

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        # Roles may point into another of our packages (a `rules` docstring to `geometric`), so
        # all of them are loaded before any docstring is rewritten: the first package to load
        # loads the others (their own `on_package` calls only queue them).
        self._collection = loader.modules_collection
        self._pending.append(pkg)
        if self._loading:
            return
        self._loading = True
        try:
            for top in dict.fromkeys(m.split(".")[0] for m in self.public_modules):
                if top not in self._collection.members:
                    loader.load(top)
        finally:
            self._loading = False
        self._public = None
        pending, self._pending = self._pending, []
        for package in pending:
            if package.path not in self._done:
                self._done.add(package.path)
                self._visit(package, set())

    def _visit(self, obj, seen: set[str]) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        docstring = obj.docstring
        if docstring is not None:
            # griffe-inherited-docstrings gives a subclass method its base's Docstring object:
            # convert from the original text, relative to this object, into a copy of its own.
            original = self._originals.setdefault(id(docstring), (docstring, docstring.value))[1]
            text = self.convert_text(obj, original)
            if id(docstring) in self._converted:
                obj.docstring = griffe.Docstring(
                    text, lineno=docstring.lineno, endlineno=docstring.endlineno, parent=obj,
                    parser=docstring.parser, parser_options=docstring.parser_options)
            else:
                self._converted.add(id(docstring))
                docstring.value = text
                docstring.__dict__.pop("parsed", None)  # parsed lazily; drop a stale cache
        for member in obj.members.values():
            if not member.is_alias:
                self._visit(member, seen)
