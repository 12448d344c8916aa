"""What the examples' evaluation programs share for their plots: pyplot off-screen, figures written as PNG files."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["pyplot", "save_figures"]


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend (imported when a program first plots)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figures(figures: Mapping[str, Any], out: Path, dpi: int = 100,
                 dpis: Mapping[str, int] | None = None) -> list[Path]:
    """Write each figure as ``<name>.png`` into ``out`` and close it; return the paths, in the order of ``figures``.

    Args:
        figures: ``matplotlib`` figures by file stem.
        out: an existing directory.
        dpi: the resolution of every figure not in ``dpis``.
        dpis: resolutions of single figures, by file stem.
    """
    plt = pyplot()
    paths = []
    for name, fig in figures.items():
        paths.append(out / f"{name}.png")
        fig.savefig(paths[-1], dpi=(dpis or {}).get(name, dpi))
        plt.close(fig)
    return paths
