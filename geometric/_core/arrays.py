"""Elementwise helpers the manifolds share, on batch-leading arrays: symmetric and skew parts,
the Frobenius inner product, a square root with a subgradient at 0."""
from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["frobenius_inner", "safe_sqrt", "skew", "sym"]


def sym(a: jax.Array) -> jax.Array:
    """``(a + aᵀ)/2`` over the last two axes."""
    return 0.5 * (a + a.mT)


def skew(a: jax.Array) -> jax.Array:
    """``(a - aᵀ)/2`` over the last two axes."""
    return 0.5 * (a - a.mT)


def frobenius_inner(u: jax.Array, v: jax.Array, ndim: int = 2) -> jax.Array:
    """``Σ u ⊙ v`` over the last ``ndim`` axes (``tr(uᵀv)`` for matrices)."""
    return jnp.sum(u * v, axis=tuple(range(-ndim, 0)))


def safe_sqrt(s: jax.Array) -> jax.Array:
    """``√s`` for ``s ≥ 0`` whose derivative at ``s = 0`` is 0 instead of ``∞·0 = nan``.

    A norm or distance is not differentiable at 0; 0 is a subgradient there, and the square of
    the result keeps its true derivative (0) at 0.
    """
    positive = s > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, s, 1)), 0)
