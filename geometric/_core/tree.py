"""Walking a ``manifolds`` pytree alongside ``params``.

A ``manifolds`` pytree mirrors ``params`` (or a prefix of it): each leaf is a manifold, or None for
Euclidean parameters. Manifolds are frozen dataclasses, not registered pytree nodes, so
``jax.tree`` functions see them as leaves; None needs ``is_leaf=``.
"""
from __future__ import annotations

from typing import Any, TypeAlias

import jax
from jax.tree_util import PyTreeDef

from .manifold import AbstractManifold

__all__ = ["ManifoldsTree", "flatten_manifolds", "is_manifold_leaf"]

ManifoldsTree: TypeAlias = Any
"""A pytree whose leaves are manifolds or None, mirroring ``params`` or a prefix of it."""


def is_manifold_leaf(m: object) -> bool:
    return m is None or isinstance(m, AbstractManifold)


def flatten_manifolds(fname: str, manifolds: ManifoldsTree, **trees: Any
                      ) -> tuple[PyTreeDef, list[AbstractManifold | None], dict[str, list[Any]]]:
    """Flatten ``manifolds`` (None counts as a leaf) and each tree up to it.

    Returns ``(treedef, manifold_leaves, {name: list of subtrees})``; raises ``ValueError`` naming
    the tree whose structure does not match, ``TypeError`` for leaves that are not manifolds.
    """
    leaves, treedef = jax.tree.flatten(manifolds, is_leaf=is_manifold_leaf)
    for leaf in leaves:
        if not is_manifold_leaf(leaf):
            raise TypeError(f"{fname}: the leaves of `manifolds` must be manifolds (e.g. "
                            f"geometric.Stiefel) or None; got {type(leaf).__name__}.")
    flat = {}
    for name, tree in trees.items():
        try:
            flat[name] = treedef.flatten_up_to(tree)  # type: ignore[attr-defined]  # no jaxlib stub
        except (ValueError, TypeError) as e:
            raise ValueError(f"{fname}: `manifolds` must have the structure of `{name}` (or a "
                             f"prefix of it), with a manifold or None per leaf; {e}") from None
    return treedef, leaves, flat
