"""Rules of the Cholesky factorisation: the factor, and solves with it.

Complex convention: the derivations (``docs/derivations/decompositions.md#cholesky``) are written
directly in JAX's bilinear pairing ``Re Σ x̄ ⊙ ẋ``, so the pullbacks below need no conjugation at
their boundary; the conjugations inside come from ``Lᴴ``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.typing import ArrayLike

from .._core.arrays import conj, hermitian_part, mH
from .._core.checks import as_inexact_matrix, promote_operands, solve_broadcast
from .._core.dispatch import jitted
from .._core.rule import Rule
from .._kernels import cholesky as kernel
from .._kernels.products import lower_of_transpose_product, lower_product, mm
from .._kernels.small import closed_form_applies

__all__ = ["cho_solve", "cholesky"]


# ==============================================================================================
# Cholesky factorisation


@jitted("upper", "symmetrize_input")
def cholesky(a: ArrayLike, *, upper: bool = False, symmetrize_input: bool = True) -> jax.Array:
    r"""Cholesky factor ``A = L Lᴴ`` of Hermitian positive definite matrices, as ``jnp.linalg.cholesky``.

    With ``S`` the matrix factorised (below) and ``Φ(X) = tril(X, -1) + ½ diag(X)``:

    .. math::
        \dot L = L\,\Phi(L^{-1}\dot S L^{-H}), \qquad
        \bar S = L^{-T}\,\Phi(L^T \bar L)\,\operatorname{conj}(L)^{-1}

    (Murray 2016; the pullback in JAX's convention), two triangular solves each. Derivation:
    ``docs/derivations/decompositions.md#cholesky``.

    What is read of ``a``: with ``symmetrize_input=True`` (the default, as in JAX) the factorised
    matrix is ``S = (A + Aᴴ)/2``, so the function depends on the Hermitian part of ``a`` only and
    its gradient is Hermitian. With ``symmetrize_input=False`` LAPACK reads the lower triangle of
    ``a`` alone; the derivatives are then those of the formulas above applied to the tangent as
    given (which is what ``jnp.linalg.cholesky`` does), correct for Hermitian tangents.

    Args:
      a: array of shape ``(..., n, n)``, Hermitian (symmetric) positive definite. Integers and
        booleans are promoted as ``jnp.linalg.cholesky`` promotes them; float16/bfloat16 go to
        JAX's forward.
      upper: return ``U = Lᴴ`` (``A = Uᴴ U``) instead of ``L``.
      symmetrize_input: factorise ``(A + Aᴴ)/2`` (``True``) or the lower triangle of ``a``.

    Returns:
      ``L`` (or ``U``), shape and dtype of ``a``. Where ``a`` is not positive definite the factor
      is NaN (LAPACK fails), and so are its derivatives, as in JAX.

    Raises:
      TypeError: ``a`` is not an array, or not of a numeric dtype.
      ValueError: ``a`` is not of shape ``(..., n, n)``.

    Notes:
      Residual: ``L`` only. Pushforward and pullback cost two triangular solves and one product,
      like the forward's factorisation up to a constant. For ``n ≤ 4`` the factor is the
      unrolled Cholesky recurrence and the solves are products with the closed-form ``L⁻¹``
      (``rules/_kernels/cholesky.py``), fused loops over a batch instead of a solver call per
      matrix. Solve with the factor with :func:`rules.cho_solve`.

    References:
      I. Murray, "Differentiation of the Cholesky decomposition", arXiv:1602.07527.
      S. P. Smith, "Differentiation of the Cholesky algorithm", J. Comp. Graph. Stat. 4 (1995).

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a = jnp.array([[4.0, 2.0], [2.0, 2.0]], dtype=jnp.float32)
      >>> rules.cholesky(a)
      Array([[2., 0.],
             [1., 1.]], dtype=float32)
      >>> jax.jvp(rules.cholesky, (a,), (a,))[1]  # L is homogeneous of degree ½
      Array([[1. , 0. ],
             [0.5, 0.5]], dtype=float32)
    """
    a = as_inexact_matrix("cholesky", "a", a, square=True)
    l = _cholesky(a, symmetrize_input=symmetrize_input)
    return mH(l) if upper else l


def _cholesky_forward(a, *, symmetrize_input):
    l = kernel.cholesky(a, symmetrize_input=symmetrize_input)
    return l, l


def _cholesky_pushforward(l, a_dot, *, symmetrize_input):
    """``L̇ = L Φ(L⁻¹ Ṡ L⁻ᴴ)``: a left-side solve, then a right-side one, so that neither solve
    reads a transposed operand (which XLA would copy first)."""
    solve = kernel.triangular_solver(l)
    s_dot = hermitian_part(a_dot) if symmetrize_input else a_dot
    x = solve(solve(s_dot, left_side=True), left_side=False, transpose_a=True, conjugate_a=True)
    return lower_product(l, _phi(x))


def _cholesky_pullback(l, l_bar, *, symmetrize_input):
    """``S̄ = L⁻ᵀ Φ(Lᵀ L̄) conj(L)⁻¹``, then the Hermitian part if the input was symmetrised.

    With ``Y = Φ(Lᵀ L̄) conj(L)⁻¹`` (a right-side solve), ``S̄ = L⁻ᵀ Y`` by a left-side one: no
    solve reads a transposed operand. Tiny factors take ``S̄ = (Yᵀ L⁻¹)ᵀ`` instead: their solves
    are unrolled products, into which the transposes fuse, where a product with ``L⁻ᵀ`` would
    make XLA lay out the transposed inverse.
    """
    solve = kernel.triangular_solver(l)
    y = solve(_phi(lower_of_transpose_product(l, l_bar)), left_side=False, conjugate_a=True)
    if closed_form_applies(l):
        s_bar = solve(y.mT, left_side=False).mT
    else:
        s_bar = solve(y, left_side=True, transpose_a=True)
    return (hermitian_part(s_bar) if symmetrize_input else s_bar,)


_cholesky = Rule("cholesky", _cholesky_forward, _cholesky_pushforward, _cholesky_pullback)


def _phi(x):
    """``tril(X, -1) + ½ diag(X)``: the lower triangle with the diagonal halved (one pass)."""
    n = x.shape[-1]
    row = lax.broadcasted_iota(jnp.int32, (n, n), 0)
    col = lax.broadcasted_iota(jnp.int32, (n, n), 1)
    return jnp.where(row > col, x, jnp.where(row == col, 0.5 * x, 0))


# ==============================================================================================
# Solve with a Cholesky factor


def cho_solve(c_and_lower: tuple[ArrayLike, bool], b: ArrayLike, overwrite_b: bool = False,
              check_finite: bool = True) -> jax.Array:
    r"""Solve ``A X = B`` given the Cholesky factor of ``A``, as ``jax.scipy.linalg.cho_solve``.

    ``A = L Lᴴ`` with ``L`` the lower factor (``lower=True``) or ``A = Uᴴ U`` with ``U = c`` upper.
    With ``X = A⁻¹ B``, in JAX's convention:

    .. math::
        \dot X = A^{-1}\big(\dot B - (\dot L L^H + L \dot L^H) X\big), \qquad
        \bar B = \operatorname{conj}(A)^{-1}\bar X, \qquad
        \bar L = -\operatorname{tril}\big((\bar B X^T + \operatorname{conj}(X)\,\bar B^H)
        \operatorname{conj}(L)\big)

    (``Ā = -B̄ Xᵀ`` as for any solve, then the chain rule through ``A = L Lᴴ``). Derivation: ``docs/derivations/decompositions.md#cho-solve``.

    Args:
      c_and_lower: ``(c, lower)``: ``c`` of shape ``(..., n, n)``, the factor from
        :func:`rules.cholesky` (or ``jax.scipy.linalg.cho_factor``); only its ``lower`` triangle is
        read, and only that triangle gets a cotangent. ``lower`` is a Python bool.
      b: array of shape ``(n,)`` or ``(..., n, k)``; batch axes broadcast with those of ``c``. As in
        :func:`rules.solve` (and unlike the deprecated 1-D batching of
        ``jax.scipy.linalg.cho_solve``), ``b`` is a vector only when it is 1-D.
      overwrite_b: no effect (arrays are immutable), as in ``jax.scipy.linalg.cho_solve``.
      check_finite: no effect (non-finite input gives non-finite output), as in JAX.

    Returns:
      ``X`` of shape ``(..., n)`` for a 1-D ``b``, ``(..., n, k)`` otherwise.

    Raises:
      TypeError: ``c`` or ``b`` is not an array of a numeric dtype, or ``lower`` is not a bool.
      ValueError: ``c`` is not of shape ``(..., n, n)``, ``b`` does not match it, or ``c_and_lower``
        is not a pair.

    Notes:
      Residuals: the lower factor and ``X``. The pushforward is one solve (two triangular solves)
      and the pullback one solve and two products: the factorisation is never repeated. For
      ``n ≤ 4`` the triangular solves are products with the closed-form ``L⁻¹``, as in
      :func:`rules.cholesky`. Through
      :func:`rules.cholesky` this differentiates ``A ↦ A⁻¹B`` at half the cost of an LU solve.

    References:
      I. Murray, arXiv:1602.07527; M. Giles (2008), §2.2.

    Examples:
      >>> import jax.numpy as jnp, rules
      >>> a = jnp.array([[4.0, 2.0], [2.0, 2.0]], dtype=jnp.float32)
      >>> rules.cho_solve((rules.cholesky(a), True), jnp.array([2.0, 0.0], dtype=jnp.float32))
      Array([ 1., -1.], dtype=float32)
    """
    if not (isinstance(c_and_lower, (tuple, list)) and len(c_and_lower) == 2):
        raise ValueError(f"cho_solve: `c_and_lower` must be a pair (c, lower); got "
                         f"{type(c_and_lower).__name__}.")
    del overwrite_b, check_finite  # SciPy's options, which JAX accepts and ignores too
    c, lower = c_and_lower
    if not isinstance(lower, bool):
        raise TypeError(f"cho_solve: `lower` must be a bool; got {type(lower).__name__}.")
    return _cho_solve_with(c, b, lower=lower)


@jitted("lower")
def _cho_solve_with(c, b, *, lower):
    c, b = promote_operands("cho_solve", "c", c, b)
    return solve_broadcast("cho_solve", "c", c if lower else mH(c), b, _cho_solve)


def _cho_solve_forward(l, b):
    solve = kernel.triangular_solver(l)
    y = solve(b, left_side=True)
    x = solve(y, left_side=True, transpose_a=True, conjugate_a=True)
    return x, (l, y, x)


def _cho_solve_pushforward(res, l_dot, b_dot):
    """``Ẋ = A⁻¹(Ḃ - L̇(LᴴX) - L(L̇ᴴX))`` with ``L̇ = tril(ċ)`` and ``LᴴX = Y``."""
    l, y, x = res
    if l_dot is None:  # the rule is not evaluated when both tangents are zero
        return kernel.solve_factored(l, b_dot)
    l_dot = jnp.tril(l_dot)
    rhs = -mm(l_dot, y) - mm(l, mm(mH(l_dot), x))
    return kernel.solve_factored(l, rhs if b_dot is None else rhs + b_dot)


def _cho_solve_pullback(res, x_bar):
    """``Z = conj(L)⁻¹ X̄``, ``B̄ = L⁻ᵀ Z``, ``L̄ = -tril(B̄ Yᵀ + conj(X) Zᴴ)`` with ``Y = L⁻¹B``.

    The same as ``-tril((Ā + Āᴴ) conj L)`` with ``Ā = -B̄ Xᵀ``, since ``Xᵀ conj L = Yᵀ`` and
    ``B̄ᴴ conj L = Zᴴ``: two outer products instead of four products, computed as one,
    ``[B̄ | conj X] [Y | conj Z]ᵀ`` (one dot and no sum).
    """
    l, y, x = res
    solve = kernel.triangular_solver(l)
    z = solve(x_bar, left_side=True, conjugate_a=True)
    b_bar = solve(z, left_side=True, transpose_a=True)
    left = jnp.concatenate([b_bar, conj(x)], axis=-1)
    right = jnp.concatenate([y, conj(z)], axis=-1)
    return -jnp.tril(mm(left, right.mT)), b_bar


_cho_solve = Rule("cho_solve", _cho_solve_forward, _cho_solve_pushforward, _cho_solve_pullback)
