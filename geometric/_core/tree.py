"""The ``manifolds`` spec: which leaf of ``params`` lies on which manifold.

A spec is either

* a pytree whose leaves are manifolds, :data:`EUCLIDEAN` or None (both: no constraint), placed at
  the leaves of ``params`` or at any prefix of them (a manifold at a subtree applies to every array
  below it); or
* a function ``params -> such a pytree`` (for example :func:`by_path`), called with whatever the
  optimizer is given, at ``init`` and at every ``update``.

A pytree spec is matched against ``params`` **by key path**, not by container type: a dict spec
fits an ``nnx.State``, a Linen ``FrozenDict`` or an equinox module with the same keys or field
names. A boxed array (a Flax NNX ``Variable``) counts as the array it holds, whichever side it is
on, so a spec written for ``nnx.state(model)`` still fits the plain arrays ``nnx.Optimizer`` passes
to ``update``.

Manifolds are frozen dataclasses, not pytree nodes, so ``jax.tree`` functions see them as leaves;
None needs ``is_leaf=``.
"""
from __future__ import annotations

import re
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, NamedTuple, TypeAlias

import jax
import optax
from jax.tree_util import (DictKey, FlattenedIndexKey, GetAttrKey, PyTreeDef, SequenceKey,
                           tree_flatten_with_path)

from .manifold import AbstractManifold

__all__ = ["EUCLIDEAN", "ManifoldsTree", "Resolved", "by_path", "check_spec", "is_spec_leaf",
           "path_string", "resolve"]


class _Euclidean:
    """The type of :data:`EUCLIDEAN` (one instance; survives copying and pickling as itself)."""

    _instance: _Euclidean | None = None

    def __new__(cls) -> _Euclidean:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "EUCLIDEAN"

    def __reduce__(self) -> str:
        return "EUCLIDEAN"


EUCLIDEAN = _Euclidean()
"""A spec leaf for unconstrained parameters, like None, for containers where None is an empty
subtree (equinox: ``eqx.tree_at`` cannot put anything where a None stands)."""

ManifoldsTree: TypeAlias = Any
"""A spec: a pytree of manifolds / :data:`EUCLIDEAN` / None matching ``params`` or a prefix of it,
or a function ``params -> such a pytree``."""

SpecLeaf: TypeAlias = "AbstractManifold | _Euclidean | None"


def is_spec_leaf(x: object) -> bool:
    return x is None or x is EUCLIDEAN or isinstance(x, AbstractManifold)


def _is_boxed(x: object) -> bool:
    """Whether ``x`` is a Flax NNX ``Variable`` (a box around one array); no import of flax."""
    nnx = sys.modules.get("flax.nnx")
    return nnx is not None and isinstance(x, nnx.Variable)


def _key(k: Any) -> str:
    if isinstance(k, DictKey):
        return str(k.key)
    if isinstance(k, GetAttrKey):
        return k.name
    if isinstance(k, SequenceKey):
        return str(k.idx)
    if isinstance(k, FlattenedIndexKey):
        return str(k.key)
    return str(k)


def path_string(path: Sequence[str]) -> str:
    """``('layers', '0', 'kernel') -> 'layers/0/kernel'``; the root is ``''``."""
    return "/".join(path)


def _leaves_with_paths(tree: Any, is_leaf: Callable[[Any], bool] | None = None
                       ) -> list[tuple[tuple[str, ...], Any]]:
    """``(path, leaf)`` for each leaf of ``tree``; a boxed value's leaves get the box's path."""
    def stop(x: Any) -> bool:
        return _is_boxed(x) or (is_leaf is not None and is_leaf(x))

    out: list[tuple[tuple[str, ...], Any]] = []
    for keys, leaf in tree_flatten_with_path(tree, is_leaf=stop)[0]:
        path = tuple(map(_key, keys))
        if _is_boxed(leaf):
            out.extend((path, x) for x in jax.tree.leaves(leaf, is_leaf=is_leaf))
        else:
            out.append((path, leaf))
    return out


def _is_spec_function(fname: str, spec: Any) -> bool:
    """Whether ``spec`` is a function to call rather than a pytree (a mirror) to match.

    A callable that JAX sees as a single leaf (a function, a :func:`by_path` spec) is a function.
    A callable pytree (an equinox module) is a mirror when it holds a manifold or
    :data:`EUCLIDEAN`; holding neither, it could be either, and is refused.
    """
    if not callable(spec) or is_spec_leaf(spec):
        return False
    leaves = jax.tree.leaves(spec, is_leaf=is_spec_leaf)
    if len(leaves) == 1 and leaves[0] is spec:
        return True
    if any(leaf is not None and is_spec_leaf(leaf) for leaf in leaves):
        return False
    raise TypeError(f"{fname}: `manifolds` is a callable pytree ({type(spec).__name__}) with no "
                    "manifold and no EUCLIDEAN among its leaves, so it is neither clearly a mirror "
                    "of `params` nor clearly a spec function. For a mirror, mark unconstrained "
                    "leaves with geometric.optim.EUCLIDEAN; for a function, pass a plain function "
                    "(`lambda params: ...`).")


def _spec_leaves(fname: str, spec: Any) -> dict[tuple[str, ...], SpecLeaf]:
    found = {}
    for path, leaf in _leaves_with_paths(spec, is_leaf=is_spec_leaf):
        if not is_spec_leaf(leaf):
            where = f" at '{path_string(path)}'" if path else ""
            raise TypeError(f"{fname}: the leaves of `manifolds` must be manifolds (e.g. "
                            f"geometric.Stiefel), EUCLIDEAN or None; got {type(leaf).__name__}"
                            f"{where}.")
        found[path] = leaf
    return found


def check_spec(fname: str, spec: ManifoldsTree) -> list[AbstractManifold]:
    """Check a spec when an optimizer is built; returns its manifolds ([] for a function spec)."""
    if _is_spec_function(fname, spec):
        return []
    return [m for m in _spec_leaves(fname, spec).values() if isinstance(m, AbstractManifold)]


class Resolved(NamedTuple):
    """A spec resolved against one ``params``: a manifold or None per leaf of ``params``."""

    fname: str
    treedef: PyTreeDef  # of params
    manifolds: list[AbstractManifold | None]  # one per leaf of params
    paths: list[str]  # '/'-joined key path of each leaf

    def flatten(self, name: str, tree: Any) -> list[Any]:
        """The leaves of ``tree`` (a tree shaped like ``params``; masked leaves allowed)."""
        try:
            return self.treedef.flatten_up_to(tree)
        except (ValueError, TypeError) as e:
            raise ValueError(f"{self.fname}: `{name}` must have the structure of `params`; "
                             f"{e}") from None

    def unflatten(self, leaves: Sequence[Any]) -> Any:
        return self.treedef.unflatten(leaves)

    def mask(self, tree: Any, *, manifold: bool) -> Any:
        """``tree`` with ``optax.MaskedNode()`` at the Euclidean (``manifold=True``) or the
        manifold leaves (``manifold=False``), as ``optax.masked`` hands it to a transformation."""
        return self.unflatten([x if (m is not None) == manifold else optax.MaskedNode()
                               for m, x in zip(self.manifolds, self.flatten("tree", tree))])

    def merge(self, manifold_tree: Any, euclidean_tree: Any) -> Any:
        """The inverse of the two :meth:`mask` calls."""
        return self.unflatten([a if m is not None else b for m, a, b in zip(
            self.manifolds, self.flatten("updates", manifold_tree),
            self.flatten("updates", euclidean_tree))])


def resolve(fname: str, spec: ManifoldsTree, params: Any) -> Resolved:
    """Match ``spec`` against ``params`` (see the module docstring).

    Raises ``ValueError`` naming a leaf of ``params`` that no spec leaf covers, or a manifold of
    the spec where ``params`` has no array; ``TypeError`` for spec leaves that are neither
    manifolds nor EUCLIDEAN nor None.
    """
    if _is_spec_function(fname, spec):
        spec = spec(params)
    table = _spec_leaves(fname, spec)
    manifolds, paths, used = [], [], set()
    for path, _ in _leaves_with_paths(params):
        for k in range(len(path), -1, -1):
            if path[:k] in table:
                leaf = table[path[:k]]
                used.add(path[:k])
                break
        else:
            deeper = sorted(path_string(p) for p in table if p[:len(path)] == path)
            hint = (f"; `manifolds` has {', '.join(deeper[:3])} below it: a spec leaf must sit "
                    "at the array or above it") if deeper else ""
            raise ValueError(f"{fname}: `manifolds` must have the structure of `params` (or a "
                             "prefix of it), with a manifold, EUCLIDEAN or None per leaf; nothing "
                             f"in `manifolds` covers the leaf '{path_string(path)}' of `params`"
                             f"{hint}.")
        manifolds.append(leaf if isinstance(leaf, AbstractManifold) else None)
        paths.append(path_string(path))
    lost = [(path_string(p), m) for p, m in table.items()
            if p not in used and isinstance(m, AbstractManifold)]
    if lost:
        have = ", ".join(f"'{p}'" for p in paths[:6]) + (", ..." if len(paths) > 6 else "")
        raise ValueError(f"{fname}: `manifolds` puts {lost[0][1]!r} at '{lost[0][0]}', where "
                         f"`params` has no array, so that constraint would apply to nothing; "
                         f"the leaves of `params` are {have or 'none'}.")
    return Resolved(fname, jax.tree.structure(params), manifolds, paths)


Rule: TypeAlias = "SpecLeaf | Callable[[str, Any], SpecLeaf]"


def by_path(rules: Mapping[str, Rule] | Callable[[str, Any], SpecLeaf], default: SpecLeaf = EUCLIDEAN,
            *, optional: Collection[str] = ()) -> Callable[[Any], Any]:
    r"""A spec that picks each leaf's manifold from its key path and value.

    The path of a leaf is its key path joined by ``/``: dict keys, attribute names and sequence
    indices, e.g. ``'layers/0/kernel'`` (Flax NNX), ``'params/Dense_0/kernel'`` (Linen),
    ``'layers/0/weight'`` (equinox). A Flax ``Variable`` counts as its array.

    Args:
      rules: a mapping from regular expressions to manifolds, :data:`EUCLIDEAN` / None, or
        functions ``(path, leaf) -> manifold | EUCLIDEAN | None``. The first pattern (in the
        mapping's order) that ``re.search`` finds in the path decides; ``'kernel$'`` matches
        every path ending in ``kernel``, ``'^encoder/'`` the encoder's leaves. Or one function
        ``(path, leaf) -> manifold | EUCLIDEAN | None`` for every leaf.
      default: the choice for paths no pattern matches.
      optional: patterns of ``rules`` that may decide no leaf (a model that may lack the layer).

    Returns:
      A spec function ``params -> pytree of manifolds``, accepted wherever ``manifolds`` is.
      When it is called, a pattern (not in ``optional``) that decides no leaf of ``params`` — no
      path matches it, or an earlier pattern takes every path it matches — is an error naming
      the pattern: a constraint would otherwise switch off without a word.

    Raises:
      ValueError: a pattern of ``rules`` is not a regular expression, or ``optional`` names a
        pattern that ``rules`` does not have; when the spec is used, a pattern decides no leaf.

    Examples:
      >>> import jax.numpy as jnp, geometric
      >>> from geometric.optim import by_path
      >>> params = {"layers": [{"kernel": jnp.zeros((8, 4)), "bias": jnp.zeros(4)}]}
      >>> spec = by_path({r"kernel$": lambda path, w: geometric.Stiefel(*w.shape)})
      >>> spec(params)
      {'layers': [{'bias': EUCLIDEAN, 'kernel': Stiefel(n=8, p=4, ...)}]}
    """
    patterns: list[tuple[str, re.Pattern[str], Rule]] = []
    if callable(rules) and not isinstance(rules, Mapping):
        def choose(path: str, leaf: Any, decided: set[str]) -> SpecLeaf:
            return rules(path, leaf)
    else:
        for pattern, rule in rules.items():
            try:
                patterns.append((pattern, re.compile(pattern), rule))
            except re.error as e:
                raise ValueError(f"by_path: the pattern '{pattern}' is not a regular expression: "
                                 f"{e}.") from None
        unknown = [p for p in optional if p not in rules]
        if unknown:
            raise ValueError(f"by_path: `optional` names {unknown!r}, which are not patterns of "
                             f"`rules` ({list(rules)!r}).")

        def choose(path: str, leaf: Any, decided: set[str]) -> SpecLeaf:
            for name, pattern, rule in patterns:
                if pattern.search(path):
                    decided.add(name)
                    return rule(path, leaf) if callable(rule) else rule
            return default

    def spec(params: Any) -> Any:
        decided: set[str] = set()
        leaves = [choose(path_string(path), x, decided) for path, x in _leaves_with_paths(params)]
        idle = [name for name, _, _ in patterns if name not in decided and name not in optional]
        if idle:
            paths = [path_string(path) for path, _ in _leaves_with_paths(params)]
            have = ", ".join(f"'{p}'" for p in paths[:6]) + (", ..." if len(paths) > 6 else "")
            raise ValueError(f"by_path: the pattern '{idle[0]}' decides no leaf of `params` (no "
                             "path matches it, or an earlier pattern takes every path it "
                             f"matches), so its constraint would apply to nothing; the paths are "
                             f"{have or 'none'}. List it in `optional=` if that is intended.")
        for path, leaf in zip(_leaves_with_paths(params), leaves):
            if not is_spec_leaf(leaf):
                raise TypeError(f"by_path: the rule for '{path_string(path[0])}' gave "
                                f"{type(leaf).__name__}; expected a manifold, EUCLIDEAN or None.")
        return jax.tree.unflatten(jax.tree.structure(params), leaves)

    return spec
