"""Rules of matrix functions: the Cayley transform and the matrix exponential."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.typing import ArrayLike

from .._core.arrays import eye_like, mm
from .._core.checks import as_inexact_matrix, check_matrix, is_half
from .._core.rule import Rule
from . import jax_ops
from .dense import inverse, lower_inverse_factors, solve_with
from .small import closed_form_applies, closed_form_inv

__all__ = ["cayley", "cayley_matrix", "expm", "inv_identity_plus"]


def inv_identity_plus(c: jax.Array) -> jax.Array:
    """``N = (I + C)⁻¹`` by :func:`~.dense.inverse` (plain JAX)."""
    return inverse(eye_like(c) + c)


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


# ==============================================================================================
# Matrix exponential

# Scaling and squaring (Higham 2005; Al-Mohy & Higham 2009): the [m/m] Padé approximant r_m is
# accurate to the unit roundoff for ‖A‖₁ ≤ θ_m; θ₁₃ for double, θ₇ for single precision (the
# degrees and thresholds jax.scipy.linalg.expm uses at the top of its range).
_PADE = {
    7: (17297280.0, 8648640.0, 1995840.0, 277200.0, 25200.0, 1512.0, 56.0, 1.0),
    13: (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
         129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
         40840800.0, 960960.0, 16380.0, 182.0, 1.0),
}
_THETA = {7: 3.925724783138660, 13: 5.371920351148152}
# As jax.scipy.linalg.expm: a slice that needs more squarings gives NaN.
MAX_SQUARINGS = 16


def expm(a: ArrayLike) -> jax.Array:
    r"""Matrix exponential ``exp(A)`` with an explicit pushforward and pullback (Fréchet derivative).

    .. math::
        \dot X = L(A, \dot A) = \int_0^1 e^{tA}\,\dot A\, e^{(1-t)A}\,dt, \qquad
        \bar A = L(A^T, \bar X)

    ``X = exp(A)`` by scaling and squaring with a Padé approximant, as
    ``jax.scipy.linalg.expm``; ``L(A, E)`` is the Fréchet derivative, the pullback in JAX's
    convention is the Fréchet derivative at ``Aᵀ`` (plain transpose; ``exp`` is holomorphic).
    Both derivatives run Al-Mohy & Higham's recurrence on the forward's own intermediates: the
    exact derivative of the computed approximant. Derivation:
    ``docs/derivations/decompositions.md#expm``.

    Args:
      a: array of shape ``(..., n, n)``; integers and booleans are promoted as in
        ``jnp.linalg``; float16/bfloat16 go to ``jax.scipy.linalg.expm`` (which raises).

    Returns:
      ``exp(A)``, shape and dtype of ``a``. A slice with ``‖A‖₁ > θ · 2¹⁶`` (or non-finite
      entries) gives NaN, as ``jax.scipy.linalg.expm`` does.

    Raises:
      TypeError: ``a`` is not an array of a numeric dtype.
      ValueError: ``a`` is not of shape ``(..., n, n)``.

    Notes:
      Forward: ``s = max(0, ⌊log₂(‖A‖₁/θ)⌋)`` per slice, the ``[m/m]`` Padé approximant of
      ``A/2ˢ`` (``m = 13``, ``θ = 5.37`` in double precision; ``m = 7``, ``θ = 3.93`` in single),
      then ``s`` squarings; a batch runs ``max s`` squarings, each slice keeping its own ``s``.
      Residuals: the scaled matrix and its powers, the Padé intermediates, the factorisation of
      the denominator (the closed-form inverse for ``n ≤ 4``, otherwise ``U`` and ``L⁻¹P`` of
      its LU factorisation, so no solve permutes rows) and ``r(A/2ˢ)``.
      Pushforward and pullback then cost two matrix products per product of the Padé step, one
      solve with the stored factors and two products per squaring, plus the squares it reads
      (``s − 1``, recomputed); the pullback is the same recurrence, ``L(Aᵀ, X̄) = L(A, X̄ᵀ)ᵀ``
      (for ``n ≤ 4`` on the transposed intermediates). This measured several times faster than
      the exponential of the ``2n × 2n`` block matrix ``[[Aᵀ, X̄], [0, Aᵀ]]``
      (``benchmarks/bench_decompositions.py``).

    References:
      N. J. Higham, "The scaling and squaring method for the matrix exponential revisited",
      SIAM J. Matrix Anal. Appl. 26 (2005).
      A. H. Al-Mohy, N. J. Higham, "Computing the Fréchet derivative of the matrix exponential,
      with an application to condition number estimation", SIAM J. Matrix Anal. Appl. 30 (2009).

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a = jnp.array([[0.0, 1.0], [0.0, 0.0]], dtype=jnp.float32)  # nilpotent: exp(A) = I + A
      >>> rules.expm(a)
      Array([[1., 1.],
             [0., 1.]], dtype=float32)
      >>> jax.jvp(rules.expm, (a,), (jnp.eye(2, dtype=jnp.float32),))[1]  # A and I commute
      Array([[1., 1.],
             [0., 1.]], dtype=float32)
    """
    a = as_inexact_matrix("expm", "a", a, square=True)
    return _expm(a)


def _expm_forward(a):
    if is_half(a):
        return jax_ops.expm(a), None
    if a.shape[-1] == 0:
        return a, None
    m = 13 if jnp.finfo(a.dtype).bits == 64 else 7
    b = _coefficients(m)
    norm = jnp.max(jnp.sum(jnp.abs(a), axis=-2), axis=-1)
    # ⌊·⌋ as jax.scipy.linalg.expm, not Higham's ⌈·⌉: ‖A/2ˢ‖₁ < 2θ, one squaring fewer, and as
    # accurate or more (measured on random matrices up to ‖A‖₁ = 40 in both precisions).
    s = jnp.maximum(0, jnp.floor(jnp.log2(norm / _THETA[m])))
    too_big = ~(s <= MAX_SQUARINGS)  # also NaN and inf
    s = jnp.where(too_big, 0, s)
    x = a * (2.0 ** -s).astype(a.dtype)[..., None, None]
    eye = eye_like(x)
    x2 = mm(x, x)
    x4 = mm(x2, x2)
    x6 = mm(x4, x2)
    if m == 13:
        w1 = b[13] * x6 + b[11] * x4 + b[9] * x2
        z1 = b[12] * x6 + b[10] * x4 + b[8] * x2
        w = mm(x6, w1) + b[7] * x6 + b[5] * x4 + b[3] * x2 + b[1] * eye
        v = mm(x6, z1) + b[6] * x6 + b[4] * x4 + b[2] * x2 + b[0] * eye
        pade: tuple[jax.Array, ...] = (x, x2, x4, x6, w1, z1, w)
    else:
        w = b[7] * x6 + b[5] * x4 + b[3] * x2 + b[1] * eye
        v = b[6] * x6 + b[4] * x4 + b[2] * x2 + b[0] * eye
        pade = (x, x2, x4, x6, w)
    u = mm(x, w)
    q = v - u
    factors = _factor(q)
    r0 = solve_with(factors, v + u)
    out = jnp.where(too_big[..., None, None], jnp.nan, _squarings(r0, s))
    return out, (pade, factors, r0, s)


def _expm_pushforward(res, a_dot):
    """``L(A, Ȧ)``: Al-Mohy & Higham's recurrence on the forward's intermediates."""
    return _expm_frechet(res, a_dot)


def _expm_pullback(res, x_bar):
    """``Ā = L(Aᵀ, X̄)``: the recurrence on the transposed intermediates for ``n ≤ 4`` (unrolled
    products take a transposed operand for free), else ``L(A, X̄ᵀ)ᵀ`` (``exp(Aᵀ) = exp(A)ᵀ``),
    the pushforward's own: with transposed left operands its products ran in XLA:CPU's generic
    dot (gradient float32, 256 × 256: 0.88 of the time this way, 64 × 64: 0.95–1.0; 4096 × 3×3
    took 1.3–1.4× as long).
    """
    if closed_form_applies(x_bar):
        return (_expm_frechet(res, x_bar, transpose=True),)
    return (_expm_frechet(res, x_bar.mT).mT,)


_expm = Rule("expm", _expm_forward, _expm_pushforward, _expm_pullback)


def _coefficients(m):
    """Padé coefficients divided by the constant one (``r_m = q⁻¹p`` is unchanged, and the
    identity terms are exact)."""
    return [c / _PADE[m][0] for c in _PADE[m]]


def _factor(q):
    """The denominator's factors for the forward's solve and the derivatives' solves, every one
    with ``n`` right-hand sides: the closed-form inverse for ``n ≤ 4``, else ``U`` and ``L⁻¹P``
    (no permutation to form or apply; against LU with the permutation, jvp 0.89 of the time at
    64 × 64 and 0.93 at 256 × 256, 512 × 512 and 1024 × 1024, gradient 0.94 at 64 × 64 and
    unchanged above)."""
    return closed_form_inv(q) if closed_form_applies(q) else lower_inverse_factors(q)


def _squarings(r0, s):
    """``R ← R²`` while ``i < s``, per slice; a batch runs ``max s`` steps."""
    s_max = jnp.max(s, initial=0)

    def step(r, i):
        return lax.cond(i < s_max, lambda r: jnp.where((i < s)[..., None, None], mm(r, r), r),
                        lambda r: r, r), None

    return _squaring_scan(step, r0, s, s_max)


def _expm_frechet(res, e, *, transpose=False):
    pade, factors, r0, s = res
    if transpose:
        pade, r0 = [y.mT for y in pade], r0.mT
    e = e * (2.0 ** -s).astype(e.dtype)[..., None, None]
    x, x2, x4 = pade[:3]
    m2 = mm(x, e) + mm(e, x)
    m4 = mm(x2, m2) + mm(m2, x2)
    m6 = mm(x4, m2) + mm(m4, x2)
    if len(pade) == 7:  # m = 13
        b = _coefficients(13)
        _, _, _, x6, w1, z1, w = pade
        lw1 = b[13] * m6 + b[11] * m4 + b[9] * m2
        lz1 = b[12] * m6 + b[10] * m4 + b[8] * m2
        lw = mm(x6, lw1) + mm(m6, w1) + b[7] * m6 + b[5] * m4 + b[3] * m2
        lv = mm(x6, lz1) + mm(m6, z1) + b[6] * m6 + b[4] * m4 + b[2] * m2
    else:
        b = _coefficients(7)
        w = pade[4]
        lw = b[7] * m6 + b[5] * m4 + b[3] * m2
        lv = b[6] * m6 + b[4] * m4 + b[2] * m2
    lu = mm(x, lw) + mm(e, w)
    # q r = p with p = v + u, q = v - u: q L = L_p - L_q r.
    l0 = solve_with(factors, lu + lv + mm(lu - lv, r0), transpose=transpose)
    s_max = jnp.max(s, initial=0)

    def step(carry, i):
        # Lᵢ₊₁ = Rᵢ Lᵢ + Lᵢ Rᵢ with Rᵢ₊₁ = Rᵢ² recomputed: storing the forward's squares (a
        # stack of 16, written in a scan or a conditional) measured slower than s - 1 products.
        # The last step's square is never read, so only steps before it form one.
        def square(carry):
            l, r = carry
            on = (i < s)[..., None, None]
            l = jnp.where(on, mm(r, l) + mm(l, r), l)
            r = lax.cond(i + 1 < s_max, lambda r: jnp.where(on, mm(r, r), r), lambda r: r, r)
            return l, r
        return lax.cond(i < s_max, square, lambda c: c, carry), None

    return _squaring_scan(step, (l0, r0), s, s_max)[0]


def _squaring_scan(step, carry, s, s_max):
    """``step`` scanned over ``i < MAX_SQUARINGS`` in two stretches, each entered only if some
    slice needs a step in it: ``i < 4`` when ``s_max > 0``, ``4 ≤ i < 16`` when ``s_max > 4``.

    Every step tests ``i < s_max`` in a conditional of its own, and those tests cost more than
    the work on small matrices. An unscaled batch (``‖A‖₁ < 2θ``) skips all 16 with one test
    (4096 × 3×3: jvp and gradient 0.88–0.91 of the time); a matrix squared once or twice runs 4
    (64×64 and 256×256 with one squaring: jvp 0.96–0.98 of the time with one stretch of 16). A
    ``while_loop`` of ``s_max`` steps would skip them too, but JAX cannot reverse-differentiate
    one, and second derivatives go through these loops.
    """
    def stretch(start, stop):
        return lambda c: lax.scan(step, c, jnp.arange(start, stop, dtype=s.dtype))[0]

    carry = lax.cond(s_max > 0, stretch(0, _FIRST_STRETCH), lambda c: c, carry)
    return lax.cond(s_max > _FIRST_STRETCH, stretch(_FIRST_STRETCH, MAX_SQUARINGS), lambda c: c,
                    carry)


_FIRST_STRETCH = 4  # squarings: ‖A‖₁ up to 2⁵θ (≈ 125 in single precision) takes no more
