r"""Rules of the principal square root and logarithm of general square matrices: sqrtm, logm.

Both are primary matrix functions with real power-series coefficients, so the pullback in JAX's
bilinear pairing is the Fréchet derivative at the transpose, ``Ā = L(Aᵀ, Ȳ)`` (plain transposes,
no conjugation; ``docs/derivations/conventions.md#complex``). The forwards use matrix products and
inverses only (the scaled Denman–Beavers iteration, inverse scaling and squaring), and every
platform runs the same computation; the derivatives run on the forward's recorded iterates
(``rules/_kernels/roots.py``). Derivation: ``docs/derivations/sqrtm-logm.md``.
"""
from __future__ import annotations

import operator

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from .._core.arrays import as_complex
from .._core.checks import UnsupportedDtypeError, as_inexact_matrix, is_half
from .._core.dispatch import jitted
from .._core.rule import Rule
from .._kernels import roots as kernel

__all__ = ["logm", "sqrtm"]


# ==============================================================================================
# Square root


@jitted("blocksize")
def sqrtm(A: ArrayLike, blocksize: int = 1) -> jax.Array:
    r"""Principal square root ``X = A^{1/2}`` of square matrices, as ``jax.scipy.linalg.sqrtm``.

    .. math::
        X^2 = A, \qquad X\dot X + \dot X X = \dot A, \qquad
        X^T\bar A + \bar A X^T = \bar X

    ``X`` is the square root whose eigenvalues lie in the open right half plane. Its Fréchet
    derivative ``Ẋ = L(A, Ȧ)`` solves the Sylvester equation above (uniquely: ``X`` and ``−X``
    share no eigenvalue); the pullback is ``Ā = L(Aᵀ, X̄)``, the same equation at ``Xᵀ``. JAX's
    own ``sqrtm`` has neither derivative and runs on the CPU only (``schur``). Derivation:
    ``docs/derivations/sqrtm-logm.md``.

    Args:
      A: array of shape ``(..., n, n)`` (JAX's takes one matrix; here any leading batch axes);
        integers and booleans are promoted as in ``jnp.linalg``.
      blocksize: accepted as SciPy accepts it, an int ≥ 1 (SciPy's block size for its Schur
        method; JAX raises ``NotImplementedError`` for more than 1). The iteration here has no
        blocks: every value gives the same result.

    Returns:
      ``A^{1/2}``, complex as in JAX: complex64 for float32 (and promoted integer) input,
      complex128 for float64, the dtype of complex input. A slice with an eigenvalue on the
      closed negative real axis (0 included), which has no principal square root, gives NaN —
      JAX and SciPy instead return a square root with ``√(−1) = i`` there.

    Raises:
      TypeError: ``A`` is not an array of a numeric dtype (half precision included), or
        ``blocksize`` not an int.
      ValueError: ``A`` is not of shape ``(..., n, n)``, or ``blocksize < 1``.

    Notes:
      Forward, on every platform: the product form of the Denman–Beavers iteration with
      determinant scaling (Higham, *Functions of Matrices*, (6.29)), one inverse and one product
      per step, in real arithmetic for real input. The inverse pivots (LU; for ``n ≤ 4``
      Gauss–Jordan elimination unrolled over the batch's entries), and the first step takes
      ``X₀M₀⁻¹ = I`` exactly: the two keep the error a backward error of ``A``. A step from ``M``
      with ``‖M − I‖₁ ≤ √u`` ends the iteration (``u`` the unit roundoff): the result is then at
      rounding level. Each slice stops at its own step, the batch runs the most any slice needs,
      up to 32; a slice still short of convergence (an eigenvalue on or within a tiny angle of
      the negative real axis, or non-finite entries) gives NaN. Relative error a few units of
      ``u`` times the condition number of the square root, as the Schur method's (SciPy's,
      JAX's), also for ill-conditioned and non-normal input: about ``1e-15`` on well-conditioned
      float64 input, ``1e-6`` in float32.

      Derivatives: the derivative of the recorded steps (each step's inverse stored, the scaling
      held fixed), continued to the limit of the steps not taken: five products per step, no
      inverse, so a pushforward or pullback costs about what the forward does. It solves the
      Sylvester equation to rounding level. The pullback runs the same recurrence on the
      transposed iterates (the iteration of ``Aᵀ``). Second derivatives in either mode: forward
      over reverse (``jax.hessian``, ``jax.jvp`` of ``jax.grad``) and reverse over reverse
      (``jax.grad`` of ``jax.grad``); the iterations they differentiate are scans of fixed
      length whose steps past convergence are skipped.

    References:
      N. J. Higham, "Functions of Matrices: Theory and Computation", SIAM (2008), §6.3, §6.4, §6.7.
      E. D. Denman, A. N. Beavers, "The matrix sign function and computations in systems",
      Appl. Math. Comput. 2 (1976).

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a = jnp.array([[4.0, 5.0], [0.0, 9.0]], jnp.float32)
      >>> x = rules.sqrtm(a)   # complex, as JAX's
      >>> with jnp.printoptions(precision=3, suppress=True):
      ...     print(x)
      [[2.+0.j 1.+0.j]
       [0.+0.j 3.+0.j]]
      >>> g = jax.grad(lambda a: rules.sqrtm(a)[0, 0].real)(a)  # solves Xᵀ G + G Xᵀ = e₀e₀ᵀ
      >>> with jnp.printoptions(precision=3, suppress=True):
      ...     print(g)
      [[ 0.25  0.  ]
       [-0.05  0.  ]]
    """
    a = _as_matrix("sqrtm", A)
    try:
        blocks = operator.index(blocksize)
    except TypeError:
        raise TypeError(f"sqrtm: `blocksize` must be an int; got "
                        f"{type(blocksize).__name__}.") from None
    if isinstance(blocksize, bool):
        raise TypeError("sqrtm: `blocksize` must be an int; got bool.")
    if blocks < 1:
        raise ValueError(f"sqrtm: `blocksize` must be at least 1; got {blocks}.")
    return _sqrtm(a)


def _as_matrix(fname: str, a: ArrayLike) -> jax.Array:
    """``A`` checked and promoted as in ``jnp.linalg``. Half precision is refused as the other
    rules refuse it on the CPU and GPU, and on the TPU too: the iteration's convergence test
    ``‖M − I‖₁ ≤ √u`` needs more digits than half precision has, and JAX has no forward to
    hand it to (its ``sqrtm`` needs ``schur``)."""
    a = as_inexact_matrix(fname, "A", a, square=True)
    if is_half(a):
        raise UnsupportedDtypeError(
            f"{fname}: `A` has dtype {a.dtype}. Unsupported dtype {a.dtype}: {fname} takes "
            "float32, float64, complex64 and complex128. Cast it, e.g. `A.astype(jnp.float32)`, "
            "and the result back.")
    return a


def _sqrtm_primal(a):
    if a.size == 0:
        return as_complex(a)
    return as_complex(kernel.sqrtm(a, record=False)[0])


def _sqrtm_forward(a):
    if a.size == 0:
        return as_complex(a), None
    x, steps = kernel.sqrtm(a)
    return as_complex(x), steps


def _sqrtm_pushforward(steps, a_dot):
    """``Ẋ = L(A, Ȧ)``: the derivative of the recorded iteration (real for real ``A``)."""
    return as_complex(kernel.frechet(steps, a_dot))


def _sqrtm_pullback(steps, x_bar):
    """``Ā = L(Aᵀ, X̄)`` (JAX's pairing; for real ``A`` of ``Re X̄``, the output being complex)."""
    if not jnp.iscomplexobj(steps.b):
        x_bar = x_bar.real
    return (kernel.frechet(steps, x_bar, transpose=True),)


_sqrtm = Rule("sqrtm", _sqrtm_forward, _sqrtm_pushforward, _sqrtm_pullback, primal=_sqrtm_primal)


# ==============================================================================================
# Logarithm


@jitted()
def logm(A: ArrayLike) -> jax.Array:
    r"""Principal logarithm ``Y = log A`` of general square matrices, as ``scipy.linalg.logm``.

    .. math::
        e^Y = A, \qquad
        \dot Y = L(A, \dot A) = \int_0^1 \big(t(A - I) + I\big)^{-1}\dot A\,
        \big(t(A - I) + I\big)^{-1} dt, \qquad \bar A = L(A^T, \bar Y)

    ``Y`` is the logarithm whose eigenvalues have imaginary parts in ``(−π, π)``; ``L`` is its
    Fréchet derivative and the pullback is ``L`` at ``Aᵀ`` (plain transposes). JAX has no
    ``logm``. Derivation: ``docs/derivations/sqrtm-logm.md``.

    Args:
      A: array of shape ``(..., n, n)`` (SciPy's takes one matrix); integers and booleans are
        promoted as in ``jnp.linalg``.

    Returns:
      ``log A`` with the dtype of ``A`` (after integer promotion): real for real input, complex
      for complex input, a rule that cannot depend on the values under ``jit``. It loses
      nothing: the principal logarithm exists exactly when no eigenvalue lies on the closed
      negative real axis, and it is then real for real ``A``. A slice with such an eigenvalue
      (0 included) gives NaN, real or complex; SciPy returns the logarithm with ``log(−1) = iπ``
      there, complex (and real output for real input otherwise, as here).

    Raises:
      TypeError: ``A`` is not an array of a numeric dtype (half precision included).
      ValueError: ``A`` is not of shape ``(..., n, n)``.

    Notes:
      Forward, on every platform: inverse scaling and squaring without a Schur form (Higham,
      *Functions of Matrices*, Alg. 11.10; Al-Mohy & Higham 2012, §5). ``A = 2^k B`` with
      ``2^k`` the power of two nearest ``|det A|^{1/n}``; square roots of ``B`` by the scaled
      Denman–Beavers iteration (as :func:`sqrtm`) until ``Y = B^{1/2^s} − I`` has
      ``α_p(Y) = max(‖Y^p‖^{1/p}, ‖Y^{p+1}‖^{1/(p+1)}) ≤ θ`` for some ``2 ≤ p ≤ 5`` (``≤ ‖Y‖``:
      far fewer square roots for a far from normal ``A``); then
      ``log A = 2^s r_m(Y) + k log 2 · I`` with the ``[m/m]`` Padé approximant of
      ``log(1 + x)`` in partial fractions (``m``-point Gauss–Legendre): ``m = 12``, ``θ = 0.586``
      in double precision, ``m = 6``, ``θ = 0.646`` (and ``p ≤ 4``) in single. Each slice takes
      its own number of square roots; the batch runs the most any slice needs, up to 64
      iteration steps in all, and a slice that has not converged by then gives NaN. Relative
      error a few units of the unit roundoff times the condition number of ``log`` at ``A``, as
      SciPy's: about ``1e-15`` on well-conditioned float64 input, ``1e-6`` in float32.

      Derivatives (Al-Mohy, Higham & Relton 2013, the chain rule through the same steps): the
      derivative of the square roots' recorded iterations (as :func:`sqrtm`'s), then of the
      Padé step, ``d[(I + βY)⁻¹Y] = (I + βY)⁻¹Ẏ(I + βY)⁻¹`` with the forward's inverses: no
      inverse, five products per iteration step and two per Padé term. The pullback is the same
      on the transposed iterates, in reverse order of the stages. Second derivatives as
      :func:`sqrtm`'s: forward over reverse and reverse over reverse.

    References:
      N. J. Higham, "Functions of Matrices: Theory and Computation", SIAM (2008), §11.5.
      A. H. Al-Mohy, N. J. Higham, "Improved inverse scaling and squaring algorithms for the
      matrix logarithm", SIAM J. Sci. Comput. 34 (2012).
      A. H. Al-Mohy, N. J. Higham, S. D. Relton, "Computing the Fréchet derivative of the matrix
      logarithm and estimating the condition number", SIAM J. Sci. Comput. 35 (2013).

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a = jnp.array([[1.0, 1.0], [0.0, 1.0]], jnp.float32)  # I + N, N² = 0: log = N
      >>> rules.logm(a)
      Array([[0., 1.],
             [0., 0.]], dtype=float32)
      >>> b = jnp.array([[2.0, 1.0], [-1.0, 3.0]], jnp.float32)
      >>> jnp.allclose(rules.expm(rules.logm(b)), b, atol=1e-5)
      Array(True, dtype=bool)
    """
    return _logm(_as_matrix("logm", A))


def _logm_primal(a):
    if a.size == 0:
        return a
    return kernel.logm(a, record=False)[0]


def _logm_forward(a):
    if a.size == 0:
        return a, None
    return kernel.logm(a)


def _logm_pushforward(res, a_dot):
    """``Ẏ = L(A, Ȧ)``: scale, square roots, Padé step, each differentiated on its iterates."""
    return kernel.logm_frechet(res, a_dot)


def _logm_pullback(res, y_bar):
    """``Ā = L(Aᵀ, Ȳ)``: the stages' adjoints in reverse order (JAX's pairing, no conj)."""
    return (kernel.logm_frechet(res, y_bar, transpose=True),)


_logm = Rule("logm", _logm_forward, _logm_pushforward, _logm_pullback, primal=_logm_primal)
