"""Array helpers every rule is written with; all work on batch-leading arrays ``(..., m, n)``.

``x.mT`` (the transpose of the last two axes) is used directly; :func:`mH` is its conjugate.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["HIGHEST", "SMALL_MATMUL", "THIN_CONTRACTION", "conj", "copyltu", "eye_like", "laid_out",
           "mH", "mm", "mm_h", "mm_thin"]

# Pullbacks and pushforwards ask for full precision so that TF32/bf16 matmuls on accelerators
# cannot quietly spoil a derivative (as jax/_src/lax/linalg.py does in its JVP rules).
HIGHEST = lax.Precision.HIGHEST

# Up to this size a batched matrix product is written as a sum of outer products. XLA's CPU dot
# emitter is pathologically slow for batches of tiny matrices (measured: 4096 products of 4×4 in
# ~8 ms as a dot, ~0.25 ms unrolled); the unrolled form is one fused elementwise loop everywhere.
SMALL_MATMUL = 4


def mm(a: jax.Array, b: jax.Array, *, unroll: int = SMALL_MATMUL) -> jax.Array:
    """Batched matrix product ``(..., m, k) @ (..., k, n)`` at full precision.

    Batch axes broadcast (a matrix without batch axes is shared); ranks are aligned explicitly so
    this also runs with ``jax_numpy_rank_promotion="raise"``. An empty inner dimension gives zeros.
    Products whose dimensions are all ``≤ unroll`` are written as sums of outer products.
    """
    (m, k), n = a.shape[-2:], b.shape[-1]
    if max(m, k, n) > unroll or k == 0:
        return jnp.matmul(a, b, precision=HIGHEST)
    return _outer_product_sum(a, b)


def mm_thin(a: jax.Array, b: jax.Array) -> jax.Array:
    """:func:`mm` for a thin contraction: a tall ``(..., m, k)`` times a small ``(..., k, n)``.

    The product of a frame and a p×p matrix, ``Y S``. On the CPU, with ``k ≤ 16`` and a result
    of at least 2¹⁶ entries, it is summed as ``k`` outer products: one fused loop, ``k``
    multiply-adds per entry, that also fuses with its consumer. XLA:CPU's dot runs such shapes
    far below its speed on wide ones (measured float32, jitted, two cores, ``U - Y S``, time
    outer products / dot: 64 × (64 × 16)(16 × 16) 0.64–0.83, 256 × (64 × 16) 0.45–0.59,
    64 × (64 × 12) 0.39–0.45, 128 × (64 × 8) 0.57–0.70, (8192 × 16)(16 × 16) 0.80,
    65536 × 16 0.65). Below 2¹⁶ entries the loop's fixed cost takes over (32768: 0.74–1.12;
    512 × 16: 1.4–1.8), and from ``k = 32`` on the dot is as fast or faster for one tall matrix
    (8192 × 32: 1.2–1.5). ``a`` should be an array already formed, not a chain of products: XLA
    fuses an elementwise producer into the loop and recomputes it for each of the ``k`` terms
    (the attention layer's nested products, routed here, ran 1.06–1.45× slower).
    """
    (m, k), n = a.shape[-2:], b.shape[-1]
    size = math.prod(jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])) * m * n
    if not 0 < k <= THIN_CONTRACTION or size < _THIN_CONTRACTION_SIZE:
        return mm(a, b)
    return lax.platform_dependent(a, b, cpu=_outer_product_sum, default=mm)


THIN_CONTRACTION = 16  # the deepest contraction mm_thin sums as outer products
_THIN_CONTRACTION_SIZE = 2**16


def _outer_product_sum(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a @ b`` as ``Σ_i a[..., :, i] ⊗ b[..., i, :]``: elementwise, one fused loop for XLA."""
    rank = max(a.ndim, b.ndim)
    a = a.reshape((1,) * (rank - a.ndim) + a.shape)
    b = b.reshape((1,) * (rank - b.ndim) + b.shape)
    out = a[..., :, 0, None] * b[..., None, 0, :]
    for i in range(1, a.shape[-1]):
        out = out + a[..., :, i, None] * b[..., None, i, :]
    return out


def mm_h(a: jax.Array, b: jax.Array, *, unroll: int = SMALL_MATMUL) -> jax.Array:
    """``aᴴ b`` by :func:`mm`, with ``aᴴ`` laid out in memory first on the CPU (:func:`laid_out`).

    XLA folds a transpose into the dot that consumes it, and XLA:CPU sends a dot to its fast
    kernel (YNNPACK) only when the left operand is contracted over its last axis: the folded
    ``aᴴb`` of two tall matrices runs in the generic dot instead. The copy of ``aᴴ`` costs one pass
    and wins (measured float32, jitted, one core: 512 × 64 Gram 67 against 78 µs, ``Q̄ᴴQ`` of QR's
    pullback 109 against 183 µs; gradient of QR 512 × 64 0.94 → 0.83 of JAX's).
    """
    return mm(laid_out_unless_unrolled(mH(a), b.shape[-1], unroll=unroll), b, unroll=unroll)


def laid_out(x: jax.Array) -> jax.Array:
    """``x`` as an array of its own on the CPU: an optimization barrier that XLA cannot fold.

    Used on a transpose that would otherwise be folded into the dot consuming it (see
    :func:`mm_h`). Other backends transpose inside their matrix units, so there it is ``x``.
    """
    barrier: Callable[[jax.Array], jax.Array] = lax.optimization_barrier  # untyped in jax
    return lax.platform_dependent(x, cpu=barrier, default=lambda x: x)


def laid_out_unless_unrolled(x: jax.Array, *other_dims: int, unroll: int = SMALL_MATMUL
                             ) -> jax.Array:
    """:func:`laid_out` ``x``, a transposed operand, unless the product it enters is unrolled.

    :func:`mm` unrolls a product whose dimensions (those of ``x``'s last two axes and
    ``other_dims``) are all ``≤ unroll``: that elementwise loop fuses with the transpose, and the
    barrier would only add a copy.
    """
    return laid_out(x) if max(*x.shape[-2:], *other_dims) > unroll else x


def mH(x: jax.Array) -> jax.Array:
    """Conjugate transpose of the last two axes (a plain transpose for real dtypes)."""
    return conj(x.mT)


def conj(x: jax.Array) -> jax.Array:
    """Complex conjugate that adds no operation for real dtypes."""
    return jnp.conj(x) if jnp.iscomplexobj(x) else x


def copyltu(m: jax.Array) -> jax.Array:
    """``tril(M, -1) + tril(M, -1)ᴴ + Re diag(M)``: mirror the strict lower triangle upwards.

    The Hermitian matrix whose lower triangle is ``M``'s (real diagonal for complex ``M``).
    Written as masks on the row and column indices: taking the diagonal out and putting it back
    compiled to a gather and one more pass over ``M``, and a single ``where(row ≥ col, M, Mᵀ)`` to
    a slow fused loop (measured 256 × 256 float32, one core: 137 µs as written, 187 µs with the
    diagonal taken out, 350 µs as a single select).
    """
    row = lax.broadcasted_iota(jnp.int32, m.shape, m.ndim - 2)
    col = lax.broadcasted_iota(jnp.int32, m.shape, m.ndim - 1)
    strict = jnp.where(row > col, m, 0)
    if not jnp.iscomplexobj(m):
        return jnp.where(row >= col, m, 0) + strict.mT
    return strict + mH(strict) + jnp.where(row == col, m.real, 0).astype(m.dtype)


def eye_like(x: jax.Array) -> jax.Array:
    """Identity matrices of the shape and dtype of the square batch ``x``.

    Broadcast explicitly, so that the library also runs with ``jax_numpy_rank_promotion="raise"``.
    """
    return jnp.broadcast_to(jnp.eye(x.shape[-1], dtype=x.dtype), x.shape)
