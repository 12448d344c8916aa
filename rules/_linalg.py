"""Dense linear algebra rules: matrix inverse, QR and LQ.

Each section holds the public function (checks once, at trace time), the ``custom_vjp`` with its
``fwd``/``bwd``, the pullback as a plain function callable on its own, and the pushforward.

Complex convention. The pullbacks below are derived, as in the papers, for the real inner product
``<X, Y> = Re tr(Xᴴ Y)``. JAX's cotangents are the complex conjugates of those (math.md, preamble),
so ``bwd(ȳ) = conj(pullback(conj(ȳ)))``; for real dtypes ``conj`` adds no operation.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ._rrule import register_frule
from ._small import MAX_CLOSED_FORM_N, closed_form_inv
from ._utils import H, T, check_matrix, conj, copyltu, eye_like, mm, tril, triu

__all__ = ["inv", "qr", "lq", "QRResult", "LQResult"]


class QRResult(NamedTuple):
    """``(Q, R)`` of :func:`qr`, field names as ``jnp.linalg.qr``'s result."""

    Q: jax.Array
    R: jax.Array


class LQResult(NamedTuple):
    """``(L, Q)`` of :func:`lq`."""

    L: jax.Array
    Q: jax.Array


# ==============================================================================================
# Matrix inverse


def inv(a: jax.Array) -> jax.Array:
    r"""Inverse of a (batch of) square matrices, with an explicit pullback.

    .. math::
        B = A^{-1}, \qquad \dot B = -B\,\dot A\,B, \qquad \bar A = -B^T \bar B\, B^T

    (the pullback in JAX's convention; it is holomorphic, so complex inputs use plain transposes).

    Args:
      a: array of shape ``(..., n, n)``, float32, float64, complex64 or complex128.

    Returns:
      ``B`` of the shape and dtype of ``a``. A singular ``a`` gives inf/nan, as ``jnp.linalg.inv``
      does: for ``n ≤ 4`` every entry of the singular slice, for larger ``n`` the entries LU gives.

    Raises:
      TypeError: ``a`` is not an array, or has an integer, boolean or half-precision dtype.
      ValueError: ``a`` is not of shape ``(..., n, n)``.

    Notes:
      Residual: ``B`` only. The pullback is two matrix products (4n³ flops, GEMM speed). For
      ``n ≤ 4`` the forward is the closed-form adjugate formula (``rules/_small.py``), several times
      faster than a batched LU on CPU; it is accurate to about ``κ(A)·eps``. Prefer
      ``jnp.linalg.solve`` when only ``A⁻¹ b`` is needed.

    References:
      M. Giles, "An extended collection of matrix derivative results for forward and reverse mode
      algorithmic differentiation" (2008), §2.2.

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a = jnp.array([[2.0, 1.0], [1.0, 3.0]], dtype=jnp.float32)
      >>> jax.grad(lambda a: rules.inv(a).sum())(a).round(4)
      Array([[-0.16, -0.08],
             [-0.08, -0.04]], dtype=float32)
    """
    check_matrix("inv", "a", a, square=True)
    return _inv(a)


def _inv_forward(a):
    # Tiny matrices: the adjugate formula, one fused elementwise loop over the batch, instead of a
    # LAPACK-style LU per slice (overhead-bound on CPU); see rules/_small.py.
    if a.shape[-1] <= MAX_CLOSED_FORM_N:
        return closed_form_inv(a)
    return jnp.linalg.inv(a)


@jax.custom_vjp
def _inv(a):
    return _inv_forward(a)


def _inv_fwd(a):
    b = _inv_forward(a)
    return b, b


def inv_pullback(b, b_bar):
    """``Ā = -Bᵀ B̄ Bᵀ`` (JAX convention), from ``dB = -B dA B``."""
    bt = T(b)
    return -mm(mm(bt, b_bar), bt)


def _inv_bwd(b, b_bar):
    return (inv_pullback(b, b_bar),)


_inv.defvjp(_inv_fwd, _inv_bwd)


@register_frule(inv)
def _inv_pushforward(primals, tangents):
    (a,), (a_dot,) = primals, tangents
    check_matrix("inv", "a", a, square=True)
    b = _inv_forward(a)
    return b, -mm(mm(b, a_dot), b)


# ==============================================================================================
# QR decomposition

_QR_MODES = ("reduced", "complete", "r")


def qr(a: jax.Array, mode: str = "reduced"):
    r"""QR decomposition with explicit pullbacks for tall, square and wide matrices.

    ``A = QR`` with ``Q`` orthonormal columns and ``R`` upper triangular/trapezoidal; the outputs
    are exactly those of ``jnp.linalg.qr(a, mode=mode)``. With ``k = min(m, n)``:

    * ``mode="reduced"``: ``Q`` of shape ``(..., m, k)``, ``R`` of shape ``(..., k, n)``;
    * ``mode="complete"``: ``Q`` of shape ``(..., m, m)``, ``R`` of shape ``(..., m, n)``;
    * ``mode="r"``: ``R`` only, shape ``(..., k, n)``.

    Pullback for ``m ≥ n`` (Seeger et al.; Liao et al.), in the papers' convention:

    .. math::
        M = R\bar R^H - \bar Q^H Q, \qquad \bar A = (\bar Q + Q\,\mathrm{copyltu}(M))\,R^{-H}

    with ``copyltu(M) = tril(M, -1) + tril(M, -1)ᴴ + Re diag(M)`` and ``R⁻ᴴ`` applied by a
    triangular solve. For ``m < n`` (Roberts & Roberts) split ``A = [X | Y]``, ``R = [U | V]``:
    ``Ȳ = Q V̄`` and ``X̄`` is the square rule at ``(Q, U)`` with cotangents ``(Q̄ + Y V̄ᴴ, Ū)``.
    ``mode="complete"`` with ``m > n`` adds the transpose of the compact-WY derivative of the
    last ``m − n`` columns of ``Q`` (Papanicolopulos), so it agrees with ``jax.vjp(jnp.linalg.qr)``.

    Args:
      a: array of shape ``(..., m, n)``, float32, float64, complex64 or complex128.
      mode: ``"reduced"``, ``"complete"`` or ``"r"``.

    Returns:
      ``(Q, R)``, or ``R`` for ``mode="r"``.

    Raises:
      TypeError: ``a`` is not a float/complex array.
      ValueError: ``a`` has rank < 2, or ``mode`` is unknown.

    Notes:
      Gauge: like LAPACK (and ``jnp.linalg.qr``) the signs of ``diag(R)`` are not forced positive
      (complex: ``diag(R)`` is real). The derivative is that of the locally constant sign branch;
      losses that depend on the signs of ``Q``'s columns are not smooth functions of ``A``.
      The wide case needs the leading ``m × m`` block of ``A`` to be nonsingular, the tall case
      ``A`` of full column rank: the gradient grows like ``1/σ_min``.
      Residuals: ``Q`` and ``R``.

    References:
      M. Seeger et al., "Auto-differentiating linear algebra", arXiv:1710.08717.
      H.-J. Liao et al., "Differentiable programming tensor networks", arXiv:1903.09650.
      D. Roberts, L. Roberts, "QR and LQ decomposition matrix backpropagation algorithms for
      square, wide, and deep matrices", arXiv:2009.10071.
      S.-A. Papanicolopulos, "Computation of the complete QR derivative", arXiv:2409.13374.

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a = jnp.array([[3.0, 1.0], [4.0, 2.0], [0.0, 1.0]])
      >>> q, r = rules.qr(a)
      >>> bool(jnp.allclose(q @ r, a, atol=1e-6))
      True
    """
    check_matrix("qr", "a", a)
    if mode not in _QR_MODES:
        raise ValueError(f"qr: `mode` must be one of 'reduced', 'complete', 'r'; got {mode!r}.")
    return _qr(a, mode)


def _qr_forward(a, mode):
    return jnp.linalg.qr(a, mode="complete" if mode == "complete" else "reduced")


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _qr(a, mode):
    q, r = _qr_forward(a, mode)
    return r if mode == "r" else QRResult(q, r)


def _qr_fwd(a, mode):
    q, r = _qr_forward(a, mode)
    return (r if mode == "r" else QRResult(q, r)), (q, r)


def _qr_bwd(mode, res, ct):
    q, r = res
    q_bar, r_bar = (None, ct) if mode == "r" else ct
    q_bar = None if q_bar is None else conj(q_bar)
    return (conj(qr_pullback(q, r, q_bar, conj(r_bar))),)


_qr.defvjp(_qr_fwd, _qr_bwd)


def qr_pullback(q, r, q_bar, r_bar):
    """Pullback of ``A = QR`` in the papers' convention (``Re tr(Xᴴ Y)``), any shape and mode.

    ``q`` and ``r`` are the outputs of the forward (reduced or complete); ``q_bar`` may be ``None``
    (``mode="r"``). Returns ``Ā`` of shape ``(..., m, n)``.
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
    q_bar_x = mm(q, mm(v, H(v_bar)))  # Y V̄ᴴ with Y = QV: the Q-cotangent that V passes on
    q_bar_x = q_bar_x if q_bar is None else q_bar + q_bar_x
    x_bar = _thin_qr_pullback(q, u, q_bar_x, u_bar)
    return jnp.concatenate([x_bar, mm(q, v_bar)], axis=-1)


def _thin_qr_pullback(q, r, q_bar, r_bar):
    """``Ā = (Q̄ + Q copyltu(M)) R⁻ᴴ``, ``M = R R̄ᴴ - Q̄ᴴQ``, for ``m ≥ n`` (reduced ``Q``, square ``R``)."""
    r_bar = triu(r_bar)  # R is upper triangular: the lower part of R̄ meets no tangent
    m_ = mm(r, H(r_bar))
    if q_bar is not None:
        m_ = m_ - mm(H(q_bar), q)
    b = mm(q, copyltu(m_))
    if q_bar is not None:
        b = b + q_bar
    # B R⁻ᴴ by a triangular solve, never an explicit inverse of R.
    return lax.linalg.triangular_solve(r, b, left_side=False, lower=False, transpose_a=True,
                                       conjugate_a=True)


def _complete_q_bar(q, q_bar, n):
    """Fold the cotangent of the last ``m − n`` columns of a complete ``Q`` into the first ``n``.

    JAX's tangent of those columns (arXiv:2409.13374, eqs. 32–33) is linear in the thin ``dQ``:
    ``dQ₂ = dQ₁ Zᴴ - W (dQ₁[n:] - Z dQ₁[:n])ᴴ`` with ``Z = Q₁[n:] (Q₁[:n] - I)⁻¹`` and
    ``W = Q₁ + Q₂ Z``. This is its adjoint.
    """
    q1, q2 = q[..., :, :n], q[..., :, n:]
    g1, g2 = q_bar[..., :, :n], q_bar[..., :, n:]
    q_nn, q_pn = q1[..., :n, :], q1[..., n:, :]
    # Z = Q_pn (Q_nn - I)⁻¹ as a solve: (Q_nn - I)ᵀ Zᵀ = Q_pnᵀ.
    z = T(jnp.linalg.solve(T(q_nn - eye_like(q_nn)), T(q_pn)))
    w = q1 + mm(q2, z)
    e_bar = -mm(H(g2), w)
    g1 = g1 + mm(g2, z)
    return g1 + jnp.concatenate([-mm(H(z), e_bar), e_bar], axis=-2)


def _thin_qr_pushforward(q, r, a_dot):
    """Walter & Lehmann: ``X = dA R⁻¹``, ``C = QᴴX``, ``dR = (C - Ω)R``, ``dQ = X - Q(C - Ω)``."""
    x = lax.linalg.triangular_solve(r, a_dot, left_side=False, lower=False)
    c = mm(H(q), x)
    low = tril(c, -1)
    # Ω = QᴴdQ is skew-Hermitian; its diagonal is imaginary because diag(R) stays real.
    omega = low - H(low) + _imag_diag(c)
    upper = c - omega  # = dR R⁻¹, upper triangular
    return x - mm(q, upper), mm(upper, r)


def _imag_diag(c):
    d = jnp.diagonal(c, axis1=-2, axis2=-1)
    d = (d - d.real.astype(d.dtype)) if jnp.iscomplexobj(d) else jnp.zeros_like(d)
    return d[..., :, None] * eye_like(c)


def qr_pushforward(q, r, a_dot):
    """Tangents ``(dQ, dR)`` of ``A = QR`` (any shape and mode) from those of ``A``."""
    m, n = q.shape[-2], r.shape[-1]
    if m >= n:
        complete = q.shape[-1] == m and m > n
        q1, r1 = (q[..., :, :n], r[..., :n, :]) if complete else (q, r)
        dq, dr = _thin_qr_pushforward(q1, r1, a_dot)
        if not complete:
            return dq, dr
        q2 = q[..., :, n:]
        q_nn, q_pn = q1[..., :n, :], q1[..., n:, :]
        z = T(jnp.linalg.solve(T(q_nn - eye_like(q_nn)), T(q_pn)))
        dq2 = mm(dq, H(z)) - mm(q1 + mm(q2, z), H(dq[..., n:, :] - mm(z, dq[..., :n, :])))
        zeros = jnp.zeros((*dr.shape[:-2], m - n, n), dr.dtype)
        return jnp.concatenate([dq, dq2], -1), jnp.concatenate([dr, zeros], -2)
    x_dot, y_dot = a_dot[..., :, :m], a_dot[..., :, m:]
    u, v = r[..., :, :m], r[..., :, m:]
    dq, du = _thin_qr_pushforward(q, u, x_dot)
    y = mm(q, v)
    return dq, jnp.concatenate([du, mm(H(dq), y) + mm(H(q), y_dot)], -1)


@register_frule(qr)
def _qr_frule(primals, tangents, mode="reduced"):
    (a,), (a_dot,) = primals, tangents
    check_matrix("qr", "a", a)
    q, r = _qr_forward(a, mode)
    dq, dr = qr_pushforward(q, r, a_dot)
    return (r, dr) if mode == "r" else (QRResult(q, r), QRResult(dq, dr))


# ==============================================================================================
# LQ decomposition


def lq(a: jax.Array):
    r"""LQ decomposition ``A = LQ`` with an explicit pullback, for wide and tall matrices.

    With ``k = min(m, n)``: ``L`` of shape ``(..., m, k)`` is lower triangular/trapezoidal and ``Q``
    of shape ``(..., k, n)`` has orthonormal rows. It is the conjugate transpose of the QR of
    ``Aᴴ``, and so is its pullback (math.md §3): for ``m ≤ n``, in the papers' convention,

    .. math::
        M = L^H \bar L - \bar Q Q^H, \qquad \bar A = L^{-H}(\mathrm{copyltu}(M)\,Q + \bar Q).

    For ``m > n`` split ``A = [A₁; A₂]``, ``L = [U; D]``: ``Ā₂ = D̄ Q`` and ``Ā₁`` is the square rule
    with ``Q̄ + D̄ᴴ A₂``.

    Args:
      a: array of shape ``(..., m, n)``, float32, float64, complex64 or complex128.

    Returns:
      ``(L, Q)``.

    Raises:
      TypeError: ``a`` is not a float/complex array.
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
    check_matrix("lq", "a", a)
    return _lq(a)


def _lq_forward(a):
    q, r = jnp.linalg.qr(H(a))
    return LQResult(H(r), H(q))


@jax.custom_vjp
def _lq(a):
    return _lq_forward(a)


def _lq_fwd(a):
    l, q = _lq_forward(a)
    return LQResult(l, q), (l, q)


def lq_pullback(l, q, l_bar, q_bar):
    """Pullback of ``A = LQ`` (papers' convention): the adjoint of QR's at ``Aᴴ = QᴴLᴴ``."""
    return H(qr_pullback(H(q), H(l), H(q_bar), H(l_bar)))


def _lq_bwd(res, ct):
    (l, q), (l_bar, q_bar) = res, ct
    return (conj(lq_pullback(l, q, conj(l_bar), conj(q_bar))),)


_lq.defvjp(_lq_fwd, _lq_bwd)


@register_frule(lq)
def _lq_frule(primals, tangents):
    (a,), (a_dot,) = primals, tangents
    check_matrix("lq", "a", a)
    l, q = _lq_forward(a)
    dq_t, dr_t = qr_pushforward(H(q), H(l), H(a_dot))
    return LQResult(l, q), LQResult(H(dr_t), H(dq_t))
