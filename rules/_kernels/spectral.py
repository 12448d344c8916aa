r"""Spectral decompositions and functions of symmetric matrices, on ``(..., n, n)`` batches.

:func:`eigh` and :func:`svd` are the decompositions the rules ``rules.eigh`` and ``rules.svd``
differentiate: Jacobi rotations on whole batch arrays for tiny real matrices (:mod:`.small`, on
every platform), JAX's otherwise. :func:`sym_function` is the one symmetric matrix function, with
the Daleckii–Krein derivative, which exists at repeated eigenvalues:

.. math::
    f(A) = Q f(\Lambda) Q^T, \qquad Df(A)[\dot A] = Q\,\big(F \circ Q^T\dot A Q\big)\,Q^T, \qquad
    F_{ij} = \frac{f(\lambda_i) - f(\lambda_j)}{\lambda_i - \lambda_j}, \quad F_{ii} = f'(\lambda_i).

:func:`polar_factor` and :func:`arctan_sv` are matrix functions of ``AᵀA`` built on it.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from . import jax_ops
from .products import mm, mm_h
from .qr import gram_defect
from .small import jacobi_applies, jacobi_eigh, jacobi_svd

__all__ = ["arctan_sv", "eigh", "polar_factor", "svd", "sym_function"]


def eigh(a: jax.Array, *, lower: bool = True, symmetrize_input: bool = True
         ) -> tuple[jax.Array, jax.Array]:
    """``(λ, V)`` of Hermitian ``(..., n, n)`` matrices, ``λ`` ascending, as ``jnp.linalg.eigh``.

    Tiny real matrices (:func:`~.small.jacobi_applies`) take cyclic Jacobi
    (:func:`~.small.jacobi_eigh`), whose eigenvector signs may differ from LAPACK's.
    """
    if jacobi_applies(a):
        return jacobi_eigh(a, lower, symmetrize_input)
    w, v = jax_ops.eigh(a, UPLO="L" if lower else "U", symmetrize_input=symmetrize_input)
    return w, v


def svd(a: jax.Array, *, full_matrices: bool) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(U, s, Vh)`` of ``(..., m, n)`` matrices, ``s`` descending, as ``jnp.linalg.svd``.

    Tiny real square matrices take one-sided Jacobi (:func:`~.small.jacobi_svd`).
    """
    if jacobi_applies(a):
        return jacobi_svd(a)
    u, s, vh = jax_ops.svd(a, full_matrices=full_matrices)
    return u, s, vh


def _sym(a: jax.Array) -> jax.Array:
    return 0.5 * (a + a.mT)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def sym_function(f: Callable[[jax.Array], jax.Array], df: Callable[[jax.Array], jax.Array],
                 a: jax.Array) -> jax.Array:
    r"""``f(A) = Q f(Λ) Qᵀ`` for real symmetric ``(..., m, m)`` matrices ``A = QΛQᵀ``.

    .. math::
        Df(A)[\dot A] = Q\,\big(F \circ Q^T\dot A Q\big)\,Q^T, \qquad
        F_{ij} = \frac{f(\lambda_i) - f(\lambda_j)}{\lambda_i - \lambda_j}, \quad
        F_{ii} = f'(\lambda_i)

    (Daleckii–Krein). Differentiating through ``eigh`` instead divides by ``λᵢ - λⱼ`` and gives
    nan at repeated eigenvalues, though ``f(A)`` is smooth there; here pairs closer than
    ``ε^{1/3}·max|λ|`` use ``(f'(λᵢ) + f'(λⱼ))/2``, which balances the divided difference's
    cancellation against the mean's truncation error (both about ``ε^{2/3}``).

    Args:
      f: elementwise function of the eigenvalues (a hashable callable, e.g. a module function).
      df: its derivative.
      a: symmetric matrices; only ``(a + aᵀ)/2`` is used.

    References:
      N. J. Higham, "Functions of Matrices: Theory and Computation" (2008), Thm. 3.11.
    """
    w, q = eigh(a)
    return _sym(mm(q * f(w)[..., None, :], q.mT))


@sym_function.defjvp
def _sym_function_jvp(f: Callable[[jax.Array], jax.Array], df: Callable[[jax.Array], jax.Array],
                      primals: tuple[jax.Array], tangents: tuple[jax.Array]
                      ) -> tuple[jax.Array, jax.Array]:
    (a,), (a_dot,) = primals, tangents
    w, q = eigh(a)
    fw, dfw = f(w), df(w)
    diff = w[..., :, None] - w[..., None, :]
    scale = jnp.max(jnp.abs(w), axis=-1)[..., None, None]
    close = jnp.abs(diff) <= float(np.finfo(w.dtype).eps) ** (1 / 3) * scale
    divided = (fw[..., :, None] - fw[..., None, :]) / jnp.where(close, 1, diff)
    slopes = jnp.where(close, 0.5 * (dfw[..., :, None] + dfw[..., None, :]), divided)
    out = _sym(mm(q * fw[..., None, :], q.mT))
    return out, _sym(mm(q, mm(slopes * mm(q.mT, mm(_sym(a_dot), q)), q.mT)))


def polar_factor(z: jax.Array) -> jax.Array:
    """``z (zᵀz)^{-1/2}``, the orthonormal frame nearest to the m×k ``z``, in O(mk²).

    ``(zᵀz)^{-1/2}`` by :func:`sym_function` (its derivative exists where ``zᵀz`` has repeated
    eigenvalues, at an orthonormal ``z`` for one), then one Newton–Schulz step
    ``y(3I - yᵀy)/2 = y - ½y E``, ``E = yᵀy - I``: eigenvectors are orthonormal only to about
    ``k·ε``, and the step, which converges quadratically to the same polar factor, leaves the
    error with which ``E`` is computed. Written as a correction (``½yE`` is of the size of ``E``,
    so its rounding is negligible) with :func:`~.qr.gram`'s accurate diagonal.
    """
    y = mm(z, sym_function(_inverse_sqrt, _inverse_sqrt_slope, mm_h(z, z)))
    return y - 0.5 * mm(y, gram_defect(y))


def _inverse_sqrt(w: jax.Array) -> jax.Array:
    return 1 / jnp.sqrt(w)


def _inverse_sqrt_slope(w: jax.Array) -> jax.Array:
    return -0.5 / (w * jnp.sqrt(w))


def arctan_sv(a: jax.Array) -> jax.Array:
    r"""``U arctan(Σ) Vᵀ`` for ``A = UΣVᵀ`` of shape ``(..., m, k)``, without an SVD.

    .. math::
        U \arctan(\Sigma) V^T = A\, f(A^TA), \qquad f(u) = \frac{\arctan\sqrt u}{\sqrt u},
        \quad f(0) = 1

    through :func:`sym_function` on the k×k matrix ``AᵀA``, so the derivative exists at repeated
    and at zero singular values (an SVD's does not), and is ``Ȧ`` at ``A = 0``. It is the
    logarithm's last step on the Grassmann manifold (``A = tan Θ`` in principal angles) and on
    the orthogonal group (``A = tan(K/2)``).
    """
    return mm(a, sym_function(_arctan_ratio, _arctan_ratio_slope, mm_h(a, a)))


def _arctan_ratio(u: jax.Array) -> jax.Array:
    # Eigenvalues of AᵀA may come out slightly negative; f is even in √u, so clip them.
    u = jnp.maximum(u, 0)
    positive = u > 0
    r = jnp.sqrt(jnp.where(positive, u, 1))
    return jnp.where(positive, jnp.arctan(r) / r, 1)


# f'(u) = Σ_{k≥1} k(-1)^k u^{k-1}/(2k+1): below u = 0.01 nine terms reach the unit roundoff,
# where the closed form (1/(1 + u) - f(u))/(2u) loses digits to cancellation.
_ARCTAN_SLOPE_SERIES = tuple(k * (-1) ** k / (2 * k + 1) for k in range(1, 10))


def _arctan_ratio_slope(u: jax.Array) -> jax.Array:
    u = jnp.maximum(u, 0)
    small = u < 0.01
    series = jnp.zeros_like(u)
    for c in reversed(_ARCTAN_SLOPE_SERIES):
        series = series * u + c
    safe = jnp.where(small, 1, u)
    return jnp.where(small, series, (1 / (1 + safe) - _arctan_ratio(safe)) / (2 * safe))
