r"""Optimal rotations: ``k`` Procrustes problems at once, ``max Σₖ ⟨Xₖ, AₖBₖᵀ⟩`` over ``SO(n)ᵏ``.

.. math::
    \min_{X_1, \dots, X_k \in SO(n)} -\sum_k \langle X_k, A_kB_k^T\rangle, \qquad
    X_k^\star = U_k \operatorname{diag}(1, \dots, 1, \det U_kV_k^T) V_k^T

with ``AₖBₖᵀ = UₖΣₖVₖᵀ`` (the Kabsch algorithm: the rotation that best aligns ``Bₖ`` with
``Aₖ``). The point is a stack of ``k`` matrices of :class:`geometric.Orthogonal`; its QR retraction
stays in the component of the start, so a start in ``SO(n)`` keeps every iterate a rotation.

Pymanopt's ``examples/optimal_rotations.py``: ``n = 3``, ``m = 10`` Gaussian columns in
``Aₖ`` and ``Bₖ``, ``k = 10``, steepest descent on ``SpecialOrthogonalGroup(3, k=10)``. The
optimum is from ``numpy.linalg.svd``; a point's error is ``‖X − X*‖_F`` over the stack.

Examples::

    python -m examples.solvers.optimal_rotations
    python -m examples.solvers.optimal_rotations --solver trust_region --n 10 --k 100
"""
from __future__ import annotations

from typing import Any

import numpy as np

import geometric
from examples import _training
from examples.solvers import _common, costs

__all__ = ["EXAMPLE", "build_parser", "cost", "error", "main", "manifold", "optimum", "solve"]


def manifold(data: _common.Data) -> geometric.Orthogonal:
    return geometric.Orthogonal(data["abt"].shape[-1])


def cost(x: Any, data: _common.Data) -> Any:
    return costs.optimal_rotations(x, abt=data["abt"])


def optimum(data: _common.Data) -> np.ndarray:
    """Per problem, ``U diag(1, …, 1, det UVᵀ) Vᵀ`` from the SVD ``AₖBₖᵀ = UΣVᵀ``."""
    u, _, vt = np.linalg.svd(data["abt"])
    sign = np.sign(np.linalg.det(u @ vt))
    u[..., :, -1] *= sign[..., None]
    return u @ vt


def error(x: np.ndarray, data: _common.Data) -> float:
    return float(np.linalg.norm(x - optimum(data)))


EXAMPLE = _common.Example(
    name="optimal_rotations", title="Optimal rotations on SO(n)^k", sizes={"n": 3, "m": 10, "k": 10},
    size_help={"n": "size of the rotations", "m": "columns of each A_k and B_k",
               "k": "number of rotations"},
    solver="steepest_descent", manifold=manifold, cost=cost, optimum=optimum, error=error,
    error_name="‖X − X*‖_F to the Kabsch rotations (numpy.linalg.svd)")


solve, build_parser, main = _common.entry_points(EXAMPLE)


if __name__ == "__main__":
    _training.command_line(main)
