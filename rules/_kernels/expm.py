r"""The matrix exponential, its Fréchet derivative, and ``φ(X) = Σ_{k≥0} X^k/(k+1)!``.

:func:`pade_expm` is scaling and squaring with a Padé approximant (Higham 2005), as
``jax.scipy.linalg.expm``, returning the intermediates from which :func:`frechet` runs Al-Mohy &
Higham's recurrence: the exact derivative of the computed approximant. Both also run on
:class:`Dual` matrices ``[[A, E], [0, A]]``, whose exponential holds ``L(A, E)``: the forward of
``expm_frechet`` and its first derivatives, the exact ones of the computed ``(exp(A), L(A, E))``.
:func:`phi` is the function of the low-rank rotations on frame manifolds (``exp(X) = I + Xφ(X)``),
by a Taylor polynomial and its own doubling formula.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import operator
from collections.abc import Callable
from typing import NamedTuple, TypeVar

import jax
import jax.numpy as jnp
from jax import lax

from .._core.arrays import HIGHEST, eye_like, norm1
from .lu import SolveFactors, solve_factors, solve_with
from .products import mm
from .routes import cpu_route
from .small import closed_form_applies, closed_form_inv

__all__ = ["MAX_SQUARINGS", "Dual", "DualFactors", "ExpmIntermediates", "frechet", "frechet_adjoint",
           "pade_expm", "phi"]

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
# jax.scipy.linalg.expm's default: a slice that needs more squarings gives NaN.
MAX_SQUARINGS = 16


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Dual:
    r"""The block matrix ``[[A, E], [0, A]]`` of ``(..., n, n)`` blocks, held as the pair ``(A, E)``.

    These matrices form an algebra, ``[[A, E], [0, A]] [[B, F], [0, B]] = [[AB, AF + EB], [0, AB]]``,
    closed under inverses, and for a matrix function ``f``, ``f([[A, E], [0, A]]) = [[f(A),
    L_f(A, E)], [0, f(A)]]`` (Higham 2008, §3.2): the kernels below run on it unchanged, each
    product three ``n × n`` products where a ``2n × 2n`` product has the flops of eight. ``None``
    is a zero block, with which no product is formed.
    """

    a: jax.Array | None
    b: jax.Array | None

    def __add__(self, other: Dual) -> Dual:
        return Dual(_add(self.a, other.a), _add(self.b, other.b))

    def __sub__(self, other: Dual) -> Dual:
        return Dual(_add(self.a, _neg(other.a)), _add(self.b, _neg(other.b)))

    def __rmul__(self, c: float) -> Dual:
        return Dual(None if self.a is None else c * self.a, None if self.b is None else c * self.b)

    @property
    def mT(self) -> Dual:
        return Dual(None if self.a is None else self.a.mT, None if self.b is None else self.b.mT)


class DualFactors(NamedTuple):
    """The factors of a :class:`Dual` ``[[Q, Q'], [0, Q]]``: ``Q``'s, and ``Q'``."""

    factors: jax.Array | SolveFactors
    dq: jax.Array


M = TypeVar("M", jax.Array, Dual)


class ExpmIntermediates(NamedTuple):
    """What :func:`frechet` reads of the forward: the scaled matrix and its Padé intermediates
    (``X, X², X⁴, X⁶, W₁, Z₁, W`` for degree 13, ``X, X², X⁴, X⁶, W`` for 7), the factors of the
    denominator ``Q = V - U``, ``r(X)`` before squaring, and the squarings ``s`` per slice; all
    :class:`Dual` for a :class:`Dual` forward."""

    pade: tuple[jax.Array, ...] | tuple[Dual, ...]
    factors: jax.Array | SolveFactors | DualFactors
    r0: jax.Array | Dual
    s: jax.Array


def pade_expm(a: M, max_squarings: int = MAX_SQUARINGS) -> tuple[M, ExpmIntermediates]:
    """``exp(A)`` of a non-empty float or complex ``(..., n, n)`` batch, and its intermediates.

    ``s = max(0, ⌊log₂(‖A‖₁/θ)⌋)`` per slice, the ``[m/m]`` Padé approximant of ``A/2ˢ``
    (``m = 13``, ``θ = 5.37`` in double precision; ``m = 7``, ``θ = 3.93`` in single), then
    ``s`` squarings; a batch runs ``max s`` squarings, each slice keeping its own ``s``. The
    denominator's factors are the closed-form inverse for tiny matrices, :class:`~.lu.SolveFactors`
    otherwise. A slice that needs more than ``max_squarings`` squarings (``‖A‖₁ > θ · 2¹⁶`` by
    default), or has non-finite entries, gives NaN, as ``jax.scipy.linalg.expm``.

    For a :class:`Dual` ``(A, E)``: ``(exp(A), L(A, E))`` (Al-Mohy & Higham's recurrence beside the
    forward, both squared by the same ``s``, the ``2n × 2n`` matrix's own norm not consulted), and
    the intermediates of both; a slice of ``A`` that gives NaN gives NaN in both.
    """
    primal = _primal(a)
    m = 13 if jnp.finfo(primal.dtype).bits == 64 else 7
    b = _coefficients(m)
    norm = norm1(primal)
    # ⌊·⌋ as jax.scipy.linalg.expm, not Higham's ⌈·⌉: ‖A/2ˢ‖₁ < 2θ, one squaring fewer, with
    # the truncation error of r_m still below the rounding of the squarings that follow.
    s = jnp.maximum(0, jnp.floor(jnp.log2(norm / _THETA[m])))
    too_big = ~(s <= max_squarings)  # also NaN and inf
    s = jnp.where(too_big, 0, s)
    x = _scale(a, 2.0 ** -s)
    eye = _identity(x)
    x2 = _mm(x, x)
    x4 = _mm(x2, x2)
    x6 = _mm(x4, x2)
    if m == 13:
        w1 = b[13] * x6 + b[11] * x4 + b[9] * x2
        z1 = b[12] * x6 + b[10] * x4 + b[8] * x2
        w = _mm(x6, w1) + b[7] * x6 + b[5] * x4 + b[3] * x2 + b[1] * eye
        v = _mm(x6, z1) + b[6] * x6 + b[4] * x4 + b[2] * x2 + b[0] * eye
        pade: tuple[M, ...] = (x, x2, x4, x6, w1, z1, w)
    else:
        w = b[7] * x6 + b[5] * x4 + b[3] * x2 + b[1] * eye
        v = b[6] * x6 + b[4] * x4 + b[2] * x2 + b[0] * eye
        pade = (x, x2, x4, x6, w)
    u = _mm(x, w)
    q = v - u
    factors = _factors(q)
    r0 = _solve(factors, v + u)
    out = jax.tree.map(lambda y: jnp.where(too_big[..., None, None], jnp.nan, y),
                       _squarings(r0, s, max_squarings))
    return out, ExpmIntermediates(pade, factors, r0, s)


def _coefficients(m):
    """Padé coefficients divided by the constant one (``r_m = q⁻¹p`` is unchanged, and the
    identity terms are exact)."""
    return [c / _PADE[m][0] for c in _PADE[m]]


def _squarings(r0, s, max_squarings):
    """``R ← R²`` while ``i < s``, per slice; a batch runs ``max s`` steps."""
    s_max = jnp.max(s, initial=0)

    def step(r, i):
        return lax.cond(i < s_max, lambda r: _where((i < s)[..., None, None], _mm(r, r), r),
                        lambda r: r, r), None

    return _squaring_scan(step, r0, s, s_max, max_squarings)


def frechet(res: ExpmIntermediates, e: M, max_squarings: int = MAX_SQUARINGS) -> M:
    """The Fréchet derivative ``L(A, E)`` of :func:`pade_expm` at its intermediates ``res``.

    Al-Mohy & Higham's recurrence: the derivatives of the Padé step's products, one solve with
    the stored factors (``q L = L_p - L_q r``), then per squaring ``Lᵢ₊₁ = Rᵢ Lᵢ + Lᵢ Rᵢ``. At
    the intermediates of a :class:`Dual` ``(A, E)`` and a direction ``(Ȧ, Ė)``: ``(L(A, Ȧ),
    L(A, Ė) + L⁽²⁾(A; E, Ȧ))``, the second-order Fréchet derivative (Higham & Relton 2014).
    """
    return _frechet(res, e, max_squarings=max_squarings)


def frechet_adjoint(res: ExpmIntermediates, e: M, max_squarings: int = MAX_SQUARINGS) -> M:
    """``L(Aᵀ, E)``, the adjoint of :func:`frechet` (``exp`` is holomorphic: plain transposes).

    The recurrence on the transposed intermediates; on the CPU for matrices beyond the closed
    forms ``L(A, Eᵀ)ᵀ`` instead (``cpu_route.transposed_frechet``: ``exp(Aᵀ) = exp(A)ᵀ``), whose
    products keep their operands in the layout XLA:CPU's fast dot takes. Transposition reverses
    products of :class:`Dual` matrices too, so the same holds at a :class:`Dual` ``res``.
    """
    frechet = functools.partial(_frechet, max_squarings=max_squarings)
    transposed = functools.partial(frechet, transpose=True)
    if closed_form_applies(_primal(res.r0)):
        return transposed(res, e)
    return cpu_route("transposed_frechet", lambda res, e: frechet(res, e.mT).mT, transposed,
                     res, e)


def _frechet(res, e, *, max_squarings, transpose=False):
    pade, factors, r0, s = res
    if transpose:
        pade, r0 = tuple(y.mT for y in pade), r0.mT
    e = _scale(e, 2.0 ** -s)
    x, x2, x4 = pade[:3]
    m2 = _mm(x, e) + _mm(e, x)
    m4 = _mm(x2, m2) + _mm(m2, x2)
    m6 = _mm(x4, m2) + _mm(m4, x2)
    if len(pade) == 7:  # m = 13
        b = _coefficients(13)
        _, _, _, x6, w1, z1, w = pade
        lw1 = b[13] * m6 + b[11] * m4 + b[9] * m2
        lz1 = b[12] * m6 + b[10] * m4 + b[8] * m2
        lw = _mm(x6, lw1) + _mm(m6, w1) + b[7] * m6 + b[5] * m4 + b[3] * m2
        lv = _mm(x6, lz1) + _mm(m6, z1) + b[6] * m6 + b[4] * m4 + b[2] * m2
    else:
        b = _coefficients(7)
        w = pade[4]
        lw = b[7] * m6 + b[5] * m4 + b[3] * m2
        lv = b[6] * m6 + b[4] * m4 + b[2] * m2
    lu = _mm(x, lw) + _mm(e, w)
    # q r = p with p = v + u, q = v - u: q L = L_p - L_q r.
    l0 = _solve(factors, lu + lv + _mm(lu - lv, r0), transpose=transpose)
    s_max = jnp.max(s, initial=0)

    def step(carry, i):
        # Lᵢ₊₁ = Rᵢ Lᵢ + Lᵢ Rᵢ with Rᵢ₊₁ = Rᵢ² recomputed: s - 1 products instead of a stack of
        # the forward's squares written in a scan or a conditional. The last step's square is
        # never read, so only steps before it form one.
        def square(carry):
            l, r = carry
            on = (i < s)[..., None, None]
            l = _where(on, _mm(r, l) + _mm(l, r), l)
            r = lax.cond(i + 1 < s_max, lambda r: _where(on, _mm(r, r), r), lambda r: r, r)
            return l, r
        return lax.cond(i < s_max, square, lambda c: c, carry), None

    return _squaring_scan(step, (l0, r0), s, s_max, max_squarings)[0]


def _squaring_scan(step, carry, s, s_max, max_squarings):
    """``step`` scanned over ``i < max_squarings`` in two stretches, each entered only if some
    slice needs a step in it: ``i < 4`` when ``s_max > 0``, ``4 ≤ i`` when ``s_max > 4``.

    Every step tests ``i < s_max`` in a conditional of its own, and on small matrices those tests
    cost more than the work: an unscaled batch (``‖A‖₁ < 2θ``) skips all 16 with one test, and a
    matrix squared once or twice runs 4. A ``while_loop`` of ``s_max`` steps would skip them too,
    but JAX cannot reverse-differentiate one, and second derivatives go through these loops.
    """
    def stretch(start, stop):
        return lambda c: lax.scan(step, c, jnp.arange(start, stop, dtype=s.dtype))[0]

    first = min(_FIRST_STRETCH, max_squarings)
    carry = lax.cond(s_max > 0, stretch(0, first), lambda c: c, carry)
    if max_squarings <= first:
        return carry
    return lax.cond(s_max > first, stretch(first, max_squarings), lambda c: c, carry)


_FIRST_STRETCH = 4  # squarings: ‖A‖₁ up to 2⁵θ (≈ 125 in single precision) takes no more


# ----------------------------------------------------------------------------------------------
# The operations the kernels above take on matrices and on Dual matrices alike


def _primal(x: jax.Array | Dual) -> jax.Array:
    """``A`` of ``[[A, E], [0, A]]``, or the matrix itself."""
    if not isinstance(x, Dual):
        return x
    assert x.a is not None, "a Dual forward has its matrix"
    return x.a


def _mm(x: M, y: M) -> M:
    """``XY``; of :class:`Dual` matrices ``(AB, AF + EB)``, the products with the blocks ``E``
    and ``F`` dots at every size. Tiny products are otherwise unrolled (:func:`~.products.mm`),
    an elementwise loop that XLA fuses into its consumer, recomputing the consumer's operand
    for each of its terms; the derivative blocks chain products whose operands are sums of the
    previous ones, so the recomputation would compound at every level."""
    if isinstance(x, Dual) and isinstance(y, Dual):
        return Dual(_product(mm, x.a, y.a), _add(_product(_dot, x.a, y.b), _product(_dot, x.b, y.a)))
    assert not isinstance(x, Dual) and not isinstance(y, Dual)
    return mm(x, y)


def _dot(x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.matmul(x, y, precision=HIGHEST)


def _identity(x: M) -> M:
    return Dual(eye_like(_primal(x)), None) if isinstance(x, Dual) else eye_like(x)


def _scale(x: M, c: jax.Array) -> M:
    """``c · X`` per slice, ``c`` a batch of real scalars."""
    return jax.tree.map(lambda y: y * c.astype(y.dtype)[..., None, None], x)


def _where(on: jax.Array, x: M, y: M) -> M:
    return jax.tree.map(lambda x, y: jnp.where(on, x, y), x, y)


def _factors(q: M) -> jax.Array | SolveFactors | DualFactors:
    if isinstance(q, Dual):
        assert q.b is not None, "the Padé denominator of a Dual forward has a derivative"
        return DualFactors(_matrix_factors(_primal(q)), q.b)
    return _matrix_factors(q)


def _matrix_factors(q: jax.Array) -> jax.Array | SolveFactors:
    return closed_form_inv(q) if closed_form_applies(q) else solve_factors(q)


def _solve(factors: jax.Array | SolveFactors | DualFactors, b: M, transpose: bool = False) -> M:
    """``Q⁻¹ B`` (``Q⁻ᵀ B``); for a :class:`Dual` ``Q``, ``[[Q, Q'], [0, Q]] [[Y, Y'], [0, Y]] =
    [[B, B'], [0, B]]`` gives ``Y = Q⁻¹B`` and ``Y' = Q⁻¹(B' - Q'Y)``."""
    if isinstance(factors, DualFactors):
        assert isinstance(b, Dual)
        dq = factors.dq.mT if transpose else factors.dq
        y = None if b.a is None else _solve(factors.factors, b.a, transpose)
        y_dot = _add(b.b, _neg(_product(_dot, dq, y)))
        return Dual(y, None if y_dot is None else _solve(factors.factors, y_dot, transpose))
    assert not isinstance(b, Dual)
    return solve_with(factors, b, transpose=transpose)


def _product(product: Callable[[jax.Array, jax.Array], jax.Array], x: jax.Array | None,
             y: jax.Array | None) -> jax.Array | None:
    return None if x is None or y is None else product(x, y)


def _add(x: jax.Array | None, y: jax.Array | None) -> jax.Array | None:
    return y if x is None else x if y is None else x + y


def _neg(x: jax.Array | None) -> jax.Array | None:
    return None if x is None else -x


# ----------------------------------------------------------------------------------------------
# φ

# φ(X) = Σ_{k≥0} X^k/(k+1)! on the scaled matrix: the Taylor degree that makes the truncation
# error (1/2)^{m+1}/(m+2)! fall below the unit roundoff once ‖X‖₁ ≤ 1/2.
_PHI_THETA = 0.5
_PHI_DEGREE = {jnp.dtype(jnp.float32): 7, jnp.dtype(jnp.float64): 13}


def phi(x: jax.Array) -> jax.Array:
    r"""``φ(X) = Σ_{k≥0} X^k/(k+1)!`` (so ``exp(X) = I + Xφ(X)``) of real ``(..., m, m)`` matrices.

    Scaling and squaring: ``Z = X/2^s`` with ``‖Z‖₁ ≤ 1/2``, a Taylor polynomial of ``φ(Z)`` by
    Paterson–Stockmeyer (4 products in float32, 6 in float64), then ``s`` doublings
    ``φ(2Z) = φ(Z)(I + ½Zφ(Z))``. One ``s`` serves the whole batch, so the doublings are skipped
    by ``lax.cond`` rather than computed and masked; the loop is a fixed-length ``scan``, so
    reverse-mode differentiation works.
    """
    degree = _PHI_DEGREE[jnp.dtype(x.dtype)]
    norm = jnp.max(jnp.sum(jnp.abs(x), axis=-2))
    squarings = jnp.clip(jnp.ceil(jnp.log2(norm / _PHI_THETA)), 0, MAX_SQUARINGS).astype(jnp.int32)
    z = x * jnp.exp2(-squarings.astype(x.dtype))
    f = _phi_taylor(z, degree)

    def double(carry: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        f, z = carry
        return f + 0.5 * mm(f, mm(z, f)), 2 * z

    def body(carry: tuple[jax.Array, jax.Array], i: jax.Array
             ) -> tuple[tuple[jax.Array, jax.Array], None]:
        return lax.cond(i < squarings, double, lambda c: c, carry), None

    (f, _), _ = lax.scan(body, (f, z), jnp.arange(MAX_SQUARINGS, dtype=jnp.int32))
    return f


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
