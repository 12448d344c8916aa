r"""Fréchet (Karcher) mean of points in the Poincaré ball.

.. math::
    \min_{x \in \mathbb{B}^n} \frac1{2m}\sum_{i=1}^m d(x, y_i)^2, \qquad
    d(x, y) = \operatorname{arcosh}\Big(1 + \frac{2\|x - y\|^2}{(1 - \|x\|^2)(1 - \|y\|^2)}\Big)

on :class:`geometric.PoincareBall` (curvature −1). The mean is unique (hyperbolic space has
negative curvature) and is where the logarithms average to zero, ``Σᵢ log_x(yᵢ) = 0``. Neither
Pymanopt nor Manopt has this example; the sizes are ours: 50 points in the 2-D disk, scattered
about a centre at distance 1 from the origin, started at the origin.

The reference is computed in another model, the hyperboloid ``{p : ⟨p, p⟩_L = −1, p₀ > 0}``:
the fixed-point iteration ``p ← exp_p((1/m) Σᵢ log_p(qᵢ))`` in NumPy (:func:`optimum`), mapped back
to the ball. A point's error is its hyperbolic distance to the reference;
:func:`mean_logarithm` is the first-order condition.

Examples::

    python -m examples.solvers.karcher_mean_poincare
    python -m examples.solvers.karcher_mean_poincare --solver lbfgs --n 10 --m 500
"""
from __future__ import annotations

from typing import Any

import numpy as np

import geometric
from examples import _training
from examples.solvers import _common, costs

__all__ = ["EXAMPLE", "build_parser", "cost", "error", "main", "manifold", "optimum", "solve"]


def manifold(data: _common.Data) -> geometric.PoincareBall:
    return geometric.PoincareBall(data["points"].shape[-1])


def cost(x: Any, data: _common.Data) -> Any:
    return costs.karcher_mean_poincare(x, points=data["points"])


def _minkowski(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    return np.sum(p[..., 1:] * q[..., 1:], axis=-1) - p[..., 0] * q[..., 0]


def to_hyperboloid(x: np.ndarray) -> np.ndarray:
    s = np.sum(x * x, axis=-1, keepdims=True)
    return np.concatenate([1 + s, 2 * x], axis=-1) / (1 - s)


def to_ball(p: np.ndarray) -> np.ndarray:
    return p[..., 1:] / (1 + p[..., :1])


def optimum(data: _common.Data, *, max_iterations: int = 1000) -> np.ndarray:
    """The Fréchet mean by the fixed-point iteration on the hyperboloid, float64 NumPy.

    It stops once a step is no shorter than the one before: the steps shrink (linearly) until
    rounding sets their length.
    """
    q = to_hyperboloid(np.asarray(data["points"], np.float64))
    p = q.mean(axis=0)
    p = p / np.sqrt(-_minkowski(p, p))  # the Lorentzian centroid, a start on the hyperboloid
    last = np.inf
    for _ in range(max_iterations):
        cosh = np.maximum(-_minkowski(p, q), 1.0)
        dist = np.arccosh(cosh)
        scale = np.where(dist > 0, dist / np.sinh(np.where(dist > 0, dist, 1.0)), 1.0)
        v = np.mean(scale[:, None] * (q - cosh[:, None] * p), axis=0)  # mean of log_p(qᵢ)
        norm = float(np.sqrt(max(float(_minkowski(v, v)), 0.0)))
        if norm == 0 or norm >= last:
            break
        last = norm
        p = np.cosh(norm) * p + np.sinh(norm) * v / norm
        p = p / np.sqrt(-_minkowski(p, p))
    return to_ball(p)


def distance(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The distance of the ball (curvature −1), ``arcosh(1 + δ)`` as ``log1p(δ + √(δ(δ + 2)))``,
    ``δ = 2‖x − y‖²/((1 − ‖x‖²)(1 − ‖y‖²))``: accurate for near points, where ``arcosh`` of a
    number close to 1 loses half the digits."""
    delta = 2 * np.sum((x - y) ** 2, axis=-1) / (
        (1 - np.sum(x * x, axis=-1)) * (1 - np.sum(y * y, axis=-1)))
    return np.log1p(delta + np.sqrt(delta * (delta + 2)))


def mean_logarithm(x: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``(1/m) Σᵢ log_x(yᵢ)`` in the ball, by Möbius addition: zero at the Fréchet mean.

    ``log_x(y) = (1 − ‖x‖²) artanh(‖u‖) u/‖u‖`` with ``u = (−x) ⊕ y``.
    """
    xx = np.sum(x * x)
    xy = points @ -x
    yy = np.sum(points * points, axis=-1)
    u = ((1 + 2 * xy + yy)[:, None] * -x + (1 - xx) * points) / (1 + 2 * xy + xx * yy)[:, None]
    r = np.linalg.norm(u, axis=-1, keepdims=True)
    return np.mean((1 - xx) * np.arctanh(r) * u / r, axis=0)


def error(x: np.ndarray, data: _common.Data) -> float:
    return float(distance(x, optimum(data)))


EXAMPLE = _common.Example(
    name="karcher_mean_poincare", title="Fréchet mean in the Poincaré ball",
    sizes={"n": 2, "m": 50}, size_help={"n": "dimension of the ball", "m": "number of points"},
    solver="trust_region", manifold=manifold, cost=cost, optimum=optimum, error=error,
    error_name="hyperbolic distance to the fixed-point mean on the hyperboloid")


solve, build_parser, main = _common.entry_points(EXAMPLE)


if __name__ == "__main__":
    _training.command_line(main)
