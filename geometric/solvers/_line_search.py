r"""Backtracking (Armijo) line search along a retraction, robust to rounding near a minimum.

Along a tangent direction ``d`` at ``x`` with slope ``φ'(0) = <grad f(x), d> < 0``, the line
search tries ``φ(α) = f(R_x(αd))`` at ``α₀, τα₀, τ²α₀, …`` (``τ = 1/2``) and takes the first
``α`` with sufficient decrease (Armijo):

.. math:: \varphi(\alpha) \le \varphi(0) + c\,\alpha\,\varphi'(0).

Each trial also gives ``φ'(α)``: the Euclidean gradient at the trial point paired with
``d/dα R_x(αd)`` (one ``jax.jvp`` of the retraction), exact for every retraction and metric.

**Rounding.** Near a minimum the decrease a step can make, ``≈ ‖grad f‖²/L``, falls below the
rounding error of ``f`` itself when ``‖grad f‖ ≲ √(ε|f|L)``: the Armijo test then compares
rounding errors, and a plain backtracking search accepts and rejects steps at random, stalling
first-order methods near ``‖grad f‖ ≈ 1e-8`` in float64. Where the cost has not changed beyond
its rounding (``|φ(α) - φ(0)| ≤ ε^{3/4}|φ(0)|``), the test is made on the slope instead, as Hager
and Zhang's approximate Wolfe conditions do:

.. math:: \varphi'(\alpha) \le (2c - 1)\,\varphi'(0),

which for a quadratic is the Armijo condition itself, computed from gradients, whose relative
accuracy does not degrade as the minimum is approached. Elsewhere the search is Manopt's.

If no trial passes within the budget, the last one is kept if it did not increase the cost and
the step is rejected (``α = 0``) otherwise, as in Manopt and Pymanopt.

References:
  W. W. Hager, H. Zhang, "A new conjugate gradient method with guaranteed descent and an
  efficient line search", SIAM J. Optim. 16 (2005), §4 (the approximate Wolfe conditions).
  N. Boumal, *An Introduction to Optimization on Smooth Manifolds* (2023), §4.3.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ._problem import Problem, scale, select

__all__ = ["LineSearch", "backtracking", "rounding_slack"]

CONTRACTION = 0.5


class LineSearch(NamedTuple):
    alpha: jax.Array  # the multiplier of d taken; 0: the step was rejected
    point: Any  # R_x(alpha d)
    cost: jax.Array
    grad: Any  # the Riemannian gradient at `point`
    slope: jax.Array  # φ'(alpha) = d/dt f(R_x(t d)) at t = alpha
    evaluations: jax.Array  # int32: trials made


def rounding_slack(problem: Problem, f: jax.Array) -> jax.Array:
    """``ε^{3/4}|f|``: a change of the cost this small may be rounding."""
    return problem.eps ** 0.75 * jnp.abs(f)


def backtracking(problem: Problem, x: Any, d: Any, f0: jax.Array, grad0: Any, df0: jax.Array,
                 alpha0: jax.Array, *, sufficient_decrease: float, max_evaluations: int,
                 active: jax.Array) -> LineSearch:
    """Armijo backtracking from ``alpha0`` along ``d`` (see the module docstring).

    ``f0``, ``grad0`` and ``df0`` are the cost, Riemannian gradient and slope ``<grad f(x), d>``
    at ``x`` (returned for a rejected step). ``active`` false (a finished problem of a batch)
    makes no trial beyond the first.
    """
    c = jnp.asarray(sufficient_decrease, problem.dtype)
    slack = rounding_slack(problem, f0)

    def trial(alpha: jax.Array) -> tuple[Any, jax.Array, Any, jax.Array]:
        y, dy = jax.jvp(lambda t: problem.retract(x, scale(t, d)), (alpha,),
                        (jnp.ones_like(alpha),))
        f, egrad = problem.value_and_egrad(y)
        slope = sum((jnp.sum(g * v) for g, v in zip(jax.tree.leaves(egrad), jax.tree.leaves(dy))),
                    jnp.zeros_like(alpha))
        return y, f, egrad, slope

    def passes(alpha: jax.Array, f: jax.Array, slope: jax.Array) -> jax.Array:
        armijo = f <= f0 + c * alpha * df0
        return jnp.where(jnp.abs(f - f0) <= slack, slope <= (2 * c - 1) * df0, armijo)

    def cond(s: tuple[Any, ...]) -> jax.Array:
        alpha, _, f, _, slope, n = s
        return active & ~passes(alpha, f, slope) & (n < max_evaluations)

    def body(s: tuple[Any, ...]) -> tuple[Any, ...]:
        alpha = CONTRACTION * s[0]
        return (alpha, *trial(alpha), s[-1] + 1)

    alpha0 = alpha0.astype(problem.dtype)
    alpha, y, f, egrad, slope, n = lax.while_loop(cond, body, (alpha0, *trial(alpha0), jnp.int32(1)))
    # Out of budget: keep the last trial unless it increased the cost (nan counts as increase).
    reject = ~passes(alpha, f, slope) & ~(f <= f0)
    taken = LineSearch(alpha, y, f, problem.rgrad(y, egrad), slope, n)
    kept = LineSearch(jnp.zeros_like(alpha), x, f0, grad0, df0, n)
    return select(reject, kept, taken)
