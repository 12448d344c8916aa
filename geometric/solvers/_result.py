"""What a solver returns, why it stopped, and the fixed-size record of its iterations."""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["COST", "GRADIENT", "HISTORY_KEYS", "MAX_ITERATIONS", "NON_FINITE", "REASONS", "RUNNING",
           "STEP", "SolverResult", "empty_history", "record"]

REASONS: tuple[str, ...] = ("gradient_tolerance", "max_iterations", "step_tolerance",
                            "cost_tolerance", "non_finite")
"""The names of the stopping reasons, indexed by :attr:`SolverResult.reason`:

* ``0`` ``"gradient_tolerance"``: ``‖grad f(x)‖ ≤ gradient_tolerance`` (``converged`` is true);
* ``1`` ``"max_iterations"``: ``max_iterations`` iterations were taken;
* ``2`` ``"step_tolerance"``: the last step was shorter than ``step_tolerance`` (a line search
  that found no decrease takes a step of length 0; for ``trust_region``, the radius fell below it);
* ``3`` ``"cost_tolerance"``: the last step changed the cost by less than ``cost_tolerance``;
* ``4`` ``"non_finite"``: the cost or the gradient at the current point is inf or nan.
"""
GRADIENT, MAX_ITERATIONS, STEP, COST, NON_FINITE = range(len(REASONS))
RUNNING = -1  # the reason of a solve still under way (never returned)

HISTORY_KEYS = ("cost", "gradient_norm", "step_size")


class SolverResult(NamedTuple):
    """The outcome of a solver: a NamedTuple, hence a pytree (``jit`` and ``vmap`` return it).

    Under ``jax.vmap`` every field gains the batch axis: one result per problem.
    """

    point: Any
    """The last point, a pytree like ``x0``."""
    cost: jax.Array
    """``f(point)``, shape ``()``."""
    gradient_norm: jax.Array
    """``‖grad f(point)‖`` in the manifold's metric, shape ``()``."""
    iterations: jax.Array
    """The number of iterations taken (steps, accepted or rejected), int32, shape ``()``."""
    converged: jax.Array
    """Whether the gradient tolerance was met (``reason == 0``), bool, shape ``()``."""
    reason: jax.Array
    """Why the solver stopped, an int32 index into :data:`REASONS`."""
    history: dict[str, jax.Array] | None
    """``None``, or with ``history=h``: ``{"cost", "gradient_norm", "step_size"}``, arrays of
    shape ``(h,)``: entry ``k`` belongs to the point after ``k`` iterations (entry 0 to ``x0``, whose
    step size is nan; a rejected step has size 0); nan past the last iteration."""


def empty_history(length: int, dtype: Any) -> dict[str, jax.Array] | None:
    """nan-filled arrays of ``length`` entries, or None for ``length == 0``."""
    if length == 0:
        return None
    return {key: jnp.full((length,), jnp.nan, dtype) for key in HISTORY_KEYS}


def record(history: dict[str, jax.Array] | None, k: jax.Array, **values: jax.Array
           ) -> dict[str, jax.Array] | None:
    """``history`` with ``values`` at entry ``k``; ``k`` past the end writes nothing."""
    if history is None:
        return None
    return {key: h.at[k].set(values[key].astype(h.dtype), mode="drop")
            for key, h in history.items()}
