"""Rules of orthogonal factorizations: QR and LQ.

Complex convention. The pullbacks are derived, as in the papers, for the real inner product
``<X, Y> = Re tr(Xᴴ Y)``; JAX's cotangents are the complex conjugates of those
(``docs/derivations/conventions.md``), so the rule's pullback is ``conj(pullback(conj(ȳ)))``; for
real dtypes ``conj`` adds no operation. The pushforwards need no such care: a tangent is a tangent.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NamedTuple, overload

import jax
import jax.numpy as jnp
from jax import lax
from jax.typing import ArrayLike

from .._core.arrays import conj, copyltu, eye_like, mH
from .._core.checks import as_inexact_matrix
from .._core.dispatch import jitted
from .._core.rule import Rule
from .._kernels import jax_ops, products, routes

__all__ = ["LQResult", "QRResult", "lq", "qr"]

if TYPE_CHECKING:  # the same class, for type checkers
    from jax._src.numpy.linalg import QRResult
else:  # JAX's own result class (``jax.numpy.linalg`` does not export it)
    QRResult = type(jax.eval_shape(lambda: jax_ops.qr(jnp.zeros((1, 1), jnp.float32))))
"""``(Q, R)`` of :func:`qr`: the class ``jnp.linalg.qr`` returns, so that results and cotangents of
``rules.qr`` and ``jnp.linalg.qr`` are interchangeable pytrees."""


class LQResult(NamedTuple):
    """``(L, Q)`` of :func:`lq`."""

    L: jax.Array
    Q: jax.Array


def mm(a, b):
    """:func:`rules._kernels.products.mm` unrolled up to ``routes.QR_UNROLL_MAX`` on the CPU:
    batches of small QRs, whose products XLA:CPU's dot runs slice by slice. The same limit for
    single matrices keeps a slice of a batch and the batch computed alike."""
    return products.mm(a, b, unroll=routes.QR_UNROLL_MAX)


def mm_h(a, b):
    """:func:`rules._kernels.products.mm_h` with QR's unroll size: ``aᴴ b``, ``aᴴ`` laid out."""
    return products.mm_h(a, b, unroll=routes.QR_UNROLL_MAX)


# ==============================================================================================
# QR decomposition

_QR_MODES = ("reduced", "complete", "r", "raw", "full")


@overload
def qr(a: ArrayLike, mode: Literal["r"]) -> jax.Array: ...
@overload
def qr(a: ArrayLike, mode: Literal["reduced", "complete", "raw", "full"] = "reduced") -> QRResult: ...
@jitted("mode")
def qr(a: ArrayLike, mode: str = "reduced") -> jax.Array | QRResult:
    r"""QR decomposition with explicit pushforwards and pullbacks for tall, square and wide matrices.

    ``A = QR`` with ``Q`` orthonormal columns and ``R`` upper triangular/trapezoidal; the outputs,
    their types and the accepted modes and dtypes are exactly those of ``jnp.linalg.qr(a, mode)``.
    With ``k = min(m, n)``:

    * ``mode="reduced"`` (and its alias ``"full"``): ``Q`` of shape ``(..., m, k)``, ``R`` of
      shape ``(..., k, n)``;
    * ``mode="complete"``: ``Q`` of shape ``(..., m, m)``, ``R`` of shape ``(..., m, n)``;
    * ``mode="r"``: ``R`` only, shape ``(..., k, n)``;
    * ``mode="raw"``: LAPACK's Householder representation ``(H, τ)``, computed and differentiated
      by JAX (which has no derivative for it).

    Pushforward for ``m ≥ n`` (Walter & Lehmann), with ``X = Ȧ R⁻¹`` and ``C = QᴴX``:
    ``Ṙ = (C − Ω) R``, ``Q̇ = X − Q(C − Ω)``, where ``Ω`` is the skew-Hermitian part of ``C``
    built from its strict lower triangle. Pullback for ``m ≥ n`` (Seeger et al.; Liao et al.), in
    the papers' convention:

    .. math::
        M = R\bar R^H - \bar Q^H Q, \qquad \bar A = (\bar Q + Q\,\mathrm{copyltu}(M))\,R^{-H}

    with ``copyltu(M) = tril(M, -1) + tril(M, -1)ᴴ + Re diag(M)`` and ``R⁻ᴴ`` applied by a
    triangular solve. For ``m < n`` (Roberts & Roberts) split ``A = [X | Y]``, ``R = [U | V]``:
    ``Ȳ = Q V̄`` and ``X̄`` is the square rule at ``(Q, U)`` with cotangents ``(Q̄ + Y V̄ᴴ, Ū)``.
    ``mode="complete"`` with ``m > n`` adds the compact-WY derivative of the last ``m − n``
    columns of ``Q`` (Papanicolopulos) and its transpose, so both agree with JAX's
    ``jnp.linalg.qr``. Derivation: ``docs/derivations/qr.md``.

    Args:
      a: array of shape ``(..., m, n)``; integer and boolean arrays are promoted as
        ``jnp.linalg.qr`` promotes them; float16/bfloat16 go to JAX's forward (on CPU it raises
        ``NotImplementedError``, as ``jnp.linalg.qr`` does).
      mode: ``"reduced"``, ``"complete"``, ``"r"``, ``"raw"`` or ``"full"``.

    Returns:
      ``QRResult(Q, R)`` (``jnp.linalg.qr``'s own result type), or ``R`` for ``mode="r"``.

    Raises:
      TypeError: ``a`` is not an array of a numeric dtype.
      ValueError: ``a`` has rank < 2, or ``mode`` is unknown.

    Notes:
      Gauge: like LAPACK (and ``jnp.linalg.qr``) the signs of ``diag(R)`` are not forced positive
      (complex: ``diag(R)`` is real). The derivative is that of the locally constant sign branch;
      losses that depend on the signs of ``Q``'s columns are not smooth functions of ``A``.
      The wide case needs the leading ``m × m`` block of ``A`` to be nonsingular, the tall case
      ``A`` of full column rank: the derivatives grow like ``1/σ_min``.
      Residuals: ``Q`` and ``R``.

    References:
      M. Seeger et al., "Auto-differentiating linear algebra", arXiv:1710.08717.
      H.-J. Liao et al., "Differentiable programming tensor networks", arXiv:1903.09650.
      D. Roberts, L. Roberts, "QR and LQ decomposition matrix backpropagation algorithms for
      square, wide, and deep matrices", arXiv:2009.10071.
      S. F. Walter, L. Lehmann, "Algorithmic differentiation of linear algebra functions with
      application in optimum experimental design", arXiv:1001.1654.
      S.-A. Papanicolopulos, "Computation of the complete QR derivative", arXiv:2409.13374.

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a = jnp.array([[3.0, 1.0], [4.0, 2.0], [0.0, 1.0]])
      >>> q, r = rules.qr(a)
      >>> bool(jnp.allclose(q @ r, a, atol=1e-6))
      True
      >>> r_dot = jax.jvp(lambda a: rules.qr(a, mode="r"), (a,), (a,))[1]  # R is homogeneous
      >>> bool(jnp.allclose(r_dot, rules.qr(a, mode="r"), atol=1e-6))
      True
    """
    a = as_inexact_matrix("qr", "a", a)
    if mode not in _QR_MODES:
        raise ValueError(f"qr: `mode` must be one of 'reduced', 'complete', 'r', 'raw', 'full'; "
                         f"got {mode!r}.")
    if mode == "raw":
        return jax_ops.qr(a, mode="raw")
    return _qr(a, mode="reduced" if mode == "full" else mode)


def _qr_forward(a, *, mode):
    q, r = jax_ops.qr(a, mode="complete" if mode == "complete" else "reduced")
    return (r if mode == "r" else QRResult(q, r)), (q, r, _wide_block(a))


def _wide_block(a):
    """``Y = A[..., :, m:]`` of a wide ``A``, else ``None``: a residual of the wide rules.

    Both derivatives need ``Y = QV``; keeping the input block saves that m × m × (n − m) product.
    """
    m, n = a.shape[-2:]
    return a[..., :, m:] if m < n else None


def _qr_pushforward(res, a_dot, *, mode):
    q, r, y = res
    q_dot, r_dot = qr_pushforward(q, r, a_dot, y)
    return r_dot if mode == "r" else QRResult(q_dot, r_dot)


def _qr_pullback(res, ct, *, mode):
    q, r, y = res
    q_bar, r_bar = (None, ct) if mode == "r" else ct
    q_bar = None if q_bar is None else conj(q_bar)
    return (conj(qr_pullback(q, r, q_bar, conj(r_bar), y)),)


_qr = Rule("qr", _qr_forward, _qr_pushforward, _qr_pullback)


def qr_pushforward(q, r, a_dot, y=None):
    """Tangents ``(Q̇, Ṙ)`` of ``A = QR`` (reduced or complete, any shape) from ``Ȧ``.

    ``y``: for a wide ``A``, its block ``A[..., :, m:]`` if at hand (else computed as ``QV``).
    """
    m, n = q.shape[-2], r.shape[-1]
    if m >= n:
        complete = q.shape[-1] == m and m > n
        q1, r1 = (q[..., :, :n], r[..., :n, :]) if complete else (q, r)
        q_dot, r_dot = _thin_qr_pushforward(q1, r1, a_dot)
        if not complete:
            return q_dot, r_dot
        # JAX's tangent of the last m − n columns of a complete Q (arXiv:2409.13374, eqs. 32–33).
        q2 = q[..., :, n:]
        z = _complete_z(q1, n)
        q2_dot = mm(q_dot, mH(z)) - mm(q1 + mm(q2, z), mH(q_dot[..., n:, :] - mm(z, q_dot[..., :n, :])))
        zeros = jnp.zeros((*r_dot.shape[:-2], m - n, n), r_dot.dtype)
        return jnp.concatenate([q_dot, q2_dot], -1), jnp.concatenate([r_dot, zeros], -2)
    # Wide: A = [X | Y], R = [U | V] with X = QU and V = QᴴY.
    x_dot, y_dot = a_dot[..., :, :m], a_dot[..., :, m:]
    u, v = r[..., :, :m], r[..., :, m:]
    q_dot, u_dot = _thin_qr_pushforward(q, u, x_dot)
    y = mm(q, v) if y is None else y
    return q_dot, jnp.concatenate([u_dot, mm_h(q_dot, y) + mm_h(q, y_dot)], -1)


def _thin_qr_pushforward(q, r, a_dot):
    """Walter & Lehmann: ``X = Ȧ R⁻¹``, ``C = QᴴX``, ``Ṙ = (C - Ω)R``, ``Q̇ = X - Q(C - Ω)``."""
    x = lax.linalg.triangular_solve(r, a_dot, left_side=False, lower=False)
    c = mm_h(q, x)
    low = jnp.tril(c, -1)
    # Ω = QᴴQ̇ is skew-Hermitian; its diagonal is imaginary because diag(R) stays real.
    omega = low - mH(low) + _imag_diag(c)
    upper = c - omega  # = Ṙ R⁻¹, upper triangular
    return x - mm(q, upper), mm(upper, r)


def _imag_diag(c):
    d = jnp.diagonal(c, axis1=-2, axis2=-1)
    d = (d - d.real.astype(d.dtype)) if jnp.iscomplexobj(d) else jnp.zeros_like(d)
    return d[..., :, None] * eye_like(c)


def qr_pullback(q, r, q_bar, r_bar, y=None):
    """Pullback of ``A = QR`` in the papers' convention (``Re tr(Xᴴ Y)``), any shape and mode.

    ``q`` and ``r`` are the outputs of the forward (reduced or complete); ``q_bar`` may be ``None``
    (``mode="r"``); ``y`` as in :func:`qr_pushforward`. Returns ``Ā`` of shape ``(..., m, n)``.
    """
    m, n = q.shape[-2], r.shape[-1]
    if m > n and q.shape[-1] == m:  # complete mode of a tall matrix
        q_bar = None if q_bar is None else _complete_q_bar(q, q_bar, n)
        q, r, r_bar = q[..., :, :n], r[..., :n, :], r_bar[..., :n, :]
    if m >= n:
        return _thin_qr_pullback(q, r, q_bar, r_bar)
    # Wide: A = [X | Y], R = [U | V] with X = QU and V = QᴴY, hence Y = QV.
    u, v = r[..., :, :m], r[..., :, m:]
    u_bar, v_bar = r_bar[..., :, :m], r_bar[..., :, m:]
    # Y V̄ᴴ, the Q-cotangent that V passes on (Y = QV).
    q_bar_x = mm(q, mm(v, mH(v_bar))) if y is None else mm(y, mH(v_bar))
    q_bar_x = q_bar_x if q_bar is None else q_bar + q_bar_x
    x_bar = _thin_qr_pullback(q, u, q_bar_x, u_bar)
    return jnp.concatenate([x_bar, mm(q, v_bar)], axis=-1)


def _thin_qr_pullback(q, r, q_bar, r_bar):
    """``Ā = (Q̄ + Q copyltu(M)) R⁻ᴴ``, ``M = R R̄ᴴ - Q̄ᴴQ``, for ``m ≥ n`` (reduced ``Q``)."""
    b = mm(q, _copyltu_m(q, r, q_bar, r_bar))
    if q_bar is not None:
        b = b + q_bar
    # B R⁻ᴴ by a triangular solve, never an explicit inverse of R.
    return lax.linalg.triangular_solve(r, b, left_side=False, lower=False, transpose_a=True,
                                       conjugate_a=True)


def _copyltu_m(q, r, q_bar, r_bar):
    """``copyltu(M)``, ``M = R R̄ᴴ - Q̄ᴴQ``, with ``R R̄ᴴ`` formed only where copyltu reads it (on and
    below the diagonal, :func:`~rules._kernels.products.lower_of_upper_adjoint_product`)."""
    m_ = products.lower_of_upper_adjoint_product(r, r_bar, unroll=routes.QR_UNROLL_MAX)
    return copyltu(m_ if q_bar is None else m_ - mm_h(q_bar, q))


def _complete_z(q1, n):
    """``Z = Q₁[n:] (Q₁[:n] − I)⁻¹`` of the compact-WY representation, by a solve."""
    q_nn, q_pn = q1[..., :n, :], q1[..., n:, :]
    return jax_ops.solve((q_nn - eye_like(q_nn)).mT, q_pn.mT).mT


def _complete_q_bar(q, q_bar, n):
    """Fold the cotangent of the last ``m − n`` columns of a complete ``Q`` into the first ``n``.

    JAX's tangent of those columns (arXiv:2409.13374, eqs. 32–33) is linear in the thin ``Q̇``:
    ``Q̇₂ = Q̇₁ Zᴴ - W (Q̇₁[n:] - Z Q̇₁[:n])ᴴ`` with ``Z = Q₁[n:] (Q₁[:n] - I)⁻¹`` and
    ``W = Q₁ + Q₂ Z``. This is its adjoint.
    """
    q1, q2 = q[..., :, :n], q[..., :, n:]
    g1, g2 = q_bar[..., :, :n], q_bar[..., :, n:]
    z = _complete_z(q1, n)
    w = q1 + mm(q2, z)
    e_bar = -mm_h(g2, w)
    g1 = g1 + mm(g2, z)
    return g1 + jnp.concatenate([-mm_h(z, e_bar), e_bar], axis=-2)


# ==============================================================================================
# LQ decomposition


@jitted()
def lq(a: ArrayLike) -> LQResult:
    r"""LQ decomposition ``A = LQ`` with explicit pushforward and pullback, wide and tall matrices.

    With ``k = min(m, n)``: ``L`` of shape ``(..., m, k)`` is lower triangular/trapezoidal and ``Q``
    of shape ``(..., k, n)`` has orthonormal rows. It is the conjugate transpose of the QR of
    ``Aᴴ``, and so are its pushforward and pullback: for ``m ≤ n``, in the papers' convention,

    .. math::
        M = L^H \bar L - \bar Q Q^H, \qquad \bar A = L^{-H}(\mathrm{copyltu}(M)\,Q + \bar Q).

    For ``m > n`` split ``A = [A₁; A₂]``, ``L = [U; D]``: ``Ā₂ = D̄ Q`` and ``Ā₁`` is the square rule
    with ``Q̄ + D̄ᴴ A₂``. Derivation: ``docs/derivations/lq.md``.

    Args:
      a: array of shape ``(..., m, n)``; integer and boolean arrays are promoted as for
        :func:`qr`.

    Returns:
      ``LQResult(L, Q)``.

    Raises:
      TypeError: ``a`` is not an array of a numeric dtype.
      ValueError: ``a`` has rank < 2.

    Notes:
      Gauge as :func:`rules.qr`: the signs of ``diag(L)`` are LAPACK's. JAX has no LQ; residuals
      are ``L`` and ``Q``.

    References:
      D. Roberts, L. Roberts, arXiv:2009.10071.

    Examples:
      >>> import jax.numpy as jnp, rules
      >>> l, q = rules.lq(jnp.array([[1.0, 2.0, 2.0], [0.0, 1.0, 1.0]]))
      >>> l.shape, q.shape
      ((2, 2), (2, 3))
    """
    a = as_inexact_matrix("lq", "a", a)
    return _lq(a)


def _lq_forward(a):
    a_h = mH(a)
    q, r = jax_ops.qr(a_h)
    out = LQResult(mH(r), mH(q))
    y = _wide_block(a_h)
    return out, (out, None if y is None else mH(y))  # a tall A's lower block A[..., n:, :]


def _lq_pushforward(res, a_dot):
    """For ``m ≤ n``, ``Z = L⁻¹Ȧ``, ``D = ZQᴴ``, ``G = tril(D, -1) + triu(D, 1)ᴴ + Re diag(D)``:
    ``L̇ = LG``, ``Q̇ = Z - GQ``. For ``m > n``, QR's wide rule at ``Aᴴ``, transposed.

    ``G`` is ``(Ṙ R⁻¹)ᴴ`` of QR's rule at ``Aᴴ = QᴴLᴴ``, written for ``L`` and ``Q`` directly
    (``docs/derivations/lq.md#pushforward``): no product has a transposed operand or result,
    which XLA would copy.
    """
    (l, q), y = res
    if y is not None:
        qt_dot, rt_dot = qr_pushforward(mH(q), mH(l), mH(a_dot), mH(y))
        # Transposed by a copy of its own: folded into the product Ṙ = (C - Ω)R, the transpose
        # makes it a dot that misses YNNPACK (see mm_h).
        rt_dot = products.laid_out_unless_unrolled(rt_dot, unroll=routes.QR_UNROLL_MAX)
        return LQResult(mH(rt_dot), mH(qt_dot))
    # L⁻¹ as a solve with R = Lᴴ, transposed: R is in the layout LAPACK's QR left it in.
    z = lax.linalg.triangular_solve(mH(l), a_dot, left_side=True, lower=False, transpose_a=True,
                                    conjugate_a=True)
    d = mm(z, mH(q))
    g = jnp.tril(d) + mH(jnp.triu(d, 1)) - _imag_diag(d)  # diag(G) = Re diag(D)
    # L laid out: as the transpose of R, XLA would send LG to its generic dot (see mm_h).
    l = products.laid_out_unless_unrolled(l, unroll=routes.QR_UNROLL_MAX)
    return LQResult(mm(l, g), z - mm(g, q))


def _lq_pullback(res, ct):
    """The adjoint of QR's at ``Aᴴ = QᴴLᴴ``, in JAX's convention."""
    ((l, q), y), (l_bar, q_bar) = res, ct
    return (mH(conj(qr_pullback(mH(q), mH(l), mH(conj(q_bar)), mH(conj(l_bar)),
                                None if y is None else mH(y)))),)


_lq = Rule("lq", _lq_forward, _lq_pushforward, _lq_pullback)
