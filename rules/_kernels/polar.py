r"""The polar decomposition of tall matrices from the SVD, and the two functions of its positive
factor that its derivatives apply.

For ``A = W diag(s) Vᴴ`` of shape ``(..., m, n)``, ``m ≥ n``, of full rank, the positive factor
``P = V diag(s) Vᴴ`` has its eigendecomposition at hand, and the derivatives of ``A = UP`` need

.. math::
    \operatorname{sylvester}(P, C) = X:\; XP + PX = C, \qquad
    X = V\big((V^HCV) \oslash (s_i + s_j)\big)V^H, \qquad\text{and}\qquad P^{-1} = V s^{-1} V^H .

Both are smooth functions of ``P`` (and ``C``) while ``P`` is positive definite, at repeated
eigenvalues too, although ``V`` is then not determined. Their own derivatives are therefore written
in ``Ṗ`` alone (``Ẋ = sylvester(P, Ċ - XṖ - ṖX)``, ``d(P⁻¹) = -P⁻¹ṖP⁻¹``): the tangents of ``s`` and
``V`` that a caller passes are ignored. That is what makes second derivatives of the polar
decomposition exist at repeated singular values, orthogonal input included; a derivative taken
through ``V`` would divide by ``s_i - s_j``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .._core.arrays import hermitian_part, mH
from . import spectral
from .products import mm, mm_h

__all__ = ["factors", "inverse", "sylvester"]


def factors(a: jax.Array) -> tuple[jax.Array, ...]:
    """``(W, s, V, U, P)`` of tall ``(..., m, n)`` matrices ``A = W diag(s) Vᴴ = UP``.

    One thin SVD; ``U = W Vᴴ`` and ``P = V diag(s) Vᴴ``, made exactly Hermitian. ``s``
    (descending) and ``V`` are also the eigendecomposition of ``P`` that :func:`sylvester` and
    :func:`inverse` take.
    """
    n = a.shape[-1]
    if n == 0 or a.size == 0:
        square = jnp.zeros((*a.shape[:-2], n, n), a.dtype)
        return (jnp.zeros(a.shape, a.dtype), jnp.zeros((*a.shape[:-2], n), jnp.finfo(a.dtype).dtype),
                square, jnp.zeros(a.shape, a.dtype), square)
    w, s, vh = spectral.svd(a, full_matrices=False)
    v = mH(vh)
    p = hermitian_part(mm(v * s.astype(a.dtype)[..., None, :], vh))
    return w, s, v, mm(w, vh), p


@jax.custom_jvp
def sylvester(p: jax.Array, s: jax.Array, v: jax.Array, c: jax.Array) -> jax.Array:
    """``X`` with ``XP + PX = C`` for ``P = V diag(s) Vᴴ`` positive definite, ``(..., n, n)``.

    ``X = V((VᴴCV) ⊘ (s_i + s_j))Vᴴ``: four products. Skew-Hermitian ``C`` gives skew-Hermitian
    ``X``. The map ``C ↦ X`` is self-adjoint (``s_i + s_j`` is real and symmetric). An exactly zero
    ``s_i`` gives ``0/0`` on the diagonal: NaN, where the solution is not determined.
    """
    denominator = (s[..., :, None] + s[..., None, :]).astype(c.dtype)
    return mm(mm(v, mm_h(v, mm(c, v)) / denominator), mH(v))


@sylvester.defjvp
def _sylvester_jvp(primals, tangents):
    p, s, v, c = primals
    p_dot, _, _, c_dot = tangents  # s and V are functions of P: their tangents are not used
    x = sylvester(p, s, v, c)
    return x, sylvester(p, s, v, c_dot - mm(x, p_dot) - mm(p_dot, x))


@jax.custom_jvp
def inverse(p: jax.Array, s: jax.Array, v: jax.Array) -> jax.Array:
    """``P⁻¹ = V diag(1/s) Vᴴ`` for ``P = V diag(s) Vᴴ`` positive definite, made exactly Hermitian."""
    return hermitian_part(mm(v / s.astype(v.dtype)[..., None, :], mH(v)))


@inverse.defjvp
def _inverse_jvp(primals, tangents):
    p, s, v = primals
    p_dot = tangents[0]  # s and V are functions of P: their tangents are not used
    p_inv = inverse(p, s, v)
    return p_inv, -mm(p_inv, mm(p_dot, p_inv))
