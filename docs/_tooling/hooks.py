"""MkDocs hooks for the pullbacks documentation.

Figures that live beside the code (``examples/rigid_body/demo.png``) are added to the site as
they are, so the docs never hold a second copy.

After the build, check that the API reference is complete: every name in ``__all__`` of the
public modules must be rendered somewhere (an ``::: identifier`` block in ``docs/api/``). A name
added to ``__all__`` without a page is a warning, so ``mkdocs build --strict`` fails on it.
The modules' ``__all__`` are read statically with griffe: nothing is imported.
"""
from __future__ import annotations

import logging
from pathlib import Path

import griffe
from mkdocs.structure.files import File

_log = logging.getLogger("mkdocs.hooks.pullbacks")

PUBLIC_MODULES = ("rules", "rules.testing", "rules.internal", "geometric", "geometric.optim",
                  "geometric.solvers", "geometric.hyperbolic")

# Site path -> path in the repository.
FIGURES = {"assets/rigid_body_demo.png": "examples/rigid_body/demo.png",
           "assets/hyperbolic_disk.png": "examples/hyperbolic/disk.png"}


def on_files(files, config, **kwargs):
    root = Path(config.config_file_path).parent
    for dest, src in FIGURES.items():
        files.append(File.generated(config, dest, abs_src_path=str(root / src)))
    return files


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
