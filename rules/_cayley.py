"""The Cayley transform and the volume-preserving transformer's layers (math.md §5).

Layout: JAX's, ``x`` of shape ``(..., T, d)`` (batch axes, sequence length, features). The paper
(Brantner et al.) writes one sample as ``Z ∈ ℝ^{d×T}``; here ``Z = xᵀ`` and the attention output
``ZΛ`` is returned as ``(ZΛ)ᵀ = Λᵀ x``.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

from ._rrule import register_frule
from ._small import MAX_CLOSED_FORM_N, closed_form_inv
from ._structured import AbstractPacked, StrictlyLower, StrictlyUpper
from ._tensor import _product, batched_product
from ._utils import HIGHEST, T, check_array, check_matrix, eye_like, match_varying, mm, tril

__all__ = ["cayley", "volume_preserving_attention", "volume_preserving_feedforward"]

_REAL_DTYPES = (jnp.float32, jnp.float64)


def _inv_identity_plus(c):
    """``N = (I + C)⁻¹``: the adjugate formula for tiny slices, LU otherwise."""
    a = eye_like(c) + c
    return closed_form_inv(a) if c.shape[-1] <= MAX_CLOSED_FORM_N else jnp.linalg.inv(a)


def _cayley_forward(c):
    # (I - C)(I + C)⁻¹ = 2(I + C)⁻¹ - I: one inverse and no product.
    return 2 * _inv_identity_plus(c) - eye_like(c)


# ==============================================================================================
# Cayley transform


def cayley(c: jax.Array) -> jax.Array:
    r"""Cayley transform ``Λ = (I - C)(I + C)⁻¹`` of a (batch of) square matrices.

    .. math::
        \Lambda = (I - C)(I + C)^{-1} = 2N - I, \quad N = (I + C)^{-1} = \tfrac12 (I + \Lambda),
        \qquad \dot\Lambda = -2 N \dot C N, \qquad \bar C = -2 N^T \bar\Lambda N^T

    The factors commute, so ``Λ = (I + C)⁻¹(I - C)`` as well. For skew-symmetric ``C``, ``Λ`` is
    orthogonal with determinant +1.

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
      which the pullback recovers ``N = (I + Λ)/2``, so it costs two matrix products. The
      transform is holomorphic: complex inputs use plain transposes (JAX's convention).

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


@jax.custom_vjp
def _cayley(c):
    return _cayley_forward(c)


def _cayley_fwd(c):
    lam = _cayley_forward(c)
    return lam, lam


def cayley_pullback(lam, lam_bar):
    """``C̄ = -2 Nᵀ Λ̄ Nᵀ`` with ``Nᵀ = (I + Λ)ᵀ/2`` (JAX convention; holomorphic, no conj)."""
    n_t = (eye_like(lam) + T(lam)) / 2
    return -2 * mm(mm(n_t, lam_bar), n_t)


def _cayley_bwd(lam, lam_bar):
    return (cayley_pullback(lam, lam_bar),)


_cayley.defvjp(_cayley_fwd, _cayley_bwd)


@register_frule(cayley)
def _cayley_pushforward(primals, tangents):
    (c,), (c_dot,) = primals, tangents
    check_matrix("cayley", "c", c, square=True)
    lam = _cayley_forward(c)
    n = (eye_like(lam) + lam) / 2
    return lam, -2 * mm(mm(n, c_dot), n)


# ==============================================================================================
# Volume-preserving attention

_WEIGHTINGS = ("skew", "arbitrary")


def volume_preserving_attention(x: jax.Array, a, *, weighting: str = "skew") -> jax.Array:
    r"""Volume-preserving attention of Brantner et al., one fused rule for the whole layer.

    For each sample ``x`` (``T × d``; the paper's ``Z = xᵀ``):

    .. math::
        C = x K x^T,\ K = \tfrac12 (A - A^T) \quad \text{(skew, the paper's)}, \qquad
        C = P - P^T,\ P = \tfrac{1}{\sqrt d} \operatorname{tril}(x A x^T, -1)
        \quad \text{(arbitrary)},

    .. math::
        \Lambda = \operatorname{Cay}(C) = (I - C)(I + C)^{-1}, \qquad y = \Lambda^T x
        \quad (\text{the paper's } Z\Lambda).

    ``C`` is skew-symmetric in both variants, so ``Λ`` is orthogonal. Pullback, with
    ``N = (I + Λ)/2`` and the cotangent ``ȳ``:

    .. math::
        \bar C = -2 N^T x\, \bar y^T N^T = -2\, u v^T, \quad u = N^T x,\ v = N \bar y, \qquad
        \bar x = \Lambda \bar y + \bar M x A^T + \bar M^T x A, \qquad
        \bar A = \sum_b x_b^T \bar M_b x_b

    where ``M̄`` is ``C̄`` for the skew weighting (then projected, ``Ā ← (Ā - Āᵀ)/2``) and
    ``tril(C̄ - C̄ᵀ, -1)/√d`` for the arbitrary one. ``C̄`` has rank ``≤ d``; for ``T > d`` the skew
    pullback applies it through ``d × d`` products and never forms it.

    Args:
      x: shape ``(..., T, d)``, float32 or float64; any number of batch axes, any ``T`` and ``d``.
      a: shape ``(d, d)``, the weight (shared by every sample), an array or a packed matrix
        (e.g. :class:`rules.SkewSymmetric`). The skew weighting uses only its skew part.
      weighting: ``"skew"`` (default, the paper's) or ``"arbitrary"``
        (GeometricMachineLearning.jl's default).

    Returns:
      ``y = Λᵀ x`` of shape ``(..., T, d)``, dtype promoted from ``x`` and ``a``.

    Raises:
      TypeError: ``x`` or ``a`` is not a float32/float64 array.
      ValueError: ``x`` has fewer than two axes, ``a`` is not ``(d, d)``, or ``weighting`` is
        unknown.

    Notes:
      Only the skew weighting preserves volume. The determinant of the full ``Td × Td`` Jacobian of
      ``x ↦ y`` is 1 for the skew weighting at every (T, d): measured ``|det - 1| < 4e-15``
      (float64) at (T, d) = (3, 3), (2, 5), (6, 2), (4, 4) for random ``x`` (entries of size 0.5)
      and ``A``. For the arbitrary weighting it is not: at the same samples det = -0.0073, 0.973,
      0.043, 0.447. There only ``x ↦ Λᵀ x`` at frozen ``Λ`` preserves volume, not the layer.

      Residuals: ``x`` and ``Λ`` (``N = (I + Λ)/2``), besides the weight ``A`` itself; for the skew
      weighting with ``T > d`` the pullback forms no other ``T × T`` matrix. One factorisation per
      sample: of ``I + C``, by the adjugate formula for ``T ≤ 4``
      (:func:`rules._small.closed_form_inv`) and LU otherwise; for the skew weighting with
      ``T > d``, of the ``d × d`` matrix ``I + xᵀx K`` instead (Woodbury identity, since ``C`` has
      rank ``≤ d``). JAX has no forward mode through a ``custom_vjp``: use :func:`rules.frule` for
      directional derivatives.

    References:
      B. Brantner, G. de Romemont, M. Kraus, Z. Li, "Volume-preserving transformers for learning
      time series data with structure", arXiv:2312.11166.

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> x = jnp.arange(6.0).reshape(1, 2, 3) / 6  # batch 1, T = 2, d = 3
      >>> a = jnp.array([[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
      >>> y = rules.volume_preserving_attention(x, a)
      >>> bool(jnp.allclose(jnp.linalg.norm(y, axis=-2), jnp.linalg.norm(x, axis=-2)))
      True
      >>> jax.grad(lambda a: rules.volume_preserving_attention(x, a).sum())(a).shape
      (3, 3)
    """
    x, a = _check_attention(x, a, weighting)
    return _attention(x, a, weighting)


def _check_attention(x, a, weighting):
    fname = "volume_preserving_attention"
    if weighting not in _WEIGHTINGS:
        raise ValueError(f"{fname}: `weighting` must be 'skew' or 'arbitrary'; got {weighting!r}.")
    if isinstance(a, AbstractPacked):
        a = a.dense()
    check_matrix(fname, "x", x, dtypes=_REAL_DTYPES)
    check_array(fname, "a", a, dtypes=_REAL_DTYPES)
    d = x.shape[-1]
    if a.shape != (d, d):
        raise ValueError(f"{fname}: `a` must have shape (d, d) = ({d}, {d}) for `x` of shape "
                         f"{tuple(x.shape)} (..., T, d); got {tuple(a.shape)}.")
    dtype = jnp.result_type(x, a)
    return match_varying(x.astype(dtype), a.astype(dtype))  # shard_map: see rules/_utils.py


# The forward uses `mm` too: for T, d ≤ 4 it is an unrolled elementwise product, several times
# faster on CPU than XLA's dot for large batches of tiny matrices (the rigid-body setting).


def _attention_c(x, a, weighting):
    """``C`` of the attention layer (``T × T`` per sample, skew-symmetric)."""
    if weighting == "skew":
        return mm(mm(x, (a - a.T) / 2), T(x))
    p = tril(mm(mm(x, a), T(x)), -1) / math.sqrt(x.shape[-1])
    return p - T(p)


def _attention_forward(x, a, weighting):
    t, d = x.shape[-2:]
    if weighting == "skew" and t > d:
        return _skew_attention_low_rank(x, (a - a.T) / 2)
    lam = _cayley_forward(_attention_c(x, a, weighting))
    return mm(T(lam), x), lam


def _skew_attention_low_rank(x, k):
    """``(y, Λ)`` for ``T > d`` through ``d × d`` matrices: ``C = x K xᵀ`` has rank ``≤ d``.

    Woodbury: ``(I + x K xᵀ)⁻¹ = I - x K M xᵀ`` with ``M = (I + G K)⁻¹``, ``G = xᵀ x``, so
    ``Λ = I - 2 x K M xᵀ`` and ``y = Λᵀ x = x + 2 x Mᵀ K G``. No ``T × T`` factorisation, and more
    accurate in float32 than forming ``C`` (measured: ``‖ΛᵀΛ - I‖`` 3e-5 against 9e-4 through LU
    at (T, d) = (256, 64), entries of ``x`` of size 2).
    """
    g = mm(T(x), x)
    k = jnp.broadcast_to(k, g.shape)
    m = _inv_identity_plus(mm(g, k))
    u = mm(x, mm(k, m))
    eye = jnp.broadcast_to(jnp.eye(x.shape[-2], dtype=x.dtype), (*x.shape[:-1], x.shape[-2]))
    lam = eye - 2 * mm(u, T(x))
    return x + 2 * mm(x, mm(T(m), mm(k, g))), lam


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _attention(x, a, weighting):
    return _attention_forward(x, a, weighting)[0]


def _attention_fwd(x, a, weighting):
    y, lam = _attention_forward(x, a, weighting)
    return y, (x, a, lam)


def attention_pullback(x, a, lam, y_bar, weighting):
    """``(x̄, Ā)`` of ``y = Λᵀ x``, ``Λ = Cay(C(x, A))``, from the residuals ``x``, ``Λ`` and ``A``.

    Derivation (math.md §5, in the ``(T, d)`` layout): ``Λ̄ = x ȳᵀ`` and
    ``C̄ = -2 Nᵀ Λ̄ Nᵀ = -2 u vᵀ`` with ``u = Nᵀ x = (x + Λᵀ x)/2`` and ``v = N ȳ = (ȳ + Λ ȳ)/2``.
    """
    lam_y_bar = mm(lam, y_bar)
    u = (x + mm(T(lam), x)) / 2
    v = (y_bar + lam_y_bar) / 2
    t, d = x.shape[-2:]
    batch = x.ndim > 2
    if weighting == "skew":
        k = (a - T(a)) / 2
    if weighting == "skew" and t > d:
        # With K skew, x̄ = Λȳ + (C̄ᵀ - C̄) x K and Ā = ½Σ xᵀ(C̄ - C̄ᵀ)x. As
        # C̄ᵀ - C̄ = 2(u vᵀ - v uᵀ), both go through G₁ = uᵀx and G₂ = vᵀx (d × d): O(T d²), no
        # T × T matrix.
        g1, g2 = mm(T(u), x), mm(T(v), x)
        x_bar = lam_y_bar + 2 * mm(mm(u, g2) - mm(v, g1), k)
        m = batched_product(g1, g2, True, False, sum_batch=batch, precision=HIGHEST)
        return x_bar, T(m) - m
    # Otherwise S = C̄ᵀ - C̄ = 2(P - Pᵀ), P = u vᵀ, is formed (T × T; for the arbitrary weighting
    # the tril breaks the low rank).
    p = mm(u, T(v))
    s = 2 * (p - T(p))
    if weighting == "skew":
        s_x = mm(s, x)
        a_bar = batched_product(x, s_x, True, False, sum_batch=batch, precision=HIGHEST)
        return lam_y_bar + mm(s_x, k), -a_bar / 2
    # M̄ = tril(C̄ - C̄ᵀ, -1)/√d = -tril(S, -1)/√d is the cotangent of M = x A xᵀ.
    m_bar = tril(s, -1) / -math.sqrt(d)
    m_bar_x, m_bar_t_x = mm(m_bar, x), mm(T(m_bar), x)
    x_bar = lam_y_bar + mm(m_bar_x, T(a)) + mm(m_bar_t_x, a)
    a_bar = batched_product(x, m_bar_x, True, False, sum_batch=batch, precision=HIGHEST)
    return x_bar, a_bar


def _attention_bwd(weighting, res, y_bar):
    x, a, lam = res
    return attention_pullback(x, a, lam, y_bar, weighting)


_attention.defvjp(_attention_fwd, _attention_bwd)


@register_frule(volume_preserving_attention)
def _attention_pushforward(primals, tangents, weighting="skew"):
    (x, a), (x_dot, a_dot) = primals, tangents
    x, a = _check_attention(x, a, weighting)
    x_dot, a_dot = _check_attention(x_dot, a_dot, weighting)
    y, lam = _attention_forward(x, a, weighting)
    # C is a quadratic form in x and linear in A: Ċ = C(ẋ, x) + C(x, ẋ) + C(x, Ȧ) written out.
    c_dot = _attention_c_dot(x, a, x_dot, a_dot, weighting)
    n = (eye_like(lam) + lam) / 2
    lam_dot = -2 * mm(mm(n, c_dot), n)
    return y, mm(T(lam_dot), x) + mm(T(lam), x_dot)


def _attention_c_dot(x, a, x_dot, a_dot, weighting):
    w = (a - a.T) / 2 if weighting == "skew" else a
    w_dot = (a_dot - a_dot.T) / 2 if weighting == "skew" else a_dot
    m_dot = mm(mm(x_dot, w), T(x)) + mm(mm(x, w), T(x_dot)) + mm(mm(x, w_dot), T(x))
    if weighting == "skew":
        return m_dot
    p_dot = tril(m_dot, -1) / math.sqrt(x.shape[-1])
    return p_dot - T(p_dot)


# ==============================================================================================
# Volume-preserving feed-forward layer


def volume_preserving_feedforward(x: jax.Array, weight, bias: jax.Array | None = None, *,
                                  activation=jnp.tanh) -> jax.Array:
    r"""Volume-preserving feed-forward layer ``x + σ(W x + b)`` applied to every time step.

    .. math::
        y_t = x_t + \sigma(W x_t + b), \qquad \text{i.e.}\ y = x + \sigma(x W^T + b)
        \ \text{for } x \text{ of shape } (\dots, T, d),

    with ``W`` strictly lower (the paper's lower layer) or strictly upper triangular (upper
    layer). ``∂y_t/∂x_t = I + diag(σ'(·)) W`` is unit triangular, so the determinant of the
    Jacobian is 1 for any activation.

    Args:
      x: shape ``(..., d)``, float32 or float64 (a sequence ``(..., T, d)`` or a single vector).
      weight: :class:`rules.StrictlyLower` or :class:`rules.StrictlyUpper` with ``n = d``.
      bias: shape ``(d,)``, or None for no bias.
      activation: an elementwise function (default ``jnp.tanh``; ``lambda z: z`` for the
        paper's linear layers).

    Returns:
      ``y`` of the shape of ``x``, dtype promoted from the inputs.

    Raises:
      TypeError: ``weight`` is not packed strictly triangular, or an array has a wrong dtype.
      ValueError: the shapes do not match.

    Notes:
      A composition of :func:`rules.tensor_mat_mul`'s rule and ``.dense()``: the packed weight's
      cotangent has the exact-derivative convention of :mod:`rules._structured`; the activation is
      differentiated by JAX.

    References:
      B. Brantner, G. de Romemont, M. Kraus, Z. Li, arXiv:2312.11166, §"volume-preserving
      feedforward neural networks".

    Examples:
      >>> import jax.numpy as jnp, rules
      >>> w = rules.StrictlyLower(jnp.array([1.0, 0.0, 2.0], jnp.float32), 3)
      >>> rules.volume_preserving_feedforward(jnp.ones(3, jnp.float32), w, activation=lambda z: z)
      Array([1., 2., 3.], dtype=float32)
    """
    x, weight, bias = _check_feedforward(x, weight, bias)
    x2, w = match_varying(jnp.atleast_2d(x), weight.dense())  # shard_map: see rules/_utils.py
    z = _product(x2, w, False, True).reshape(x.shape)  # x Wᵀ
    return x + activation(z if bias is None else z + jnp.broadcast_to(bias, z.shape))


def _check_feedforward(x, weight, bias):
    fname = "volume_preserving_feedforward"
    if not isinstance(weight, (StrictlyLower, StrictlyUpper)):
        raise TypeError(f"{fname}: `weight` must be a rules.StrictlyLower or rules.StrictlyUpper; "
                        f"got {type(weight).__name__}.")
    check_array(fname, "x", x, dtypes=_REAL_DTYPES)
    check_array(fname, "weight.packed", weight.packed, dtypes=_REAL_DTYPES)
    if x.ndim < 1 or x.shape[-1] != weight.n or weight.packed.ndim != 1:
        raise ValueError(f"{fname}: `x` of shape {tuple(x.shape)} must be (..., d) with d = "
                         f"weight.n = {weight.n}, and `weight` a single matrix; got weight of "
                         f"shape {weight.shape}.")
    dtypes = [x, weight.packed]
    if bias is not None:
        check_array(fname, "bias", bias, dtypes=_REAL_DTYPES)
        if bias.shape != (weight.n,):
            raise ValueError(f"{fname}: `bias` must have shape (d,) = ({weight.n},); got "
                             f"{tuple(bias.shape)}.")
        dtypes.append(bias)
    dtype = jnp.result_type(*dtypes)
    weight = type(weight)(weight.packed.astype(dtype), weight.n)
    return x.astype(dtype), weight, None if bias is None else bias.astype(dtype)


@register_frule(volume_preserving_feedforward)
def _feedforward_pushforward(primals, tangents, activation=jnp.tanh):
    (x, weight, *bias), (x_dot, weight_dot, *bias_dot) = primals, tangents
    bias, bias_dot = (bias or [None])[0], (bias_dot or [None])[0]
    x, weight, bias = _check_feedforward(x, weight, bias)
    w, w_dot = weight.dense(), weight_dot.dense()
    z = batched_product(jnp.atleast_2d(x), w, False, True).reshape(x.shape)
    z_dot = (batched_product(jnp.atleast_2d(x_dot), w, False, True)
             + batched_product(jnp.atleast_2d(x), w_dot, False, True)).reshape(x.shape)
    if bias is not None:
        z, z_dot = z + jnp.broadcast_to(bias, z.shape), z_dot + jnp.broadcast_to(bias_dot, z.shape)
    s, s_dot = jax.jvp(activation, (z,), (z_dot,))
    return x + s, x_dot + s_dot
