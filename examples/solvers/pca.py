r"""Principal component analysis: minimise the reconstruction error ``‖S − SWWᵀ‖²_F`` on Stiefel.

.. math::
    \min_{W \in \mathrm{St}(d, p)} \|S - SWW^T\|_F^2, \qquad
    \operatorname{span}(W^\star) = \operatorname{span}(v_1, \dots, v_p)

with ``S`` the centred samples (rows) and ``v_i`` the dominant eigenvectors of ``SᵀS`` (the
principal axes). The cost is invariant under ``W ↦ WQ``, ``Q ∈ O(p)``: only the span is
determined.

Pymanopt's ``examples/pca.py``: 200 samples in dimension 3 scaled by ``diag(3, 2, 1)``, 2
components, trust regions. In larger dimensions the scales are ``linspace(3, 1, d)``. The optimum
is from ``numpy.linalg.svd`` of the samples (the right singular vectors); a point's error is
``‖W − VVᵀW‖_F`` (the sines of the principal angles).

Examples::

    python -m examples.solvers.pca
    python -m examples.solvers.pca --scale 10 --solver conjugate_gradient
"""
from __future__ import annotations

from typing import Any

import numpy as np

import geometric
from examples import _training
from examples.solvers import _common, costs

__all__ = ["EXAMPLE", "build_parser", "cost", "error", "main", "manifold", "optimum", "solve"]


def manifold(data: _common.Data) -> geometric.Stiefel:
    return geometric.Stiefel(*data["x0"].shape)


def cost(w: Any, data: _common.Data) -> Any:
    return costs.pca(w, samples=data["samples"])


def optimum(data: _common.Data) -> np.ndarray:
    """The ``p`` principal axes: the dominant right singular vectors of the samples."""
    return np.linalg.svd(data["samples"], full_matrices=False)[2][:data["x0"].shape[1]].T


def error(w: np.ndarray, data: _common.Data) -> float:
    """``‖W − VVᵀW‖_F``: the sines of the principal angles to the principal subspace."""
    v = optimum(data)
    return float(np.linalg.norm(w - v @ (v.T @ w)))


EXAMPLE = _common.Example(
    name="pca", title="Principal component analysis on Stiefel",
    sizes={"dimension": 3, "samples": 200, "components": 2},
    size_help={"dimension": "dimension of the samples", "samples": "number of samples",
               "components": "number of principal components"},
    solver="trust_region", manifold=manifold, cost=cost, optimum=optimum, error=error,
    error_name="‖W − VVᵀW‖_F to the principal axes V (numpy.linalg.svd)",
    checks=[_common.at_most("components", "dimension")])


solve, build_parser, main = _common.entry_points(EXAMPLE)


if __name__ == "__main__":
    _training.command_line(main)
