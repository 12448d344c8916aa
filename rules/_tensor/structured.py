"""Packed structured matrices: strictly lower/upper triangular, skew-symmetric and symmetric.

Each class stores only the free entries of an ``n × n`` matrix in a vector (the pytree leaf; ``n``
is static aux data), as GeometricMachineLearning.jl does for its network weights. All four share
one packing, :func:`packing_indices`: entry ``k`` of the vector sits at ``(rows[k], cols[k])`` of
the lower triangle, in row-major order, and is mirrored to ``(cols[k], rows[k])`` with a sign that
is the only thing that tells the classes apart.

Gradient convention. The cotangent of the packed vector is the exact derivative of the loss with
respect to the stored entries (``docs/derivations/structured.md#exact-derivative``): with ``W̄`` the cotangent
of the dense matrix,

* strictly lower ``L``: ``p̄_k = W̄_ij`` (``i > j``); strictly upper: ``p̄_k = W̄_ji``;
* skew-symmetric ``S = L - Lᵀ``: ``p̄_k = W̄_ij - W̄_ji``;
* symmetric: ``p̄_k = W̄_ij + W̄_ji`` off the diagonal, ``W̄_ii`` on it.

Every code path (``.dense()``, :func:`rules.mat_tensor_mul`, :func:`rules.tensor_mat_mul`,
:func:`rules.volume_preserving_feedforward`) goes through ``.dense()``, whose pullback is
:func:`pack_cotangent`, so the packed gradient is the same on all of them.
(GeometricMachineLearning.jl halves the skew/symmetric gradient on one path and not on another.)
"""
from __future__ import annotations

import functools
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import check_array
from .._core.rule import Rule

__all__ = ["StrictlyLower", "StrictlyUpper", "SkewSymmetric", "Symmetric", "packing_indices",
           "pack_cotangent"]


@functools.lru_cache(maxsize=None)
def packing_indices(n: int, diagonal: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, cols)`` of the stored entries: the lower triangle of an ``n × n`` matrix, row-major.

    With ``diagonal=False`` the strictly lower triangle (``n(n-1)/2`` entries), else the lower
    triangle with the diagonal (``n(n+1)/2``). This is the only packing formula in the library.
    """
    rows, cols = np.tril_indices(n, 0 if diagonal else -1)
    rows.flags.writeable = cols.flags.writeable = False
    return rows, cols


@functools.lru_cache(maxsize=None)
def _unpacking(n: int, diagonal: bool, lower: int, upper: int) -> np.ndarray:
    """Gather index with ``dense = concat([p, [0], -p])[..., index]`` (no -0.0 entries)."""
    rows, cols = packing_indices(n, diagonal)
    size = rows.size
    k = np.arange(size)
    off = rows != cols
    signed = {1: k, -1: size + 1 + k}  # positions of +p_k and -p_k in the concatenation
    index = np.full((n, n), size)  # the zero
    if lower:
        index[rows, cols] = signed[lower]
    if upper:
        index[cols[off], rows[off]] = signed[upper][off]
    index.flags.writeable = False
    return index


def unpack(packed, n, diagonal, lower, upper):
    """The dense ``(..., n, n)`` matrix of the stored entries (plain JAX, linear in ``packed``)."""
    index = _unpacking(n, diagonal, lower, upper)
    zero = jnp.zeros((*packed.shape[:-1], 1), packed.dtype)
    return jnp.concatenate([packed, zero, -packed], axis=-1)[..., index]


def pack_cotangent(w_bar: jax.Array, diagonal: bool, lower: int, upper: int) -> jax.Array:
    """Adjoint of unpacking: the exact packed cotangent from the dense one (module docstring).

    ``p̄_k = lower · W̄[i, j] + upper · W̄[j, i]`` at ``(i, j) = (rows[k], cols[k])``, the mirrored
    term only off the diagonal (a diagonal entry is stored, and counted, once).
    """
    rows, cols = packing_indices(w_bar.shape[-1], diagonal)
    # A triangular matrix has one of the two terms: a gather, no scatter-add of zeros.
    if not upper:
        return lower * w_bar[..., rows, cols]
    off = np.flatnonzero(rows != cols)
    mirrored = upper * w_bar[..., cols[off], rows[off]]
    if not lower:
        return mirrored
    return (lower * w_bar[..., rows, cols]).at[..., off].add(mirrored)


# Unpacking is linear: its pushforward unpacks the tangent, its pullback packs the cotangent, and
# it needs no residuals.


def _unpack_forward(packed, **structure):
    return unpack(packed, **structure), ()


def _unpack_pushforward(_, packed_dot, **structure):
    return unpack(packed_dot, **structure)


def _unpack_pullback(_, w_bar, *, n, diagonal, lower, upper):
    return (pack_cotangent(w_bar, diagonal, lower, upper),)


_unpack = Rule("unpack", _unpack_forward, _unpack_pushforward, _unpack_pullback)


class AbstractPacked:
    """Base of the packed matrices; never instantiated. Subclasses only fix the structure.

    Every subclass is constructed as ``cls(packed, n)``.

    Args:
      packed: the free entries, shape ``(..., n(n-1)/2)`` (strictly triangular, skew-symmetric) or
        ``(..., n(n+1)/2)`` (symmetric, with the diagonal); float32, float64, complex64 or
        complex128. Leading axes are batch axes (a stack of matrices).
      n: the matrix size (static: pytree aux data).

    Raises:
      TypeError: ``packed`` is not a float/complex array, or ``n`` is not a non-negative int.
      ValueError: ``packed``'s last axis is not :meth:`packed_size` ``(n)`` long.

    Attributes:
      packed: the free entries.
      n: the matrix size.
    """

    # Structure of a subclass: whether the diagonal is stored, and the signs with which entry k
    # appears in the lower triangle (at (rows[k], cols[k])) and in the upper one (mirrored).
    diagonal: ClassVar[bool]
    lower: ClassVar[int]
    upper: ClassVar[int]

    def __init__(self, packed: jax.Array, n: int):
        name = type(self).__name__
        check_array(name, "packed", packed)
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise TypeError(f"{name}: `n` must be a non-negative int; got {n!r}.")
        n = int(n)
        size = self.packed_size(n)
        if packed.ndim < 1 or packed.shape[-1] != size:
            raise ValueError(f"{name}: `packed` must have shape (..., {size}) for n = {n}; "
                             f"got {tuple(packed.shape)}.")
        self.packed, self.n = packed, n

    @classmethod
    def packed_size(cls, n: int) -> int:
        """Number of free entries of an ``n × n`` matrix of this structure."""
        return n * (n + 1) // 2 if cls.diagonal else n * (n - 1) // 2

    @classmethod
    def from_dense(cls, w: jax.Array):
        """Pack the stored entries of ``w`` (shape ``(..., n, n)``); the other entries are ignored.

        ``from_dense(w).dense() == w`` exactly when ``w`` has this structure. Nothing is
        projected: to take the skew part of an arbitrary matrix, pass ``(w - wᵀ)/2``.
        """
        name = f"{cls.__name__}.from_dense"
        check_array(name, "w", w)
        if w.ndim < 2 or w.shape[-1] != w.shape[-2]:
            raise ValueError(f"{name}: `w` must have shape (..., n, n); got {tuple(w.shape)}.")
        rows, cols = packing_indices(w.shape[-1], cls.diagonal)
        if cls.lower == 0:  # stored in the upper triangle
            rows, cols = cols, rows
        return cls(w[..., rows, cols], w.shape[-1])

    def dense(self) -> jax.Array:
        """The ``(..., n, n)`` matrix. Its pullback is :func:`pack_cotangent` (exact derivative)."""
        return _unpack(self.packed, n=self.n, diagonal=self.diagonal, lower=self.lower,
                       upper=self.upper)

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of :meth:`dense`."""
        return (*self.packed.shape[:-1], self.n, self.n)

    @property
    def dtype(self):
        return self.packed.dtype

    def tree_flatten(self):
        return (self.packed,), self.n

    @classmethod
    def tree_unflatten(cls, n, leaves):
        # JAX rebuilds pytrees with placeholder leaves (None, object()): no validation here.
        obj = object.__new__(cls)
        obj.packed, obj.n = leaves[0], n
        return obj

    def __repr__(self) -> str:
        return f"{type(self).__name__}(packed={self.packed!r}, n={self.n})"


@jax.tree_util.register_pytree_node_class
class StrictlyLower(AbstractPacked):
    r"""Strictly lower triangular ``n × n`` matrix stored as its ``n(n-1)/2`` free entries.

    .. math:: L_{ij} = p_k \ (i > j), \qquad L_{ij} = 0 \ (i \le j), \qquad \bar p_k = \bar L_{ij}

    with ``k`` running row-major over the strictly lower triangle (:func:`packing_indices`).

    Constructed as ``cls(packed, n)`` with ``packed`` of shape ``(..., n(n-1)/2)`` (see
    :class:`AbstractPacked`).

    Examples:
      >>> import jax.numpy as jnp
      >>> from rules import StrictlyLower
      >>> StrictlyLower(jnp.array([1.0, 2.0, 3.0], jnp.float32), 3).dense()
      Array([[0., 0., 0.],
             [1., 0., 0.],
             [2., 3., 0.]], dtype=float32)
    """

    diagonal, lower, upper = False, 1, 0


@jax.tree_util.register_pytree_node_class
class StrictlyUpper(AbstractPacked):
    r"""Strictly upper triangular ``n × n`` matrix stored as its ``n(n-1)/2`` free entries.

    .. math:: U_{ji} = p_k \ (i > j), \qquad \bar p_k = \bar U_{ji}

    The packing is the transpose of :class:`StrictlyLower`'s (the volume-preserving feed-forward
    network's upper layers use it), constructed as ``StrictlyUpper(packed, n)`` like every
    :class:`AbstractPacked`.

    Examples:
      >>> import jax.numpy as jnp
      >>> from rules import StrictlyLower, StrictlyUpper
      >>> p = jnp.array([1.0, 2.0, 3.0], jnp.float32)
      >>> bool((StrictlyUpper(p, 3).dense() == StrictlyLower(p, 3).dense().T).all())
      True
    """

    diagonal, lower, upper = False, 0, 1


@jax.tree_util.register_pytree_node_class
class SkewSymmetric(AbstractPacked):
    r"""Skew-symmetric ``n × n`` matrix ``S = L - Lᵀ`` stored as the ``n(n-1)/2`` entries of ``L``.

    .. math:: S_{ij} = p_k = -S_{ji} \ (i > j), \qquad \bar p_k = \bar S_{ij} - \bar S_{ji}

    The packed cotangent is the exact derivative; it is twice the dense cotangent's skew part
    ``(S̄ - S̄ᵀ)/2`` read off the lower triangle.

    Constructed as ``cls(packed, n)`` with ``packed`` of shape ``(..., n(n-1)/2)`` (see
    :class:`AbstractPacked`).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from rules import SkewSymmetric
      >>> s = SkewSymmetric(jnp.array([1.0, 2.0, 3.0], jnp.float32), 3)
      >>> s.dense()
      Array([[ 0., -1., -2.],
             [ 1.,  0., -3.],
             [ 2.,  3.,  0.]], dtype=float32)
      >>> jax.grad(lambda s: s.dense()[1, 0])(s).packed  # d S₁₀ / d p: only p₀, with weight 1
      Array([1., 0., 0.], dtype=float32)
    """

    diagonal, lower, upper = False, 1, -1


@jax.tree_util.register_pytree_node_class
class Symmetric(AbstractPacked):
    r"""Symmetric ``n × n`` matrix stored as the ``n(n+1)/2`` entries of its lower triangle.

    .. math::
        W_{ij} = W_{ji} = p_k \ (i \ge j), \qquad
        \bar p_k = \bar W_{ij} + \bar W_{ji} \ (i > j), \qquad \bar p_k = \bar W_{ii} \ (i = j)

    Constructed as ``cls(packed, n)`` with ``packed`` of shape ``(..., n(n+1)/2)`` (see
    :class:`AbstractPacked`).

    Examples:
      >>> import jax.numpy as jnp
      >>> from rules import Symmetric
      >>> Symmetric(jnp.array([1.0, 2.0, 3.0], jnp.float32), 2).dense()
      Array([[1., 2.],
             [2., 3.]], dtype=float32)
    """

    diagonal, lower, upper = True, 1, 1
