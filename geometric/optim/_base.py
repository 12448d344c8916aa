"""Plumbing shared by the optimizer pieces: mapping over manifold leaves, re-projection, checks."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from jax import lax

from .._core.manifold import AbstractManifold
from .._core.tree import ManifoldsTree, Resolved, check_spec, resolve

DEFAULT_STABILIZE_EVERY = 100


def check_stabilize_every(fname: str, stabilize_every: int | None) -> None:
    if stabilize_every is None:
        return
    if isinstance(stabilize_every, bool) or not isinstance(stabilize_every, int):
        raise TypeError(f"{fname}: `stabilize_every` must be an int or None; got "
                        f"{type(stabilize_every).__name__}.")
    if stabilize_every < 1:
        raise ValueError(f"{fname}: `stabilize_every` must be ≥ 1; got {stabilize_every}.")


def resolve_update(fname: str, manifolds: ManifoldsTree, params: optax.Params | None) -> Resolved:
    """The spec resolved against ``params``, which ``update`` needs (the point of the tangents)."""
    if params is None:
        raise ValueError(f"{fname}: `update` needs `params` (the current point): call "
                         "`update(grads, state, params)`.")
    return resolve(fname, manifolds, params)


def stabilize(m: AbstractManifold, y: jax.Array, count: jax.Array, stabilize_every: int | None,
              self_correcting: bool) -> jax.Array:
    """Re-project ``y`` onto ``m`` when the ``count``-th update (1-based) is due.

    ``stabilize_every=None``: every 100 updates, and never where the retraction corrects itself.
    """
    every = stabilize_every
    if every is None:
        if self_correcting:
            return y
        every = DEFAULT_STABILIZE_EVERY
    return lax.cond(count % every == 0, m.project_point, lambda y: y, y)


def map_manifolds(r: Resolved, fn: Callable[..., tuple[Any, ...]], *trees: Any, outputs: int,
                  euclidean: Callable[..., tuple[Any, ...]] | None = None) -> tuple[Any, ...]:
    """``outputs`` trees like ``params``: ``fn(m, *leaves)`` at each manifold leaf of ``trees``.

    Euclidean leaves get ``euclidean(*leaves)``, or ``optax.MaskedNode()`` in every output
    (what a Euclidean optax transformation, run on :meth:`Resolved.mask`, leaves for them).
    """
    flat = [r.flatten("tree", t) for t in trees]
    masked = (optax.MaskedNode(),) * outputs
    rows = [fn(m, *leaves) if m is not None else euclidean(*leaves) if euclidean else masked
            for m, *leaves in zip(r.manifolds, *flat)]
    return tuple(r.unflatten(list(column)) for column in zip(*rows)) if rows else \
        (r.unflatten([]),) * outputs


def init_euclidean(r: Resolved, tx: optax.GradientTransformation, params: optax.Params
                   ) -> optax.OptState:
    """``tx``'s state for the Euclidean leaves alone (the others masked, as ``optax.masked``)."""
    return tx.init(r.mask(params, manifold=False))


def update_euclidean(r: Resolved, tx: optax.GradientTransformation, updates: optax.Updates,
                     state: optax.OptState) -> tuple[optax.Updates, optax.OptState]:
    """``tx`` on the Euclidean leaves alone: what it would do to them without manifolds."""
    return tx.update(r.mask(updates, manifold=False), state)


def transport_to(m: AbstractManifold, previous: jax.Array, x: jax.Array, v: jax.Array
                 ) -> jax.Array:
    r"""Lazy transport: ``v``, tangent at the previous point, into ``T_x``.

    ``𝒯_{x_{t-1}→x_t}(v)`` is applied by the next update, which is given ``x_t``; the step that
    produced ``x_t`` need not know it. For the default transport, the projection ``P_{x_t}(v)``,
    ``previous`` is not used (and XLA drops it from the computation); a manifold with another
    transport gets it.
    """
    return m.transport(previous, x, v)


def manifold_transform(fname: str, manifolds: ManifoldsTree, euclidean: optax.GradientTransformation,
                       state_type: Any,
                       init_leaf: Callable[[AbstractManifold, jax.Array], tuple[Any, ...]],
                       update_leaf: Callable[..., tuple[Any, ...]], *,
                       check_init: Callable[[Resolved, optax.Params], jax.Array | None] | None = None,
                       check_update: Callable[[Resolved, optax.Params, Any], jax.Array | None]
                       | None = None
                       ) -> optax.GradientTransformationExtraArgs:
    """The template of a piece that keeps state per manifold leaf.

    ``euclidean`` runs on the Euclidean leaves, as it would without manifolds. ``state_type``'s
    fields are, in order: ``count`` (an int32 step counter, if the piece counts), one tree like
    ``params`` per state leaf, and ``euclidean``. At each manifold leaf ``init_leaf(m, x)`` gives
    the state leaves and ``update_leaf(m, x, g, *state_leaves)`` (with ``count=``, the 1-based
    step, for a counting piece) the update and the new state leaves; ``check_init(r, params)``
    runs at ``init``, ``check_update(r, params, state)`` at each ``update``; a check may return
    an int32 zero that joins the step count (a counting piece), so that the compiler keeps it.
    """
    check_spec(fname, manifolds)
    fields: tuple[str, ...] = state_type._fields  # a NamedTuple class
    counted = fields[0] == "count"
    trees = fields[int(counted):-1]

    def init_fn(params: optax.Params) -> optax.OptState:
        r = resolve(fname, manifolds, params)
        flag = check_init(r, params) if check_init is not None else None
        leaves = map_manifolds(r, init_leaf, params, outputs=len(trees))
        count = (jnp.zeros([], jnp.int32) + (0 if flag is None else flag),) if counted else ()
        return state_type(*count, *leaves, init_euclidean(r, euclidean, params))

    def update_fn(updates: optax.Updates, state: Any, params: optax.Params | None = None,
                  **extra_args: Any) -> tuple[optax.Updates, optax.OptState]:
        r = resolve_update(fname, manifolds, params)
        flag = check_update(r, params, state) if check_update is not None else None
        e_updates, e_state = update_euclidean(r, euclidean, updates, state.euclidean)
        count = (state.count + 1,) if counted else ()

        def leaf(m: AbstractManifold, *leaves: jax.Array) -> tuple[Any, ...]:
            return update_leaf(m, *leaves, **dict(zip(["count"], count)))

        out, *new = map_manifolds(r, leaf, params, updates, *(getattr(state, t) for t in trees),
                                  outputs=1 + len(trees))
        if flag is not None:
            count = tuple(c + flag for c in count)
        return r.merge(out, e_updates), state_type(*count, *new, e_state)

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)
