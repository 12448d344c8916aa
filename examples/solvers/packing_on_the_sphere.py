r"""Packing on the sphere: spread ``n`` points on ``S^{d−1}``, minimising a smooth maximum of
their inner products on the oblique manifold.

.. math::
    \min_{X \in \mathrm{OB}(d, n)} \varepsilon \log \sum_{i<j} \exp(x_i^Tx_j/\varepsilon)
    \;\in\; \big[\max_{i<j} x_i^Tx_j,\; \max_{i<j} x_i^Tx_j + \varepsilon\log\tbinom n2\big]

Pymanopt's ``examples/packing_on_the_sphere.py`` (after Manopt's): 24 points in ``ℝ³``,
``ε = 0.005``, conjugate gradients to a gradient norm of ``1e-8`` with at most ``1e5``
iterations. Pymanopt optimises on the elliptope, rows of a ``24 × 3`` matrix modulo rotations;
the cost is invariant under rotations, so the oblique manifold (columns of a ``3 × 24`` matrix, as
in Manopt) has the same minimisers. This is the Tammes problem, non-convex with many local minima:
there is no closed form. The reference is the best packing known for the size (:func:`optimum`:
the largest inner product of an optimal packing), and a point's error is how much its largest
inner product exceeds it. A local minimum of the smoothed cost has an error of the order of
``ε`` or more; every point's largest inner product is at least the optimum's.

Examples::

    python -m examples.solvers.packing_on_the_sphere
    python -m examples.solvers.packing_on_the_sphere --points 12 --solver trust_region
"""
from __future__ import annotations

from typing import Any

import numpy as np

import geometric
from examples import _training
from examples.solvers import _common, costs

__all__ = ["EXAMPLE", "build_parser", "cost", "error", "main", "manifold", "optimum", "solve"]

# The largest inner product of the best packings known in ℝ³ (the Tammes problem): n = 12, the
# icosahedron; n = 24, the snub cube, angular separation 43.6907671° (Robinson 1961; Sloane's
# tables of spherical codes).
TAMMES_3D = {12: 1 / np.sqrt(5), 24: float(np.cos(np.radians(43.6907671)))}


def manifold(data: _common.Data) -> geometric.Oblique:
    return geometric.Oblique(*data["x0"].shape)


def cost(x: Any, data: _common.Data) -> Any:
    return costs.packing_on_the_sphere(x, epsilon=data["epsilon"])


def max_inner_product(x: np.ndarray) -> float:
    """The largest inner product of two distinct columns: the cosine of the smallest angle."""
    y = x.T @ x
    return float(y[np.triu_indices(y.shape[0], 1)].max())


def optimum(data: _common.Data) -> float:
    """The largest inner product of the best packing known, or nan where none is tabulated here.

    ``n ≤ d + 1`` points: the regular simplex, ``−1/(n − 1)``; ``d + 1 < n ≤ 2d``: ``0``, part of
    the cross-polytope (Rankin 1955); 12 and 24 points in ``ℝ³``: :data:`TAMMES_3D`.
    """
    d, n = data["x0"].shape
    if n <= d + 1:
        return -1 / (n - 1)
    if n <= 2 * d:
        return 0.0
    return TAMMES_3D.get(n, float("nan")) if d == 3 else float("nan")


def error(x: np.ndarray, data: _common.Data) -> float:
    """How much the largest inner product exceeds the best packing's (nan when unknown)."""
    return max_inner_product(x) - optimum(data)


EXAMPLE = _common.Example(
    name="packing_on_the_sphere", title="Packing on the sphere (oblique manifold)",
    sizes={"dimension": 3, "points": 24},
    size_help={"dimension": "dimension of the space the sphere is in", "points": "number of points"},
    solver="conjugate_gradient", manifold=manifold, cost=cost, optimum=optimum, error=error,
    error_name="largest inner product − best known packing's",
    checks=[lambda s: None if s["points"] >= 2 else
            f"argument --points: expected an integer ≥ 2; got {s['points']}",
            lambda s: None if s["dimension"] >= 2 else
            f"argument --dimension: expected an integer ≥ 2; got {s['dimension']}"],
    options=lambda solver, data: {"gradient_tolerance": 1e-8, "max_iterations": 100_000})


solve, build_parser, main = _common.entry_points(EXAMPLE)


if __name__ == "__main__":
    _training.command_line(main)
