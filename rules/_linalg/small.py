"""Closed forms for tiny matrices (inverse, determinant, cofactors), elementwise over the batch.

XLA on CPU inverts a batch of tiny matrices with one LAPACK LU per slice, which is dominated by
call overhead; the adjugate formula below is a single fused elementwise loop over the batch.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .._core.checks import HALF_DTYPES, INEXACT_DTYPES, check_matrix

__all__ = ["MAX_CLOSED_FORM_N", "closed_form_cofactors", "closed_form_inv", "cofactor_entries"]

# Beyond 4 the cofactor expansion costs more than LU and loses accuracy faster.
MAX_CLOSED_FORM_N = 4


def closed_form_inv(a: jax.Array) -> jax.Array:
    r"""Inverse of a batch of ``n × n`` matrices, ``n ≤ 4``, by the adjugate formula.

    .. math::
        A^{-1} = \frac{\operatorname{adj}(A)}{\det A}, \qquad
        \operatorname{adj}(A)_{ij} = (-1)^{i+j} M_{ji}, \qquad
        \det A = \sum_j a_{0j}\,(-1)^{j} M_{0j},

    with ``M_ij`` the minor of ``A`` without row ``i`` and column ``j`` (Laplace expansion along
    the first row). Every entry is an explicit polynomial of the entries of ``A``, evaluated on
    whole batch arrays, so XLA fuses the computation into one elementwise loop over the batch.

    Args:
      a: array of shape ``(..., n, n)`` with ``n ≤ 4``; float32, float64, complex64 or complex128.

    Returns:
      ``A⁻¹``, shape and dtype of ``a``. A singular slice (``det A == 0`` in floating point) gives
      inf/nan entries, as ``jnp.linalg.inv`` does, never a finite wrong number.

    Raises:
      TypeError: ``a`` is not an array of a floating or complex dtype.
      ValueError: ``a`` is not of shape ``(..., n, n)``, or ``n > 4``.

    Notes:
      Differentiable by JAX's autodiff (it is built from elementwise ops only), so it can serve as
      the forward of a rule. The adjugate formula is not backward stable: its relative error grows
      like ``κ(A) · eps`` with a larger constant than pivoted LU, which matters only for
      ill-conditioned input. It costs ``O(n!·n)`` flops per slice, fewer than an LU call for
      ``n ≤ 4`` and far less time on CPU, where a batched LU of tiny matrices is overhead-bound.

    Examples:
      >>> import jax.numpy as jnp
      >>> from rules._linalg.small import closed_form_inv
      >>> closed_form_inv(jnp.array([[2.0, 1.0], [1.0, 1.0]], dtype=jnp.float32))
      Array([[ 1., -1.],
             [-1.,  2.]], dtype=float32)
      >>> closed_form_inv(jnp.array([[1.0, 2.0], [2.0, 4.0]], dtype=jnp.float32))  # singular
      Array([[ inf, -inf],
             [-inf,  inf]], dtype=float32)
    """
    check_matrix("closed_form_inv", "a", a, square=True)
    _check_size("closed_form_inv", a, "jnp.linalg.inv")
    if a.shape[-1] == 0:
        return a
    cof, det = cofactor_entries(a)
    n = len(cof)
    inv_det = 1 / det
    rows = [jnp.stack([cof[j][i] * inv_det for j in range(n)], axis=-1) for i in range(n)]
    return jnp.stack(rows, axis=-2)


def closed_form_cofactors(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    r"""Cofactor matrix and determinant of a batch of ``n × n`` matrices, ``n ≤ 4``.

    .. math::
        C_{ij} = (-1)^{i+j} M_{ij}, \qquad \det A = \sum_j a_{0j} C_{0j}, \qquad
        \frac{\partial \det A}{\partial a_{ij}} = C_{ij}, \qquad A\,C^T = \det(A)\, I,

    with ``M_ij`` the minor of ``A`` without row ``i`` and column ``j``: ``C`` is the transposed
    adjugate, the gradient of the determinant. Both are polynomials in the entries of ``A``,
    evaluated on whole batch arrays (one fused elementwise loop), and exact at singular ``A``.

    Args:
      a: array of shape ``(..., n, n)`` with ``n ≤ 4``, of a floating or complex dtype.

    Returns:
      ``(C, det)``: ``C`` of the shape and dtype of ``a``, ``det`` of shape ``a.shape[:-2]``.

    Raises:
      TypeError: ``a`` is not an array of a floating or complex dtype.
      ValueError: ``a`` is not of shape ``(..., n, n)``, or ``n > 4``.

    Examples:
      >>> import jax.numpy as jnp
      >>> from rules._linalg.small import closed_form_cofactors
      >>> closed_form_cofactors(jnp.array([[1.0, 2.0], [2.0, 4.0]], dtype=jnp.float32))
      (Array([[ 4., -2.],
             [-2.,  1.]], dtype=float32), Array(0., dtype=float32))
    """
    check_matrix("closed_form_cofactors", "a", a, square=True, dtypes=INEXACT_DTYPES + HALF_DTYPES)
    _check_size("closed_form_cofactors", a, "rules.det")
    if a.shape[-1] == 0:
        return a, jnp.ones(a.shape[:-2], a.dtype)
    cof, det = cofactor_entries(a)
    return jnp.stack([jnp.stack(row, axis=-1) for row in cof], axis=-2), det


def _check_size(fname, a, alternative):
    if a.shape[-1] > MAX_CLOSED_FORM_N:
        raise ValueError(f"{fname}: `a` must have shape (..., n, n) with n ≤ "
                         f"{MAX_CLOSED_FORM_N}; got {tuple(a.shape)}. Use {alternative}.")


def cofactor_entries(a: jax.Array) -> tuple[list[list[jax.Array]], jax.Array]:
    """Cofactors ``C_ij`` (a list of lists of batch arrays) and the determinant, ``1 ≤ n ≤ 4``.

    Unstacked, so that a caller's elementwise expression in them fuses into one loop.
    """
    n = a.shape[-1]
    entries = [[a[..., i, j] for j in range(n)] for i in range(n)]
    cof = [[_cofactor(entries, i, j) for j in range(n)] for i in range(n)]
    return cof, sum(entries[0][j] * cof[0][j] for j in range(n))


def _minor(entries, i, j):
    return [[x for c, x in enumerate(row) if c != j] for r, row in enumerate(entries) if r != i]


def _det(entries):
    """Determinant of a list-of-lists of batch arrays by Laplace expansion along the first row."""
    n = len(entries)
    if n == 1:
        return entries[0][0]
    if n == 2:
        return entries[0][0] * entries[1][1] - entries[0][1] * entries[1][0]
    return sum(entries[0][j] * _cofactor(entries, 0, j) for j in range(n))


def _cofactor(entries, i, j):
    if len(entries) == 1:
        return jnp.ones_like(entries[0][0])
    minor = _det(_minor(entries, i, j))
    return minor if (i + j) % 2 == 0 else -minor
