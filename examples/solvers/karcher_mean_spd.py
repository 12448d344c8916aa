r"""Karcher mean of symmetric positive definite matrices under the affine-invariant metric.

.. math::
    \min_{X \in \mathrm{SPD}(n)} \frac1{2m}\sum_{i=1}^m d(X, A_i)^2, \qquad
    d(X, A)^2 = \sum_j \log^2 \lambda_j(X^{-1}A)

(:class:`geometric.SPD`, ``metric="affine"``). The minimiser, the Karcher (Riemannian) mean, is
unique: SPD(n) with this metric has non-positive curvature. Pymanopt has no example of it;
Manopt's ``examples/positive_definite_intrinsic_mean.m`` sets the sizes and the data: ``m = 50``
noisy copies of a diagonal ``5 × 5`` matrix, solved with Riemannian L-BFGS. Manopt starts at
the first matrix; here the start is the identity: at ``X = A₁`` every eigenvalue of ``X⁻¹A₁`` is
1, and JAX's ``eigh``, which the cost (:func:`examples.solvers.costs.karcher_mean_spd`, plain
``jax.numpy``, shared with the Pymanopt benchmark) differentiates, has no second derivative at
repeated eigenvalues (nan Hessian-vector products for the trust regions).

The reference is the classical fixed-point iteration (a Riemannian gradient step of length 1,
in NumPy, :func:`optimum`)

.. math::
    X \leftarrow X^{1/2} \exp\Big(\frac1m \sum_i \log(X^{-1/2}A_iX^{-1/2})\Big) X^{1/2},

run until the step stalls; for two matrices the mean is the geometric mean
``A # B = A^{1/2}(A^{-1/2}BA^{-1/2})^{1/2}A^{1/2}`` (:func:`geometric_mean`), in closed form. A
point's error is its affine-invariant distance to the reference.

Examples::

    python -m examples.solvers.karcher_mean_spd
    python -m examples.solvers.karcher_mean_spd --solver trust_region --n 20 --m 100
"""
from __future__ import annotations

from typing import Any

import numpy as np

import geometric
from examples import _training
from examples.solvers import _common, costs

__all__ = ["EXAMPLE", "build_parser", "cost", "error", "main", "manifold", "optimum", "solve"]


def manifold(data: _common.Data) -> geometric.SPD:
    return geometric.SPD(data["a"].shape[-1])


def cost(x: Any, data: _common.Data) -> Any:
    return costs.karcher_mean_spd(x, a=data["a"])


def _hermitian(a: np.ndarray, f: Any) -> np.ndarray:
    w, v = np.linalg.eigh(a)
    return (v * f(w)[..., None, :]) @ np.swapaxes(v, -1, -2)


def optimum(data: _common.Data, *, max_iterations: int = 1000) -> np.ndarray:
    """The Karcher mean by the fixed-point iteration, from the arithmetic mean, float64 NumPy.

    It stops once a step is no shorter than the one before: the steps shrink (linearly) until
    rounding sets their length.
    """
    a = np.asarray(data["a"], np.float64)
    x, last = a.mean(axis=0), np.inf
    for _ in range(max_iterations):
        half, half_inv = _hermitian(x, np.sqrt), _hermitian(x, lambda w: 1 / np.sqrt(w))
        step = _hermitian(half_inv @ a @ half_inv, np.log).mean(axis=0)
        length = float(np.linalg.norm(step))
        if length >= last:
            break
        last = length
        x = half @ _hermitian(step, np.exp) @ half
        x = 0.5 * (x + x.T)
    return x


def geometric_mean(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``A # B = A^{1/2}(A^{-1/2}BA^{-1/2})^{1/2}A^{1/2}``: the Karcher mean of two matrices."""
    half, half_inv = _hermitian(a, np.sqrt), _hermitian(a, lambda w: 1 / np.sqrt(w))
    return half @ _hermitian(half_inv @ b @ half_inv, np.sqrt) @ half


def distance(x: np.ndarray, y: np.ndarray) -> float:
    """The affine-invariant distance, from the eigenvalues of ``Y^{-1/2}XY^{-1/2}``."""
    half_inv = _hermitian(y, lambda w: 1 / np.sqrt(w))
    return float(np.linalg.norm(np.log(np.linalg.eigvalsh(half_inv @ x @ half_inv))))


def error(x: np.ndarray, data: _common.Data) -> float:
    return distance(0.5 * (x + x.T), optimum(data))


EXAMPLE = _common.Example(
    name="karcher_mean_spd", title="Karcher mean on SPD (affine-invariant metric)",
    sizes={"n": 5, "m": 50}, size_help={"n": "size of the matrices", "m": "number of matrices"},
    solver="lbfgs", manifold=manifold, cost=cost, optimum=optimum, error=error,
    error_name="affine-invariant distance to the fixed-point Karcher mean")


solve, build_parser, main = _common.entry_points(EXAMPLE)


if __name__ == "__main__":
    _training.command_line(main)
