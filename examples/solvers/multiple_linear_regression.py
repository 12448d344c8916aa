r"""Multiple linear regression: least squares ``‖y − Sw‖²`` over ``w ∈ ℝᵈ``, no manifold.

.. math::
    \min_{w \in \mathbb{R}^d} \|y - Sw\|^2, \qquad w^\star = S^+y

A Euclidean problem: the manifold spec is ``None`` (no constraint), as a ``None`` leaf in
:mod:`geometric.optim`. Pymanopt's ``examples/multiple_linear_regression.py``: 200 Gaussian
samples of 3 features, Gaussian targets, trust regions on ``Euclidean(3)``. The optimum is
``numpy.linalg.lstsq``; a point's error is ``‖w − w*‖``.

Examples::

    python -m examples.solvers.multiple_linear_regression
    python -m examples.solvers.multiple_linear_regression --scale 10 --solver lbfgs
"""
from __future__ import annotations

from typing import Any

import numpy as np

from examples import _training
from examples.solvers import _common, costs

__all__ = ["EXAMPLE", "build_parser", "cost", "error", "main", "manifold", "optimum", "solve"]


def manifold(data: _common.Data) -> None:
    return None


def cost(w: Any, data: _common.Data) -> Any:
    return costs.multiple_linear_regression(w, samples=data["samples"], targets=data["targets"])


def optimum(data: _common.Data) -> np.ndarray:
    """The least-squares solution (``numpy.linalg.lstsq``)."""
    return np.linalg.lstsq(data["samples"], data["targets"], rcond=None)[0]


def error(w: np.ndarray, data: _common.Data) -> float:
    return float(np.linalg.norm(w - optimum(data)))


EXAMPLE = _common.Example(
    name="multiple_linear_regression", title="Multiple linear regression (Euclidean)",
    sizes={"samples": 200, "weights": 3},
    size_help={"samples": "number of samples", "weights": "number of features"},
    solver="trust_region", manifold=manifold, cost=cost, optimum=optimum, error=error,
    error_name="‖w − w*‖ to the least-squares solution (numpy.linalg.lstsq)",
    checks=[_common.at_most("weights", "samples")])


solve, build_parser, main = _common.entry_points(EXAMPLE)


if __name__ == "__main__":
    _training.command_line(main)
