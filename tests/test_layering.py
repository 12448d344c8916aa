"""The layering of the two packages, read from their source.

* ``geometric`` uses ``rules`` through public names only (``rules`` and ``rules.internal``);
* no module imports another module's private (underscored) name: a name used across modules is
  the package's, and carries no underscore;
* no module of ``geometric`` reads an object's private attribute (outside ``self`` and ``cls``).

docs/architecture.md draws the resulting dependency graph.
"""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
NAMEDTUPLE_API = {"_replace", "_fields", "_asdict", "_make"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _modules(package):
    return sorted((ROOT / package).rglob("*.py"))


def _problems(package):
    problems = []
    for path in _modules(package):
        where = path.relative_to(ROOT)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [a.name for a in node.names]
                module = node.module or ""
                if package == "geometric" and module.split(".")[0] == "rules" and (
                        any(_private(p) for p in module.split(".")) or any(map(_private, names))):
                    problems.append(f"{where}:{node.lineno}: imports a private part of rules "
                                    f"(from {module} import {', '.join(names)})")
                elif any(_private(n) for n in names) and not module == "":
                    problems.append(f"{where}:{node.lineno}: imports the private name(s) "
                                    f"{[n for n in names if _private(n)]} from {module}")
            elif isinstance(node, ast.Import) and package == "geometric":
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[0] == "rules" and any(map(_private, parts)):
                        problems.append(f"{where}:{node.lineno}: imports {alias.name}")
            elif (package == "geometric" and isinstance(node, ast.Attribute)
                  and _private(node.attr) and node.attr not in NAMEDTUPLE_API):
                owner = node.value
                if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                    continue
                if isinstance(owner, ast.Call) and getattr(owner.func, "id", None) == "super":
                    continue
                problems.append(f"{where}:{node.lineno}: reads {ast.unparse(node)}")
    return problems


@pytest.mark.parametrize("package", ["rules", "geometric"])
def test_layering(package):
    assert not _problems(package), "\n".join(_problems(package))
