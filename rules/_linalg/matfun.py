"""Rules of matrix functions: the Cayley transform."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .._core.arrays import eye_like, mm
from .._core.checks import check_matrix
from .._core.rule import Rule
from .small import MAX_CLOSED_FORM_N, closed_form_inv, jnp_inv

__all__ = ["cayley", "cayley_matrix", "inv_identity_plus"]


def inv_identity_plus(c: jax.Array) -> jax.Array:
    """``N = (I + C)⁻¹``: the adjugate formula for tiny slices, LU otherwise (plain JAX)."""
    a = eye_like(c) + c
    return closed_form_inv(a) if c.shape[-1] <= MAX_CLOSED_FORM_N else jnp_inv(a)


def cayley_matrix(c: jax.Array) -> jax.Array:
    """``(I - C)(I + C)⁻¹ = 2(I + C)⁻¹ - I``: one inverse and no product (plain JAX)."""
    return 2 * inv_identity_plus(c) - eye_like(c)


# ==============================================================================================
# Cayley transform


def cayley(c: jax.Array) -> jax.Array:
    r"""Cayley transform ``Λ = (I - C)(I + C)⁻¹`` of a (batch of) square matrices.

    .. math::
        \Lambda = (I - C)(I + C)^{-1} = 2N - I, \quad N = (I + C)^{-1} = \tfrac12 (I + \Lambda),
        \qquad \dot\Lambda = -2 N \dot C N, \qquad \bar C = -2 N^T \bar\Lambda N^T

    The factors commute, so ``Λ = (I + C)⁻¹(I - C)`` as well. For skew-symmetric ``C``, ``Λ`` is
    orthogonal with determinant +1. Derivation: ``docs/derivations/cayley.md``.

    Args:
      c: shape ``(..., n, n)``, float32, float64, complex64 or complex128, with ``I + C``
        invertible (always true for skew-symmetric ``C``).

    Returns:
      ``Λ`` of the shape and dtype of ``c``. A singular ``I + C`` gives inf/nan entries.

    Raises:
      TypeError: ``c`` is not a float/complex array.
      ValueError: ``c`` is not of shape ``(..., n, n)``.

    Notes:
      The volume-preserving transformer's convention, without the ½ of the Cayley retraction
      ``(I - ½W)⁻¹(I + ½W)`` used on the Stiefel manifold (and by geoopt). One factorisation per
      slice (the adjugate formula for ``n ≤ 4``, LU otherwise); the residual is ``Λ`` alone, from
      which the pushforward and the pullback recover ``N = (I + Λ)/2``, so each costs two matrix
      products. The transform is holomorphic: complex inputs use plain transposes (JAX's
      convention).

    References:
      B. Brantner, G. de Romemont, M. Kraus, Z. Li, "Volume-preserving transformers for learning
      time series data with structure", arXiv:2312.11166.

    Examples:
      >>> import jax.numpy as jnp, rules
      >>> lam = rules.cayley(jnp.array([[0.0, -1.0], [1.0, 0.0]], jnp.float32))  # rotation by -π/2
      >>> lam
      Array([[ 0.,  1.],
             [-1.,  0.]], dtype=float32)
    """
    check_matrix("cayley", "c", c, square=True)
    return _cayley(c)


def _cayley_forward(c):
    lam = cayley_matrix(c)
    return lam, lam


def _cayley_pushforward(lam, c_dot):
    """``Λ̇ = -2 N Ċ N`` with ``N = (I + Λ)/2``."""
    n = (eye_like(lam) + lam) / 2
    return -2 * mm(mm(n, c_dot), n)


def _cayley_pullback(lam, lam_bar):
    """``C̄ = -2 Nᵀ Λ̄ Nᵀ`` (JAX convention; holomorphic, no conj)."""
    n_t = (eye_like(lam) + lam.mT) / 2
    return (-2 * mm(mm(n_t, lam_bar), n_t),)


_cayley = Rule("cayley", _cayley_forward, _cayley_pushforward, _cayley_pullback)
