"""The stopping criteria every solver shares, and the checks of the options' values.

Options are Python numbers, checked when the solver is called; inside the solve they become
scalars of the point's dtype.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._problem import Problem
from ._result import COST, GRADIENT, MAX_ITERATIONS, NON_FINITE, RUNNING, STEP

__all__ = ["Criteria", "Stopping", "check_count", "check_real", "check_stopping", "criteria",
           "stop_reason"]


def check_real(fname: str, name: str, value: object, *, minimum: float = 0.0,
               strict: bool = False, maximum: float | None = None,
               allow_none: bool = False) -> None:
    """``value`` is a real number ``≥ minimum`` (``>`` with ``strict``), ``< maximum`` if given."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        kind = "a real number" + (" or None" if allow_none else "")
        raise TypeError(f"{fname}: `{name}` must be {kind}; got {type(value).__name__}.")
    v = float(value)
    low = v > minimum if strict else v >= minimum
    if math.isnan(v) or not low or (maximum is not None and not v < maximum):
        bound = f"{'>' if strict else '≥'} {minimum:g}"
        if maximum is not None:
            bound += f" and < {maximum:g}"
        raise ValueError(f"{fname}: `{name}` must be {bound}; got {value!r}.")


def check_count(fname: str, name: str, value: object, *, minimum: int = 0,
                allow_none: bool = False) -> None:
    """``value`` is an int ``≥ minimum``."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        kind = "an int" + (" or None" if allow_none else "")
        raise TypeError(f"{fname}: `{name}` must be {kind}; got {type(value).__name__}.")
    if value < minimum:
        raise ValueError(f"{fname}: `{name}` must be ≥ {minimum}; got {value}.")


class Criteria(NamedTuple):
    """The tolerances of one solve, as scalars of the point's dtype (traced: a default may depend
    on the start)."""

    gradient_tolerance: jax.Array
    cost_tolerance: jax.Array
    step_tolerance: jax.Array
    max_iterations: int


class Stopping(NamedTuple):
    """The common options, as given (checked by :func:`check_stopping`)."""

    gradient_tolerance: float | None
    cost_tolerance: float
    step_tolerance: float | None
    max_iterations: int
    history: int


def check_stopping(fname: str, gradient_tolerance: float | None, cost_tolerance: float,
                   step_tolerance: float | None, max_iterations: int, history: int) -> Stopping:
    check_real(fname, "gradient_tolerance", gradient_tolerance, allow_none=True)
    check_real(fname, "cost_tolerance", cost_tolerance)
    check_real(fname, "step_tolerance", step_tolerance, allow_none=True)
    check_count(fname, "max_iterations", max_iterations)
    check_count(fname, "history", history)
    return Stopping(gradient_tolerance, cost_tolerance, step_tolerance, int(max_iterations),
                    int(history))


def criteria(problem: Problem, gradient_norm0: jax.Array, s: Stopping) -> Criteria:
    """The tolerances, defaults filled in.

    ``gradient_tolerance=None``: ``√ε·‖grad f(x₀)‖``, eight orders of magnitude below the start's
    gradient in float64 (Manopt's rule of thumb for what floating point allows), which leaves
    ``f`` accurate to about ``ε``. ``step_tolerance=None``: ``ε``, the step below which a point of
    unit scale no longer changes (a line search that finds no decrease steps by 0).
    """
    eps = problem.eps
    dtype = problem.dtype
    gtol = (math.sqrt(eps) * gradient_norm0 if s.gradient_tolerance is None
            else jnp.asarray(s.gradient_tolerance, dtype))
    stol = eps if s.step_tolerance is None else s.step_tolerance
    return Criteria(gtol.astype(dtype), jnp.asarray(s.cost_tolerance, dtype),
                    jnp.asarray(stol, dtype), s.max_iterations)


def stop_reason(c: Criteria, *, cost: jax.Array, gradient_norm: jax.Array, iteration: jax.Array,
                step_small: jax.Array, cost_change: jax.Array) -> jax.Array:
    """Why to stop at a point reached after ``iteration`` iterations, or ``RUNNING``.

    In order: a non-finite cost or gradient (never converged), the gradient tolerance
    (convergence before the other criteria), a step shorter than the step tolerance, a cost change
    below the cost tolerance, the iteration budget. ``cost_change`` is inf where the last
    iteration did not move.
    """
    finite = jnp.isfinite(cost) & jnp.isfinite(gradient_norm)
    conditions = [~finite, gradient_norm <= c.gradient_tolerance, step_small,
                  cost_change < c.cost_tolerance, iteration >= c.max_iterations]
    return jnp.select(conditions, [jnp.int32(r) for r in (NON_FINITE, GRADIENT, STEP, COST,
                                                          MAX_ITERATIONS)], jnp.int32(RUNNING))
