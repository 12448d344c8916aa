"""Array helpers every rule is written with; all work on batch-leading arrays ``(..., m, n)``.

``x.mT`` (the transpose of the last two axes) is used directly; :func:`mH` is its conjugate.
Products live in the kernel layer (``rules/_kernels/products.py``).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["HIGHEST", "as_complex", "conj", "copyltu", "eye_like", "hermitian_part", "mH", "norm1"]

# Pullbacks and pushforwards ask for full precision so that TF32/bf16 matmuls on accelerators
# cannot quietly spoil a derivative (as jax/_src/lax/linalg.py does in its JVP rules).
HIGHEST = lax.Precision.HIGHEST


def mH(x: jax.Array) -> jax.Array:
    """Conjugate transpose of the last two axes (a plain transpose for real dtypes)."""
    return conj(x.mT)


def conj(x: jax.Array) -> jax.Array:
    """Complex conjugate that adds no operation for real dtypes."""
    return jnp.conj(x) if jnp.iscomplexobj(x) else x


def as_complex(x: jax.Array) -> jax.Array:
    """``x`` as complex of its precision (complex64 for float32, complex128 for float64); complex
    ``x`` unchanged."""
    if jnp.iscomplexobj(x):
        return x
    return x.astype(jnp.complex128 if jnp.finfo(x.dtype).bits == 64 else jnp.complex64)


def norm1(x: jax.Array) -> jax.Array:
    """``‖X‖₁`` (largest column sum of moduli) per slice, real."""
    return jnp.max(jnp.sum(jnp.abs(x), axis=-2), axis=-1)


def hermitian_part(x: jax.Array) -> jax.Array:
    """``(X + Xᴴ)/2`` over the last two axes."""
    return 0.5 * (x + mH(x))


def copyltu(m: jax.Array) -> jax.Array:
    """``tril(M, -1) + tril(M, -1)ᴴ + Re diag(M)``: mirror the strict lower triangle upwards.

    The Hermitian matrix whose lower triangle is ``M``'s (real diagonal for complex ``M``).
    Written as masks on the row and column indices, which XLA fuses into one pass over ``M``:
    taking the diagonal out and putting it back compiles to a gather and a second pass, and a
    single ``where(row ≥ col, M, Mᵀ)`` to a fused loop that reads ``M`` in two orders at once.
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
