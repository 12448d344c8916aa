"""The Cholesky factor ``A = LLᴴ`` and solves with a lower triangular factor.

Tiny matrices (``routes.CLOSED_FORM_MAX_N``) take the unrolled recurrence and the closed-form
``L⁻¹`` of :mod:`.small` on every platform: fused loops over the batch where a batched
factorisation or triangular solve is one call per matrix. Larger ones take JAX's Cholesky and
``lax.linalg.triangular_solve``.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import jax
from jax import lax

from .._core.arrays import conj, hermitian_part
from . import jax_ops
from .products import mm
from .small import closed_form_applies, closed_form_cholesky, closed_form_lower_inv

__all__ = ["cholesky", "solve_factored", "triangular_solver"]


def cholesky(a: jax.Array, *, symmetrize_input: bool) -> jax.Array:
    """Lower Cholesky factor of ``(A + Aᴴ)/2`` (``symmetrize_input``) or of ``a``'s lower triangle.

    NaN where the matrix is not positive definite, as ``jnp.linalg.cholesky``.
    """
    if closed_form_applies(a):
        return closed_form_cholesky(hermitian_part(a) if symmetrize_input else a)
    return jax_ops.cholesky(a, symmetrize_input=symmetrize_input)


TriangularSolver = Callable[..., jax.Array]


def triangular_solver(l: jax.Array) -> TriangularSolver:
    """``solve(B, left_side=, transpose_a=, conjugate_a=)``: ``op(L)⁻¹B`` or ``B op(L)⁻¹``.

    ``lax.linalg.triangular_solve`` with the lower triangle of ``l``; for tiny ``l`` a product
    with the closed-form ``L⁻¹`` (``op`` of an inverse is the inverse of ``op``), formed once for
    all the solves made with one solver.
    """
    if not closed_form_applies(l):
        return functools.partial(lax.linalg.triangular_solve, l, lower=True)
    inverse = closed_form_lower_inv(l)

    def solve(b: jax.Array, *, left_side: bool, transpose_a: bool = False,
              conjugate_a: bool = False) -> jax.Array:
        op = inverse.mT if transpose_a else inverse
        op = conj(op) if conjugate_a else op
        return mm(op, b) if left_side else mm(b, op)

    return solve


def solve_factored(l: jax.Array, b: jax.Array) -> jax.Array:
    """``(L Lᴴ)⁻¹ B`` by two triangular solves, reading the lower triangle of ``l`` only."""
    solve = triangular_solver(l)
    return solve(solve(b, left_side=True), left_side=True, transpose_a=True, conjugate_a=True)
