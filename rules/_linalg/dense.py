"""Rules of dense square matrices: the inverse.

Each section holds the public function (checks once, at trace time), then the rule's forward,
pushforward and pullback, in that order, and the :class:`~rules._core.rule.Rule` that joins them.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from .._core.arrays import mm
from .._core.checks import as_inexact_matrix, is_half
from .._core.rule import Rule
from .small import MAX_CLOSED_FORM_N, closed_form_inv

__all__ = ["inv"]


# ==============================================================================================
# Matrix inverse


def inv(a: ArrayLike) -> jax.Array:
    r"""Inverse of a (batch of) square matrices, with an explicit pushforward and pullback.

    .. math::
        B = A^{-1}, \qquad \dot B = -B\,\dot A\,B, \qquad \bar A = -B^T \bar B\, B^T

    (the pullback in JAX's convention; the inverse is holomorphic, so complex inputs use plain
    transposes). Derivation: ``docs/derivations/linalg.md#inverse``.

    Args:
      a: array of shape ``(..., n, n)``. Integer and boolean arrays are promoted as
        ``jnp.linalg.inv`` promotes them; float16/bfloat16 go to JAX's own forward (which, on CPU,
        raises ``NotImplementedError`` as ``jnp.linalg.inv`` does).

    Returns:
      ``B`` of the shape and dtype of ``a``. A singular ``a`` gives inf/nan, as ``jnp.linalg.inv``
      does: for ``n ≤ 4`` every entry of the singular slice, for larger ``n`` the entries LU gives.

    Raises:
      TypeError: ``a`` is not an array, or not of a numeric dtype.
      ValueError: ``a`` is not of shape ``(..., n, n)``.

    Notes:
      Residual: ``B`` only. The pushforward and the pullback are two matrix products each (4n³
      flops, GEMM speed). For ``n ≤ 4`` the forward is the closed-form adjugate formula
      (``rules/_linalg/small.py``), several times faster than a batched LU on CPU; it is accurate
      to about ``κ(A)·eps``. Prefer :func:`jnp.linalg.solve` when only ``A⁻¹ b`` is needed.

    References:
      M. Giles, "An extended collection of matrix derivative results for forward and reverse mode
      algorithmic differentiation" (2008), §2.2.

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a = jnp.array([[2.0, 1.0], [1.0, 1.0]], dtype=jnp.float32)  # B = [[1, -1], [-1, 2]]
      >>> jax.grad(lambda a: rules.inv(a).sum())(a)
      Array([[-0., -0.],
             [-0., -1.]], dtype=float32)
      >>> jax.jvp(rules.inv, (a,), (jnp.eye(2, dtype=jnp.float32),))[1]  # -B B
      Array([[-2.,  3.],
             [ 3., -5.]], dtype=float32)
    """
    a = as_inexact_matrix("inv", "a", a, square=True)
    return _inv(a)


def _inv_forward(a):
    # Tiny matrices: the adjugate formula, one fused elementwise loop over the batch, instead of a
    # LAPACK-style LU per slice (overhead-bound on CPU); see rules/_linalg/small.py.
    if a.shape[-1] <= MAX_CLOSED_FORM_N and not is_half(a):
        b = closed_form_inv(a)
    else:
        b = jnp.linalg.inv(a)
    return b, b


def _inv_pushforward(b, a_dot):
    """``Ḃ = -B Ȧ B``, from ``d(AB) = 0``."""
    return -mm(mm(b, a_dot), b)


def _inv_pullback(b, b_bar):
    """``Ā = -Bᵀ B̄ Bᵀ``: the transpose of the pushforward."""
    return (-mm(mm(b.mT, b_bar), b.mT),)


_inv = Rule("inv", _inv_forward, _inv_pushforward, _inv_pullback)
