r"""Riemannian limited-memory BFGS."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .._core.tree import ManifoldsTree
from ._line_search import backtracking
from ._loop import Progress, advance, finish, running, start
from ._problem import Problem, axpy, scale, select
from ._result import SolverResult
from ._stopping import check_count, check_stopping

__all__ = ["lbfgs"]

# Manopt's linesearch_hint with rlbfgs' defaults: the step α = 1 first, 25 trials at most.
SUFFICIENT_DECREASE = 1e-4
MAX_EVALUATIONS = 25


class _Memory(NamedTuple):
    """The last pairs ``(s, y)``, oldest first, all tangent at the current point; the newest is
    at index ``memory - 1`` and the ``used`` newest are in use."""

    s: Any  # like the point, with a leading axis of length `memory`
    y: Any
    rho: jax.Array  # (memory,): 1/<s, y>
    used: jax.Array  # int32
    gamma: jax.Array  # the initial inverse Hessian's scale, <s, y>/<y, y> of the newest pair


class _State(NamedTuple):
    progress: Progress
    memory: _Memory
    ultimatum: jax.Array  # bool: the last step was too short and the memory was cleared


def _direction(problem: Problem, x: Any, g: Any, mem: _Memory) -> Any:
    """``-H g``, ``H`` the L-BFGS inverse Hessian of ``mem`` (the two-loop recursion)."""
    size = mem.rho.shape[0]
    in_use = jnp.arange(size) >= size - mem.used

    def newest_first(q: Any, pair: tuple[Any, ...]) -> tuple[Any, jax.Array]:
        s, y, rho, used = pair
        a = jnp.where(used, rho * problem.inner(x, s, q), 0)
        return axpy(-a, y, q), a

    q, a = lax.scan(newest_first, g, (mem.s, mem.y, mem.rho, in_use), reverse=True)

    def oldest_first(r: Any, pair: tuple[Any, ...]) -> tuple[Any, None]:
        s, y, rho, a, used = pair
        b = rho * problem.inner(x, y, r)
        return axpy(jnp.where(used, a - b, 0), s, r), None

    r, _ = lax.scan(oldest_first, scale(mem.gamma, q), (mem.s, mem.y, mem.rho, a, in_use))
    return scale(-jnp.ones_like(mem.gamma), r)


def lbfgs(cost: Callable[[Any], jax.Array], manifold: ManifoldsTree, x0: Any, *,
          memory: int = 30, gradient_tolerance: float | None = None, cost_tolerance: float = 0.0,
          step_tolerance: float | None = None, max_iterations: int = 1000,
          history: int = 0) -> SolverResult:
    r"""Minimise ``cost`` over a manifold by limited-memory Riemannian BFGS.

    The direction is ``d_k = -H_k g_k``, with ``H_k`` the inverse Hessian approximation of the
    last ``memory`` pairs

    .. math::
        s_j = \mathcal{T}(\alpha_j d_j), \qquad
        y_j = g_{j+1} - \mathcal{T}(g_j), \qquad \rho_j = 1/\langle s_j, y_j\rangle,

    all transported (``𝒯``, the manifold's vector transport) to the current tangent space after
    every step, and applied by the two-loop recursion: ``q = g``; for ``j`` newest to oldest,
    ``a_j = ρ_j⟨s_j, q⟩``, ``q ← q - a_j y_j``; ``r = γ q`` with ``γ = ⟨s, y⟩/⟨y, y⟩`` of the
    newest pair; for ``j`` oldest to newest, ``r ← r + (a_j - ρ_j⟨y_j, r⟩) s_j``; ``d = -r``. The
    step is ``x_{k+1} = R_{x_k}(α_k d_k)``, ``α_k`` by Armijo backtracking from ``α = 1``
    (``c = 10⁻⁴``, 25 trials). A pair is stored only when it passes the cautious test of Huang,
    Absil & Gallivan, ``⟨s, y⟩/‖s‖² ≥ ‖g_k‖``, which keeps ``H`` positive definite without a
    Wolfe line search on nonconvex costs. As in Manopt's ``rlbfgs``: a step shorter than
    ``step_tolerance`` clears the memory and the solver stops only if the next, a gradient step,
    is too short as well. A direction that is not a descent direction (possible with a transport
    that is not isometric) is replaced by ``-g`` and clears the memory.

    Args:
      cost: the function to minimise, ``f(x) -> scalar``, written with JAX.
      manifold: a manifold, or a spec pytree for a point that is a pytree (see
        :func:`steepest_descent`).
      x0: the start, a point (array or pytree) of float32 or float64 arrays of one dtype.
      memory: how many pairs ``(s, y)`` to keep (default 30, Manopt's), ``≥ 1``; the solver stores
        ``2·memory`` tangent vectors.
      gradient_tolerance, cost_tolerance, step_tolerance, max_iterations, history: the stopping
        criteria and the history, as for :func:`steepest_descent` (default gradient tolerance
        ``√ε·‖grad f(x₀)‖``, 1000 iterations).

    Returns:
      A :class:`SolverResult`.

    Raises:
      TypeError, ValueError: as :func:`steepest_descent`; also for a ``memory`` that is not an
        int ``≥ 1``.

    References:
      W. Huang, K. A. Gallivan, P.-A. Absil, "A Broyden class of quasi-Newton methods for
      Riemannian optimization", SIAM J. Optim. 25 (2015). W. Huang, P.-A. Absil, K. A.
      Gallivan, "A Riemannian BFGS method without differentiated retraction for nonconvex
      optimization problems", SIAM J. Optim. 28 (2018). J. Nocedal, S. J. Wright, *Numerical
      Optimization* (2006), Algorithm 7.4 (the two-loop recursion).

    Examples:
      >>> import jax, jax.numpy as jnp, geometric
      >>> a = jnp.diag(jnp.arange(1.0, 6.0))
      >>> sphere = geometric.Sphere(5)
      >>> x0 = sphere.random_point(jax.random.PRNGKey(0))
      >>> res = geometric.solvers.lbfgs(lambda x: -x @ a @ x, sphere, x0, memory=5)
      >>> print(f"{-res.cost:.5f}", bool(res.converged))
      5.00000 True
    """
    fname = "lbfgs"
    check_count(fname, "memory", memory, minimum=1)
    stopping = check_stopping(fname, gradient_tolerance, cost_tolerance, step_tolerance,
                              max_iterations, history)
    problem = Problem(fname, cost, manifold, x0)
    size = int(memory)

    def solve(x0: Any) -> SolverResult:
        progress, criteria = start(problem, x0, stopping)
        one = jnp.ones([], problem.dtype)

        def step(s: _State) -> _State:
            p, mem = s.progress, s.memory
            x, g, gn = p.point, p.grad, p.gradient_norm
            d = _direction(problem, x, g, mem)
            df0 = problem.inner(x, g, d)
            descent = df0 < 0
            d = select(descent, d, scale(-one, g))
            df0 = jnp.where(descent, df0, -gn ** 2)
            used = jnp.where(descent, mem.used, 0)
            ls = backtracking(problem, x, d, p.cost, g, df0, one,
                              sufficient_decrease=SUFFICIENT_DECREASE,
                              max_evaluations=MAX_EVALUATIONS, active=running(p))
            x_new, g_new = ls.point, ls.grad

            def to_new(v: Any) -> Any:
                return problem.transport(x, x_new, v)

            s_new = to_new(scale(ls.alpha, d))
            y_new = axpy(-one, to_new(g), g_new)
            sy = problem.inner(x_new, s_new, y_new)
            ss = problem.inner(x_new, s_new, s_new)
            cautious = (ss > 0) & (sy >= gn * ss)
            # Every stored pair moves to the new tangent space; a cautious pair joins them.
            moved_s, moved_y = jax.vmap(to_new)(mem.s), jax.vmap(to_new)(mem.y)

            def push(stack: Any, new: Any) -> Any:
                return jax.tree.map(lambda a, b: jnp.roll(a, -1, axis=0).at[-1].set(b), stack,
                                    new)

            pushed = _Memory(push(moved_s, s_new), push(moved_y, y_new),
                             jnp.roll(mem.rho, -1).at[-1].set(1 / sy),
                             jnp.minimum(used + 1, size), sy / problem.inner(x_new, y_new, y_new))
            mem = select(cautious, pushed, _Memory(moved_s, moved_y, mem.rho, used, mem.gamma))
            # A step too short clears the memory once; a second in a row stops the solver.
            step_size = ls.alpha * problem.norm(x, d)
            short = step_size < criteria.step_tolerance
            mem = mem._replace(used=jnp.where(short, 0, mem.used))
            return _State(advance(problem, criteria, p, point=x_new, cost=ls.cost, grad=g_new,
                                  step_size=step_size, step_small=short & s.ultimatum),
                          mem, short)

        zeros = jax.tree.map(lambda a: jnp.zeros((size, *a.shape), a.dtype), x0)
        empty = _Memory(zeros, zeros, jnp.zeros((size,), problem.dtype), jnp.int32(0), one)
        final = lax.while_loop(lambda s: running(s.progress), step,
                               _State(progress, empty, jnp.bool_(False)))
        return finish(final.progress)

    return jax.jit(solve)(x0)
