"""The state every solver's ``lax.while_loop`` carries: the iterate, its cost and gradient, the
count, the stopping reason and the history; how it starts, advances by a step, and ends."""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ._problem import Problem
from ._result import GRADIENT, RUNNING, SolverResult, empty_history, record
from ._stopping import Criteria, Stopping, criteria, stop_reason

__all__ = ["Progress", "advance", "finish", "running", "start"]


class Progress(NamedTuple):
    point: Any
    cost: jax.Array
    grad: Any  # the Riemannian gradient at `point`
    gradient_norm: jax.Array
    iteration: jax.Array  # int32
    reason: jax.Array  # int32, RUNNING until a criterion holds
    history: dict[str, jax.Array] | None


def start(problem: Problem, x0: Any, stopping: Stopping) -> tuple[Progress, Criteria]:
    """The progress at ``x0`` (cost and gradient evaluated) and the tolerances of the solve."""
    f, g = problem.value_and_rgrad(x0)
    gn = problem.norm(x0, g)
    c = criteria(problem, gn, stopping)
    zero = jnp.int32(0)
    reason = stop_reason(c, cost=f, gradient_norm=gn, iteration=zero,
                         step_small=jnp.bool_(False), cost_change=jnp.asarray(jnp.inf, f.dtype))
    history = record(empty_history(stopping.history, problem.dtype), zero, cost=f,
                     gradient_norm=gn, step_size=jnp.asarray(jnp.nan, f.dtype))
    return Progress(x0, f, g, gn, zero, reason, history), c


def advance(problem: Problem, c: Criteria, p: Progress, *, point: Any, cost: jax.Array, grad: Any,
            step_size: jax.Array, step_small: jax.Array) -> Progress:
    """The progress after one iteration that reached ``point`` by a step of ``step_size``."""
    gn = problem.norm(point, grad)
    iteration = p.iteration + 1
    change = jnp.where(step_size > 0, jnp.abs(cost - p.cost), jnp.inf)
    reason = stop_reason(c, cost=cost, gradient_norm=gn, iteration=iteration,
                         step_small=step_small, cost_change=change)
    history = record(p.history, iteration, cost=cost, gradient_norm=gn, step_size=step_size)
    return Progress(point, cost, grad, gn, iteration, reason, history)


def running(p: Progress) -> jax.Array:
    return p.reason == RUNNING


def finish(p: Progress) -> SolverResult:
    return SolverResult(p.point, p.cost, p.gradient_norm, p.iteration, p.reason == GRADIENT,
                        p.reason, p.history)
