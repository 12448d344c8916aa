r"""Numerical kernels the manifolds share, on batch-leading ``(..., n, p)`` arrays.

Every kernel costs O(np²) time (or O(p³) on a p×p matrix) and never forms an n×n array.

The rotations of :func:`rotate` use the low-rank factorisation of the canonical horizontal lift
(Edelman, Arias & Smith; Wen & Yin)

.. math::
    \Omega(Y, \Delta) = P Y^T - Y P^T = U V^T, \qquad P = (I - \tfrac12 YY^T)\Delta,
    \quad U = [P, Y], \quad V = [Y, -P] \in \mathbb{R}^{n\times 2p},

which is skew with ``ΩY = Δ`` for tangent ``Δ``. A function ``f(Ω)`` with ``f(0) = I`` acts on an
n×k matrix ``Z`` through the 2p×2p matrix ``X = VᵀU`` only: ``f(Ω)Z = Z + U ψ(X) VᵀZ`` with
``ψ(X) = (I - ½X)⁻¹`` for the Cayley transform ``(I - ½Ω)⁻¹(I + ½Ω)`` (Sherman–Morrison–Woodbury)
and ``ψ(X) = φ(X) = Σ_{k≥1} X^{k-1}/k!`` for ``exp(Ω)``.
"""
from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np
from jax.typing import DTypeLike

from rules.internal import eye_like, mm, mm_h, mm_thin

__all__ = ["arctan_sv", "expm", "frobenius_inner", "gram_error", "haar_frame", "phi",
           "polar_factor", "qr_factor", "rotate", "rotation_coefficients", "safe_sqrt", "skew",
           "sym", "sym_eigh", "sym_function"]


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


def gram_error(x: jax.Array) -> jax.Array:
    """``‖xᵀx - I‖_F`` over the last two axes, with :func:`_gram`'s accurate diagonal.

    With the plain product the measurement's own float32 rounding is of the size of what it
    measures: on St(256, 64), frames whose exact (float64) error is 0.8–1.2e-6 read 1.8–2.4e-6.
    """
    return jnp.linalg.norm(_gram_defect(x), axis=(-2, -1))


def haar_frame(key: jax.Array, n: int, p: int, dtype: DTypeLike) -> jax.Array:
    """A Haar-distributed n×p orthonormal frame: sign-corrected QR of a Gaussian matrix.

    Without the sign fix the columns follow LAPACK's gauge and the distribution is not uniform
    (Mezzadri 2007). Householder QR: a Gaussian matrix (square ones above all) is not well
    conditioned enough for :func:`qr_factor`'s Cholesky passes.
    """
    return _householder_qr_factor(jax.random.normal(key, (n, p), dtype))


# CholeskyQR takes a pass when the Gram matrix G of the input satisfies ‖G/c − I‖₁ ≤ 1/2 with
# c = tr(G)/p: G's eigenvalues then lie in [c/2, 3c/2], κ(G) ≤ 3, and one pass is as orthonormal
# as Householder QR (tests/geometric/test_kernels.py).
_CHOLESKY_QR_TOLERANCE = 0.5

# Up to this many columns the Gram matrix skips its separate diagonal (:func:`_gram`) and a
# well-conditioned Cholesky factor is inverted by products (:func:`_well_conditioned_lower_inverse`).
_SMALL_K = 16


def qr_factor(z: jax.Array) -> jax.Array:
    r"""``Q`` of the thin QR of the m×k ``z`` with ``diag(R) ≥ 0``, in O(mk²).

    A tall input with orthonormal-ish columns — the QR retraction's ``Y + V``, whose Gram matrix
    is ``I + VᵀV`` for tangent ``V`` — takes CholeskyQR (Fukaya et al.):

    .. math::
        G = z^Tz = LL^T, \qquad Q = z L^{-T}, \qquad R = L^T,

    a k×k Cholesky factorisation between two matrix products. ``diag(L) > 0``, so this is the
    same ``Q`` as Householder QR with the sign fix below, not another retraction. Its
    orthonormality error grows like ``ε κ(G)`` (Householder's like ``ε``), so:

    * ``‖G/c − I‖₁ ≤ 1/2`` (``c = tr(G)/k``; then ``κ(G) ≤ 3``): one pass; for ``k ≤ 16``
      with ``L⁻¹`` by products (:func:`_well_conditioned_lower_inverse`) rather than LAPACK's
      triangular solve, whose per-matrix calls dominate a batch of small matrices (64 ×
      St(64, 16), stacked attention heads); for larger k the solve (one k×k call) is kept;
    * otherwise a second pass on ``Q`` (CholeskyQR2, ``R = L₂ᵀL₁ᵀ``), whose Gram matrix is
      ``I + O(ε κ(G))``, when that one meets the same test (``κ(G)`` up to about ``1/(kε)``);
    * otherwise (a near rank-deficient ``z``, or a first Cholesky factorisation that breaks
      down): Householder QR, ``Q diag(sign(sign(rᵢᵢ) + ½))``, where a zero ``rᵢᵢ`` counts as
      positive (geoopt), so the result does not depend on LAPACK's sign gauge.

    The tests pick a branch by ``lax.cond`` on the whole batch (every matrix must pass), so only
    the chosen one runs; under ``jax.vmap`` the test is batched and every branch runs — pass
    stacked matrices as leading axes instead. Time on St(N, 64) (float32, 2 cores; the
    retraction section of ``docs/derivations/manifolds.md``): one pass 0.18 / 0.70 / 2.3 ms at
    N = 512 / 2048 / 8192 against Householder's 0.44 / 2.0 / 8.7 ms; the Q factor agrees with a
    float64 QR to 2e-8 where Householder's does to 1e-7.

    References:
      T. Fukaya, Y. Nakatsukasa, Y. Yanagisawa, Y. Yamamoto, "CholeskyQR2: a simple and
      communication-avoiding algorithm for computing a tall-skinny QR factorization on a
      large-scale parallel system", ScalA 2014.
    """
    if z.shape[-2] < z.shape[-1]:  # a wide z has a singular Gram matrix
        return _householder_qr_factor(z)
    gram = _gram(z)
    return lax.cond(_well_conditioned(gram), _well_conditioned_pass,
                    _cholesky_qr2_or_householder, z, gram)


def _gram(z: jax.Array) -> jax.Array:
    """``zᵀz`` with its diagonal summed by a reduction of ``z ⊙ z``.

    The diagonal, sums of the largest terms, carries most of the float32 rounding of the
    product (whose accumulation runs in long sequential chunks); with the reduction's, one
    Cholesky pass on St(256, 64) gives ‖QᵀQ − I‖_F ≈ 1.0e-6 instead of 2.1e-6 (Householder:
    1.5e-6), on 64 × St(64, 32) 6.5e-7 instead of 8.8e-7. How much depends on the CPU's
    product kernel: on an AVX2 host (median over the batch, a step of norm 0.3) St(2000, 8)
    2.7e-7 instead of 1.7e-6 (Householder 4.9e-7), 8 × St(256, 12) 3.9e-7 instead of 8.4e-7,
    64 × St(64, 16) 4.2e-7 instead of 5.7e-7, where an earlier host measured no difference
    for k ≤ 16. The reduction costs 2–5% of an optimizer step on 64 × St(64, 16).
    """
    k = z.shape[-1]
    on_diagonal = jnp.eye(k, dtype=bool)
    return jnp.where(on_diagonal, jnp.sum(z * z, axis=-2)[..., None, :], mm_h(z, z))


def _gram_defect(x: jax.Array) -> jax.Array:
    """``xᵀx - I`` with :func:`_gram`'s accurate diagonal."""
    gram = _gram(x)
    return gram - eye_like(gram)


def _well_conditioned(gram: jax.Array) -> jax.Array:
    """Whether every Gram matrix of the batch has ``‖G/c − I‖₁ ≤ 1/2``, ``c = tr(G)/k``.

    ``G/c − I`` is symmetric, so its 1-norm bounds its spectral norm and ``κ(G) ≤ 3``; a nan
    fails.
    """
    k = gram.shape[-1]
    c = jnp.trace(gram, axis1=-2, axis2=-1)[..., None, None] / k
    off = jnp.sum(jnp.abs(gram / c - eye_like(gram)), axis=-2)
    return jnp.all(off <= _CHOLESKY_QR_TOLERANCE)


def _cholesky_qr_pass(z: jax.Array, gram: jax.Array, well_conditioned: bool = False
                      ) -> jax.Array:
    """``z L^{-T}`` with ``LLᵀ = gram``: the k×k inverse, then one product (a triangular solve
    with all of ``z`` runs on one core, the product on all).

    ``L⁻¹`` comes from LAPACK's triangular solve, or, for a ``gram`` that passed
    :func:`_well_conditioned` with ``k ≤ 16``, from :func:`_well_conditioned_lower_inverse`.
    """
    l = lax.linalg.cholesky(gram, symmetrize_input=False)
    if well_conditioned and l.shape[-1] <= _SMALL_K:
        l_inv = _well_conditioned_lower_inverse(l)
    else:
        l_inv = lax.linalg.triangular_solve(l, eye_like(l), left_side=True, lower=True)
    return mm(z, l_inv.mT)


def _well_conditioned_lower_inverse(l: jax.Array) -> jax.Array:
    r"""``L⁻¹`` of a lower triangular k×k ``L`` by products only.

    With ``D = diag(L)`` and the strictly lower (nilpotent: ``Nᵏ = 0``) ``N = D⁻¹L − I``,

    .. math::
        L^{-1} = (I + N)^{-1} D^{-1}, \qquad (I + N)^{-1} = \sum_{j<k} (-N)^j
        = (I - N)(I + N^2)(I + N^4) \cdots (I + N^{2^{s}}), \quad 2^{s+1} \ge k,

    ``2⌈log₂ k⌉ − 2`` k×k products, written out (:func:`~rules.internal.mm` with ``unroll``) so
    that each is one fused loop over the batch. LAPACK's triangular solve is one call per matrix
    of the batch, which for small k costs more than its arithmetic: on 64 × St(64, 16) (float32,
    one core, interleaved) an optimizer step with the QR retraction is 1.05–1.25× faster
    (``riemannian_sgd``, about 0.1 ms) and 1.11–1.13× (``riemannian_adam``). Only for a ``gram`` with ``κ ≤ 3``: then
    ``‖I + N‖, ‖(I + N)⁻¹‖ ≤ κ(L) ≤ √3`` (``|dᵢ| ≥ σ_min(L)``) and the partial sums stay of
    that size; an ill-conditioned ``L`` (CholeskyQR2's first pass) keeps the backward-stable
    triangular solve.
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


def _cholesky_qr2_or_householder(z: jax.Array, gram: jax.Array) -> jax.Array:
    # The first pass may break down (a non-positive pivot gives nan); try it without derivatives
    # and factor the identity instead, so no nan reaches a derivative. Its Q = z then fails the
    # second test (gram did) and Householder QR takes over.
    usable = jnp.all(jnp.isfinite(lax.linalg.cholesky(lax.stop_gradient(gram),
                                                      symmetrize_input=False)))
    q = _cholesky_qr_pass(z, jnp.where(usable, gram, eye_like(gram)))
    gram2 = _gram(q)
    return lax.cond(_well_conditioned(gram2), _well_conditioned_pass,
                    lambda q, gram2: _householder_qr_factor(z), q, gram2)


def _householder_qr_factor(z: jax.Array) -> jax.Array:
    """``Q diag(sign(sign(rᵢᵢ) + ½))`` of LAPACK's Householder QR: ``diag(R) ≥ 0``."""
    q, r = jnp.linalg.qr(z)
    d = jnp.diagonal(r, axis1=-2, axis2=-1)
    return q * jnp.sign(jnp.sign(d) + 0.5)[..., None, :]


def polar_factor(z: jax.Array) -> jax.Array:
    """``z (zᵀz)^{-1/2}``, the orthonormal frame nearest to ``z``, in O(np²).

    From the p×p eigendecomposition of ``zᵀz``, then one Newton–Schulz step
    ``y(3I - yᵀy)/2 = y - ½y E``, ``E = yᵀy - I``: float32 eigenvectors are orthonormal only to
    about ``p·ε`` (‖E‖_F ≈ 1e-5 for p = 64), and the step, which converges quadratically to the
    same polar factor, leaves the error with which ``E`` is computed. Written as a correction
    (``½yE`` is of the size of ``E``, so its rounding is negligible) with :func:`_gram`'s
    diagonal, that is ≈ 0.8e-6 on St(256, 64) (measured in float64; QR retraction 1.2e-6, a
    fresh Householder QR 1.4–1.6e-6); the form ``1.5y - 0.5y(yᵀy)`` left ≈ 2e-6.
    """
    w, q = jnp.linalg.eigh(mm_h(z, z))
    y = mm(z, mm(q / jnp.sqrt(w)[..., None, :], q.mT))
    return y - 0.5 * mm(y, _gram_defect(y))


# ----------------------------------------------------------------------------------------------
# φ and the low-rank rotations

# φ(X) = Σ_{k≥0} X^k/(k+1)! on the scaled matrix: the Taylor degree that makes the truncation
# error (1/2)^{m+1}/(m+2)! fall below the unit roundoff once ‖X‖₁ ≤ 1/2.
_PHI_THETA = 0.5
_PHI_DEGREE = {jnp.dtype(jnp.float32): 7, jnp.dtype(jnp.float64): 13}
_MAX_SQUARINGS = 16  # as jax.scipy.linalg.expm: ‖X‖₁ up to 2¹⁵


def phi(x: jax.Array) -> jax.Array:
    r"""``φ(X) = Σ_{k≥0} X^k/(k+1)!`` (so ``exp(X) = I + Xφ(X)``) of ``(..., m, m)`` matrices.

    Scaling and squaring: ``Z = X/2^s`` with ``‖Z‖₁ ≤ 1/2``, a Taylor polynomial of ``φ(Z)`` by
    Paterson–Stockmeyer (4 products in float32, 6 in float64), then ``s`` doublings
    ``φ(2Z) = φ(Z)(I + ½Zφ(Z))``. One ``s`` serves the whole batch, so the doublings are skipped
    by ``lax.cond`` rather than computed and masked; the loop is a fixed-length ``scan``, so
    reverse-mode differentiation works.
    """
    degree = _PHI_DEGREE[jnp.dtype(x.dtype)]
    norm = jnp.max(jnp.sum(jnp.abs(x), axis=-2))
    squarings = jnp.clip(jnp.ceil(jnp.log2(norm / _PHI_THETA)), 0, _MAX_SQUARINGS)
    z = x * jnp.exp2(-squarings).astype(x.dtype)
    f = _phi_taylor(z, degree)

    def double(carry: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        f, z = carry
        return f + 0.5 * mm(f, mm(z, f)), 2 * z

    def body(carry: tuple[jax.Array, jax.Array], i: jax.Array
             ) -> tuple[tuple[jax.Array, jax.Array], None]:
        return lax.cond(i < squarings, double, lambda c: c, carry), None

    (f, _), _ = lax.scan(body, (f, z), jnp.arange(_MAX_SQUARINGS))
    return f


def expm(x: jax.Array) -> jax.Array:
    """The matrix exponential ``I + Xφ(X)`` of ``(..., m, m)`` matrices (:func:`phi`).

    As accurate as ``jax.scipy.linalg.expm`` (to 1e-14 relative up to ``‖X‖ = 40`` in the tests)
    and cheaper to compile: one Taylor polynomial and a scan, instead of Padé approximants of
    several degrees selected by ``lax.cond``.
    """
    return eye_like(x) + mm(x, phi(x))


def _phi_taylor(z: jax.Array, degree: int, block: int = 4) -> jax.Array:
    """``Σ_{k≤degree} Z^k/(k+1)!`` by Paterson–Stockmeyer: powers up to ``Z^block``, Horner in
    it."""
    coeffs = [1 / math.factorial(k + 1) for k in range(degree + 1)]
    powers = [eye_like(z), z]
    while len(powers) <= block:
        powers.append(mm(powers[-1], z))
    chunks = [functools.reduce(operator.add, [c * p for c, p in zip(coeffs[j:j + block], powers)])
              for j in range(0, degree + 1, block)]
    f = chunks[-1]
    for chunk in reversed(chunks[:-1]):
        f = chunk + mm(powers[block], f)
    return f


def rotate(y: jax.Array, delta: jax.Array, method: str, z: jax.Array | None = None) -> jax.Array:
    r"""Apply ``Q = cay(Ω)`` or ``exp(Ω)``, ``Ω = Ω(Y, Δ)``, to ``[Y, Z]`` in O(np(p + k)) time.

    .. math::
        Q [Y, Z] = [Y, Z] + U\,\psi(X)\,V^T [Y, Z], \qquad X = V^T U \in \mathbb{R}^{2p\times 2p}

    Args:
      y: a point, shape ``(..., n, p)``.
      delta: shape ``(..., n, p)``; only its tangent part ``Y skew(YᵀΔ) + (I - YYᵀ)Δ`` enters Ω.
      method: ``"cayley"`` (``ψ(X) = (I - ½X)⁻¹``, one 2p×2p solve, by a p×p one:
        :func:`_cayley_blocks`) or ``"exp"`` (``ψ = φ``, :func:`phi`).
      z: optional further columns to rotate, shape ``(..., n, k)``.

    Returns:
      ``Q [y, z]``, shape ``(..., n, p + k)`` (``Q y`` when ``z`` is None). Written as the input
      plus a correction, so the rounding error of a small step is relative to the step.
      ``YᵀY = I`` is taken in the 2p×2p algebra (a point is orthonormal to working precision):
      the rotation then moves by ``O(‖YᵀY - I‖‖Δ‖)``, below the rounding of the correction
      (``docs/derivations/optimizers.md#global-tangent-cost``).
    """
    yt_delta = mm_h(y, delta)
    p_ = delta - 0.5 * mm_thin(y, yt_delta)
    yt_p = 0.5 * yt_delta  # Yᵀ(I - ½YYᵀ)Δ with YᵀY = I
    z_products = None if z is None else (mm_h(y, z), mm_h(p_, z))
    r_p, r_y = rotation_coefficients(yt_p, mm_h(p_, p_), z_products, method)
    columns = y if z is None else jnp.concatenate([y, z], axis=-1)
    return columns + (mm_thin(p_, r_p) + mm_thin(y, r_y))


# ----------------------------------------------------------------------------------------------
# Functions of symmetric matrices, with derivatives that exist at repeated eigenvalues


def sym_eigh(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    r"""``(λ, Q)`` with ``sym(a) = Q diag(λ) Qᵀ``, ``λ`` ascending, for ``(..., n, n)`` arrays.

    For ``n = 2`` in closed form: with ``m = (a₁₁ + a₂₂)/2``, ``h = (a₁₁ - a₂₂)/2`` and
    ``b = (a₁₂ + a₂₁)/2``, ``λ = m ∓ hypot(h, b)`` and the rotation angle ``θ = ½ atan2(b, h)``,
    ``Q = [[-sin θ, cos θ], [cos θ, sin θ]]`` (Jacobi's rotation: orthogonal to rounding, and
    stable at repeated eigenvalues, where ``atan2(0, 0) = 0`` gives ``Q`` a rotation). Other
    sizes: ``jnp.linalg.eigh``. Not for differentiation (its derivative at ``h = b = 0`` is nan):
    :func:`sym_function` supplies the derivative of the matrix functions built on it.

    Batches of small matrices (2×2 covariances, diffusion tensors, Gram matrices of two columns)
    are where the LAPACK call per matrix behind ``jnp.linalg.eigh`` costs most. Measured on one
    CPU core for 10⁴ matrices (``jax.jit``, ``OPENBLAS_NUM_THREADS=1``): ``jnp.linalg.eigh``
    8–11 ms, the closed form 2.2 ms, as accurate (reconstruction error 1.8e-15 in float64). A
    3×3 closed form (Smith's trigonometric eigenvalues, eigenvectors by cross products) was 1.7×
    faster but reconstructed to only 1e-4 in float32 near repeated eigenvalues, so 3×3 matrices
    keep ``jnp.linalg.eigh``.
    """
    if a.shape[-1] != 2:
        return jnp.linalg.eigh(sym(a))
    p, r = a[..., 0, 0], a[..., 1, 1]
    b = 0.5 * (a[..., 0, 1] + a[..., 1, 0])
    m, h = 0.5 * (p + r), 0.5 * (p - r)
    radius = jnp.hypot(h, b)
    theta = 0.5 * jnp.arctan2(b, h)
    c, s = jnp.cos(theta), jnp.sin(theta)
    w = jnp.stack([m - radius, m + radius], axis=-1)
    q = jnp.stack([jnp.stack([-s, c], axis=-1), jnp.stack([c, s], axis=-1)], axis=-1)
    return w, q


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def sym_function(f: Callable[[jax.Array], jax.Array], df: Callable[[jax.Array], jax.Array],
                 a: jax.Array) -> jax.Array:
    r"""``f(A) = Q f(Λ) Qᵀ`` for symmetric ``(..., m, m)`` matrices ``A = QΛQᵀ``.

    .. math::
        Df(A)[\dot A] = Q\,\big(F \circ Q^T\dot A Q\big)\,Q^T, \qquad
        F_{ij} = \frac{f(\lambda_i) - f(\lambda_j)}{\lambda_i - \lambda_j}, \quad
        F_{ii} = f'(\lambda_i)

    (Daleckii–Krein). Differentiating through ``eigh`` instead divides by ``λᵢ - λⱼ`` and gives
    nan at repeated eigenvalues, though ``f(A)`` is smooth there; here pairs closer than
    ``ε^{1/3}·max|λ|`` use ``(f'(λᵢ) + f'(λⱼ))/2``, which balances the divided difference's
    cancellation against the mean's truncation error (both about ``ε^{2/3}``).

    Args:
      f: elementwise function of the eigenvalues (a hashable callable, e.g. a module function).
      df: its derivative.
      a: symmetric matrices; only ``sym(a)`` is used.

    References:
      N. J. Higham, "Functions of Matrices: Theory and Computation" (2008), Thm. 3.11.
    """
    w, q = sym_eigh(a)
    return sym(mm(q * f(w)[..., None, :], q.mT))


@sym_function.defjvp
def _sym_function_jvp(f: Callable[[jax.Array], jax.Array], df: Callable[[jax.Array], jax.Array],
                      primals: tuple[jax.Array], tangents: tuple[jax.Array]
                      ) -> tuple[jax.Array, jax.Array]:
    (a,), (a_dot,) = primals, tangents
    w, q = sym_eigh(a)
    fw, dfw = f(w), df(w)
    diff = w[..., :, None] - w[..., None, :]
    scale = jnp.max(jnp.abs(w), axis=-1)[..., None, None]
    close = jnp.abs(diff) <= float(np.finfo(w.dtype).eps) ** (1 / 3) * scale
    divided = (fw[..., :, None] - fw[..., None, :]) / jnp.where(close, 1, diff)
    slopes = jnp.where(close, 0.5 * (dfw[..., :, None] + dfw[..., None, :]), divided)
    out = sym(mm(q * fw[..., None, :], q.mT))
    return out, sym(mm(q, mm(slopes * mm(q.mT, mm(sym(a_dot), q)), q.mT)))


def arctan_sv(a: jax.Array) -> jax.Array:
    r"""``U arctan(Σ) Vᵀ`` for ``A = UΣVᵀ`` of shape ``(..., m, k)``, without an SVD.

    .. math::
        U \arctan(\Sigma) V^T = A\, f(A^TA), \qquad f(u) = \frac{\arctan\sqrt u}{\sqrt u},
        \quad f(0) = 1

    through :func:`sym_function` on the k×k matrix ``AᵀA``, so the derivative exists at repeated
    and at zero singular values (an SVD's does not), and is ``Ȧ`` at ``A = 0``. It is the
    logarithm's last step on the Grassmann manifold (``A = tan Θ`` in principal angles) and on
    the orthogonal group (``A = tan(K/2)``).
    """
    return mm(a, sym_function(_arctan_ratio, _arctan_ratio_slope, mm_h(a, a)))


def _arctan_ratio(u: jax.Array) -> jax.Array:
    # Eigenvalues of AᵀA may come out slightly negative; f is even in √u, so clip them.
    u = jnp.maximum(u, 0)
    positive = u > 0
    r = jnp.sqrt(jnp.where(positive, u, 1))
    return jnp.where(positive, jnp.arctan(r) / r, 1)


# f'(u) = Σ_{k≥1} k(-1)^k u^{k-1}/(2k+1): below u = 0.01 nine terms reach the unit roundoff,
# where the closed form (1/(1 + u) - f(u))/(2u) loses digits to cancellation.
_ARCTAN_SLOPE_SERIES = tuple(k * (-1) ** k / (2 * k + 1) for k in range(1, 10))


def _arctan_ratio_slope(u: jax.Array) -> jax.Array:
    u = jnp.maximum(u, 0)
    small = u < 0.01
    series = jnp.zeros_like(u)
    for c in reversed(_ARCTAN_SLOPE_SERIES):
        series = series * u + c
    safe = jnp.where(small, 1, u)
    return jnp.where(small, series, (1 / (1 + safe) - _arctan_ratio(safe)) / (2 * safe))


def rotation_coefficients(yt_p: jax.Array, pt_p: jax.Array,
                          z_products: tuple[jax.Array, jax.Array] | None, method: str
                          ) -> tuple[jax.Array, jax.Array]:
    r"""``(R_P, R_Y)`` with ``Q [Y, Z] = [Y, Z] + P R_P + Y R_Y``, ``Q = cay(Ω)`` or ``exp(Ω)``,
    ``Ω = PYᵀ - YPᵀ``, from products only, for an orthonormal ``Y`` (``YᵀY = I``).

    :func:`rotate` once ``P = (I - ½YYᵀ)Δ`` is formed, for callers that hold the products
    ``YᵀP``, ``PᵀP`` and, for the further columns ``Z`` to rotate, ``z_products = (YᵀZ, PᵀZ)``
    (None: ``Y`` alone): every block of ``X = VᵀU`` and of ``Vᵀ[Y, Z]`` is one of them (or a
    transpose, or ``YᵀY = I``), so what is left is the 2p×2p ``ψ(X)`` here and one product with
    ``U = [P, Y]``, the caller's (``optim.manifold_adam`` applies it to ``P``'s own factors).
    """
    p = yt_p.shape[-1]
    c_y, c_p = eye_like(yt_p), yt_p.mT  # YᵀY and PᵀY
    if z_products is not None:
        c_y = jnp.concatenate([c_y, z_products[0]], axis=-1)
        c_p = jnp.concatenate([c_p, z_products[1]], axis=-1)
    if method == "cayley":
        # Ω = UVᵀ with U = [P, Y], V = [Y, -P]; (I - ½UVᵀ)⁻¹U = U(I - ½X)⁻¹ (push-through), so
        # cay(Ω)Z = Z + U(I - ½X)⁻¹VᵀZ, the 2p×2p solve done by one p×p solve.
        return _cayley_blocks(yt_p, pt_p, c_y, -c_p)
    # Balanced factors Ω = [P, sY][Y, -P/s]ᵀ: with s ≈ ‖P‖_F (a power of two, so scaling is
    # exact) every block of X = VᵀU is of the size of the step, instead of X holding
    # YᵀY = I. That keeps φ's scaling and squaring short for small steps. Q does not
    # depend on s, so no derivative flows through it.
    norm = lax.stop_gradient(jnp.sqrt(jnp.trace(pt_p, axis1=-2, axis2=-1)))[..., None, None]
    s = jnp.where(norm > 0, jnp.exp2(jnp.round(jnp.log2(norm))), 1).astype(yt_p.dtype)
    x = jnp.concatenate([jnp.concatenate([yt_p, s * eye_like(yt_p)], axis=-1),
                         jnp.concatenate([-pt_p / s, -yt_p.mT], axis=-1)], axis=-2)
    # exp(UVᵀ) = I + Uφ(VᵀU)Vᵀ, from (UVᵀ)^k = U X^{k-1} Vᵀ.
    r = mm(phi(x), jnp.concatenate([c_y, -c_p / s], axis=-2))
    return r[..., :p, :], s * r[..., p:, :]


def _cayley_blocks(t: jax.Array, s: jax.Array, c1: jax.Array, c2: jax.Array
                   ) -> tuple[jax.Array, jax.Array]:
    r"""``(r₁, r₂)`` with ``(I - ½X)[r₁; r₂] = [c₁; c₂]``, ``X = [[T, I], [-S, -Tᵀ]]``.

    The first block row gives ``r₂ = 2h - T r₁`` with ``h = r₁ - c₁``; the second then reads

    .. math::
        2(I - Z)\,h = c_2 + (T^T + 2Z)\,c_1, \qquad
        Z = \tfrac12(T - T^T) + \tfrac14(T^TT - S) .

    One p×p solve instead of a 2p×2p one, and every term is of the size of the step (no
    cancellation in ``r₂``). For the Cayley transform of a step, ``T = YᵀP`` and ``S = PᵀP``,
    ``S - TᵀT = Pᵀ(I - YYᵀ)P`` is positive semidefinite: ``I - Z`` is the identity plus a skew
    matrix plus a positive semidefinite one, so ``‖(I - Z)⁻¹‖₂ ≤ 1`` for a step of any size,
    and for a step of moderate size :func:`_neumann_solve` takes its series.
    """
    z = 0.5 * (t - t.mT) + 0.25 * (mm_h(t, t) - s)
    h = _neumann_solve(z, 0.5 * (c2 + mm(t.mT + 2 * z, c1)))
    r1 = c1 + h
    return r1, 2 * h - mm(t, r1)


# (I - Z)⁻¹C = Σ_k Z^k C = Π_{j<m} (I + Z^{2^j}) C up to the terms k ≥ 2^m, Z^{2^m}(I - Z)⁻¹C,
# of norm at most ‖Z^{2^m}‖₁/(1 - θ) for θ = ‖Z‖₁ ≤ 1/2: with ‖Z^{2^m}‖₁ ≤ θ^{2^m}, m = 5 factors
# reach float32's unit roundoff, 6 float64's.
_NEUMANN_THETA = 0.5
_NEUMANN_FACTORS = {jnp.dtype(jnp.float32): 5, jnp.dtype(jnp.float64): 6}


def _neumann_solve(z: jax.Array, c: jax.Array) -> jax.Array:
    """``(I - Z)⁻¹C`` of ``(..., m, m)`` and ``(..., m, k)`` matrices.

    For ``‖Z‖₁ ≤ 1/2`` (the Cayley transform of a step of moderate size) by the Neumann series
    in product form, with as many factors as the batch needs to reach the unit roundoff: the
    factor of ``Z^{2^j}`` is taken while ``‖Z^{2^{j-1}}‖₁²``, from the power last formed (often
    far below ``θ^{2^j}``: the series of a Cayley transform), exceeds ``(1 - θ)u``; skipped
    factors cost nothing (``lax.cond``). Otherwise by LU. LAPACK's LU
    costs a call per matrix and an m-step loop over its pivots, which on a batch of small
    matrices (stacked attention heads, 64 × 32×32) is most of a ``manifold_adam`` step; the
    series is batched matrix products only. Under ``jax.vmap`` the tests are batched and both
    branches run — pass stacked matrices as leading axes instead.
    """
    u = float(np.finfo(z.dtype).eps) / 2

    def norm(a: jax.Array) -> jax.Array:
        return lax.stop_gradient(jnp.max(jnp.sum(jnp.abs(a), axis=-2)))

    theta = norm(z)
    tol = (1 - theta) * u

    def series(z: jax.Array, c: jax.Array) -> jax.Array:
        r = c + mm(z, c)

        def square(zr: tuple[jax.Array, jax.Array, jax.Array]
                   ) -> tuple[jax.Array, jax.Array, jax.Array]:
            z, r, _ = zr
            z = mm(z, z)
            return z, r + mm(z, r), norm(z)

        state = (z, r, theta)
        for _ in range(1, _NEUMANN_FACTORS[jnp.dtype(z.dtype)]):
            state = lax.cond(state[2] ** 2 > tol, square, lambda zr: zr, state)
        return state[1]

    return lax.cond(theta <= _NEUMANN_THETA, series,
                    lambda z, c: jnp.linalg.solve(eye_like(z) - z, c), z, c)
