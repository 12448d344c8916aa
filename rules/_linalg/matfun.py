"""Rules of matrix functions: the Cayley transform and the matrix exponential."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from .._core.arrays import eye_like
from .._core.checks import as_inexact_matrix, check_matrix, is_half
from .._core.dispatch import jitted
from .._core.rule import Rule
from .._kernels import expm as kernel
from .._kernels import jax_ops
from .._kernels.expm import MAX_SQUARINGS
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
        = \frac{d}{dh}\Big|_{h=0} e^{A + hE}, \qquad
        \exp\begin{pmatrix} A & E \\ 0 & A \end{pmatrix}
        = \begin{pmatrix} e^A & L(A, E) \\ 0 & e^A \end{pmatrix}

    ``(exp(A), L(A, E))`` is the exponential of the block matrix ``[[A, E], [0, A]]``, and both
    derivatives are those of that exponential: the pushforward is its Fréchet derivative in the
    direction ``[[Ȧ, Ė], [0, Ȧ]]``, ``(L(A, Ȧ), L(A, Ė) + L⁽²⁾(A; E, Ȧ))`` with ``L⁽²⁾`` the
    second Fréchet derivative, and the pullback its Fréchet derivative at the transpose
    ``[[Aᵀ, Eᵀ], [0, Aᵀ]]`` in the direction ``[[L̄, X̄], [0, L̄]]``, whose blocks are ``Ē`` and
    ``Ā``. Derivation: ``docs/derivations/expm-frechet.md``.

    Args:
      A: array of shape ``(..., n, n)``; integers and booleans are promoted as in ``jnp.linalg``.
      E: the direction, of the shape of ``A`` and, once promoted, its dtype.
      method: accepted as ``jax.scipy.linalg.expm_frechet`` accepts it (ignored there too).
      compute_expm: also return ``exp(A)`` (the default, as in SciPy and JAX).

    Returns:
      ``(exp(A), L(A, E))``, or ``L(A, E)`` alone when ``compute_expm`` is False; each of the
      shape and dtype of ``A``. A slice with ``‖A‖₁ > θ · 2¹⁶`` (or non-finite entries) gives NaN
      in both, where ``jax.scipy.linalg.expm_frechet`` gives NaN and zeros.

    Raises:
      TypeError: ``A`` or ``E`` is not an array of a numeric dtype, or their dtypes differ after
        integer promotion.
      ValueError: ``A`` is not of shape ``(..., n, n)`` or ``E`` not of ``A``'s shape.

    Notes:
      The forward is :func:`expm`'s, run on pairs ``(A, E)`` standing for ``[[A, E], [0, A]]``
      (each product of the block matrices three products of ``n × n`` matrices): the scaling,
      the ``[m/m]`` Padé approximant and its denominator's factors are ``A``'s (``s`` and ``m`` as
      in :func:`expm`), and Al-Mohy & Higham's recurrence for ``L`` runs beside each product,
      the solve, and each squaring; ``exp(A)`` is :func:`expm`'s, by the same operations. The
      residuals are both recurrences' intermediates; the pushforward and the pullback are the
      recurrence of :func:`expm`'s derivatives on them, about twice the forward's products and
      no factorisation, the squarings' intermediates recomputed as in :func:`expm`. Without
      ``X̄`` (``compute_expm=False``) or without ``Ȧ``, products with the zero block are not
      formed: the pullback of ``L`` alone or the pushforward in ``E`` alone costs less. The
      same computation (products and solves) runs on every platform.

    References:
      A. H. Al-Mohy, N. J. Higham, "Computing the Fréchet derivative of the matrix exponential,
      with an application to condition number estimation", SIAM J. Matrix Anal. Appl. 30 (2009).
      N. J. Higham, S. D. Relton, "Higher order Fréchet derivatives of matrix functions and the
      level-2 condition number", SIAM J. Matrix Anal. Appl. 35 (2014).
      N. J. Higham, *Functions of Matrices: Theory and Computation*, SIAM (2008), §3.2.

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
    return _expm_frechet(a, e, compute_expm=compute_expm)


def _expm_frechet_forward(a, e, *, compute_expm):
    """``exp([[A, E], [0, A]]) = [[exp(A), L(A, E)], [0, exp(A)]]``."""
    if a.shape[-1] == 0:
        return ((a, e) if compute_expm else e), None
    out, res = kernel.pade_expm(kernel.Dual(a, e), MAX_SQUARINGS)
    return ((out.a, out.b) if compute_expm else out.b), res


def _expm_frechet_pushforward(res, a_dot, e_dot, *, compute_expm):
    """``(Ẋ, L̇) = (L(A, Ȧ), L(A, Ė) + L⁽²⁾(A; E, Ȧ))``: the Fréchet derivative of the block
    exponential in the direction ``[[Ȧ, Ė], [0, Ȧ]]``."""
    d = kernel.frechet(res, kernel.Dual(a_dot, e_dot), MAX_SQUARINGS)
    x_dot, l_dot = (jnp.zeros_like(res.r0.a) if y is None else y for y in (d.a, d.b))
    return (x_dot, l_dot) if compute_expm else l_dot


def _expm_frechet_pullback(res, out_bar, *, compute_expm):
    """``(Ā, Ē) = (L(Aᵀ, X̄) + L⁽²⁾(Aᵀ; Eᵀ, L̄), L(Aᵀ, L̄))``: the Fréchet derivative of the block
    exponential at ``[[Aᵀ, Eᵀ], [0, Aᵀ]]`` in the direction ``[[L̄, X̄], [0, L̄]]``."""
    x_bar, l_bar = out_bar if compute_expm else (None, out_bar)
    bar = kernel.frechet_adjoint(res, kernel.Dual(l_bar, x_bar), MAX_SQUARINGS)
    return bar.b, bar.a


_expm_frechet = Rule("expm_frechet", _expm_frechet_forward, _expm_frechet_pushforward,
                     _expm_frechet_pullback)
