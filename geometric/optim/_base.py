"""Plumbing shared by the optimizer pieces: mapping over manifold leaves, re-projection, checks."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import optax
from jax import lax

from .._core.manifold import AbstractManifold
from .._core.tree import ManifoldsTree, Resolved, resolve

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


def uses_projection_transport(m: AbstractManifold) -> bool:
    """Whether ``m.transport(x, y, v)`` is the projection onto ``T_y`` (needs no ``x``)."""
    return type(m)._transport is AbstractManifold._transport


def previous_point(m: AbstractManifold, x: jax.Array) -> Any:
    """What the state keeps to transport a moment lazily to the next point: nothing when the
    transport is a projection, else the point itself."""
    return optax.MaskedNode() if uses_projection_transport(m) else x


def transport_to(m: AbstractManifold, previous: Any, x: jax.Array, v: jax.Array) -> jax.Array:
    r"""Lazy transport: ``v``, tangent at the previous point, into ``T_x``.

    ``𝒯_{x_{t-1}→x_t}(v)`` depends only on ``x_t`` when it is the projection ``P_{x_t}(v)``, so
    the step that produced ``x_t`` need not know it: the next update, which is given ``x_t``,
    applies it. Manifolds with another transport keep ``x_{t-1}`` in the state.
    """
    return m.project(x, v) if isinstance(previous, optax.MaskedNode) else \
        m.transport(previous, x, v)
