r"""Riemannian trust regions with truncated conjugate gradients on the exact Hessian."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .._core.tree import ManifoldsTree
from ._problem import Problem, axpy, scale, select
from ._result import GRADIENT, RUNNING, SolverResult, empty_history, record
from ._stopping import check_count, check_real, check_stopping, criteria, stop_reason

__all__ = ["trust_region"]

# Why truncated CG stopped (Manopt's and Pymanopt's codes).
NEGATIVE_CURVATURE, EXCEEDED_RADIUS, LINEAR, SUPERLINEAR, MAX_INNER, MODEL_INCREASED = range(6)
RHO_REGULARIZATION = 1e3  # Manopt's: the ratio's shift is 1000 ε max(1, |f|)


class _TCG(NamedTuple):
    j: jax.Array  # int32: inner iterations done
    eta: Any  # the step, tangent at x
    h_eta: Any  # Hess f(x)[eta]
    r: Any  # the residual grad f(x) + Hess f(x)[eta]
    delta: Any  # the CG direction
    r_r: jax.Array  # <r, r>
    e_e: jax.Array  # <eta, eta>
    e_d: jax.Array  # <eta, delta>
    d_d: jax.Array  # <delta, delta>
    model: jax.Array  # <g, eta> + <eta, Hess[eta]>/2
    stop: jax.Array  # int32, RUNNING until a reason above


def _truncated_cg(problem: Problem, x: Any, g: Any, hess: Callable[[Any], Any],
                  radius: jax.Array, *, kappa: float, theta: float, max_inner: int,
                  active: jax.Array) -> _TCG:
    r"""Steihaug–Toint: minimise ``m(η) = <g, η> + <η, Hess[η]>/2`` over ``‖η‖ ≤ radius`` by CG
    from ``η = 0``, stopping at the boundary, at negative curvature, or once
    ``‖r‖ ≤ ‖g‖ min(‖g‖^θ, κ)`` (superlinear, or linear, convergence of the outer iteration)."""
    def inner(u: Any, v: Any) -> jax.Array:
        return problem.inner(x, u, v)

    r0 = inner(g, g)
    norm_r0 = jnp.sqrt(r0)
    target = norm_r0 * jnp.minimum(norm_r0 ** theta, kappa)
    zero = scale(jnp.zeros_like(r0), g)

    def body(t: _TCG) -> _TCG:
        h_delta = hess(t.delta)
        d_hd = inner(t.delta, h_delta)
        alpha = t.r_r / d_hd
        e_e = t.e_e + 2 * alpha * t.e_d + alpha ** 2 * t.d_d
        # Negative curvature or a step past the boundary: go to the boundary along delta.
        curved = ~(d_hd > 0)
        boundary = curved | (e_e >= radius ** 2)
        tau = (-t.e_d + jnp.sqrt(t.e_d ** 2 + t.d_d * (radius ** 2 - t.e_e))) / t.d_d
        step = jnp.where(boundary, tau, alpha)
        eta = axpy(step, t.delta, t.eta)
        h_eta = axpy(step, h_delta, t.h_eta)
        model = inner(eta, g) + 0.5 * inner(eta, h_eta)
        # With an exact Hessian the model decreases at every CG step; rounding may undo that.
        increased = ~boundary & ~(model < t.model)
        r = axpy(alpha, h_delta, t.r)
        r_r = inner(r, r)
        small = jnp.sqrt(r_r) <= target
        beta = r_r / t.r_r
        delta = problem.project(x, axpy(beta, t.delta, scale(-jnp.ones_like(beta), r)))
        j = t.j + 1
        stop = jnp.select(
            [boundary & curved, boundary, increased, small, j >= max_inner],
            [jnp.int32(NEGATIVE_CURVATURE), jnp.int32(EXCEEDED_RADIUS),
             jnp.int32(MODEL_INCREASED), jnp.where(kappa < norm_r0 ** theta, jnp.int32(LINEAR),
                                                   jnp.int32(SUPERLINEAR)),
             jnp.int32(MAX_INNER)], jnp.int32(RUNNING))
        advanced = _TCG(j, eta, h_eta, r, delta, r_r, e_e, beta * (t.e_d + alpha * t.d_d),
                        r_r + beta ** 2 * t.d_d, model, stop)
        # The model went up: keep the previous step.
        return select(increased, t._replace(j=j, stop=stop), advanced)

    start = _TCG(jnp.int32(0), zero, zero, g, scale(-jnp.ones_like(r0), g), r0,
                 jnp.zeros_like(r0), jnp.zeros_like(r0), r0, jnp.zeros_like(r0),
                 jnp.int32(RUNNING))
    return lax.while_loop(lambda t: active & (t.stop == RUNNING), body, start)


class _State(NamedTuple):
    point: Any
    cost: jax.Array  # f and ‖grad f‖ at `point` once checked (the start of the next iteration)
    gradient_norm: jax.Array
    iteration: jax.Array  # int32
    reason: jax.Array  # int32
    radius: jax.Array
    step_size: jax.Array  # the norm of the last iteration's step, 0 if rejected
    cost_change: jax.Array  # |Δf| of the last iteration, inf if it was rejected
    history: dict[str, jax.Array] | None


def trust_region(cost: Callable[[Any], jax.Array], manifold: ManifoldsTree, x0: Any, *,
                 max_radius: float | None = None, initial_radius: float | None = None,
                 max_inner_iterations: int | None = None, kappa: float = 0.1,
                 theta: float = 1.0, rho_prime: float = 0.1,
                 gradient_tolerance: float | None = None, cost_tolerance: float = 0.0,
                 step_tolerance: float | None = None, max_iterations: int = 1000,
                 history: int = 0) -> SolverResult:
    r"""Minimise ``cost`` over a manifold by Riemannian trust regions (RTR) on the exact Hessian.

    At ``x_k`` the solver minimises the quadratic model of ``f∘R_{x_k}``

    .. math::
        m_k(\eta) = f(x_k) + \langle g_k, \eta\rangle + \tfrac12\langle\eta,
        \operatorname{Hess} f(x_k)[\eta]\rangle, \qquad \|\eta\| \le \Delta_k,

    approximately, by truncated conjugate gradients (Steihaug–Toint: CG from ``η = 0``, stopped at
    the boundary, at negative curvature, after ``max_inner_iterations`` or once the residual is
    below ``‖g_k‖ min(‖g_k‖^θ, κ)``). ``Hess f(x)[η]`` is exact: the Euclidean gradient is
    linearised once per iteration (``jax.linearize``, forward over reverse), each inner iteration
    applies its tangent map, and the manifold turns the result Riemannian
    (:meth:`~geometric.AbstractManifold.ehess_to_rhess`). The step is judged by the ratio of the
    actual to the predicted decrease,

    .. math::
        \rho_k = \frac{f(x_k) - f(R_{x_k}(\eta_k)) + \epsilon_k}
        {m_k(0) - m_k(\eta_k) + \epsilon_k}, \qquad \epsilon_k = 10^3\,\varepsilon\max(1, |f(x_k)|)

    (the shift ``ε_k`` makes ``ρ → 1`` where both differences are rounding): the step is accepted
    if ``ρ_k > ρ'``; the radius is divided by 4 if ``ρ_k < 1/4`` (or the model did not decrease),
    and doubled, up to ``Δ̄``, if ``ρ_k > 3/4`` and tCG stopped at the boundary or at negative
    curvature. Defaults are Manopt's and Pymanopt's, so iteration counts compare.

    Args:
      cost: the function to minimise, ``f(x) -> scalar``, written with JAX (it is differentiated
        twice: ``jax.grad``, then ``jax.linearize`` of it).
      manifold: a manifold, or a spec pytree for a point that is a pytree (see
        :func:`steepest_descent`). Needs ``ehess_to_rhess`` on each manifold leaf.
      x0: the start, a point (array or pytree) of float32 or float64 arrays of one dtype.
      max_radius: ``Δ̄``, the largest radius; default Pymanopt's ``typical_dist`` of the manifold
        (π for the sphere, ``√p`` for Stiefel and Grassmann, ``π√p`` for the oblique manifold,
        ``π√n`` for O(n), ``dim/8`` for the Poincaré ball, ``√dim`` otherwise; for a product the
        root of the sum of squares).
      initial_radius: ``Δ₀``, default ``Δ̄/8``.
      max_inner_iterations: the most tCG iterations per step; default the manifold's dimension
        (where CG on the model is exact).
      kappa, theta: tCG's residual target ``‖g‖ min(‖g‖^θ, κ)``: ``κ ∈ (0, 1)`` (default 0.1) and
        ``θ > 0`` (default 1: quadratic convergence).
      rho_prime: ``ρ'``, the ratio a step needs to be accepted, in ``[0, 1/4)`` (default 0.1).
      gradient_tolerance, cost_tolerance, step_tolerance, max_iterations, history: the stopping
        criteria and the history, as for :func:`steepest_descent` (default gradient tolerance
        ``√ε·‖grad f(x₀)‖``, 1000 iterations); the solver also stops (``"step_tolerance"``) when
        the radius falls below ``step_tolerance``.

    Returns:
      A :class:`SolverResult`; an iteration whose step was rejected counts.

    Raises:
      TypeError, ValueError: as :func:`steepest_descent`; also for an option out of its range.
      NotImplementedError: a manifold without ``ehess_to_rhess`` for its metric.

    References:
      P.-A. Absil, C. G. Baker, K. A. Gallivan, "Trust-region methods on Riemannian manifolds",
      Found. Comput. Math. 7 (2007). P.-A. Absil, R. Mahony, R. Sepulchre, *Optimization
      Algorithms on Matrix Manifolds* (2008), ch. 7. T. Steihaug, "The conjugate gradient method
      and trust regions in large scale optimization", SIAM J. Numer. Anal. 20 (1983). A. R. Conn,
      N. I. M. Gould, Ph. L. Toint, *Trust-Region Methods* (2000), §17.4.2 (the shift of ρ).

    Examples:
      The dominant 2-dimensional invariant subspace of a symmetric matrix maximises ``tr(XᵀAX)``
      on the Grassmann manifold:

      >>> import jax, jax.numpy as jnp, geometric
      >>> a = jnp.diag(jnp.arange(1.0, 7.0))
      >>> gr = geometric.Grassmann(6, 2)
      >>> x0 = gr.random_point(jax.random.PRNGKey(0))
      >>> res = geometric.solvers.trust_region(lambda x: -jnp.trace(x.T @ a @ x), gr, x0)
      >>> print(f"{-res.cost:.4f}", bool(res.converged))
      11.0000 True
    """
    fname = "trust_region"
    check_real(fname, "max_radius", max_radius, strict=True, allow_none=True)
    check_real(fname, "initial_radius", initial_radius, strict=True, allow_none=True)
    check_count(fname, "max_inner_iterations", max_inner_iterations, minimum=1, allow_none=True)
    check_real(fname, "kappa", kappa, strict=True, maximum=1.0)
    check_real(fname, "theta", theta, strict=True)
    check_real(fname, "rho_prime", rho_prime, maximum=0.25)
    stopping = check_stopping(fname, gradient_tolerance, cost_tolerance, step_tolerance,
                              max_iterations, history)
    problem = Problem(fname, cost, manifold, x0)
    delta_bar = problem.typical_distance if max_radius is None else float(max_radius)
    delta0 = delta_bar / 8 if initial_radius is None else float(initial_radius)
    max_inner = problem.dim if max_inner_iterations is None else int(max_inner_iterations)

    def solve(x0: Any) -> SolverResult:
        dtype = problem.dtype
        f0, g0 = problem.value_and_rgrad(x0)
        c = criteria(problem, problem.norm(x0, g0), stopping)

        def iterate(s: _State) -> _State:
            x = s.point
            f, g, hess = problem.linearize(x)
            gn = problem.norm(x, g)
            reason = stop_reason(c, cost=f, gradient_norm=gn, iteration=s.iteration,
                                 step_small=s.radius < c.step_tolerance,
                                 cost_change=s.cost_change)
            history = record(s.history, s.iteration, cost=f, gradient_norm=gn,
                             step_size=s.step_size)
            active = reason == RUNNING

            def step() -> tuple[Any, ...]:
                t = _truncated_cg(problem, x, g, hess, s.radius, kappa=kappa, theta=theta,
                                  max_inner=max_inner, active=active)
                x_prop = problem.retract(x, t.eta)
                f_prop = problem.value(x_prop)
                shift = RHO_REGULARIZATION * problem.eps * jnp.maximum(1, jnp.abs(f))
                decrease = f - f_prop + shift
                predicted = -t.model + shift
                model_decreased = predicted >= 0
                rho = decrease / predicted
                shrink = ~(rho >= 0.25) | ~model_decreased
                grow = ((rho > 0.75) & ((t.stop == NEGATIVE_CURVATURE)
                                        | (t.stop == EXCEEDED_RADIUS)))
                radius = jnp.where(shrink, s.radius / 4,
                                   jnp.where(grow, jnp.minimum(2 * s.radius, delta_bar),
                                             s.radius))
                accept = model_decreased & (rho > rho_prime)
                return (select(accept, x_prop, x), radius,
                        jnp.where(accept, problem.norm(x, t.eta), 0),
                        jnp.where(accept, jnp.abs(f - f_prop), jnp.inf))

            def stay() -> tuple[Any, ...]:
                return x, s.radius, s.step_size, s.cost_change

            point, radius, step_size, change = lax.cond(active, step, stay)
            return _State(point, f, gn, s.iteration + active.astype(jnp.int32), reason, radius,
                          step_size, change, history)

        nan = jnp.asarray(jnp.nan, dtype)
        start = _State(x0, f0, nan, jnp.int32(0), jnp.int32(RUNNING), jnp.asarray(delta0, dtype),
                       nan, jnp.asarray(jnp.inf, dtype), empty_history(stopping.history, dtype))
        s = lax.while_loop(lambda s: s.reason == RUNNING, iterate, start)
        return SolverResult(s.point, s.cost, s.gradient_norm, s.iteration, s.reason == GRADIENT,
                            s.reason, s.history)

    return jax.jit(solve)(x0)
