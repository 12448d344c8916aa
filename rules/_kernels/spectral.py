r"""Spectral decompositions and functions of Hermitian matrices, on ``(..., n, n)`` batches.

:func:`eigh` and :func:`svd` are the decompositions the rules ``rules.eigh`` and ``rules.svd``
differentiate: Jacobi rotations on whole batch arrays for tiny real matrices (:mod:`.small`, on
every platform), JAX's otherwise. :func:`spectral_function` and :func:`daleckii_krein` are the one
implementation of functions of Hermitian matrices and their derivative, which exists at repeated
eigenvalues (the rules ``rules.sqrtmh``, ``logmh``, ``powmh``, ``hermitian_function``, and
:func:`matrix_function`/:func:`sym_function` here):

.. math::
    f(A) = Q f(\Lambda) Q^H, \qquad Df(A)[\dot A] = Q\,\big(F \circ Q^H\dot A Q\big)\,Q^H, \qquad
    F_{ij} = \frac{f(\lambda_i) - f(\lambda_j)}{\lambda_i - \lambda_j}, \quad F_{ii} = f'(\lambda_i).

:func:`polar_factor` and :func:`arctan_sv` are matrix functions of ``AᴴA`` built on it.
Derivation: ``docs/derivations/hermitian-functions.md``.
"""
from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero

from .._core.arrays import HIGHEST, conj, hermitian_part, mH
from .._core.rule import Rule
from . import jax_ops
from .products import mm, mm_h
from .qr import gram_defect
from .small import jacobi_applies, jacobi_eigh, jacobi_svd

__all__ = ["Elementwise", "Log", "Power", "ScalarFunction", "Spectrum", "Sqrt", "arctan_sv",
           "clip_rounding", "daleckii_krein", "divided_differences", "eigh",
           "log_divided_differences", "matrix_function", "polar_factor",
           "power_divided_differences", "second_divided_differences", "spectral_function", "svd",
           "sym_function"]


def eigh(a: jax.Array, *, lower: bool = True, symmetrize_input: bool = True
         ) -> tuple[jax.Array, jax.Array]:
    """``(λ, V)`` of Hermitian ``(..., n, n)`` matrices, ``λ`` ascending, as ``jnp.linalg.eigh``.

    Tiny real matrices (:func:`~.small.jacobi_applies`) take cyclic Jacobi
    (:func:`~.small.jacobi_eigh`), whose eigenvector signs may differ from LAPACK's.
    """
    if jacobi_applies(a):
        return jacobi_eigh(a, lower, symmetrize_input)
    w, v = jax_ops.eigh(a, UPLO="L" if lower else "U", symmetrize_input=symmetrize_input)
    return w, v


def svd(a: jax.Array, *, full_matrices: bool) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(U, s, Vh)`` of ``(..., m, n)`` matrices, ``s`` descending, as ``jnp.linalg.svd``.

    Tiny real square matrices take one-sided Jacobi (:func:`~.small.jacobi_svd`).
    """
    if jacobi_applies(a):
        return jacobi_svd(a)
    u, s, vh = jax_ops.svd(a, full_matrices=full_matrices)
    return u, s, vh


# ==============================================================================================
# Functions of Hermitian matrices: f(A) = Q f(Λ) Qᴴ and its Daleckii–Krein derivatives


class ScalarFunction(abc.ABC):
    """An elementwise function ``f`` of the eigenvalues, with its first divided differences.

    Subclasses are frozen dataclasses, equal and hashed by value (a rule's static argument). They
    define ``f`` (``__call__``) and may refine the divided differences (closed forms without
    cancellation), the slope ``f'`` (JAX's derivative of ``f`` by default) and the eigenvalues
    ``f`` is evaluated at (:meth:`prepare`).
    """

    @abc.abstractmethod
    def __call__(self, w: jax.Array) -> jax.Array:
        """``f(λ)``, elementwise, of the dtype of ``λ``."""

    def slope(self, w: jax.Array) -> jax.Array:
        """``f'(λ)``: a JVP of the elementwise ``f`` with tangent 1."""
        return jax.jvp(self, (w,), (jnp.ones_like(w),))[1]

    def prepare(self, w: jax.Array) -> jax.Array:
        """The eigenvalues ``f`` is evaluated at (the computed ones by default)."""
        return w

    def divided_differences(self, w: jax.Array, fw: jax.Array, d1: jax.Array,
                            d2: jax.Array) -> jax.Array:
        """``F_ij = f[λ_i, λ_j]``: :func:`divided_differences` unless a closed form is known."""
        return divided_differences(w, fw, d1, d2)


@dataclasses.dataclass(frozen=True)
class Elementwise(ScalarFunction):
    """A given elementwise ``f`` (its output cast to the eigenvalues' dtype) and slope ``df``
    (``None``: JAX's derivative of ``f``)."""

    f: Callable[[jax.Array], jax.Array]
    df: Callable[[jax.Array], jax.Array] | None = None

    def __call__(self, w: jax.Array) -> jax.Array:
        return jnp.asarray(self.f(w)).astype(w.dtype)

    def slope(self, w: jax.Array) -> jax.Array:
        if self.df is None:
            return super().slope(w)
        return jnp.asarray(self.df(w)).astype(w.dtype)


@dataclasses.dataclass(frozen=True)
class Sqrt(ScalarFunction):
    r"""``√λ``; ``F_ij = 1/(√λ_i + √λ_j)``, without cancellation. Eigenvalues below 0 by rounding
    only are taken as 0 (:func:`clip_rounding`)."""

    def __call__(self, w: jax.Array) -> jax.Array:
        return jnp.sqrt(w)

    def prepare(self, w: jax.Array) -> jax.Array:
        return clip_rounding(w)

    def divided_differences(self, w: jax.Array, fw: jax.Array, d1: jax.Array,
                            d2: jax.Array) -> jax.Array:
        return 1 / (fw[..., :, None] + fw[..., None, :])


@dataclasses.dataclass(frozen=True)
class Log(ScalarFunction):
    """``log λ``, with :func:`log_divided_differences`."""

    def __call__(self, w: jax.Array) -> jax.Array:
        return jnp.log(w)

    def divided_differences(self, w: jax.Array, fw: jax.Array, d1: jax.Array,
                            d2: jax.Array) -> jax.Array:
        return log_divided_differences(w)


@dataclasses.dataclass(frozen=True)
class Power(ScalarFunction):
    r"""``λ^p`` as ``jnp.power`` computes it (an ``int`` ``p``: ``lax.integer_pow``, defined at
    negative ``λ``), with :func:`power_divided_differences`. For a non-integer ``p``, eigenvalues
    below 0 by rounding only are taken as 0 (:func:`clip_rounding`)."""

    p: int | float

    def __call__(self, w: jax.Array) -> jax.Array:
        return jnp.power(w, self.p)

    def prepare(self, w: jax.Array) -> jax.Array:
        return w if isinstance(self.p, int) else clip_rounding(w)

    def divided_differences(self, w: jax.Array, fw: jax.Array, d1: jax.Array,
                            d2: jax.Array) -> jax.Array:
        return power_divided_differences(w, self.p, fw, d1, d2)


class Spectrum(NamedTuple):
    """What ``f(A) = Q f(Λ) Qᴴ`` keeps for its derivatives (:func:`daleckii_krein`).

    ``a``: the input, whose tangent the second derivative reads; ``w``: the eigenvalues ``λ``
    (ascending, after :meth:`ScalarFunction.prepare`); ``q``: the eigenvectors ``Q``; ``slopes``:
    ``F_ij = f[λ_i, λ_j]`` (real); ``curvature``: ``f''(λ)``.
    """

    a: jax.Array
    w: jax.Array
    q: jax.Array
    slopes: jax.Array
    curvature: jax.Array


def spectral_function(fn: ScalarFunction, a: jax.Array) -> tuple[jax.Array, Spectrum]:
    """``f(A) = Q f(Λ) Qᴴ`` of the Hermitian part of ``(..., n, n)`` ``a``, and its :class:`Spectrum`.

    The eigendecomposition is :func:`eigh`'s; the output is Hermitian to the last bit (real
    symmetric for real ``a``). ``f'`` and ``f''`` at the eigenvalues are one nested JVP of
    ``fn.slope``. Differentiated by JAX, ``f(A)`` has the derivative :func:`daleckii_krein` (and
    its second derivative), never that of the eigendecomposition.
    """
    w, q = eigh(a)
    w = fn.prepare(w)
    fw = fn(w)
    d1, d2 = jax.jvp(fn.slope, (w,), (jnp.ones_like(w),))
    spectrum = Spectrum(a, w, q, fn.divided_differences(w, fw, d1, d2), d2)
    out = hermitian_part(mm(q * fw.astype(q.dtype)[..., None, :], mH(q)))
    return _with_derivative(out, spectrum), spectrum


@jax.custom_jvp
def _with_derivative(out: jax.Array, spectrum: Spectrum) -> jax.Array:
    """``out = f(A)``, whose tangent is :func:`daleckii_krein` of the tangent of ``spectrum.a``.

    ``out`` and the other fields of ``spectrum`` are functions of ``a`` through the
    eigendecomposition, whose derivative does not exist at repeated eigenvalues: their tangents
    are not read.
    """
    return out


def _with_derivative_jvp(primals, tangents):
    out, spectrum = primals
    a_dot = tangents[1].a
    if isinstance(a_dot, SymbolicZero):
        return out, jnp.zeros_like(out)
    return out, daleckii_krein(hermitian_part(a_dot), spectrum)


_with_derivative.defjvp(_with_derivative_jvp, symbolic_zeros=True)


@jax.custom_jvp
def daleckii_krein(x: jax.Array, spectrum: Spectrum) -> jax.Array:
    r"""``Df(A)[X] = Q (F ∘ QᴴXQ) Qᴴ`` for Hermitian ``X`` (Daleckii–Krein), Hermitian output.

    Linear in ``X``: the pushforward of ``f(A)`` and, being self-adjoint for ``Re tr(XᴴY)``, its
    pullback too. Its own derivative in ``A`` (second derivatives of ``f(A)``) is the
    second-order Daleckii–Krein formula, which exists at repeated eigenvalues:

    .. math::
        \frac{d}{dt} Df(A + t\dot A)[X] = Q\,(S + S^H)\,Q^H, \qquad
        S_{ij} = \sum_k f[\lambda_i, \lambda_k, \lambda_j]\, N_{ik} M_{kj},

    ``N = QᴴȦQ`` (Hermitian part of ``Ȧ``), ``M = QᴴXQ``, second divided differences by
    :func:`second_divided_differences`. Only the tangent of ``spectrum.a`` is read: the other
    fields are functions of ``a``, whose derivatives through the eigendecomposition would not exist
    at repeated eigenvalues.
    """
    q = spectrum.q
    m = mm_h(q, mm(x, q))
    return _from_eigenbasis(q, spectrum.slopes.astype(m.dtype) * m)


def _daleckii_krein_jvp(primals, tangents):
    x, spectrum = primals
    x_dot, spectrum_dot = tangents
    out = daleckii_krein(x, spectrum)
    q = spectrum.q
    inner = None
    if not isinstance(x_dot, SymbolicZero):
        m_dot = mm_h(q, mm(x_dot, q))
        inner = spectrum.slopes.astype(m_dot.dtype) * m_dot
    if not isinstance(spectrum_dot.a, SymbolicZero):
        n = mm_h(q, mm(hermitian_part(spectrum_dot.a), q))
        m = mm_h(q, mm(x, q))
        t = second_divided_differences(spectrum.w, spectrum.slopes, spectrum.curvature)
        s = jnp.einsum("...ikj,...ik,...kj->...ij", t.astype(m.dtype), n, m, precision=HIGHEST)
        inner = s + mH(s) if inner is None else inner + s + mH(s)
    if inner is None:
        return out, jnp.zeros_like(out)
    return out, _from_eigenbasis(q, inner)


daleckii_krein.defjvp(_daleckii_krein_jvp, symbolic_zeros=True)


def _from_eigenbasis(q: jax.Array, inner: jax.Array) -> jax.Array:
    return hermitian_part(mm(q, mm(inner, mH(q))))


def _matrix_function_forward(a, *, fn):
    return spectral_function(fn, a)


def _matrix_function_pushforward(spectrum, a_dot, *, fn):
    """``Ẏ = Q (F ∘ Qᴴ H(Ȧ) Q) Qᴴ``."""
    del fn
    return daleckii_krein(hermitian_part(a_dot), spectrum)


def _matrix_function_pullback(spectrum, y_bar, *, fn):
    """``Ā = conj(L(conj Ȳ))``: ``L``, the pushforward, is self-adjoint for ``Re tr(XᴴY)``, and
    this is its transpose for JAX's bilinear pairing (``docs/derivations/conventions.md``)."""
    del fn
    return (conj(daleckii_krein(conj(hermitian_part(y_bar)), spectrum)),)


_matrix_function = Rule("hermitian_function", _matrix_function_forward,
                        _matrix_function_pushforward, _matrix_function_pullback)


def matrix_function(fn: ScalarFunction, a: jax.Array) -> jax.Array:
    r"""``f(A) = Q f(Λ) Qᴴ`` of the Hermitian part of ``a``: a rule (:class:`~rules._core.rule.Rule`)
    with the Daleckii–Krein pushforward and pullback.

    .. math::
        \dot Y = L(\dot A) = Q\,\big(F \circ Q^H H(\dot A)\,Q\big)\,Q^H, \qquad
        \bar A = \overline{L(\overline{\bar Y})}

    with ``H(X) = (X + Xᴴ)/2`` (:func:`daleckii_krein`; ``L`` is self-adjoint, so the pullback in
    JAX's convention is ``conj ∘ L ∘ conj``). Second derivatives, in every composition of forward
    and reverse mode, are :func:`daleckii_krein`'s second-order formula: the forward's output,
    the pushforward and the pullback are each differentiated through it, never through the
    eigendecomposition. The one implementation of functions of Hermitian matrices: the rules
    ``rules.sqrtmh``, ``logmh``, ``powmh`` and ``hermitian_function`` are this rule.
    """
    return _matrix_function(a, fn=fn)


def sym_function(f: Callable[[jax.Array], jax.Array], df: Callable[[jax.Array], jax.Array],
                 a: jax.Array) -> jax.Array:
    r"""``f(A) = Q f(Λ) Qᴴ`` for Hermitian ``(..., m, m)`` matrices ``A = QΛQᴴ``, with the exact
    derivative at repeated eigenvalues.

    .. math::
        Df(A)[\dot A] = Q\,\big(F \circ Q^H\dot A Q\big)\,Q^H, \qquad
        F_{ij} = \frac{f(\lambda_i) - f(\lambda_j)}{\lambda_i - \lambda_j}, \quad
        F_{ii} = f'(\lambda_i)

    (Daleckii–Krein). Differentiating through ``eigh`` instead divides by ``λᵢ - λⱼ`` and gives
    nan at repeated eigenvalues, though ``f(A)`` is smooth there. ``F`` is
    :func:`divided_differences`' (the limit ``f'`` taken where eigenvalues are close), second
    derivatives :func:`daleckii_krein`'s. :func:`matrix_function` of :class:`Elementwise`.

    Args:
      f: elementwise function of the eigenvalues (a hashable callable, e.g. a module function).
      df: its derivative.
      a: Hermitian matrices; only ``(a + aᴴ)/2`` is used.

    References:
      N. J. Higham, "Functions of Matrices: Theory and Computation" (2008), Thm. 3.11.
    """
    return matrix_function(Elementwise(f, df), a)


# ----------------------------------------------------------------------------------------------
# Divided differences


def clip_rounding(w: jax.Array) -> jax.Array:
    """Eigenvalues in ``[-n·ε·max|λ|, 0)`` as 0: a positive semidefinite matrix's zero eigenvalues,
    moved below 0 by the rounding of the matrix or of the eigensolver (both of that size). Lower
    ones stay negative, where ``√λ`` or ``λ^p`` is NaN."""
    tol = w.shape[-1] * float(jnp.finfo(w.dtype).eps) * jnp.max(jnp.abs(w), axis=-1,
                                                                   keepdims=True, initial=0.0)
    return jnp.where((w < 0) & (w >= -tol), 0, w)


def divided_differences(w: jax.Array, fw: jax.Array, d1: jax.Array, d2: jax.Array) -> jax.Array:
    r"""``F_ij = f[λ_i, λ_j]`` from ``f``, ``f'`` and ``f''`` at the eigenvalues, shape ``(..., n, n)``.

    The quotient ``(f(λ_i) - f(λ_j))/(λ_i - λ_j)`` loses to cancellation about
    ``e = ε(|f(λ_i)| + |f(λ_j)|)/|λ_i - λ_j|``; the corrected trapezoidal rule for
    ``∫ f'``,

    .. math::
        f[\lambda_i, \lambda_j] \approx \tfrac12\big(f'(\lambda_i) + f'(\lambda_j)\big)
        - \tfrac1{12}(\lambda_i - \lambda_j)\big(f''(\lambda_i) - f''(\lambda_j)\big),

    is exact for cubic ``f`` and otherwise errs by ``O(|λ_i - λ_j|⁴ f⁽⁵⁾)``. The trapezoidal value
    is taken where it agrees with the quotient to within ``4e`` (then it is the more accurate:
    the two differ by about the larger of their errors) and where ``λ_i = λ_j`` (the limit
    ``f'``); the quotient elsewhere. The choice needs no scale of ``f``'s variation, which a
    tolerance on ``|λ_i - λ_j|`` would (``exp`` varies on a scale of 1, ``log`` on the scale
    ``λ``).
    """
    wi, wj = w[..., :, None], w[..., None, :]
    fi, fj = fw[..., :, None], fw[..., None, :]
    d = wi - wj
    equal = d == 0
    safe = jnp.where(equal, 1, d)
    quotient = (fi - fj) / safe
    correction = jnp.where(equal, 0, d * (d2[..., :, None] - d2[..., None, :]) / 12)
    trapezoid = 0.5 * (d1[..., :, None] + d1[..., None, :]) - correction
    cancellation = 4 * float(jnp.finfo(w.dtype).eps) * (jnp.abs(fi) + jnp.abs(fj)) / jnp.abs(safe)
    return jnp.where(equal | (jnp.abs(trapezoid - quotient) <= cancellation), trapezoid, quotient)


def _ordered_pairs(w: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(lo, hi, x)``: the smaller and larger eigenvalue of each pair, ``x = (hi - lo)/lo``."""
    wi, wj = w[..., :, None], w[..., None, :]
    lo, hi = jnp.minimum(wi, wj), jnp.maximum(wi, wj)
    return lo, hi, (hi - lo) / lo


def log_divided_differences(w: jax.Array) -> jax.Array:
    r"""``L_ij = (log λ_i - log λ_j)/(λ_i - λ_j)``, ``1/λ_i`` where ``λ_i = λ_j``: the matrix of ``D log``.

    As ``log1p(x)/(x·λ_lo)`` with ``x = (λ_hi - λ_lo)/λ_lo ≥ 0`` for the smaller ``λ_lo`` and larger
    ``λ_hi`` of the pair: ``x`` is exact to rounding (the difference of close eigenvalues is
    exact), and ``log1p(x)/x`` is accurate for every ``x ≥ 0``, so no cancellation at any gap.
    A zero eigenvalue gives ``inf``, a negative one NaN.
    """
    lo, hi, x = _ordered_pairs(w)
    zero = x == 0
    near = jnp.where(zero, 1, jnp.log1p(x) / jnp.where(zero, 1, x)) / lo
    # x overflows (or is 0/0) for λ_lo = 0 or subnormal: the plain quotient, inf at λ_lo = 0.
    far = (jnp.log(hi) - jnp.log(lo)) / jnp.where(hi == lo, 1, hi - lo)
    return jnp.where(lo >= 0, jnp.where(jnp.isfinite(x), near, far), jnp.nan)


def power_divided_differences(w: jax.Array, p: int | float, fw: jax.Array, d1: jax.Array,
                              d2: jax.Array) -> jax.Array:
    r"""``F_ij = (λ_i^p - λ_j^p)/(λ_i - λ_j)``, ``p λ_i^{p-1}`` where ``λ_i = λ_j``.

    For positive pairs ``λ_lo^{p-1} · expm1(p·log1p(x))/x`` with ``x = (λ_hi - λ_lo)/λ_lo``:
    no cancellation at any gap (as in :func:`log_divided_differences`). Pairs with a zero or
    negative eigenvalue (an integer ``p``), and the rare positive pair where an intermediate
    overflows, take :func:`divided_differences`.
    """
    lo, _, x = _ordered_pairs(w)
    zero = x == 0
    ratio = jnp.where(zero, p, jnp.expm1(p * jnp.log1p(x)) / jnp.where(zero, 1, x))
    near = jnp.power(lo, p - 1) * ratio
    return jnp.where((lo > 0) & jnp.isfinite(near), near, divided_differences(w, fw, d1, d2))


def second_divided_differences(w: jax.Array, slopes: jax.Array, curvature: jax.Array) -> jax.Array:
    r"""``T_ikj = f[λ_i, λ_k, λ_j]``, shape ``(..., n, n, n)``, from ``F`` and ``f''(λ)``.

    The second divided difference is symmetric in its three points and has three quotients of
    first ones,

    .. math::
        f[\lambda_i, \lambda_k, \lambda_j] = \frac{F_{ik} - F_{kj}}{\lambda_i - \lambda_j}
        = \frac{F_{ij} - F_{kj}}{\lambda_i - \lambda_k} = \frac{F_{ik} - F_{ij}}{\lambda_k - \lambda_j};

    the one with the widest pair is taken. Where all three points are close,
    ``(f''(λ_i) + f''(λ_k) + f''(λ_j))/6`` (exact for cubic ``f``, ``f''/2`` at a triple
    eigenvalue) replaces it when the two agree to within the quotient's error, estimated as
    ``ε^{3/4}(|F_a| + |F_b|)/|λ_a - λ_b|`` (``F`` itself carries up to about that relative error,
    :func:`divided_differences`).
    """
    wi, wk, wj = w[..., :, None, None], w[..., None, :, None], w[..., None, None, :]
    f_ik, f_kj, f_ij = slopes[..., :, :, None], slopes[..., None, :, :], slopes[..., :, None, :]
    d_ij, d_ik, d_kj = wi - wj, wi - wk, wk - wj
    first = (jnp.abs(d_ij) >= jnp.abs(d_ik)) & (jnp.abs(d_ij) >= jnp.abs(d_kj))
    second = ~first & (jnp.abs(d_ik) >= jnp.abs(d_kj))
    u = jnp.where(first | ~second, f_ik, f_ij)
    v = jnp.where(first | second, f_kj, f_ij)
    den = jnp.where(first, d_ij, jnp.where(second, d_ik, d_kj))
    equal = den == 0
    safe = jnp.where(equal, 1, den)
    quotient = (u - v) / safe
    close = (curvature[..., :, None, None] + curvature[..., None, :, None]
             + curvature[..., None, None, :]) / 6
    error = float(jnp.finfo(w.dtype).eps) ** 0.75 * (jnp.abs(u) + jnp.abs(v)) / jnp.abs(safe)
    return jnp.where(equal | (jnp.abs(close - quotient) <= error), close, quotient)


def polar_factor(z: jax.Array) -> jax.Array:
    """``z (zᵀz)^{-1/2}``, the orthonormal frame nearest to the m×k ``z``, in O(mk²).

    ``(zᵀz)^{-1/2}`` by :func:`matrix_function` of :class:`Power` ``-1/2`` (its derivative exists
    where ``zᵀz`` has repeated eigenvalues, at an orthonormal ``z`` for one), then one Newton–Schulz step
    ``y(3I - yᵀy)/2 = y - ½y E``, ``E = yᵀy - I``: eigenvectors are orthonormal only to about
    ``k·ε``, and the step, which converges quadratically to the same polar factor, leaves the
    error with which ``E`` is computed. Written as a correction (``½yE`` is of the size of ``E``,
    so its rounding is negligible) with :func:`~.qr.gram`'s accurate diagonal.
    """
    y = mm(z, matrix_function(Power(-0.5), mm_h(z, z)))
    return y - 0.5 * mm(y, gram_defect(y))


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
