r"""Riemannian steepest descent with Armijo backtracking."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .._core.tree import ManifoldsTree
from ._line_search import backtracking, rounding_slack
from ._loop import Progress, advance, finish, running, start
from ._problem import Problem, scale
from ._result import SolverResult
from ._stopping import check_stopping

__all__ = ["steepest_descent"]

SUFFICIENT_DECREASE = 1e-4  # Pymanopt's; Manopt's is 2⁻¹³
OPTIMISM = 2.0  # how much further than the last decrease suggests the first trial looks
MAX_EVALUATIONS = 25  # trials per line search


class _State(NamedTuple):
    progress: Progress
    decrease: jax.Array  # f(x_{k-1}) - f(x_k), nan before the first step


def steepest_descent(cost: Callable[[Any], jax.Array], manifold: ManifoldsTree, x0: Any, *,
                     gradient_tolerance: float | None = None, cost_tolerance: float = 0.0,
                     step_tolerance: float | None = None, max_iterations: int = 1000,
                     history: int = 0) -> SolverResult:
    r"""Minimise ``cost`` over a manifold by steepest descent with Armijo backtracking.

    Each iteration steps along the negative Riemannian gradient, ``d = -grad f(x_k)``, by
    ``x_{k+1} = R_{x_k}(α_k d)``, with ``α_k`` the first of ``α₀, α₀/2, α₀/4, …`` (at most 25)
    that decreases the cost enough (the Armijo condition, ``c = 10⁻⁴``):

    .. math::
        f(R_{x_k}(\alpha d)) \le f(x_k) - c\,\alpha\,\|\operatorname{grad} f(x_k)\|^2.

    The first trial is Manopt's (``linesearch``; Pymanopt's ``BackTrackingLineSearcher``): twice
    the minimiser of the quadratic along ``d`` that would repeat the last decrease,
    ``α₀ = 2·2(f(x_{k-1}) - f(x_k))/‖grad f(x_k)‖²``, or a step of length 1 at the first
    iteration or where that is not positive. Near the minimum, where cost differences are
    rounding, the Armijo test and the last decrease are taken from slopes instead (the docs page
    "Solving problems on manifolds", ``docs/solvers.md#line-search``), so the gradient keeps
    falling to what floating point allows.

    The whole solve is one ``lax.while_loop``: it runs under ``jax.jit`` and ``jax.vmap`` (a
    batch of problems, each stopping on its own criterion).

    Args:
      cost: the function to minimise, ``f(x) -> scalar``, written with JAX (it is differentiated
        with ``jax.value_and_grad``).
      manifold: a manifold, or for a point that is a pytree a spec as in :mod:`geometric.optim`
        (a pytree of manifolds / None matching ``x0`` or a prefix of it; None is Euclidean),
        which makes the point a point of the product manifold.
      x0: the start, a point (array or pytree) of float32 or float64 arrays of one dtype.
      gradient_tolerance: stop when ``‖grad f(x)‖ ≤ gradient_tolerance`` (converged). Default
        ``√ε·‖grad f(x₀)‖`` (``ε`` the dtype's machine epsilon): eight orders of magnitude below
        the start in float64, four in float32, which leaves ``f`` accurate to about ``ε``.
      cost_tolerance: stop when a step changes the cost by less than this (default 0: never).
      step_tolerance: stop when a step is shorter than this (default ``ε``; a line search that
        finds no decrease steps by 0).
      max_iterations: stop after this many iterations (default 1000).
      history: the length of the per-iteration record in :attr:`SolverResult.history` (default 0:
        none).

    Returns:
      A :class:`SolverResult`.

    Raises:
      TypeError: ``cost`` is not callable or does not return a real array; ``x0`` has a leaf that
        is not a float32/float64 array, or leaves of different dtypes; an option has the wrong
        type.
      ValueError: ``cost`` does not return a scalar; a leaf of ``x0`` does not have its
        manifold's shape, or (a concrete ``x0``) is not on it; the spec does not match ``x0``; a
        tolerance is negative or ``max_iterations``/``history`` is negative.

    References:
      P.-A. Absil, R. Mahony, R. Sepulchre, *Optimization Algorithms on Matrix Manifolds* (2008),
      §4.2 (Algorithm 1). N. Boumal, *An Introduction to Optimization on Smooth Manifolds*
      (2023), §4.3.

    Examples:
      The dominant eigenvector of a symmetric matrix minimises ``-xᵀAx`` on the sphere:

      >>> import jax, jax.numpy as jnp, geometric
      >>> a = jnp.diag(jnp.arange(1.0, 6.0))
      >>> sphere = geometric.Sphere(5)
      >>> x0 = sphere.random_point(jax.random.PRNGKey(0))
      >>> res = geometric.solvers.steepest_descent(lambda x: -x @ a @ x, sphere, x0)
      >>> print(f"{-res.cost:.5f}", bool(res.converged), geometric.solvers.REASONS[res.reason])
      5.00000 True gradient_tolerance
    """
    fname = "steepest_descent"
    stopping = check_stopping(fname, gradient_tolerance, cost_tolerance, step_tolerance,
                              max_iterations, history)
    problem = Problem(fname, cost, manifold, x0)

    def solve(x0: Any) -> SolverResult:
        progress, criteria = start(problem, x0, stopping)

        def step(s: _State) -> _State:
            p = s.progress
            gn2 = p.gradient_norm ** 2
            # Manopt's first trial: OPTIMISM times the minimiser of the quadratic along d that
            # repeats the last decrease; a step of length 1 where that is undefined or negligible.
            alpha0 = OPTIMISM * 2 * s.decrease / gn2
            alpha0 = jnp.where(jnp.isfinite(alpha0) & (alpha0 * p.gradient_norm > problem.eps),
                               alpha0, 1 / p.gradient_norm)
            ls = backtracking(problem, p.point, scale(-jnp.ones_like(gn2), p.grad), p.cost,
                              p.grad, -gn2, alpha0, sufficient_decrease=SUFFICIENT_DECREASE,
                              max_evaluations=MAX_EVALUATIONS, active=running(p))
            # The decrease from the slopes (the trapezoidal rule, exact for a quadratic) where
            # the actual one is rounding.
            actual = p.cost - ls.cost
            decrease = jnp.where(jnp.abs(actual) > rounding_slack(problem, p.cost), actual,
                                 -0.5 * ls.alpha * (ls.slope - gn2))
            step_size = ls.alpha * p.gradient_norm
            return _State(advance(problem, criteria, p, point=ls.point, cost=ls.cost,
                                  grad=ls.grad, step_size=step_size,
                                  step_small=step_size < criteria.step_tolerance), decrease)

        nan = jnp.asarray(jnp.nan, problem.dtype)
        final = lax.while_loop(lambda s: running(s.progress), step, _State(progress, nan))
        return finish(final.progress)

    return jax.jit(solve)(x0)
