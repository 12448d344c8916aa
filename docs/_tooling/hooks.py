"""MkDocs hooks for the pullbacks documentation.

After the build, check that the API reference is complete: every name in ``__all__`` of the
public modules must be rendered somewhere (an ``::: identifier`` block in ``docs/api/``). A name
added to ``__all__`` without a page is a warning, so ``mkdocs build --strict`` fails on it.
The modules' ``__all__`` are read statically with griffe: nothing is imported.
"""
from __future__ import annotations

import logging
from pathlib import Path

import griffe

_log = logging.getLogger("mkdocs.hooks.pullbacks")

PUBLIC_MODULES = ("rules", "rules.testing", "rules.internal", "geometric", "geometric.optim")


def _exports(root: Path) -> list[str]:
    names = []
    loader = griffe.GriffeLoader(search_paths=[str(root)])
    for path in PUBLIC_MODULES:
        module = loader.load(path)
        for name in module.exports or []:
            names.append(f"{path}.{name if isinstance(name, str) else name.name}")
    return names


def on_post_build(config, **kwargs) -> None:
    autorefs = config.plugins["autorefs"]
    documented = set(autorefs._primary_url_map) | set(autorefs._secondary_url_map)
    root = Path(config.config_file_path).parent
    missing = [name for name in _exports(root) if name not in documented]
    for name in missing:
        _log.warning("API reference: %s is in __all__ but not rendered in docs/api/ "
                     "(add a `::: %s` block)", name, name)
