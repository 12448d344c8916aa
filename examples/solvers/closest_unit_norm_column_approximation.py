r"""Closest matrix with unit-norm columns: minimise ``½‖X − A‖²_F`` on the oblique manifold.

.. math::
    \min_{X \in \mathrm{OB}(m, n)} \tfrac12\|X - A\|_F^2, \qquad
    x_j^\star = a_j/\|a_j\|

Pymanopt's ``examples/closest_unit_norm_column_approximation.py``: a 5 × 8 Gaussian ``A``,
conjugate gradients with the Fletcher–Reeves rule (which :func:`solve` passes to
``conjugate_gradient`` as ``beta`` too). The optimum normalises each column of ``A``; a point's
error is ``‖X − X*‖_F``.

Examples::

    python -m examples.solvers.closest_unit_norm_column_approximation
    python -m examples.solvers.closest_unit_norm_column_approximation --solver trust_region --scale 10
"""
from __future__ import annotations

from typing import Any

import numpy as np

import geometric
from examples import _training
from examples.solvers import _common, costs

__all__ = ["EXAMPLE", "build_parser", "cost", "error", "main", "manifold", "optimum", "solve"]


def manifold(data: _common.Data) -> geometric.Oblique:
    return geometric.Oblique(*data["a"].shape)


def cost(x: Any, data: _common.Data) -> Any:
    return costs.closest_unit_norm_column_approximation(x, a=data["a"])


def optimum(data: _common.Data) -> np.ndarray:
    """``A`` with its columns normalised."""
    a = data["a"]
    return a / np.linalg.norm(a, axis=0)


def error(x: np.ndarray, data: _common.Data) -> float:
    return float(np.linalg.norm(x - optimum(data)))


EXAMPLE = _common.Example(
    name="closest_unit_norm_column_approximation",
    title="Closest unit-norm column approximation on the oblique manifold",
    sizes={"m": 5, "n": 8}, size_help={"m": "rows (length of each column)", "n": "columns"},
    solver="conjugate_gradient", manifold=manifold, cost=cost, optimum=optimum, error=error,
    error_name="‖X − X*‖_F to the normalised columns of A",
    options=lambda solver, data: (
        {"beta": "fletcher_reeves"} if solver == "conjugate_gradient" else {}))


solve, build_parser, main = _common.entry_points(EXAMPLE)


if __name__ == "__main__":
    _training.command_line(main)
