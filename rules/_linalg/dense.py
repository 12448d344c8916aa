"""Rules of dense square matrices: the inverse, linear solves, the determinant and its logarithm.

Each section holds the public function (checks once, at trace time), then the rule's forward,
pushforward and pullback, in that order, and the :class:`~rules._core.rule.Rule` that joins them.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.typing import ArrayLike

from .._core.arrays import eye_like, laid_out, mm
from .._core.checks import (
    HALF_DTYPES,
    INEXACT_DTYPES,
    as_inexact_matrix,
    check_array,
    is_half,
)
from .._core.rule import Rule
from . import jax_ops
from .small import (
    MAX_CLOSED_FORM_N,
    closed_form_applies,
    closed_form_cofactors,
    closed_form_inv,
    cofactor_entries,
)

__all__ = ["SlogdetResult", "det", "inv", "slogdet", "solve"]

# JAX's own result class (``jax.numpy.linalg`` does not export it), so that results and cotangents
# of rules.slogdet and jnp.linalg.slogdet are interchangeable pytrees.
if TYPE_CHECKING:  # the same class, for type checkers
    from jax._src.numpy.linalg import SlogdetResult
else:
    SlogdetResult = type(jax.eval_shape(lambda: jax_ops.slogdet(jnp.eye(1, dtype=jnp.float32))))


# ==============================================================================================
# Matrix inverse


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
    b = inverse(a)
    return b, b


def inverse(a: jax.Array) -> jax.Array:
    """``A⁻¹`` as the rules form it: for tiny matrices the adjugate formula, one fused elementwise
    loop over the batch instead of a LAPACK-style LU per slice (overhead-bound on CPU; see
    rules/_linalg/small.py), below ``LU_INVERSE_MAX_N`` :func:`lu_inverse`, above JAX's."""
    if closed_form_applies(a):
        return closed_form_inv(a)
    return lu_inverse(a) if a.shape[-1] < LU_INVERSE_MAX_N else jax_ops.inv(a)


# From this size on the LU of [A | I] gains nothing: its n extra columns cost LAPACK as much as
# the two triangular solves of JAX's inverse, or more. Gradient of rules.inv, time with
# lu_inverse / with JAX's inverse as the forward (float32, one process): on one 2-core host 0.82
# at 256 × 256 and 0.96–1.02 at 1024 × 1024; on another (AVX2) 0.93–0.97 at 64 × 64, ~1.0 at
# 256, 1.08–1.10 at 512 and 1.16–1.21 at 1024.
LU_INVERSE_MAX_N = 512


def lu_inverse(a: jax.Array) -> jax.Array:
    """``A⁻¹ = U⁻¹(L⁻¹P)``: ``L⁻¹P`` from :func:`_lu_with_lower_inverse` (below ``WIDE_LU_MAX_N``
    LAPACK leaves it beside the factors of ``[A | I]``), and one triangular solve.

    ``jnp.linalg.inv`` solves with the identity instead: the permutation formed from the pivots
    in a loop of n steps, a row gather and two triangular solves. Gradient of ``rules.inv``,
    this / that (float32, CPU, interleaved): 0.87 at 64 × 64 and at 256 × 256. Half precision,
    which LAPACK cannot factor, goes to JAX's inverse as before.
    """
    if is_half(a):
        return jax_ops.inv(a)
    lu, _, m = _lu_with_lower_inverse(a)
    return _upper_solve(lu, m)


def _inv_pushforward(b, a_dot):
    """``Ḃ = -B Ȧ B``, from ``d(AB) = 0``.

    ``B`` is laid out first: :func:`lu_inverse` leaves it as the transpose of a triangular
    solve's result, which XLA folds into the first product, sending it to XLA:CPU's generic dot
    (jvp float32, 64 × 64: 0.94–0.95 of the time laid out, 1024 × 1024: 0.94–0.99).
    """
    return -mm(mm(laid_out(b), a_dot), b)


def _inv_pullback(b, b_bar):
    """``Ā = -Bᵀ B̄ Bᵀ``: the transpose of the pushforward."""
    return (-mm(mm(b.mT, b_bar), b.mT),)


_inv = Rule("inv", _inv_forward, _inv_pushforward, _inv_pullback)


# ==============================================================================================
# Linear solve


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
      ``A⁻¹`` is never formed. For ``n < 128`` the LU is that of ``[A | B]``, which leaves
      ``L⁻¹PB`` beside the factors; from 128 on, where LAPACK's factorisation of the wider matrix
      costs more than that saves, the LU of ``A``, whose row permutation the derivatives reuse.
      For ``n ≤ 4`` (not half precision) the forward is instead the closed-form inverse of
      ``rules/_linalg/small.py``, and that inverse is the factorisation the derivatives reuse: on
      CPU it is several times faster than a batched LU of tiny matrices, with an error of about
      ``κ(A)·eps``. A single matrix ``a`` (no batch axes)
      with a batched ``b`` is factorised once: the batch of ``b`` is folded into its columns.

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


def solve_broadcast(fname: str, argname: str, a: jax.Array, b: jax.Array,
                    solver: Callable[[jax.Array, jax.Array], jax.Array]) -> jax.Array:
    """``solver(A, B)`` for ``b`` of shape ``(n,)`` or ``(..., n, k)``, batch shapes broadcast.

    ``solver`` takes ``A`` of shape ``(..., n, n)`` and ``B`` of shape ``(..., n, k)`` with equal
    batch shapes. One matrix with a batch of right-hand sides is factorised once: the batch
    becomes columns.
    """
    n = a.shape[-1]
    vector = b.ndim == 1
    if (b.shape[0] if vector else b.shape[-2]) != n:
        raise ValueError(f"{fname}: `b` must have shape (n,) or (..., n, k) with n = {n} "
                         f"(`{argname}` has shape {tuple(a.shape)}); got {tuple(b.shape)}.")
    b_mat = b[:, None] if vector else b
    try:
        batch = jnp.broadcast_shapes(a.shape[:-2], b_mat.shape[:-2])
    except ValueError:
        raise ValueError(f"{fname}: the batch shapes of `{argname}` {tuple(a.shape)} and `b` "
                         f"{tuple(b.shape)} do not broadcast.") from None
    k = b_mat.shape[-1]
    if a.ndim == 2 and batch:
        cols = jnp.moveaxis(b_mat, -2, 0).reshape(n, -1)
        x = jnp.moveaxis(solver(a, cols).reshape(n, *batch, k), 0, -2)
    else:
        x = solver(jnp.broadcast_to(a, (*batch, n, n)), jnp.broadcast_to(b_mat, (*batch, n, k)))
    return x[..., 0] if vector else x


def promote_operands(fname: str, argname: str, a: Any, b: Any) -> tuple[jax.Array, jax.Array]:
    """``a`` (square) and ``b`` checked, then promoted together as ``jax.numpy.linalg`` does."""
    a_in, b_in = a, b
    a = as_inexact_matrix(fname, argname, a, square=True)
    b = _as_inexact_rhs(fname, b)
    dtype = jnp.result_type(a_in.dtype, b_in.dtype)  # an integer operand takes the other's dtype
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = _as_inexact_rhs(fname, jnp.zeros(1, dtype)).dtype
    return a.astype(dtype), b.astype(dtype)


def _as_inexact_rhs(fname: str, x: Any) -> jax.Array:
    """``b`` of a solve as an array of rank ≥ 1, integers promoted as ``jax.numpy.linalg`` does."""
    if not isinstance(x, (jax.Array, np.ndarray)):
        raise TypeError(f"{fname}: `b` must be a JAX or NumPy array; got {type(x).__name__}.")
    if x.dtype == np.bool_ or jnp.issubdtype(x.dtype, jnp.integer):
        x = jnp.asarray(x, jax.dtypes.canonicalize_dtype(
            jnp.float64 if x.dtype.itemsize == 8 else jnp.float32))
    check_array(fname, "b", x, dtypes=INEXACT_DTYPES + HALF_DTYPES)
    if x.ndim < 1:
        raise ValueError(f"{fname}: `b` must have shape (n,) or (..., n, k); got ().")
    return x


# From this n on, LAPACK's getrf of the wide [A | B] costs more than the permutation and forward
# substitution it saves. Gradient of solve with k = 4 columns, time with the LU of [A | B] / with
# the LU of A alone (CPU, float32, interleaved; without and with jax_enable_x64): n = 64 0.93,
# 0.98; 128 1.00, 1.01; 192 1.03, 1.01; 256 1.06, 1.06; 384 1.02, 1.05; 512 1.15, 1.17.
_LU_OF_A_ALONE_N = 128


def _solve_forward(a, b):
    factors: jax.Array | LUFactors
    n = a.shape[-1]
    if closed_form_applies(a):
        factors = closed_form_inv(a)
    elif n >= _LU_OF_A_ALONE_N:
        factors = lu_factors(a)
    else:
        # LU of [A | B]: partial pivoting looks at the first n columns only, so the factors are
        # A's, and LAPACK's getrf leaves L⁻¹ P B in the last columns, the row permutation and
        # the forward substitution done in the factorisation: one triangular solve remains.
        lu, pivots, _ = lax.linalg.lu(jnp.concatenate([a, b], axis=-1))
        lu, y = lu[..., :n], lu[..., n:]
        x = lax.linalg.triangular_solve(lu, y, left_side=True, lower=False)
        return x, (LUFactors(lu, pivots), x)
    x = solve_with(factors, b)
    return x, (factors, x)


def _solve_pushforward(res, a_dot, b_dot):
    """``Ẋ = A⁻¹(Ḃ - Ȧ X)``: one solve with the forward's factors."""
    factors, x = res
    rhs = -mm(a_dot, x) if a_dot is not None else 0
    rhs = rhs + b_dot if b_dot is not None else rhs
    return solve_with(factors, rhs)


def _solve_pullback(res, x_bar):
    """``B̄ = A⁻ᵀ X̄`` (one transposed solve), ``Ā = -B̄ Xᵀ``."""
    factors, x = res
    b_bar = solve_with(factors, x_bar, transpose=True)
    # Negate the thin factor, not the n × n product: a pass over n·k entries instead of n².
    return mm(-b_bar, x.mT), b_bar


_solve = Rule("solve", _solve_forward, _solve_pushforward, _solve_pullback)


class LUFactors(NamedTuple):
    """``A[π] = LU`` as LAPACK's getrf leaves it: ``lu`` holds ``L`` (unit diagonal) and ``U``.

    ``perm`` is ``π`` when the forward formed it (then the derivatives reuse it), None when no
    solve of the forward needed it (it is then formed from ``pivots`` where needed).
    """

    lu: jax.Array
    pivots: jax.Array
    perm: jax.Array | None = None


def lu_factors(a: jax.Array) -> LUFactors:
    """The LU factors of ``a`` with the permutation formed once, for a forward and its derivatives."""
    lu, pivots, _ = lax.linalg.lu(a)
    return LUFactors(lu, pivots, pivots_to_permutation(pivots))


class LowerInverseFactors(NamedTuple):
    """``A = PᵀLU`` as ``U`` (the upper triangle of ``lu``) and ``M = L⁻¹P``.

    A solve is ``U⁻¹(MB)``: a product and one triangular solve, no pivots, no row permutation.
    For ``n`` right-hand sides the product costs what the forward substitution it replaces
    would, and LAPACK forms ``M`` inside the factorisation (:func:`lower_inverse_factors`).
    """

    lu: jax.Array
    l_inv_p: jax.Array


def lower_inverse_factors(a: jax.Array) -> LowerInverseFactors:
    """:class:`LowerInverseFactors` of ``a`` (:func:`_lu_with_lower_inverse`)."""
    lu, _, m = _lu_with_lower_inverse(a)
    return LowerInverseFactors(lu, m)


def solve_with(factors, b, transpose=False):
    """``A⁻¹ B`` (or ``A⁻ᵀ B``) from the closed-form inverse or the LU factors."""
    if isinstance(factors, LowerInverseFactors):
        u, m = factors
        # Both products stay row-major operands of XLA:CPU's fast dot (rules.internal.mm_h):
        # folded into the dot, _upper_solve's transpose and mᵀ would send it to the generic one.
        if not transpose:
            return _upper_solve(u, laid_out(mm(m, b)))
        return mm(laid_out(m.mT), lax.linalg.triangular_solve(u, b, left_side=True, lower=False,
                                                               transpose_a=True))
    if not isinstance(factors, LUFactors):
        return mm(factors.mT if transpose else factors, b)
    lu, pivots, perm = factors
    if not transpose:
        if perm is None:
            perm = pivots_to_permutation(pivots)
        x = _permute_rows(b, perm)
        x = lax.linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
        return lax.linalg.triangular_solve(lu, x, left_side=True, lower=False)
    x = lax.linalg.triangular_solve(lu, b, left_side=True, lower=False, transpose_a=True)
    x = lax.linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True,
                                    transpose_a=True)
    if perm is None:
        inverse = pivots_to_permutation(pivots, inverse=True)
    else:  # π⁻¹[π[i]] = i: a scatter of n integers instead of another loop over the pivots
        iota = lax.broadcasted_iota(perm.dtype, perm.shape, perm.ndim - 1)
        inverse = jnp.put_along_axis(jnp.zeros_like(perm), perm, iota, axis=-1, inplace=False,
                                     mode="promise_in_bounds")
    return _permute_rows(x, inverse)


def _permute_rows(x, perm):
    """``x[..., perm, :]`` per slice of a batch.

    A permutation is in bounds: without the clamping and masking of JAX's default gather mode,
    XLA:CPU copies rows (float32, 256 × 256: 19 against 104 µs; 1024 × 8 × 8: 22–38 against
    110 µs).
    """
    return jnp.take_along_axis(x, perm[..., :, None], axis=-2, mode="promise_in_bounds")


def pivots_to_permutation(pivots: jax.Array, inverse: bool = False) -> jax.Array:
    """The permutation ``π`` with ``A[π] = L U`` from LAPACK's pivots (row ``i`` swapped with row
    ``pivots[i]``, in turn), or its inverse ``π⁻¹`` (the same swaps in reverse order).

    What ``lax.linalg.lu`` computes as its third output, one swap per iteration as one scatter of
    two entries: on CPU, n = 256, 25 µs, where JAX's loop (two scatters per swap) takes 182 µs and
    an unrolled one about 100 µs (without ``jax_enable_x64``; with it, JAX's takes 56 µs). The
    inverse comes without a sort or a scatter of its own. The loop counter is int32, as the
    pivots: under ``jax_enable_x64`` an int64 counter made every iteration convert (38 µs).
    """
    n = pivots.shape[-1]

    def one(piv):
        def swap(k, p):
            i = n - 1 - k if inverse else k
            pair = jnp.stack([i, piv[i]]).astype(piv.dtype)
            return p.at[pair].set(p[pair[::-1]])  # i == piv[i] writes p[i] twice: no change
        return lax.fori_loop(np.int32(0), np.int32(n), swap, jnp.arange(n, dtype=piv.dtype))

    if pivots.ndim == 1:
        return one(pivots)
    return jax.vmap(one)(pivots.reshape(-1, n)).reshape(pivots.shape)


# ==============================================================================================
# Determinant


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
      For ``n ≤ 4`` ``det`` and ``C`` are polynomials of the entries (``rules/_linalg/small.py``),
      exact cofactors at every singular matrix; the residual is ``A`` and the derivatives
      evaluate ``C`` inside their own elementwise loop. For larger ``n`` the residual is ``C``,
      the derivative itself (a tangent costs one elementwise product), from one LU factorisation
      of ``Aᵀ`` (of ``[Aᵀ | I]`` for ``n < 256``), ``C = adj(Aᵀ) = ±adj(U) L⁻¹ P``, with
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
    a = as_inexact_matrix("det", "a", a, square=True)
    return _det(a)


def _det_forward(a):
    if a.shape[-1] > MAX_CLOSED_FORM_N:
        return _det_and_cofactors_lu(a)  # half precision raises there, as jnp.linalg.det does
    # Tiny matrices keep A: the cofactors are recomputed where they are needed, fused into the
    # derivative's own elementwise loop, instead of being stored.
    return (jax_ops.det(a) if is_half(a) else closed_form_cofactors(a)[1]), a


def _det_pushforward(res, a_dot):
    """``ḋ = Σ C ⊙ Ȧ``."""
    n = res.shape[-1]
    if n <= MAX_CLOSED_FORM_N and n > 0:
        cof, _ = cofactor_entries(res)
        return sum(cof[i][j] * a_dot[..., i, j] for i in range(n) for j in range(n))
    return jnp.sum(res * a_dot, axis=(-2, -1))


def _det_pullback(res, d_bar):
    """``Ā = d̄ C``."""
    cof = closed_form_cofactors(res)[0] if res.shape[-1] <= MAX_CLOSED_FORM_N else res
    return (d_bar[..., None, None] * cof,)


_det = Rule("det", _det_forward, _det_pushforward, _det_pullback)


def _det_and_cofactors_lu(a):
    """``det A`` and the cofactor matrix ``C = adj(A)ᵀ = adj(Aᵀ)`` from one LU factorisation.

    Factorise ``Aᵀ = PᵀLU``; then ``adj(Aᵀ) = adj(U) adj(L) adj(Pᵀ) = σ adj(U) L⁻¹P``
    (``σ = det P``) and ``M = L⁻¹P`` comes with the factors (:func:`_lu_with_lower_inverse` of
    ``Aᵀ``). For ``adj(U)``, replace the diagonal entry ``u_kk`` of smallest modulus by ``τ ≠ 0``
    (``Ũ``): by Sherman–Morrison, ``adj(U) = p (u_kk Ũ⁻¹ + τ(τ - u_kk) w vᵀ)`` with
    ``p = Π_{i≠k} u_ii``, ``w = Ũ⁻¹e_k``, ``vᵀ = e_kᵀŨ⁻¹``: a polynomial in ``u_kk``, exact at
    ``u_kk = 0``. With ``τ = max |u_ii|`` the two terms do not cancel catastrophically. So
    ``C = σp (u_kk Z + τ(τ - u_kk) w (vᵀM))`` with ``Z = Ũ⁻¹M`` and ``vᵀM`` the row k of ``Z``:
    one triangular solve with n right-hand sides, one with a single one, and no row permutation
    to undo (the permutation is in ``M``).
    """
    lu, pivots, m = _lu_with_lower_inverse(a.mT)
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)
    iota = lax.broadcasted_iota(pivots.dtype, pivots.shape, pivots.ndim - 1)
    parity = jnp.count_nonzero(pivots != iota, axis=-1)
    sign = jnp.where(parity % 2 == 0, 1, -1).astype(a.dtype)
    d = sign * jnp.prod(diag, axis=-1)
    k = jnp.argmin(jnp.abs(diag), axis=-1)
    at_k = iota == k[..., None].astype(iota.dtype)
    u_kk = jnp.take_along_axis(diag, k[..., None], axis=-1)
    p = sign[..., None] * jnp.prod(jnp.where(at_k, 1, diag), axis=-1, keepdims=True)
    tau = jnp.max(jnp.abs(diag), axis=-1, keepdims=True).astype(a.dtype)
    tau = jnp.where(tau == 0, 1, tau)
    # Other zero pivots (then p = 0 and adj(U) = 0) are set to 1 so that Ũ⁻¹ stays finite. The
    # solves read one triangle of their matrix, so Ũ is LU with a new diagonal.
    new_diag = jnp.where(at_k, tau, jnp.where(diag == 0, 1, diag))
    u_tilde = lu + (new_diag - diag)[..., None] * eye_like(lu)
    w = lax.linalg.triangular_solve(u_tilde, at_k[..., :, None].astype(a.dtype), left_side=True,
                                    lower=False)
    z = _upper_solve(u_tilde, m)
    v_t_m = jnp.take_along_axis(z, k[..., None, None], axis=-2)  # vᵀM = e_kᵀŨ⁻¹M: row k of Z
    c = (p * u_kk)[..., None] * z + (p * tau * (tau - u_kk))[..., None] * w * v_t_m
    return d, c


def _lu_with_lower_inverse(a):
    """``(LU, pivots, L⁻¹P)`` of ``A = PᵀLU``.

    Below ``WIDE_LU_MAX_N``, from one LU factorisation of ``[A | I]``: partial pivoting looks at
    the first n columns only, so the factors are those of ``A``, and LAPACK's getrf leaves
    ``L⁻¹P`` in the last n columns (the permutation and the forward substitution are done inside
    the factorisation). From there, the LU of ``A`` and a unit-lower triangular solve with the
    permutation matrix ``P``: the same flops, but LAPACK's factorisation of the wide matrix runs
    slower than that split (below). Either way ``A⁻¹ = U⁻¹(L⁻¹P)`` is one more solve.
    """
    n = a.shape[-1]
    if n < WIDE_LU_MAX_N:
        lu, pivots, _ = lax.linalg.lu(jnp.concatenate([a, eye_like(a)], axis=-1))
        return lu[..., :n], pivots, lu[..., n:]
    lu, pivots, perm = lu_factors(a)
    p = _permute_rows(eye_like(a), perm)  # PA = A[π]
    return lu, pivots, lax.linalg.triangular_solve(lu, p, left_side=True, lower=True,
                                                   unit_diagonal=True)


# From this n on, _lu_with_lower_inverse factorises A alone. On an AVX2 host (2 cores, float32),
# LAPACK's LU of [A | I] costs 1.8–1.9 times that of A at 256 × 256 (2.4 at 1024). Gradients at
# 256 × 256, time with the split / with the wide LU (interleaved, under jax_enable_x64): det
# 0.91–0.95, inv 0.86–0.93, Cayley 0.84–0.94, expm 0.95–1.00; det 0.97–1.00 at 64 and 128.
WIDE_LU_MAX_N = 256


# ==============================================================================================
# Sign and logarithm of the determinant


def slogdet(a: ArrayLike) -> SlogdetResult:
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

    Returns:
      ``SlogdetResult(sign, logabsdet)`` (``jnp.linalg.slogdet``'s own result type), both of shape
      ``a.shape[:-2]``; ``sign`` has the dtype of ``a``, ``logabsdet`` its real dtype. A singular
      ``a`` gives ``sign = 0``, ``logabsdet = -inf`` and an inf/nan gradient, as JAX does.

    Raises:
      TypeError: ``a`` is not an array, or not of a numeric dtype.
      ValueError: ``a`` is not of shape ``(..., n, n)``.

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
        lu, pivots, m = _lu_with_lower_inverse(a.mT)  # det Aᵀ = det A
        sign, logabsdet = _slogdet_from_lu(lu, pivots)
        inv_t = _upper_solve(lu, m)
    return SlogdetResult(sign, logabsdet), (sign, inv_t)


def _upper_solve(u, m):
    """``U⁻¹ M`` for the upper triangle ``U`` of ``u`` and an n-row ``M``, as ``(Mᵀ U⁻ᵀ)ᵀ`` where
    ``M`` comes from the LU of ``[A | I]``.

    LAPACK's right-side trsm is the faster side (float32, n = 64: 21 against 28 µs), by more than
    the two transposes cost (``det``'s forward at n = 64: 0.93 of the left-side form's time). From
    ``WIDE_LU_MAX_N`` on, ``M`` is a left-side solve's result, in the layout a left-side solve
    takes: there the transposes are copies (slogdet's gradient at 256 × 256 took 1.12–1.14 times
    as long with them).
    """
    if u.shape[-1] >= WIDE_LU_MAX_N:
        return lax.linalg.triangular_solve(u, m, left_side=True, lower=False)
    return lax.linalg.triangular_solve(u, m.mT, left_side=False, lower=False, transpose_a=True).mT


def _slogdet_from_lu(lu, pivots):
    """Sign and log-modulus of ``det A`` from ``A[perm] = L U`` (as ``jnp.linalg.slogdet``)."""
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)
    iota = lax.broadcasted_iota(pivots.dtype, pivots.shape, pivots.ndim - 1)
    parity = jnp.count_nonzero(pivots != iota, axis=-1)
    abs_diag = jnp.abs(diag)
    singular = jnp.any(abs_diag == 0, axis=-1)
    if jnp.iscomplexobj(lu):
        sign = jnp.prod(diag / jnp.where(abs_diag == 0, 1, abs_diag).astype(diag.dtype), axis=-1)
    else:
        sign = jnp.ones((), lu.dtype)
        parity = parity + jnp.count_nonzero(diag < 0, axis=-1)
    sign = jnp.where(singular, 0, sign * jnp.where(parity % 2 == 0, 1, -1).astype(lu.dtype))
    return sign, jnp.sum(jnp.log(abs_diag), axis=-1)


def _slogdet_pushforward(res, a_dot):
    """``ℓ̇ = Re t``, ``ṡ = i Im(t) s`` with ``t = Σ A⁻ᵀ ⊙ Ȧ``."""
    sign, inv_t = res
    t = jnp.sum(inv_t * a_dot, axis=(-2, -1))
    if not jnp.iscomplexobj(t):
        return SlogdetResult(jnp.zeros_like(sign), t)
    return SlogdetResult(1j * t.imag * sign, t.real)


def _slogdet_pullback(res, ct):
    """``Ā = (ℓ̄ + i Im(s̄ s)) A⁻ᵀ``; a real sign has no derivative."""
    sign, inv_t = res
    sign_bar, logabsdet_bar = ct
    z = logabsdet_bar.astype(inv_t.dtype)
    if jnp.iscomplexobj(inv_t):
        z = z + 1j * (sign_bar * sign).imag
    return (z[..., None, None] * inv_t,)


_slogdet = Rule("slogdet", _slogdet_forward, _slogdet_pushforward, _slogdet_pullback)
