r"""Riemannian nonlinear conjugate gradients."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .._core.checks import check_choice_field
from .._core.tree import ManifoldsTree
from ._line_search import backtracking
from ._loop import Progress, advance, finish, running, start
from ._problem import Problem, axpy, scale, select
from ._result import SolverResult
from ._stopping import check_stopping

__all__ = ["BETAS", "conjugate_gradient"]

BETAS = ("hestenes_stiefel", "polak_ribiere", "fletcher_reeves", "hager_zhang")
# Manopt's linesearch_adaptive (Pymanopt's AdaptiveLineSearcher): a sufficient decrease of half
# the slope, at most 10 trials.
SUFFICIENT_DECREASE = 0.5
MAX_EVALUATIONS = 10


class _State(NamedTuple):
    progress: Progress
    direction: Any  # the search direction at the current point
    alpha: jax.Array  # the line search's first trial for the next step; nan: none yet


def _ratio(num: jax.Array, den: jax.Array) -> jax.Array:
    """``num/den``, 0 where ``den`` is 0 (a restart)."""
    nonzero = den != 0
    return jnp.where(nonzero, num / jnp.where(nonzero, den, 1), 0)


def _beta(rule: str, y: Any, g: Any, d: Any, gn_old: jax.Array,
          dg: Callable[[Any, Any], jax.Array]) -> jax.Array:
    """β of ``rule`` from the new gradient ``g``, ``y = g - 𝒯(g_old)`` and the transported
    direction ``d``, all at the new point (``dg`` is its inner product)."""
    if rule == "fletcher_reeves":
        return dg(g, g) / gn_old ** 2
    if rule == "polak_ribiere":
        return jnp.maximum(0, dg(g, y) / gn_old ** 2)
    yd = dg(y, d)
    if rule == "hestenes_stiefel":
        return jnp.maximum(0, _ratio(dg(g, y), yd))
    # Hager–Zhang, bounded below by η = -1/(‖d‖ min(0.01, ‖g_old‖)) (their eq. 1.6).
    beta = _ratio(dg(y, g) - 2 * _ratio(dg(y, y) * dg(d, g), yd), yd)
    return jnp.maximum(beta, -1 / (jnp.sqrt(dg(d, d)) * jnp.minimum(0.01, gn_old)))


def conjugate_gradient(cost: Callable[[Any], jax.Array], manifold: ManifoldsTree, x0: Any, *,
                       beta: str = "hestenes_stiefel", gradient_tolerance: float | None = None,
                       cost_tolerance: float = 0.0, step_tolerance: float | None = None,
                       max_iterations: int = 1000, history: int = 0) -> SolverResult:
    r"""Minimise ``cost`` over a manifold by nonlinear conjugate gradients.

    Each iteration steps along a direction ``d_k`` by ``x_{k+1} = R_{x_k}(α_k d_k)`` (Armijo
    backtracking, ``c = 1/2``, at most 10 trials, the first trial the last step's multiplier,
    doubled unless it took exactly two trials: Manopt's ``linesearch_adaptive``), then combines the
    new gradient ``g_{k+1}`` with the previous direction, carried to the new point by vector
    transport ``𝒯``:

    .. math::
        d_{k+1} = -g_{k+1} + \beta_{k+1}\,\mathcal{T}(d_k), \qquad
        y_{k+1} = g_{k+1} - \mathcal{T}(g_k),

    .. math::
        \beta^{\mathrm{FR}} = \frac{\|g_{k+1}\|^2}{\|g_k\|^2}, \qquad
        \beta^{\mathrm{PR+}} = \max\Big(0, \frac{\langle g_{k+1}, y_{k+1}\rangle}{\|g_k\|^2}\Big),
        \qquad
        \beta^{\mathrm{HS+}} = \max\Big(0, \frac{\langle g_{k+1}, y_{k+1}\rangle}
        {\langle y_{k+1}, \mathcal{T}(d_k)\rangle}\Big),

    .. math::
        \beta^{\mathrm{HZ}} = \max\Big(\frac{\langle y, g_{k+1}\rangle - 2\frac{\|y\|^2
        \langle\mathcal{T}(d_k), g_{k+1}\rangle}{\langle y, \mathcal{T}(d_k)\rangle}}
        {\langle y, \mathcal{T}(d_k)\rangle},\ \frac{-1}{\|\mathcal{T}(d_k)\|\min(0.01, \|g_k\|)}\Big).

    The clipping at 0 (PR+, HS+) restarts the method with a gradient step where the directions
    lose conjugacy, and a direction that is not a descent direction (``<g, d> ≥ 0``) is replaced by
    ``-g``, as in Manopt and Pymanopt (whose default rule is Hestenes–Stiefel+, as here).

    Args:
      cost: the function to minimise, ``f(x) -> scalar``, written with JAX.
      manifold: a manifold, or a spec pytree for a point that is a pytree (see
        :func:`steepest_descent`).
      x0: the start, a point (array or pytree) of float32 or float64 arrays of one dtype.
      beta: the rule for ``β``: ``"hestenes_stiefel"`` (default), ``"polak_ribiere"``,
        ``"fletcher_reeves"`` or ``"hager_zhang"``.
      gradient_tolerance, cost_tolerance, step_tolerance, max_iterations, history: the stopping
        criteria and the history, as for :func:`steepest_descent` (default gradient tolerance
        ``√ε·‖grad f(x₀)‖``, 1000 iterations).

    Returns:
      A :class:`SolverResult`.

    Raises:
      TypeError, ValueError: as :func:`steepest_descent`; ``ValueError`` also for an unknown
        ``beta``.

    References:
      W. W. Hager, H. Zhang, "A survey of nonlinear conjugate gradient methods", Pacific J. Optim.
      2 (2006). H. Sato, "Riemannian conjugate gradient methods: general framework and specific
      algorithms with convergence analyses", SIAM J. Optim. 32 (2022). N. Boumal, P.-A. Absil,
      "Low-rank matrix completion via preconditioned optimization on the Grassmann manifold",
      Linear Algebra Appl. 475 (2015) (the algorithm as Manopt runs it).

    Examples:
      >>> import jax, jax.numpy as jnp, geometric
      >>> a = jnp.diag(jnp.arange(1.0, 6.0))
      >>> sphere = geometric.Sphere(5)
      >>> x0 = sphere.random_point(jax.random.PRNGKey(0))
      >>> res = geometric.solvers.conjugate_gradient(lambda x: -x @ a @ x, sphere, x0,
      ...                                            beta="polak_ribiere")
      >>> print(f"{-res.cost:.5f}", bool(res.converged))
      5.00000 True
    """
    fname = "conjugate_gradient"
    check_choice_field(fname, "beta", beta, BETAS)
    stopping = check_stopping(fname, gradient_tolerance, cost_tolerance, step_tolerance,
                              max_iterations, history)
    problem = Problem(fname, cost, manifold, x0)

    def solve(x0: Any) -> SolverResult:
        progress, criteria = start(problem, x0, stopping)

        def step(s: _State) -> _State:
            p = s.progress
            x, g, gn = p.point, p.grad, p.gradient_norm
            minus_g = scale(-jnp.ones_like(gn), g)
            df0 = problem.inner(x, g, s.direction)
            descent = df0 < 0  # else restart with the gradient
            d = select(descent, s.direction, minus_g)
            df0 = jnp.where(descent, df0, -gn ** 2)
            norm_d = problem.norm(x, d)
            alpha0 = jnp.where(jnp.isnan(s.alpha), 1 / norm_d, s.alpha)
            ls = backtracking(problem, x, d, p.cost, g, df0, alpha0,
                              sufficient_decrease=SUFFICIENT_DECREASE,
                              max_evaluations=MAX_EVALUATIONS, active=running(p))
            # Keep pace after two trials, else push (after one) or recover (after many).
            alpha = jnp.where(ls.evaluations == 2, ls.alpha, 2 * ls.alpha)
            x_new, g_new = ls.point, ls.grad
            g_old = problem.transport(x, x_new, g)
            d_old = problem.transport(x, x_new, d)
            y = axpy(-jnp.ones_like(gn), g_old, g_new)
            b = _beta(beta, y, g_new, d_old, gn,
                      lambda u, v: problem.inner(x_new, u, v))
            direction = axpy(b, d_old, scale(-jnp.ones_like(gn), g_new))
            step_size = ls.alpha * norm_d
            return _State(advance(problem, criteria, p, point=x_new, cost=ls.cost, grad=g_new,
                                  step_size=step_size,
                                  step_small=step_size < criteria.step_tolerance),
                          direction, alpha)

        nan = jnp.asarray(jnp.nan, problem.dtype)
        minus_g = scale(-jnp.ones_like(nan), progress.grad)
        final = lax.while_loop(lambda s: running(s.progress), step, _State(progress, minus_g, nan))
        return finish(final.progress)

    return jax.jit(solve)(x0)
