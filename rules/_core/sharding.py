"""``shard_map``: operands of a rule vary over the same mesh axes.

A rule's cotangent must vary over the same mesh axes as its argument. When a replicated operand (a
shared weight) meets a batch sharded over a mesh axis, the operand is cast to vary over that axis
too before the rule is called: JAX transposes that cast into the psum that adds up every device's
share of the weight's cotangent.
"""
from __future__ import annotations

from typing import Any

import jax

__all__ = ["match_varying"]


def _varying_axes(x: jax.Array) -> frozenset:
    aval = jax.typeof(x)
    mat = getattr(aval, "mat", None)
    return frozenset(mat.varying) if mat is not None else frozenset(getattr(aval, "vma", ()))


def match_varying(*args: Any) -> tuple[Any, ...]:
    """Return ``args`` with every array leaf varying over the union of their shard_map axes.

    Outside ``shard_map`` (or when all agree) the arguments come back unchanged.
    """
    leaves = [x for x in jax.tree_util.tree_leaves(args) if isinstance(x, jax.Array)]
    axes = frozenset().union(*(_varying_axes(x) for x in leaves))
    if not axes:
        return args

    def cast(x):
        if not isinstance(x, jax.Array):
            return x
        missing = tuple(sorted(axes - _varying_axes(x)))
        return jax.lax.pcast(x, missing, to="varying") if missing else x

    return jax.tree_util.tree_map(cast, args)
