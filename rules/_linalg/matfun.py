"""Rules of matrix functions: the Cayley transform and the matrix exponential."""
from __future__ import annotations

import jax
from jax.typing import ArrayLike

from .._core.arrays import eye_like
from .._core.checks import as_inexact_matrix, check_matrix, is_half
from .._core.dispatch import jitted
from .._core.rule import Rule
from .._kernels import expm as kernel
from .._kernels.expm import MAX_SQUARINGS
from .._kernels import jax_ops
from .._kernels.lu import inverse
from .._kernels.products import mm

__all__ = ["cayley", "cayley_matrix", "expm", "expm_frechet", "inv_identity_plus"]


def inv_identity_plus(c: jax.Array) -> jax.Array:
    """``N = (I + C)⁻¹`` by the kernel layer's inverse (plain JAX)."""
    return inverse(eye_like(c) + c)


def cayley_matrix(c: jax.Array) -> jax.Array:
    """``(I - C)(I + C)⁻¹ = 2(I + C)⁻¹ - I``: one inverse and no product (plain JAX)."""
    return 2 * inv_identity_plus(c) - eye_like(c)


# ==============================================================================================
# Cayley transform


@jitted()
def cayley(c: jax.Array) -> jax.Array:
    r"""Cayley transform ``Λ = (I - C)(I + C)⁻¹`` of a (batch of) square matrices.

    .. math::
        \Lambda = (I - C)(I + C)^{-1} = 2N - I, \quad N = (I + C)^{-1} = \tfrac12 (I + \Lambda),
        \qquad \dot\Lambda = -2 N \dot C N, \qquad \bar C = -2 N^T \bar\Lambda N^T

    The factors commute, so ``Λ = (I + C)⁻¹(I - C)`` as well. For skew-symmetric ``C``, ``Λ`` is
    orthogonal with determinant +1. Derivation: ``docs/derivations/cayley.md``.

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
      which the pushforward and the pullback recover ``N = (I + Λ)/2``, so each costs two matrix
      products. The transform is holomorphic: complex inputs use plain transposes (JAX's
      convention).

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


def _cayley_forward(c):
    lam = cayley_matrix(c)
    return lam, lam


def _cayley_pushforward(lam, c_dot):
    """``Λ̇ = -2 N Ċ N`` with ``N = (I + Λ)/2``."""
    n = (eye_like(lam) + lam) / 2
    return -2 * mm(mm(n, c_dot), n)


def _cayley_pullback(lam, lam_bar):
    """``C̄ = -2 Nᵀ Λ̄ Nᵀ`` (JAX convention; holomorphic, no conj)."""
    n_t = (eye_like(lam) + lam.mT) / 2
    return (-2 * mm(mm(n_t, lam_bar), n_t),)


_cayley = Rule("cayley", _cayley_forward, _cayley_pushforward, _cayley_pullback)


# ==============================================================================================
# Matrix exponential


@jitted("upper_triangular", "max_squarings")
def expm(A: ArrayLike, *, upper_triangular: bool = False,  # noqa: N803 — JAX's argument name
         max_squarings: int = MAX_SQUARINGS) -> jax.Array:
    r"""Matrix exponential ``exp(A)`` with an explicit pushforward and pullback (Fréchet derivative).

    .. math::
        \dot X = L(A, \dot A) = \int_0^1 e^{tA}\,\dot A\, e^{(1-t)A}\,dt, \qquad
        \bar A = L(A^T, \bar X)

    ``X = exp(A)`` by scaling and squaring with a Padé approximant, as
    ``jax.scipy.linalg.expm``; ``L(A, E)`` is the Fréchet derivative, the pullback in JAX's
    convention is the Fréchet derivative at ``Aᵀ`` (plain transpose; ``exp`` is holomorphic).
    Both derivatives run Al-Mohy & Higham's recurrence on the forward's own intermediates: the
    exact derivative of the computed approximant. Derivation:
    ``docs/derivations/decompositions.md#expm``.

    Args:
      A: array of shape ``(..., n, n)``; integers and booleans are promoted as in
        ``jnp.linalg``; float16/bfloat16 go to ``jax.scipy.linalg.expm`` (which raises).
      upper_triangular: accepted as ``jax.scipy.linalg.expm`` accepts it (there it selects
        triangular solves for an upper triangular ``A``); the exponential computed is the same.
      max_squarings: the most squarings a slice may need (``s`` below); one that needs more
        gives NaN, as in ``jax.scipy.linalg.expm``.

    Returns:
      ``exp(A)``, shape and dtype of ``A``. A slice with ``‖A‖₁ > θ · 2^max_squarings`` (or
      non-finite entries) gives NaN, as ``jax.scipy.linalg.expm`` does.

    Raises:
      TypeError: ``A`` is not an array of a numeric dtype, ``upper_triangular`` is not a bool or
        ``max_squarings`` not an int.
      ValueError: ``A`` is not of shape ``(..., n, n)``, or ``max_squarings < 0``.

    Notes:
      Forward: ``s = max(0, ⌊log₂(‖A‖₁/θ)⌋)`` per slice, the ``[m/m]`` Padé approximant of
      ``A/2ˢ`` (``m = 13``, ``θ = 5.37`` in double precision; ``m = 7``, ``θ = 3.93`` in single),
      then ``s`` squarings; a batch runs ``max s`` squarings, each slice keeping its own ``s``.
      Residuals: the scaled matrix and its powers, the Padé intermediates, the factorisation of
      the denominator (the closed-form inverse for ``n ≤ 4``, LU factors otherwise) and
      ``r(A/2ˢ)`` (``rules/_kernels/expm.py``). Pushforward and pullback then cost two matrix
      products per product of the Padé step, one solve with the stored factors and two products
      per squaring, plus the squares it reads (``s − 1``, recomputed); the pullback is the same
      recurrence on the transposed intermediates, ``L(Aᵀ, X̄)``. That is about a third of the
      work of the exponential of the ``2n × 2n`` block matrix ``[[Aᵀ, X̄], [0, Aᵀ]]``.

    References:
      N. J. Higham, "The scaling and squaring method for the matrix exponential revisited",
      SIAM J. Matrix Anal. Appl. 26 (2005).
      A. H. Al-Mohy, N. J. Higham, "Computing the Fréchet derivative of the matrix exponential,
      with an application to condition number estimation", SIAM J. Matrix Anal. Appl. 30 (2009).

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a = jnp.array([[0.0, 1.0], [0.0, 0.0]], dtype=jnp.float32)  # nilpotent: exp(A) = I + A
      >>> rules.expm(a)
      Array([[1., 1.],
             [0., 1.]], dtype=float32)
      >>> jax.jvp(rules.expm, (a,), (jnp.eye(2, dtype=jnp.float32),))[1]  # A and I commute
      Array([[1., 1.],
             [0., 1.]], dtype=float32)
    """
    a = as_inexact_matrix("expm", "A", A, square=True)
    if not isinstance(upper_triangular, bool):
        raise TypeError(f"expm: `upper_triangular` must be a bool; got "
                        f"{type(upper_triangular).__name__}.")
    if isinstance(max_squarings, bool) or not isinstance(max_squarings, int):
        raise TypeError(f"expm: `max_squarings` must be an int; got "
                        f"{type(max_squarings).__name__}.")
    if max_squarings < 0:
        raise ValueError(f"expm: `max_squarings` must be ≥ 0; got {max_squarings}.")
    return _expm(a, max_squarings=max_squarings)


def _expm_forward(a, *, max_squarings):
    if is_half(a):
        return jax_ops.expm(a, max_squarings=max_squarings), None
    if a.shape[-1] == 0:
        return a, None
    return kernel.pade_expm(a, max_squarings)


def _expm_pushforward(res, a_dot, *, max_squarings):
    """``L(A, Ȧ)``: Al-Mohy & Higham's recurrence on the forward's intermediates."""
    return kernel.frechet(res, a_dot, max_squarings)


def _expm_pullback(res, x_bar, *, max_squarings):
    """``Ā = L(Aᵀ, X̄)``, the adjoint recurrence."""
    return (kernel.frechet_adjoint(res, x_bar, max_squarings),)


_expm = Rule("expm", _expm_forward, _expm_pushforward, _expm_pullback)


@jitted("method", "compute_expm")
def expm_frechet(A: ArrayLike, E: ArrayLike, *, method: str | None = None,  # noqa: N803
                 compute_expm: bool = True) -> jax.Array | tuple[jax.Array, jax.Array]:
    r"""Fréchet derivative ``L(A, E)`` of the matrix exponential, as ``jax.scipy.linalg.expm_frechet``.

    .. math::
        L(A, E) = \int_0^1 e^{tA}\,E\,e^{(1-t)A}\,dt
        = \frac{d}{dh}\Big|_{h=0} e^{A + hE}

    The pushforward of :func:`expm` applied to ``E``: Al-Mohy & Higham's recurrence on the
    intermediates of the scaling-and-squaring forward, the exact derivative of the computed
    ``exp(A)``. It is differentiable in both arguments: linear in ``E`` (reverse mode runs
    :func:`expm`'s pullback), and in ``A`` through the recurrence's intermediates (``expm``'s
    second derivative). Derivation: ``docs/derivations/decompositions.md#expm``.

    Args:
      A: array of shape ``(..., n, n)``; integers and booleans are promoted as in ``jnp.linalg``.
      E: the direction, of the shape of ``A`` and, once promoted, its dtype.
      method: accepted as ``jax.scipy.linalg.expm_frechet`` accepts it (ignored there too).
      compute_expm: also return ``exp(A)`` (the default, as in SciPy and JAX).

    Returns:
      ``(exp(A), L(A, E))``, or ``L(A, E)`` alone when ``compute_expm`` is False; each of the
      shape and dtype of ``A``.

    Raises:
      TypeError: ``A`` or ``E`` is not an array of a numeric dtype, or their dtypes differ after
        integer promotion.
      ValueError: ``A`` is not of shape ``(..., n, n)`` or ``E`` not of ``A``'s shape.

    References:
      A. H. Al-Mohy, N. J. Higham, "Computing the Fréchet derivative of the matrix exponential,
      with an application to condition number estimation", SIAM J. Matrix Anal. Appl. 30 (2009).

    Examples:
      >>> import jax.numpy as jnp, rules
      >>> a = jnp.zeros((2, 2), jnp.float32)
      >>> rules.expm_frechet(a, jnp.eye(2, dtype=jnp.float32))[1]   # L(0, E) = E
      Array([[1., 0.],
             [0., 1.]], dtype=float32)
    """
    a = as_inexact_matrix("expm_frechet", "A", A, square=True)
    e = as_inexact_matrix("expm_frechet", "E", E, square=True)
    if e.shape != a.shape:
        raise ValueError(f"expm_frechet: `E` must have the shape of `A`, {a.shape}; got {e.shape}.")
    if e.dtype != a.dtype:
        raise TypeError(f"expm_frechet: `E` must have the dtype of `A`, {a.dtype}; got {e.dtype}.")
    if method is not None and not isinstance(method, str):
        raise TypeError(f"expm_frechet: `method` must be None or a str; got {type(method).__name__}.")
    if not isinstance(compute_expm, bool):
        raise TypeError(f"expm_frechet: `compute_expm` must be a bool; got "
                        f"{type(compute_expm).__name__}.")
    x, l = jax.jvp(lambda a: _expm(a, max_squarings=MAX_SQUARINGS), (a,), (e,))
    return (x, l) if compute_expm else l
