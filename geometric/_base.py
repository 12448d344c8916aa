"""The manifold interface, and walking a ``manifolds`` pytree alongside ``params``.

Every manifold is a final, frozen (hence hashable) dataclass deriving from
:class:`AbstractManifold`. Its fields are static Python ints and strings, so a manifold can be a
static ``jit`` argument and a leaf of a ``manifolds`` pytree. All methods accept leading batch axes:
a stack of ``h`` Stiefel points has shape ``(h, n, p)``, and ``inner`` returns shape ``(h,)``.
"""
from __future__ import annotations

import abc
import operator

import jax
import jax.numpy as jnp

from rules.internal import check_array

__all__ = ["AbstractManifold"]

FLOAT_DTYPES = (jnp.float32, jnp.float64)


class AbstractManifold(abc.ABC):
    """A Riemannian manifold embedded in a Euclidean space of arrays of shape :attr:`shape`.

    Tangent vectors, Euclidean gradients and Riemannian gradients are arrays of the points' shape
    (the embedding coordinates). Methods take leading batch axes; the manifold's own axes are last.
    """

    @property
    @abc.abstractmethod
    def shape(self) -> tuple[int, ...]:
        """Shape of one point, without batch axes."""

    @property
    @abc.abstractmethod
    def self_correcting(self) -> bool:
        """Whether :meth:`retract` lands on the manifold even from a point slightly off it.

        Retractions that normalise (QR, polar, ``x / ‖x‖``) wipe out rounding errors every step;
        rotations (Cayley, exponential) carry them along, so iterates drift off the manifold in
        float32 unless re-projected now and then (``stabilize_every`` of the optimizers).
        """

    @abc.abstractmethod
    def random_point(self, key: jax.Array, dtype=jnp.float32) -> jax.Array:
        """A point drawn from the uniform (Haar) distribution, shape :attr:`shape`.

        Use ``jax.vmap(manifold.random_point)(keys)`` for a stack of points.
        """

    @abc.abstractmethod
    def random_tangent(self, key: jax.Array, x: jax.Array) -> jax.Array:
        """A random tangent vector at ``x`` (a projected Gaussian), same shape as ``x``."""

    @abc.abstractmethod
    def project(self, x: jax.Array, v: jax.Array) -> jax.Array:
        """Orthogonal projection of the ambient vector ``v`` onto the tangent space at ``x``."""

    @abc.abstractmethod
    def project_point(self, x: jax.Array) -> jax.Array:
        """The point of the manifold nearest to ``x`` (used to stabilise long runs)."""

    @abc.abstractmethod
    def egrad_to_rgrad(self, x: jax.Array, g: jax.Array) -> jax.Array:
        """The Riemannian gradient of ``g``: the tangent ``r`` with ``inner(x, r, ξ) = <g, ξ>``.

        The identity holds for every tangent ``ξ`` (the Riesz map of the metric).
        """

    @abc.abstractmethod
    def inner(self, x: jax.Array, u: jax.Array, v: jax.Array) -> jax.Array:
        """The metric at ``x`` of two tangent vectors; shape: the batch axes of ``x``."""

    @abc.abstractmethod
    def retract(self, x: jax.Array, v: jax.Array) -> jax.Array:
        """The retraction ``R_x(v)``: a point of the manifold, ``R_x(tv) = x + tv + O(t²)``."""

    @abc.abstractmethod
    def transport(self, x: jax.Array, y: jax.Array, v: jax.Array) -> jax.Array:
        """Vector transport of the tangent ``v`` at ``x`` into the tangent space at ``y``."""

    @abc.abstractmethod
    def manifold_error(self, x: jax.Array) -> jax.Array:
        """Distance of ``x`` from the constraint (for logging); shape: the batch axes of ``x``."""

    # ------------------------------------------------------------------------------------------
    # Input checks. They run once, at trace time, and name the method, the argument, the expected
    # shape and the one given.

    def _check_point(self, method: str, x, argname: str = "x") -> None:
        fname = f"{self!r}.{method}"
        check_array(fname, argname, x, dtypes=FLOAT_DTYPES)
        k = len(self.shape)
        if x.ndim < k or tuple(x.shape[x.ndim - k:]) != self.shape:
            expected = "(..., " + ", ".join(map(str, self.shape)) + ")"
            raise ValueError(f"{fname}: `{argname}` must have shape {expected}; got {tuple(x.shape)}.")

    def _check_like(self, method: str, argname: str, v, x) -> None:
        fname = f"{self!r}.{method}"
        check_array(fname, argname, v, dtypes=FLOAT_DTYPES)
        if v.shape != x.shape:
            raise ValueError(f"{fname}: `{argname}` must have the shape of `x`, {tuple(x.shape)}; "
                             f"got {tuple(v.shape)}.")


def check_size(cls: str, name: str, value, minimum: int = 1) -> int:
    """``value`` as an ``int`` ≥ ``minimum``; raises naming the class and the field otherwise."""
    if isinstance(value, bool):
        raise TypeError(f"{cls}: `{name}` must be an int; got {value!r}.")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{cls}: `{name}` must be an int; got {type(value).__name__}.") from None
    if value < minimum:
        raise ValueError(f"{cls}: `{name}` must be ≥ {minimum}; got {value}.")
    return value


def check_choice(cls: str, name: str, value, choices: tuple[str, ...]) -> None:
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{cls}: `{name}` must be one of {options}; got {value!r}.")


def check_random_dtype(fname: str, dtype) -> None:
    if not any(jnp.dtype(dtype) == jnp.dtype(d) for d in FLOAT_DTYPES):
        raise TypeError(f"{fname}: `dtype` must be float32 or float64; got {jnp.dtype(dtype).name}.")


# ----------------------------------------------------------------------------------------------
# A ``manifolds`` pytree mirrors ``params`` (or a prefix of it): each leaf is a manifold, or None
# for Euclidean parameters.


def is_manifold_leaf(m) -> bool:
    return m is None or isinstance(m, AbstractManifold)


def flatten_manifolds(fname: str, manifolds, **trees):
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
            flat[name] = treedef.flatten_up_to(tree)
        except (ValueError, TypeError) as e:
            raise ValueError(f"{fname}: `manifolds` must have the structure of `{name}` (or a prefix "
                             f"of it), with a manifold or None per leaf; {e}") from None
    return treedef, leaves, flat
