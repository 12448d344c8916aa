"""Volume-preserving attention (Brantner et al.): one rule for the whole layer.

Layout: JAX's, ``x`` of shape ``(..., T, d)`` (batch axes, sequence length, features). The paper
writes one sample as ``Z ∈ ℝ^{d×T}``; here ``Z = xᵀ`` and the attention output ``ZΛ`` is returned as
``(ZΛ)ᵀ = Λᵀ x``. Derivation: ``docs/derivations/volume-preserving.md``.
"""
from __future__ import annotations

import math
from typing import Literal

import jax
import jax.numpy as jnp

from .._core.arrays import HIGHEST, eye_like
from .._core.checks import REAL_DTYPES, check_array, check_matrix
from .._core.dispatch import jitted
from .._core.rule import Rule
from .._core.sharding import match_varying
from .._kernels.products import batched_product, mm
from .._linalg.matfun import cayley_matrix, inv_identity_plus
from .._tensor.structured import AbstractPacked

__all__ = ["volume_preserving_attention"]

_WEIGHTINGS = ("skew", "arbitrary")


@jitted("weighting")
def volume_preserving_attention(x: jax.Array, a: jax.Array | AbstractPacked, *,
                                weighting: Literal["skew", "arbitrary"] = "skew") -> jax.Array:
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
      Only the skew weighting preserves volume: the determinant of the full ``Td × Td`` Jacobian
      of ``x ↦ y`` is 1 for it at every (T, d), and away from 1 for the arbitrary weighting
      (``tests/rules/layers/test_attention.py`` checks both at random ``x`` and ``A``). There only
      ``x ↦ Λᵀ x`` at frozen ``Λ`` preserves volume, not the layer.

      Residuals: ``x`` and ``Λ`` (``N = (I + Λ)/2``), besides the weight ``A`` itself; for the skew
      weighting with ``T > d`` the pullback forms no other ``T × T`` matrix. One factorisation per
      sample: of ``I + C``, by the adjugate formula for ``T ≤ 4``
      (``rules/_kernels/small.py``) and LU otherwise; for the skew weighting with
      ``T > d``, of the ``d × d`` matrix ``I + xᵀx K`` instead (Woodbury identity, since ``C`` has
      rank ``≤ d``). The pushforward uses the same residuals:
      ``ẏ = Λ̇ᵀ x + Λᵀ ẋ`` with ``Λ̇ = -2 N Ċ N`` and ``Ċ`` the derivative of the quadratic form.

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
    return _attention(x, a, weighting=weighting)


def _check_attention(x, a, weighting):
    fname = "volume_preserving_attention"
    if weighting not in _WEIGHTINGS:
        raise ValueError(f"{fname}: `weighting` must be 'skew' or 'arbitrary'; got {weighting!r}.")
    if isinstance(a, AbstractPacked):
        a = a.dense()
    check_matrix(fname, "x", x, dtypes=REAL_DTYPES)
    check_array(fname, "a", a, dtypes=REAL_DTYPES)
    d = x.shape[-1]
    if a.shape != (d, d):
        raise ValueError(f"{fname}: `a` must have shape (d, d) = ({d}, {d}) for `x` of shape "
                         f"{tuple(x.shape)} (..., T, d); got {tuple(a.shape)}.")
    dtype = jnp.result_type(x, a)
    return match_varying(x.astype(dtype), a.astype(dtype))  # shard_map: rules/_core/sharding.py


# The forward uses `mm` too: for T, d ≤ 4 it is an unrolled elementwise product, one fused loop
# over a large batch of tiny matrices (the rigid-body setting) instead of a dot per slice.


def _attention_c(x, a, weighting):
    """``C`` of the attention layer (``T × T`` per sample, skew-symmetric)."""
    if weighting == "skew":
        return mm(mm(x, (a - a.T) / 2), x.mT)
    p = jnp.tril(mm(mm(x, a), x.mT), -1) / math.sqrt(x.shape[-1])
    return p - p.mT


def _skew_attention_low_rank(x, k):
    """``(y, Λ)`` for ``T > d`` through ``d × d`` matrices: ``C = x K xᵀ`` has rank ``≤ d``.

    Woodbury: ``(I + x K xᵀ)⁻¹ = I - x K M xᵀ`` with ``M = (I + G K)⁻¹``, ``G = xᵀ x``, so
    ``Λ = I - 2 x K M xᵀ`` and ``y = Λᵀ x = x + 2 x Mᵀ K G``: a ``d × d`` factorisation, O(T d²)
    work, where forming ``C`` takes a ``T × T`` one, O(T³).
    """
    g = mm(x.mT, x)
    k = jnp.broadcast_to(k, g.shape)
    m = inv_identity_plus(mm(g, k))
    u = mm(x, mm(k, m))
    eye = jnp.broadcast_to(jnp.eye(x.shape[-2], dtype=x.dtype), (*x.shape[:-1], x.shape[-2]))
    lam = eye - 2 * mm(u, x.mT)
    return x + 2 * mm(x, mm(m.mT, mm(k, g))), lam


def _attention_forward(x, a, *, weighting):
    t, d = x.shape[-2:]
    if weighting == "skew" and t > d:
        y, lam = _skew_attention_low_rank(x, (a - a.T) / 2)
    else:
        lam = cayley_matrix(_attention_c(x, a, weighting))
        y = mm(lam.mT, x)
    return y, (x, a, lam)


def _attention_c_dot(x, a, x_dot, a_dot, weighting):
    """``Ċ``: ``C`` is a quadratic form in ``x`` and linear in ``A``; a ``None`` tangent is zero."""
    skew = weighting == "skew"
    terms = []
    if x_dot is not None:
        w = (a - a.T) / 2 if skew else a
        x_dot_w_xt = mm(mm(x_dot, w), x.mT)
        # For the skew weighting the two x-terms are each other's negative transposes.
        terms.append(x_dot_w_xt - x_dot_w_xt.mT if skew else x_dot_w_xt + mm(mm(x, w), x_dot.mT))
    if a_dot is not None:
        w_dot = (a_dot - a_dot.mT) / 2 if skew else a_dot
        terms.append(mm(mm(x, w_dot), x.mT))
    m_dot = sum(terms[1:], terms[0])
    if weighting == "skew":
        return m_dot
    p_dot = jnp.tril(m_dot, -1) / math.sqrt(x.shape[-1])
    return p_dot - p_dot.mT


def _attention_pushforward(res, x_dot, a_dot, *, weighting):
    """``ẏ = Λ̇ᵀ x + Λᵀ ẋ`` with ``Λ̇ = -2 N Ċ N``, ``N = (I + Λ)/2``."""
    x, a, lam = res
    n = (eye_like(lam) + lam) / 2
    lam_dot = -2 * mm(mm(n, _attention_c_dot(x, a, x_dot, a_dot, weighting)), n)
    y_dot = mm(lam_dot.mT, x)
    return y_dot if x_dot is None else y_dot + mm(lam.mT, x_dot)


def _attention_pullback(res, y_bar, *, weighting):
    """``(x̄, Ā)`` of ``y = Λᵀ x``, ``Λ = Cay(C(x, A))``, from the residuals ``x``, ``Λ`` and ``A``.

    Derivation (``docs/derivations/volume-preserving.md#attention-pullback``, in the ``(T, d)`` layout): ``Λ̄ = x ȳᵀ`` and
    ``C̄ = -2 Nᵀ Λ̄ Nᵀ = -2 u vᵀ`` with ``u = Nᵀ x = (x + Λᵀ x)/2`` and ``v = N ȳ = (ȳ + Λ ȳ)/2``.
    """
    x, a, lam = res
    lam_y_bar = mm(lam, y_bar)
    u = (x + mm(lam.mT, x)) / 2
    v = (y_bar + lam_y_bar) / 2
    t, d = x.shape[-2:]
    batch = x.ndim > 2
    if weighting == "skew":
        k = (a - a.mT) / 2
    if weighting == "skew" and t > d:
        # With K skew, x̄ = Λȳ + (C̄ᵀ - C̄) x K and Ā = ½Σ xᵀ(C̄ - C̄ᵀ)x. As
        # C̄ᵀ - C̄ = 2(u vᵀ - v uᵀ), both go through G₁ = uᵀx and G₂ = vᵀx (d × d): O(T d²), no
        # T × T matrix.
        g1, g2 = mm(u.mT, x), mm(v.mT, x)
        x_bar = lam_y_bar + 2 * mm(mm(u, g2) - mm(v, g1), k)
        m = batched_product(g1, g2, True, False, sum_batch=batch, precision=HIGHEST)
        return x_bar, m.mT - m
    # Otherwise S = C̄ᵀ - C̄ = 2(P - Pᵀ), P = u vᵀ, is formed (T × T; for the arbitrary weighting
    # the tril breaks the low rank).
    p = mm(u, v.mT)
    s = 2 * (p - p.mT)
    if weighting == "skew":
        s_x = mm(s, x)
        a_bar = batched_product(x, s_x, True, False, sum_batch=batch, precision=HIGHEST)
        return lam_y_bar + mm(s_x, k), -a_bar / 2
    # M̄ = tril(C̄ - C̄ᵀ, -1)/√d = -tril(S, -1)/√d is the cotangent of M = x A xᵀ.
    m_bar = jnp.tril(s, -1) / -math.sqrt(d)
    m_bar_x, m_bar_t_x = mm(m_bar, x), mm(m_bar.mT, x)
    x_bar = lam_y_bar + mm(m_bar_x, a.mT) + mm(m_bar_t_x, a)
    a_bar = batched_product(x, m_bar_x, True, False, sum_batch=batch, precision=HIGHEST)
    return x_bar, a_bar


_attention = Rule("volume_preserving_attention", _attention_forward, _attention_pushforward,
                  _attention_pullback)
