"""Rules of dense square matrices: the inverse, linear solves, the determinant and its logarithm.

Each section holds the public function (checks once, at trace time), then the rule's forward,
pushforward and pullback, in that order, and the :class:`~rules._core.rule.Rule` that joins them.
The factorisations are the kernel layer's (``rules/_kernels/lu.py``, ``rules/_kernels/small.py``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from .._core.checks import (as_inexact_matrix, is_half, promote_operands, refuse_half,
                           solve_broadcast)
from .._core.dispatch import jitted
from .._core.rule import Rule
from .._kernels import jax_ops, lu, routes
from .._kernels.products import laid_out, mm
from .._kernels.small import closed_form_applies, closed_form_cofactors, cofactor_entries

__all__ = ["SlogdetResult", "det", "inv", "slogdet", "solve"]

# JAX's own result class (``jax.numpy.linalg`` does not export it), so that results and cotangents
# of rules.slogdet and jnp.linalg.slogdet are interchangeable pytrees.
if TYPE_CHECKING:  # the same class, for type checkers
    from jax._src.numpy.linalg import SlogdetResult
else:
    SlogdetResult = type(jax.eval_shape(lambda: jax_ops.slogdet(jnp.eye(1, dtype=jnp.float32))))


# ==============================================================================================
# Matrix inverse


@jitted()
def inv(a: ArrayLike) -> jax.Array:
    r"""Inverse of a (batch of) square matrices, with an explicit pushforward and pullback.

    .. math::
        B = A^{-1}, \qquad \dot B = -B\,\dot A\,B, \qquad \bar A = -B^T \bar B\, B^T

    (the pullback in JAX's convention; the inverse is holomorphic, so complex inputs use plain
    transposes). Derivation: ``docs/derivations/inverse.md``.

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
      flops). For ``n ≤ 4`` the forward is the closed-form adjugate formula (one fused loop over
      a batch instead of an LU per matrix), accurate to about ``κ(A)·eps``; the routes by size
      and platform are those of ``rules/_kernels/lu.py``. Prefer :func:`rules.solve` when only
      ``A⁻¹ b`` is needed.

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
    b = lu.inverse(a)
    return b, b


def _inv_pushforward(b, a_dot):
    """``Ḃ = -B Ȧ B``, from ``d(AB) = 0``.

    ``B`` is laid out first: the CPU's inverse leaves it as the transpose of a triangular solve's
    result, which XLA would fold into the first product, sending it to XLA:CPU's generic dot.
    """
    return -mm(mm(laid_out(b), a_dot), b)


def _inv_pullback(b, b_bar):
    """``Ā = -Bᵀ B̄ Bᵀ``: the transpose of the pushforward."""
    return (-mm(mm(b.mT, b_bar), b.mT),)


_inv = Rule("inv", _inv_forward, _inv_pushforward, _inv_pullback)


# ==============================================================================================
# Linear solve


@jitted()
def solve(a: ArrayLike, b: ArrayLike) -> jax.Array:
    r"""Solution ``X = A⁻¹ B`` of ``A X = B``, with an explicit pushforward and pullback.

    .. math::
        X = A^{-1}B, \qquad \dot X = A^{-1}(\dot B - \dot A X), \qquad
        \bar B = A^{-T}\bar X, \qquad \bar A = -\bar B X^T

    (the pullback in JAX's convention; the solve is holomorphic, so complex inputs use plain
    transposes). ``A`` is ``a``, ``B`` is ``b``, ``X`` the result. Shapes, batching and dtype
    promotion are those of ``jnp.linalg.solve``. Derivation:
    ``docs/derivations/decompositions.md#solve``.

    Args:
      a: array of shape ``(..., n, n)``.
      b: array of shape ``(n,)`` (one right-hand side, shared by every matrix of the batch) or
        ``(..., n, k)``; the batch axes of ``a`` and ``b`` broadcast. As in ``jnp.linalg.solve``,
        ``b`` is a vector only when it is 1-D. Integer and boolean arrays are promoted as
        ``jnp.linalg.solve`` promotes them; float16/bfloat16 go to JAX's forward (on CPU it
        raises ``NotImplementedError``, as ``jnp.linalg.solve`` does).

    Returns:
      ``X`` of shape ``(..., n)`` for a 1-D ``b``, ``(..., n, k)`` otherwise, with the batch shape
      broadcast from ``a`` and ``b`` and the promoted dtype of ``a`` and ``b``. A singular ``a``
      gives inf/nan, as ``jnp.linalg.solve`` does.

    Raises:
      TypeError: ``a`` or ``b`` is not an array, or not of a numeric dtype.
      ValueError: ``a`` is not of shape ``(..., n, n)``, ``b`` is not of shape ``(n,)`` or
        ``(..., n, k)``, or their batch shapes do not broadcast.

    Notes:
      One factorisation, reused: the forward's LU factors and ``X`` are the residuals, the
      pushforward is one solve with them and the pullback one transposed solve and one product;
      ``A⁻¹`` is never formed. For ``n ≤ 4`` (not half precision) the factorisation is the
      closed-form inverse, one fused loop over a batch, with an error of about ``κ(A)·eps``; on the
      CPU below ``n = 128`` the LU is that of ``[A | B]``, which leaves ``L⁻¹PB`` beside the
      factors (``rules/_kernels/lu.py``). A single matrix ``a`` (no batch axes) with a batched
      ``b`` is factorised once: the batch of ``b`` is folded into its columns.

    References:
      M. Giles, "An extended collection of matrix derivative results for forward and reverse mode
      algorithmic differentiation" (2008), §2.2 and §3.

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a = jnp.array([[2.0, 1.0], [1.0, 1.0]], dtype=jnp.float32)
      >>> b = jnp.array([1.0, 2.0], dtype=jnp.float32)
      >>> rules.solve(a, b)
      Array([-1.,  3.], dtype=float32)
      >>> jax.grad(lambda b: rules.solve(a, b).sum())(b)  # A⁻ᵀ 1
      Array([0., 1.], dtype=float32)
    """
    a, b = promote_operands("solve", "a", a, b)
    return solve_broadcast("solve", "a", a, b, _solve)


def _solve_forward(a, b):
    x, factors = lu.factor_and_solve(a, b)
    return x, (factors, x)


def _solve_pushforward(res, a_dot, b_dot):
    """``Ẋ = A⁻¹(Ḃ - Ȧ X)``: one solve with the forward's factors."""
    factors, x = res
    if a_dot is None:  # the rule is not evaluated when both tangents are zero
        return lu.solve_with(factors, b_dot)
    rhs = -mm(a_dot, x)
    return lu.solve_with(factors, rhs if b_dot is None else rhs + b_dot)


def _solve_pullback(res, x_bar):
    """``B̄ = A⁻ᵀ X̄`` (one transposed solve), ``Ā = -B̄ Xᵀ``."""
    factors, x = res
    b_bar = lu.solve_with(factors, x_bar, transpose=True)
    # Negate the thin factor, not the n × n product: a pass over n·k entries instead of n².
    return mm(-b_bar, x.mT), b_bar


_solve = Rule("solve", _solve_forward, _solve_pushforward, _solve_pullback)


# ==============================================================================================
# Determinant


@jitted()
def det(a: ArrayLike) -> jax.Array:
    r"""Determinant of a (batch of) square matrices, with an explicit pushforward and pullback.

    .. math::
        d = \det A, \qquad \dot d = \sum_{ij} C_{ij}\dot A_{ij}, \qquad \bar A = \bar d\, C,
        \qquad C = \operatorname{adj}(A)^T

    with ``C`` the cofactor matrix (``C = det(A) A⁻ᵀ`` for nonsingular ``A``); the pullback is in
    JAX's convention (the determinant is holomorphic: no conjugation). Derivation:
    ``docs/derivations/decompositions.md#det``.

    Args:
      a: array of shape ``(..., n, n)``; integers and booleans are promoted as ``jnp.linalg.det``
        promotes them, float16/bfloat16 go to JAX's forward.

    Returns:
      ``det A`` of shape ``a.shape[:-2]`` and the dtype of ``a``.

    Raises:
      TypeError: ``a`` is not an array, or not of a numeric dtype.
      ValueError: ``a`` is not of shape ``(..., n, n)``.

    Notes:
      For ``n ≤ 4`` ``det`` and ``C`` are polynomials of the entries (``rules/_kernels/small.py``),
      exact cofactors at every singular matrix; the residual is ``A`` and the derivatives
      evaluate ``C`` inside their own elementwise loop. For larger ``n`` the residual is ``C``,
      the derivative itself (a tangent costs one elementwise product), from one LU factorisation
      of ``Aᵀ`` (``rules/_kernels/lu.py``), ``C = adj(Aᵀ) = ±adj(U) L⁻¹ P``, with
      ``adj(U)`` by a rank-one update of the triangular inverse that stays exact when ``U`` has
      one zero pivot: at a singular ``a`` the gradient is the (finite) cofactor matrix whenever
      the LU of ``aᵀ`` has at most one zero pivot, and zero when it has more: exact at rank
      ``≤ n - 2``, and at rank ``n - 1`` except in the rare case where partial pivoting meets two
      zero pivots (a zero first row of ``a`` and a dependent later one).
      JAX's gradient is zero wherever a zero pivot is not the last one.

    References:
      M. Giles, "An extended collection of matrix derivative results for forward and reverse mode
      algorithmic differentiation" (2008), §2.2 (Jacobi's formula).

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a = jnp.array([[1.0, 2.0], [2.0, 4.0]], dtype=jnp.float32)  # singular
      >>> rules.det(a), jax.grad(rules.det)(a)  # the cofactor matrix
      (Array(0., dtype=float32), Array([[ 4., -2.],
             [-2.,  1.]], dtype=float32))
    """
    a = as_inexact_matrix("det", "a", a, square=True, half=True)
    if a.shape[-1] not in (1, 2, 3):  # JAX's closed forms take half precision, LU does not
        refuse_half("det", "a", a)
    return _det(a)


def _det_forward(a):
    if not _tiny(a):
        return lu.det_and_cofactors(a)
    # Tiny matrices keep A: the cofactors are recomputed where they are needed, fused into the
    # derivative's own elementwise loop, instead of being stored.
    return (jax_ops.det(a) if is_half(a) else closed_form_cofactors(a)[1]), a


def _det_pushforward(res, a_dot):
    """``ḋ = Σ C ⊙ Ȧ``."""
    n = res.shape[-1]
    if _tiny(res) and n > 0:
        cof, _ = cofactor_entries(res)
        return sum(cof[i][j] * a_dot[..., i, j] for i in range(n) for j in range(n))
    return jnp.sum(res * a_dot, axis=(-2, -1))


def _det_pullback(res, d_bar):
    """``Ā = d̄ C``."""
    cof = closed_form_cofactors(res)[0] if _tiny(res) else res
    return (d_bar[..., None, None] * cof,)


def _tiny(a):
    """Whether ``det`` keeps ``A`` and its cofactors are polynomials (half precision included)."""
    return a.shape[-1] <= routes.CLOSED_FORM_MAX_N


def _det_primal(a):
    """The value alone: for larger ``n`` JAX's determinant, one LU of ``A`` (the residual ``C``
    needs that of ``Aᵀ`` with ``L⁻¹P``)."""
    return _det_forward(a)[0] if _tiny(a) else jax_ops.det(a)


_det = Rule("det", _det_forward, _det_pushforward, _det_pullback, primal=_det_primal)


# ==============================================================================================
# Sign and logarithm of the determinant


@jitted("method")
def slogdet(a: ArrayLike, *, method: str | None = None) -> SlogdetResult:
    r"""Sign and log-modulus of the determinant, with an explicit pushforward and pullback.

    ``det A = sign · exp(logabsdet)``. With ``t = tr(A⁻¹ Ȧ) = Σ A⁻ᵀ ⊙ Ȧ``:

    .. math::
        \dot\ell = \operatorname{Re} t, \qquad \dot s = i \operatorname{Im}(t)\, s, \qquad
        \bar A = \big(\bar\ell + i \operatorname{Im}(\bar s\, s)\big) A^{-T}

    (``ℓ`` = ``logabsdet``, ``s`` = ``sign``; for real ``a`` the sign is locally constant,
    ``ṡ = 0`` and ``Ā = ℓ̄ A⁻ᵀ``). The pullback is in JAX's convention, and both derivatives are
    those of ``jnp.linalg.slogdet``. Derivation: ``docs/derivations/decompositions.md#slogdet``.

    Args:
      a: array of shape ``(..., n, n)``; integers and booleans are promoted as
        ``jnp.linalg.slogdet`` promotes them, float16/bfloat16 go to JAX's forward.
      method: ``None`` or ``"lu"`` (JAX's default) or ``"qr"``, as ``jnp.linalg.slogdet`` takes
        it: JAX factorises with LU or with QR; both give the same sign and log-modulus, which
        this rule computes from one LU factorisation whichever is named.

    Returns:
      ``SlogdetResult(sign, logabsdet)`` (``jnp.linalg.slogdet``'s own result type), both of shape
      ``a.shape[:-2]``; ``sign`` has the dtype of ``a``, ``logabsdet`` its real dtype. A singular
      ``a`` gives ``sign = 0``, ``logabsdet = -inf`` and an inf/nan gradient, as JAX does.

    Raises:
      TypeError: ``a`` is not an array, or not of a numeric dtype.
      ValueError: ``a`` is not of shape ``(..., n, n)``, or ``method`` is unknown.

    Notes:
      The residual is ``A⁻ᵀ``, the derivative of ``log det``: the pushforward is one elementwise
      product per tangent, the pullback a scaling. For ``n ≤ 4`` it is ``C / det`` from the
      closed-form cofactors, otherwise ``U⁻¹(L⁻¹P)`` from the LU factors of ``Aᵀ`` (``L⁻¹P`` as
      ``det`` forms it).

    References:
      M. Giles (2008), §2.2.

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a = jnp.array([[2.0, 1.0], [1.0, 1.0]], dtype=jnp.float32)
      >>> rules.slogdet(-a)
      SlogdetResult(sign=Array(1., dtype=float32), logabsdet=Array(0., dtype=float32))
      >>> jax.grad(lambda a: rules.slogdet(a).logabsdet)(a)  # A⁻ᵀ
      Array([[ 1., -1.],
             [-1.,  2.]], dtype=float32)
    """
    a = as_inexact_matrix("slogdet", "a", a, square=True)
    if method not in (None, "lu", "qr"):
        raise ValueError(f"slogdet: `method` must be None, 'lu' or 'qr' (as jnp.linalg.slogdet); "
                         f"got {method!r}.")
    return _slogdet(a)


def _slogdet_forward(a):
    if closed_form_applies(a):
        cof, d = closed_form_cofactors(a)
        abs_d = jnp.abs(d)
        sign = jnp.where(abs_d == 0, 0, d / jnp.where(abs_d == 0, 1, abs_d).astype(d.dtype))
        logabsdet = jnp.log(abs_d)
        inv_t = cof / d[..., None, None]
    elif is_half(a):
        sign, logabsdet = jax_ops.slogdet(a)
        inv_t = jax_ops.inv(a).mT
    else:
        factors, pivots, m = lu.lu_with_lower_inverse(a.mT)  # det Aᵀ = det A
        sign, logabsdet = lu.slogdet_from_lu(factors, pivots)
        inv_t = lu.upper_solve(factors, m)
    return SlogdetResult(sign, logabsdet), (sign, inv_t)


def _slogdet_pushforward(res, a_dot):
    """``ℓ̇ = Re t``, ``ṡ = i Im(t) s`` with ``t = Σ A⁻ᵀ ⊙ Ȧ``."""
    sign, inv_t = res
    t = jnp.sum(inv_t * a_dot, axis=(-2, -1))
    if not jnp.iscomplexobj(t):
        return SlogdetResult(jnp.zeros_like(sign), t)
    return SlogdetResult(1j * t.imag.astype(sign.dtype) * sign, t.real)


def _slogdet_pullback(res, ct):
    """``Ā = (ℓ̄ + i Im(s̄ s)) A⁻ᵀ``; a real sign has no derivative."""
    sign, inv_t = res
    sign_bar, logabsdet_bar = ct
    z = logabsdet_bar.astype(inv_t.dtype)
    if jnp.iscomplexobj(inv_t):
        z = z + 1j * (sign_bar * sign).imag.astype(z.dtype)
    return (z[..., None, None] * inv_t,)


def _slogdet_primal(a):
    """The value alone: beyond the closed forms JAX's, one LU of ``A`` (the residual ``A⁻ᵀ``
    needs ``L⁻¹P`` and a triangular solve more)."""
    return _slogdet_forward(a)[0] if closed_form_applies(a) else jax_ops.slogdet(a)


_slogdet = Rule("slogdet", _slogdet_forward, _slogdet_pushforward, _slogdet_pullback,
                primal=_slogdet_primal)
