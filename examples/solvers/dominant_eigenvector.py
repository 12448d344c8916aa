r"""Dominant eigenvector of a symmetric matrix: minimise ``−xᵀAx`` on the sphere.

.. math::
    \min_{x \in S^{n-1}} -x^TAx, \qquad x^\star = \pm v_{\max}(A), \quad f(x^\star) = -\lambda_{\max}(A)

Pymanopt's ``examples/dominant_eigenvector.py``: ``A`` the symmetric part of an ``n × n``
Gaussian matrix, ``n = 128``, steepest descent. The optimum is the eigenvector of the largest
eigenvalue from ``numpy.linalg.eigh``; a point's error is its distance to ``±v_max``.

Examples::

    python -m examples.solvers.dominant_eigenvector
    python -m examples.solvers.dominant_eigenvector --solver trust_region --scale 10
"""
from __future__ import annotations

from typing import Any

import numpy as np

import geometric
from examples import _training
from examples.solvers import _common, costs

__all__ = ["EXAMPLE", "build_parser", "cost", "error", "main", "manifold", "optimum", "solve"]


def manifold(data: _common.Data) -> geometric.Sphere:
    return geometric.Sphere(data["a"].shape[-1])


def cost(x: Any, data: _common.Data) -> Any:
    return costs.dominant_eigenvector(x, a=data["a"])


def optimum(data: _common.Data) -> np.ndarray:
    """The unit eigenvector of the largest eigenvalue (``numpy.linalg.eigh``)."""
    return np.linalg.eigh(data["a"])[1][:, -1]


def error(x: np.ndarray, data: _common.Data) -> float:
    """``min(‖x − v‖, ‖x + v‖)``: an eigenvector's sign is arbitrary."""
    v = optimum(data)
    return float(min(np.linalg.norm(x - v), np.linalg.norm(x + v)))


EXAMPLE = _common.Example(
    name="dominant_eigenvector", title="Dominant eigenvector on the sphere", sizes={"n": 128},
    size_help={"n": "size of the matrix"}, solver="steepest_descent", manifold=manifold, cost=cost,
    optimum=optimum, error=error, error_name="distance to ±v_max (numpy.linalg.eigh)")


solve, build_parser, main = _common.entry_points(EXAMPLE)


if __name__ == "__main__":
    _training.command_line(main)
