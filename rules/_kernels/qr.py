r"""QR factorisations of tall matrices ``(..., m, k)``: Householder and CholeskyQR, Gram matrices.

The ``Q`` factors here have ``diag(R) ≥ 0`` (a zero ``r_ii`` counts as positive, as in geoopt),
so they do not depend on LAPACK's sign gauge: the factor the manifolds retract with and draw
random frames from. The decomposition with LAPACK's gauge and explicit derivatives is
:func:`rules.qr`.

CholeskyQR (Fukaya et al.) is a ``k × k`` Cholesky factorisation between two ``m × k`` matrix
products, on every platform: it reads the tall matrix twice, in matrix products, where Householder
QR makes ``k`` panel passes over it — the communication-avoiding algorithm for tall-skinny
matrices on parallel hardware.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.typing import DTypeLike

from .._core.arrays import eye_like
from . import jax_ops, routes
from .products import mm, mm_h
from .routes import cpu_route

__all__ = ["gram", "gram_defect", "gram_error", "haar_frame", "householder_qr_factor",
           "qr_factor"]


def gram(z: jax.Array) -> jax.Array:
    """``zᵀz`` with its diagonal summed by a reduction of ``z ⊙ z``.

    The diagonal, sums of the largest terms, carries most of the float32 rounding of the
    product, whose accumulation runs in long sequential chunks (how much depends on the
    platform's product kernel); a reduction sums pairwise. One CholeskyQR pass orthonormalises
    to the rounding of the Gram matrix it factors, so its diagonal decides the result's
    ``‖QᵀQ − I‖``.
    """
    k = z.shape[-1]
    on_diagonal = jnp.eye(k, dtype=bool)
    return jnp.where(on_diagonal, jnp.sum(z * z, axis=-2)[..., None, :], mm_h(z, z))


def gram_defect(x: jax.Array) -> jax.Array:
    """``xᵀx - I`` with :func:`gram`'s accurate diagonal."""
    g = gram(x)
    return g - eye_like(g)


def gram_error(x: jax.Array) -> jax.Array:
    """``‖xᵀx - I‖_F`` over the last two axes, with :func:`gram`'s accurate diagonal: with the
    plain product the measurement's own float32 rounding would be of the size of what it
    measures."""
    return jnp.linalg.norm(gram_defect(x), axis=(-2, -1))


def haar_frame(key: jax.Array, n: int, p: int, dtype: DTypeLike) -> jax.Array:
    """A Haar-distributed n×p orthonormal frame: sign-corrected QR of a Gaussian matrix.

    Without the sign fix the columns follow LAPACK's gauge and the distribution is not uniform
    (Mezzadri 2007). Householder QR: a Gaussian matrix (a square one above all) is not well
    conditioned enough for :func:`qr_factor`'s Cholesky passes.
    """
    return householder_qr_factor(jax.random.normal(key, (n, p), dtype))


def householder_qr_factor(z: jax.Array) -> jax.Array:
    """``Q diag(rᵢᵢ/|rᵢᵢ|)`` of LAPACK's Householder QR (1 for ``rᵢᵢ = 0``): ``diag(R)`` real and
    nonnegative, for real and complex ``z``."""
    q, r = jax_ops.qr(z)
    d = jnp.diagonal(r, axis1=-2, axis2=-1)
    return q * jnp.where(d == 0, 1, d / jnp.abs(d).astype(d.dtype))[..., None, :]


# CholeskyQR takes a pass when the Gram matrix G of the input satisfies ‖G/c − I‖₁ ≤ 1/2 with
# c = tr(G)/k: G's eigenvalues then lie in [c/2, 3c/2], κ(G) ≤ 3, and one pass is as orthonormal
# as Householder QR (tests/rules/kernels/test_qr.py).
_CHOLESKY_QR_TOLERANCE = 0.5


def qr_factor(z: jax.Array) -> jax.Array:
    r"""``Q`` of the thin QR of the m×k ``z`` with ``diag(R) ≥ 0``, in O(mk²).

    A tall input with orthonormal-ish columns — the QR retraction's ``Y + V``, whose Gram matrix
    is ``I + VᵀV`` for tangent ``V`` — takes CholeskyQR (Fukaya et al.):

    .. math::
        G = z^Tz = LL^T, \qquad Q = z L^{-T}, \qquad R = L^T,

    a k×k Cholesky factorisation between two matrix products. ``diag(L) > 0``, so this is the
    same ``Q`` as Householder QR with the sign fix, not another retraction. Its orthonormality
    error grows like ``ε κ(G)`` (Householder's like ``ε``), so:

    * ``‖G/c − I‖₁ ≤ 1/2`` (``c = tr(G)/k``; then ``κ(G) ≤ 3``): one pass, with ``L⁻¹`` by
      products on the CPU for ``k ≤ routes.PRODUCT_INVERSE_MAX_K``
      (:func:`_well_conditioned_lower_inverse`), by a triangular solve otherwise;
    * otherwise a second pass on ``Q`` (CholeskyQR2, ``R = L₂ᵀL₁ᵀ``), whose Gram matrix is
      ``I + O(ε κ(G))``, when that one meets the same test (``κ(G)`` up to about ``1/(kε)``);
    * otherwise (a near rank-deficient ``z``, or a first Cholesky factorisation that breaks
      down): :func:`householder_qr_factor`.

    The tests pick a branch by ``lax.cond`` on the whole batch (every matrix must pass), so only
    the chosen one runs; under ``jax.vmap`` the test is batched and every branch runs — pass
    stacked matrices as leading axes instead.

    References:
      T. Fukaya, Y. Nakatsukasa, Y. Yanagisawa, Y. Yamamoto, "CholeskyQR2: a simple and
      communication-avoiding algorithm for computing a tall-skinny QR factorization on a
      large-scale parallel system", ScalA 2014.
    """
    if z.shape[-2] < z.shape[-1]:  # a wide z has a singular Gram matrix
        return householder_qr_factor(z)
    g = gram(z)
    return lax.cond(_well_conditioned(g), _well_conditioned_pass, _cholesky_qr2_or_householder,
                    z, g)


def _well_conditioned(g: jax.Array) -> jax.Array:
    """Whether every Gram matrix of the batch has ``‖G/c − I‖₁ ≤ 1/2``, ``c = tr(G)/k``.

    ``G/c − I`` is symmetric, so its 1-norm bounds its spectral norm and ``κ(G) ≤ 3``; a nan
    fails.
    """
    k = g.shape[-1]
    c = jnp.trace(g, axis1=-2, axis2=-1)[..., None, None] / k
    off = jnp.sum(jnp.abs(g / c - eye_like(g)), axis=-2)
    return jnp.all(off <= _CHOLESKY_QR_TOLERANCE)


def _cholesky_qr_pass(z: jax.Array, g: jax.Array, well_conditioned: bool = False) -> jax.Array:
    """``z L^{-T}`` with ``LLᵀ = g``: the k×k inverse, then one product (a triangular solve with
    all of ``z`` would be a BLAS-2-like sweep; the product is one GEMM)."""
    l = lax.linalg.cholesky(g, symmetrize_input=False)
    if well_conditioned and l.shape[-1] <= routes.PRODUCT_INVERSE_MAX_K:
        l_inv = cpu_route("product_inverse", _well_conditioned_lower_inverse,
                          _lower_inverse_by_solve, l)
    else:
        l_inv = _lower_inverse_by_solve(l)
    return mm(z, l_inv.mT)


def _lower_inverse_by_solve(l: jax.Array) -> jax.Array:
    return lax.linalg.triangular_solve(l, eye_like(l), left_side=True, lower=True)


def _well_conditioned_lower_inverse(l: jax.Array) -> jax.Array:
    r"""``L⁻¹`` of a lower triangular k×k ``L`` by products only.

    With ``D = diag(L)`` and the strictly lower (nilpotent: ``Nᵏ = 0``) ``N = D⁻¹L − I``,

    .. math::
        L^{-1} = (I + N)^{-1} D^{-1}, \qquad (I + N)^{-1} = \sum_{j<k} (-N)^j
        = (I - N)(I + N^2)(I + N^4) \cdots (I + N^{2^{s}}), \quad 2^{s+1} \ge k,

    ``2⌈log₂ k⌉ − 2`` k×k products, each one fused loop over the batch (:func:`~.products.mm`
    unrolled up to ``k``), where LAPACK's triangular solve is one call per matrix of the batch.
    Only for a Gram matrix with ``κ ≤ 3``: then ``‖I + N‖, ‖(I + N)⁻¹‖ ≤ κ(L) ≤ √3``
    (``|dᵢ| ≥ σ_min(L)``) and the partial sums stay of that size; an ill-conditioned ``L``
    (CholeskyQR2's first pass) keeps the backward-stable triangular solve.
    """
    k = l.shape[-1]
    d = jnp.diagonal(l, axis1=-2, axis2=-1)
    n = jnp.tril(l / d[..., :, None], -1)
    inverse, power, reach = eye_like(l) - n, n, 2  # (I + N)⁻¹ up to N^(reach − 1)
    while reach < k:
        power = mm(power, power, unroll=k)
        inverse = inverse + mm(inverse, power, unroll=k)
        reach *= 2
    return inverse / d[..., None, :]


_well_conditioned_pass = functools.partial(_cholesky_qr_pass, well_conditioned=True)


def _cholesky_qr2_or_householder(z: jax.Array, g: jax.Array) -> jax.Array:
    # The first pass may break down (a non-positive pivot gives nan); try it without derivatives
    # and factor the identity instead, so no nan reaches a derivative. Its Q = z then fails the
    # second test (g did) and Householder QR takes over.
    usable = jnp.all(jnp.isfinite(lax.linalg.cholesky(lax.stop_gradient(g),
                                                      symmetrize_input=False)))
    q = _cholesky_qr_pass(z, jnp.where(usable, g, eye_like(g)))
    g2 = gram(q)
    return lax.cond(_well_conditioned(g2), _well_conditioned_pass,
                    lambda q, g2: householder_qr_factor(z), q, g2)
