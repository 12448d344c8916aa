"""LU factorisations and triangular solves: solves, the inverse, the determinant and its logarithm.

``A[π] = LU`` (``A = PᵀLU``, ``P`` the permutation matrix of ``π``) as LAPACK's getrf leaves it,
``lu`` holding ``L`` (unit diagonal) and ``U``. Tiny matrices take the closed forms of
:mod:`.small` on every platform. The CPU routes (:mod:`.routes`):

* the LU of ``[A | B]`` or ``[A | I]``: partial pivoting looks at the first ``n`` columns only,
  so the factors are ``A``'s, and getrf leaves ``L⁻¹PB`` (``L⁻¹P``) in the last columns, the row
  permutation and the forward substitution done inside the factorisation;
* solves by ``U⁻¹(L⁻¹P B)``: a product and one triangular solve, no pivots, no row permutation;
* the permutation from the pivots by a loop of one two-entry scatter per swap, and right-side
  triangular solves where LAPACK's right side is the one it runs best.

Elsewhere: ``lax.linalg.lu`` with its own permutation, and two triangular solves per solve, as
``jnp.linalg.solve`` does.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._core.arrays import eye_like
from .._core.checks import is_half
from .._core.sharding import match_varying
from . import jax_ops, routes
from .products import laid_out, mm
from .routes import cpu_route
from .small import closed_form_applies, closed_form_inv

__all__ = ["LUFactors", "SolveFactors", "det_and_cofactors", "factor_and_solve", "inverse",
           "lu_factors", "lu_with_lower_inverse", "pivot_parity", "pivots_to_permutation",
           "slogdet_from_lu", "solve_factors", "solve_with", "upper_solve"]


# ==============================================================================================
# Factors for solves


class LUFactors(NamedTuple):
    """``A[π] = LU``: ``lu`` holds ``L`` (unit diagonal) and ``U``, ``perm`` is ``π``."""

    lu: jax.Array
    perm: jax.Array


def lu_factors(a: jax.Array) -> LUFactors:
    """The LU factors of ``a`` with the permutation, for a solve and the solves of its
    derivatives."""
    lu, pivots, perm = lax.linalg.lu(a)
    return LUFactors(lu, _permutation(pivots, perm))


def _permutation(pivots: jax.Array, perm: jax.Array) -> jax.Array:
    """``π`` from LAPACK's pivots (``cpu_route.pivot_swaps``: :func:`pivots_to_permutation`), or
    ``lax.linalg.lu``'s own ``perm`` elsewhere."""
    return cpu_route("pivot_swaps", lambda pivots, perm: pivots_to_permutation(pivots),
                     lambda pivots, perm: perm, pivots, perm)


def pivots_to_permutation(pivots: jax.Array) -> jax.Array:
    """The permutation ``π`` with ``A[π] = L U`` from LAPACK's pivots (row ``i`` swapped with row
    ``pivots[i]``, in turn).

    What ``lax.linalg.lu`` computes as its third output, with one swap per iteration as one
    scatter of two entries (JAX's CPU loop does two scatters per swap). The loop counter is
    int32, as the pivots: an int64 counter under ``jax_enable_x64`` would make every iteration
    convert.
    """
    n = pivots.shape[-1]

    def one(piv):
        def swap(i, p):
            pair = jnp.stack([i, piv[i]]).astype(piv.dtype)
            return p.at[pair].set(p[pair[::-1]])  # i == piv[i] writes p[i] twice: no change
        # The carry varies over the shard_map axes the pivots vary over.
        (start, _) = match_varying(jnp.arange(n, dtype=piv.dtype), piv)
        return lax.fori_loop(np.int32(0), np.int32(n), swap, start)

    if pivots.ndim == 1:
        return one(pivots)
    return jax.vmap(one)(pivots.reshape(-1, n)).reshape(pivots.shape)


def pivot_parity(pivots: jax.Array) -> jax.Array:
    """The number of row swaps LAPACK's pivots make (``det P = (-1)^parity``)."""
    iota = lax.broadcasted_iota(pivots.dtype, pivots.shape, pivots.ndim - 1)
    return jnp.count_nonzero(pivots != iota, axis=-1)


def factor_and_solve(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array | LUFactors]:
    """``(X, factors)``: ``X = A⁻¹B`` and the factors that :func:`solve_with` reuses.

    The factors are the closed-form inverse for tiny ``a`` (:mod:`.small`), otherwise the LU
    factors; below ``routes.LU_WITH_RHS_MAX_N`` the CPU takes the LU of ``[A | B]``
    (``cpu_route.lu_with_rhs``), which leaves ``L⁻¹PB`` beside the factors: one triangular solve
    remains.
    """
    if closed_form_applies(a):
        inv = closed_form_inv(a)
        return solve_with(inv, b), inv
    if a.shape[-1] < routes.LU_WITH_RHS_MAX_N:
        return cpu_route("lu_with_rhs", _lu_with_rhs_solve, _lu_solve, a, b)
    return _lu_solve(a, b)


def _lu_solve(a, b):
    factors = lu_factors(a)
    return solve_with(factors, b), factors


def _lu_with_rhs_solve(a, b):
    n = a.shape[-1]
    lu, pivots, _ = lax.linalg.lu(jnp.concatenate([a, b], axis=-1))
    lu, y = lu[..., :n], lu[..., n:]
    x = lax.linalg.triangular_solve(lu, y, left_side=True, lower=False)
    return x, LUFactors(lu, pivots_to_permutation(pivots))


class SolveFactors(NamedTuple):
    """Factors of a square ``A`` for several solves with ``n`` right-hand sides each.

    ``lu`` holds ``L`` and ``U`` of ``A[π] = LU``. On the CPU a solve is ``U⁻¹(MB)`` with
    ``M = L⁻¹P`` (``l_inv_p``): a product and one triangular solve, no row permutation; for ``n``
    right-hand sides the product costs what the forward substitution it replaces would. Elsewhere
    it is the permutation ``perm`` and two triangular solves. The field of the route not taken is
    zeros, which XLA removes with the computations that do not read it.
    """

    lu: jax.Array
    perm: jax.Array
    l_inv_p: jax.Array


def solve_factors(a: jax.Array) -> SolveFactors:
    """:class:`SolveFactors` of ``a`` (``cpu_route.lower_inverse_factors`` on the CPU)."""
    def on_cpu(a):
        lu, pivots, m = lu_with_lower_inverse(a)
        return SolveFactors(lu, jnp.zeros_like(pivots), m)

    def plain(a):
        lu, perm = lu_factors(a)
        return SolveFactors(lu, perm, jnp.zeros_like(a))

    return cpu_route("lower_inverse_factors", on_cpu, plain, a)


def solve_with(factors: jax.Array | LUFactors | SolveFactors, b: jax.Array,
               transpose: bool = False) -> jax.Array:
    """``A⁻¹ B`` (or ``A⁻ᵀ B``) from the closed-form inverse, :class:`LUFactors` or
    :class:`SolveFactors`."""
    if isinstance(factors, SolveFactors):
        return cpu_route("lower_inverse_solve",
                         functools.partial(_solve_lower_inverse, transpose=transpose),
                         functools.partial(_solve_lu, transpose=transpose), factors, b)
    if isinstance(factors, LUFactors):
        return _solve_lu(factors, b, transpose)
    return mm(factors.mT if transpose else factors, b)


def _solve_lower_inverse(factors, b, transpose):
    u, m = factors.lu, factors.l_inv_p
    # Both products stay row-major operands of XLA:CPU's fast dot (products.mm_h): folded into the
    # dot, upper_solve's transpose and mᵀ would send it to the generic one.
    if not transpose:
        return upper_solve(u, laid_out(mm(m, b)))
    return mm(laid_out(m.mT), lax.linalg.triangular_solve(u, b, left_side=True, lower=False,
                                                           transpose_a=True))


def _solve_lu(factors, b, transpose):
    lu, perm = factors.lu, factors.perm
    if not transpose:
        x = _permute_rows(b, perm)
        x = lax.linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
        return lax.linalg.triangular_solve(lu, x, left_side=True, lower=False)
    x = lax.linalg.triangular_solve(lu, b, left_side=True, lower=False, transpose_a=True)
    x = lax.linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True,
                                    transpose_a=True)
    # π⁻¹[π[i]] = i: a scatter of n integers, where jnp.linalg sorts the permutation.
    iota = lax.broadcasted_iota(perm.dtype, perm.shape, perm.ndim - 1)
    inverse = jnp.put_along_axis(jnp.zeros_like(perm), perm, iota, axis=-1, inplace=False,
                                 mode="promise_in_bounds")
    return _permute_rows(x, inverse)


def _permute_rows(x, perm):
    """``x[..., perm, :]`` per slice of a batch.

    A permutation is in bounds: without the clamping and masking of JAX's default gather mode,
    XLA copies no rows beyond the gather itself.
    """
    return jnp.take_along_axis(x, perm[..., :, None], axis=-2, mode="promise_in_bounds")


# ==============================================================================================
# The inverse and L⁻¹P


def inverse(a: jax.Array) -> jax.Array:
    """``A⁻¹``: the adjugate formula for tiny matrices (:mod:`.small`), JAX's inverse otherwise;
    on the CPU below ``routes.LU_INVERSE_MAX_N`` ``U⁻¹(L⁻¹P)`` (``cpu_route.lu_inverse``), which
    needs no permutation of rows and one triangular solve (:func:`lu_with_lower_inverse`).

    Half precision goes to JAX's inverse (which decides; on the CPU it raises).
    """
    if closed_form_applies(a):
        return closed_form_inv(a)
    if is_half(a) or a.shape[-1] >= routes.LU_INVERSE_MAX_N:
        return jax_ops.inv(a)
    return cpu_route("lu_inverse", _lu_inverse, jax_ops.inv, a)


def _lu_inverse(a):
    lu, _, m = lu_with_lower_inverse(a)
    return upper_solve(lu, m)


def lu_with_lower_inverse(a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(LU, pivots, L⁻¹P)`` of ``A = PᵀLU``; ``A⁻¹ = U⁻¹(L⁻¹P)`` is one more solve.

    The LU of ``A`` and a unit-lower triangular solve with the permuted identity ``P``; on the CPU
    below ``routes.LU_WITH_IDENTITY_MAX_N``, one LU factorisation of ``[A | I]``
    (``cpu_route.lu_with_identity``), which leaves ``L⁻¹P`` in its last ``n`` columns.
    """
    if a.shape[-1] < routes.LU_WITH_IDENTITY_MAX_N:
        return cpu_route("lu_with_identity", _lu_of_a_and_identity, _lu_and_lower_solve, a)
    return _lu_and_lower_solve(a)


def _lu_of_a_and_identity(a):
    n = a.shape[-1]
    lu, pivots, _ = lax.linalg.lu(jnp.concatenate([a, eye_like(a)], axis=-1))
    return lu[..., :n], pivots, lu[..., n:]


def _lu_and_lower_solve(a):
    lu, pivots, perm = lax.linalg.lu(a)
    p = _permute_rows(eye_like(a), _permutation(pivots, perm))  # PA = A[π]
    return lu, pivots, lax.linalg.triangular_solve(lu, p, left_side=True, lower=True,
                                                    unit_diagonal=True)


def upper_solve(u: jax.Array, m: jax.Array) -> jax.Array:
    """``U⁻¹ M`` for the upper triangle ``U`` of ``u`` and an n-row ``M``.

    Below ``routes.LU_WITH_IDENTITY_MAX_N`` the CPU solves on the right, ``(Mᵀ U⁻ᵀ)ᵀ``
    (``cpu_route.right_side_solve``): there ``M`` comes from the LU of ``[A | I]`` and LAPACK's
    right-side trsm is its better side, by more than the two transposes cost. From that size on
    ``M`` is a left-side solve's result, already in a left-side solve's layout.
    """
    if u.shape[-1] < routes.LU_WITH_IDENTITY_MAX_N:
        return cpu_route("right_side_solve", _right_side_upper_solve, _left_side_upper_solve, u, m)
    return _left_side_upper_solve(u, m)


def _left_side_upper_solve(u, m):
    return lax.linalg.triangular_solve(u, m, left_side=True, lower=False)


def _right_side_upper_solve(u, m):
    return lax.linalg.triangular_solve(u, m.mT, left_side=False, lower=False, transpose_a=True).mT


# ==============================================================================================
# The determinant


def det_and_cofactors(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``det A`` and the cofactor matrix ``C = adj(A)ᵀ = adj(Aᵀ)`` from one LU factorisation.

    Factorise ``Aᵀ = PᵀLU``; then ``adj(Aᵀ) = adj(U) adj(L) adj(Pᵀ) = σ adj(U) L⁻¹P``
    (``σ = det P``) and ``M = L⁻¹P`` comes with the factors (:func:`lu_with_lower_inverse` of
    ``Aᵀ``). For ``adj(U)``, replace the diagonal entry ``u_kk`` of smallest modulus by ``τ ≠ 0``
    (``Ũ``): by Sherman–Morrison, ``adj(U) = p (u_kk Ũ⁻¹ + τ(τ - u_kk) w vᵀ)`` with
    ``p = Π_{i≠k} u_ii``, ``w = Ũ⁻¹e_k``, ``vᵀ = e_kᵀŨ⁻¹``: a polynomial in ``u_kk``, exact at
    ``u_kk = 0``. With ``τ = max |u_ii|`` the two terms do not cancel catastrophically. So
    ``C = σp (u_kk Z + τ(τ - u_kk) w (vᵀM))`` with ``Z = Ũ⁻¹M`` and ``vᵀM`` the row k of ``Z``:
    one triangular solve with n right-hand sides, one with a single one, and no row permutation
    to undo (the permutation is in ``M``).
    """
    lu, pivots, m = lu_with_lower_inverse(a.mT)
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)
    sign = jnp.where(pivot_parity(pivots) % 2 == 0, 1, -1).astype(a.dtype)
    d = sign * jnp.prod(diag, axis=-1)
    k = jnp.argmin(jnp.abs(diag), axis=-1)
    iota = lax.broadcasted_iota(pivots.dtype, pivots.shape, pivots.ndim - 1)
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
    z = upper_solve(u_tilde, m)
    v_t_m = jnp.take_along_axis(z, k[..., None, None], axis=-2)  # vᵀM = e_kᵀŨ⁻¹M: row k of Z
    c = (p * u_kk)[..., None] * z + (p * tau * (tau - u_kk))[..., None] * w * v_t_m
    return d, c


def slogdet_from_lu(lu: jax.Array, pivots: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Sign and log-modulus of ``det A`` from ``A[π] = L U`` (as ``jnp.linalg.slogdet``)."""
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)
    parity = pivot_parity(pivots)
    abs_diag = jnp.abs(diag)
    singular = jnp.any(abs_diag == 0, axis=-1)
    if jnp.iscomplexobj(lu):
        sign = jnp.prod(diag / jnp.where(abs_diag == 0, 1, abs_diag).astype(diag.dtype), axis=-1)
    else:
        sign = jnp.ones((), lu.dtype)
        parity = parity + jnp.count_nonzero(diag < 0, axis=-1)
    sign = jnp.where(singular, 0, sign * jnp.where(parity % 2 == 0, 1, -1).astype(lu.dtype))
    return sign, jnp.sum(jnp.log(abs_diag), axis=-1)
