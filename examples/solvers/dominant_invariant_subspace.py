r"""Dominant invariant subspace of a symmetric matrix: minimise ``−tr(XᵀAX)`` on Grassmann.

.. math::
    \min_{[X] \in \mathrm{Gr}(n, p)} -\operatorname{tr}(X^TAX), \qquad
    [X^\star] = \operatorname{span}(v_1, \dots, v_p), \quad
    f(X^\star) = -(\lambda_1 + \dots + \lambda_p)

Pymanopt's ``examples/dominant_invariant_subspace.py``: ``A`` the symmetric part of an ``n × n``
Gaussian matrix, ``n = 128``, ``p = 3``, trust regions with the radius bound ``Δ̄ = 8√p`` (which
:func:`solve` passes to ``trust_region`` as ``max_radius`` too). The
optimum is the span of the ``p`` dominant eigenvectors ``V`` from ``numpy.linalg.eigh``; a point's
error is ``‖X − VVᵀX‖_F``, the root sum of squared sines of the principal angles between the
subspaces.

Examples::

    python -m examples.solvers.dominant_invariant_subspace
    python -m examples.solvers.dominant_invariant_subspace --solver lbfgs --n 500 --p 10
"""
from __future__ import annotations

from typing import Any

import numpy as np

import geometric
from examples import _training
from examples.solvers import _common, costs

__all__ = ["EXAMPLE", "build_parser", "cost", "error", "main", "manifold", "optimum", "solve"]


def manifold(data: _common.Data) -> geometric.Grassmann:
    return geometric.Grassmann(*data["x0"].shape)


def cost(x: Any, data: _common.Data) -> Any:
    return costs.dominant_invariant_subspace(x, a=data["a"])


def optimum(data: _common.Data) -> np.ndarray:
    """An orthonormal basis of the ``p`` dominant eigenvectors (``numpy.linalg.eigh``)."""
    return np.linalg.eigh(data["a"])[1][:, -data["x0"].shape[1]:]


def error(x: np.ndarray, data: _common.Data) -> float:
    """``‖X − VVᵀX‖_F``: the sines of the principal angles (0 for any basis of the subspace)."""
    v = optimum(data)
    return float(np.linalg.norm(x - v @ (v.T @ x)))


EXAMPLE = _common.Example(
    name="dominant_invariant_subspace", title="Dominant invariant subspace on Grassmann",
    sizes={"n": 128, "p": 3}, size_help={"n": "size of the matrix", "p": "subspace dimension"},
    solver="trust_region", manifold=manifold, cost=cost, optimum=optimum, error=error,
    error_name="‖X − VVᵀX‖_F to the dominant eigenvectors V (numpy.linalg.eigh)",
    checks=[_common.at_most("p", "n")],
    options=lambda solver, data: (
        {"max_radius": 8 * float(np.sqrt(data["x0"].shape[1]))} if solver == "trust_region" else {}))


solve, build_parser, main = _common.entry_points(EXAMPLE)


if __name__ == "__main__":
    _training.command_line(main)
