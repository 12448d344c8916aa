r"""Rules of functions of Hermitian matrices: ``f(A) = Q f(Λ) Qᴴ`` with the Daleckii–Krein
derivative, which exists at repeated eigenvalues.

One rule serves :func:`sqrtmh`, :func:`logmh`, :func:`powmh` and :func:`hermitian_function`: the
kernel layer's :func:`~rules._kernels.spectral.matrix_function`, whose static argument is the
scalar function (a :class:`~rules._kernels.spectral.ScalarFunction`, which also supplies the
divided differences). It is defined there, beside the divided differences and the Daleckii–Krein
map, because the kernel layer's own matrix functions (the polar factor of a frame, ``arctan`` of
singular values) and ``geometric``'s SPD metrics are the same rule: one implementation, whose
second derivatives are exact at repeated eigenvalues in every composition of modes.
With ``A = QΛQᴴ``, ``H(X) = (X + Xᴴ)/2`` and ``F_ij = f[λ_i, λ_j]`` (``f'(λ_i)`` where
``λ_i = λ_j``):

.. math::
    Y = Q f(\Lambda) Q^H, \qquad
    \dot Y = Q\,\big(F \circ Q^H H(\dot A)\, Q\big)\,Q^H, \qquad
    \bar A = \overline{Q\,\big(F \circ Q^H H(\overline{\bar Y})\, Q\big)\,Q^H}

The pushforward ``L`` is self-adjoint for ``Re tr(XᴴY)`` (``F`` is real and symmetric, ``H`` an
orthogonal projection), so the pullback in JAX's bilinear convention is ``conj ∘ L ∘ conj``
(``docs/derivations/conventions.md#complex``); :func:`~rules._kernels.spectral.daleckii_krein`
computes both. Derivation: ``docs/derivations/hermitian-functions.md``.
"""
from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from .._core.checks import as_inexact_matrix
from .._core.dispatch import jitted
from .._kernels import spectral as kernel

__all__ = ["hermitian_function", "logmh", "powmh", "sqrtmh"]


@jitted()
def sqrtmh(a: ArrayLike) -> jax.Array:
    r"""Principal square root ``A^{1/2} = Q Λ^{1/2} Qᴴ`` of Hermitian positive semidefinite matrices.

    .. math::
        \dot Y = Q\,(F \circ Q^H \dot A Q)\,Q^H, \qquad
        F_{ij} = \frac{1}{\sqrt{\lambda_i} + \sqrt{\lambda_j}}

    (Daleckii–Krein; ``F_ii = 1/(2√λ_i)``, the same expression), exact at repeated eigenvalues,
    where differentiating through ``eigh`` divides by zero. ``F ∘`` is equivalently the solution of
    the Sylvester equation ``YẎ + ẎY = Ȧ``. See :func:`hermitian_function` for the conventions.

    Args:
      a: array of shape ``(..., n, n)``, Hermitian (real symmetric) positive semidefinite; only
        its Hermitian part ``(a + aᴴ)/2`` is read. Integers and booleans are promoted as in
        ``jnp.linalg``.

    Returns:
      ``A^{1/2}``, of the shape and dtype of ``a``: real symmetric for real ``a``, Hermitian for
      complex ``a``. A matrix with an eigenvalue below ``-n·ε·‖A‖₂`` gives NaN, as
      ``jnp.sqrt(-1.0)`` does (eigenvalues in ``[-n·ε·‖A‖₂, 0)`` are rounding errors of a
      semidefinite matrix and are taken as 0).

    Raises:
      TypeError: ``a`` is not an array of a numeric dtype, or has a half-precision dtype.
      ValueError: ``a`` is not of shape ``(..., n, n)``.

    Notes:
      ``F`` has no cancellation at any gap, so the derivative is as accurate as the
      eigendecomposition. At a zero eigenvalue the square root is not differentiable (``F`` is
      infinite there). Unlike :func:`rules.sqrtm` (any matrix, Schur-free iterations) this
      reads only the Hermitian part: a non-symmetric ``a`` gives the root of ``(a + aᴴ)/2``.

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a = jnp.array([[4.0, 0.0], [0.0, 4.0]], dtype=jnp.float32)  # λ = 4 twice
      >>> rules.sqrtmh(a)
      Array([[2., 0.],
             [0., 2.]], dtype=float32)
      >>> jax.grad(lambda a: rules.sqrtmh(a)[0, 1])(a)  # finite; through eigh it is NaN
      Array([[0.   , 0.125],
             [0.125, 0.   ]], dtype=float32)
    """
    return kernel.matrix_function(kernel.Sqrt(), as_inexact_matrix("sqrtmh", "a", a, square=True))


@jitted()
def logmh(a: ArrayLike) -> jax.Array:
    r"""Principal logarithm ``log A = Q (log Λ) Qᴴ`` of Hermitian positive definite matrices.

    .. math::
        \dot Y = Q\,(F \circ Q^H \dot A Q)\,Q^H, \qquad
        F_{ij} = \frac{\log\lambda_i - \log\lambda_j}{\lambda_i - \lambda_j}, \quad
        F_{ii} = \frac{1}{\lambda_i}

    (Daleckii–Krein), exact at repeated eigenvalues. ``F`` is evaluated as
    ``log1p(x)/(x·λ_lo)``, ``x = (λ_hi - λ_lo)/λ_lo``, without cancellation at any gap. See
    :func:`hermitian_function` for the conventions.

    Args:
      a: array of shape ``(..., n, n)``, Hermitian (real symmetric) positive definite; only its
        Hermitian part is read. Integers and booleans are promoted as in ``jnp.linalg``.

    Returns:
      ``log A``, of the shape and dtype of ``a`` (real for real ``a``). A matrix with a negative
      eigenvalue gives NaN, as ``jnp.log(-1.0)`` does; a singular one non-finite entries
      (``log 0 = -inf``).

    Raises:
      TypeError: ``a`` is not an array of a numeric dtype, or has a half-precision dtype.
      ValueError: ``a`` is not of shape ``(..., n, n)``.

    Notes:
      For the logarithm of a general (non-Hermitian) matrix, :func:`rules.logm`.

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a = 2 * jnp.eye(2, dtype=jnp.float32)
      >>> rules.logmh(a)
      Array([[0.6931472, 0.       ],
             [0.       , 0.6931472]], dtype=float32)
      >>> jax.jvp(rules.logmh, (a,), (jnp.ones((2, 2), jnp.float32),))[1]  # D log(2I)[E] = E/2
      Array([[0.5, 0.5],
             [0.5, 0.5]], dtype=float32)
    """
    return kernel.matrix_function(kernel.Log(), as_inexact_matrix("logmh", "a", a, square=True))


@jitted("p")
def powmh(a: ArrayLike, p: int | float) -> jax.Array:
    r"""Matrix power ``A^p = Q Λ^p Qᴴ`` of Hermitian positive (semi)definite matrices, real ``p``.

    .. math::
        \dot Y = Q\,(F \circ Q^H \dot A Q)\,Q^H, \qquad
        F_{ij} = \frac{\lambda_i^p - \lambda_j^p}{\lambda_i - \lambda_j}, \quad
        F_{ii} = p\,\lambda_i^{p-1}

    (Daleckii–Krein), exact at repeated eigenvalues. For positive eigenvalues ``F`` is evaluated
    as ``λ_lo^{p-1} expm1(p·log1p(x))/x``, ``x = (λ_hi - λ_lo)/λ_lo``, without cancellation at any
    gap. See :func:`hermitian_function` for the conventions.

    Args:
      a: array of shape ``(..., n, n)``, Hermitian (real symmetric); only its Hermitian part is
        read. Positive definite for ``p < 0``, semidefinite for ``p > 0``; any Hermitian matrix
        for an integer ``p``. Integers and booleans are promoted as in ``jnp.linalg``.
      p: the exponent, a Python ``int`` or ``float`` (a static argument: each value compiles
        once, and ``p`` is not differentiated). An integer-valued ``p`` is an integer power
        (``lax.integer_pow``, defined at negative eigenvalues).

    Returns:
      ``A^p``, of the shape and dtype of ``a`` (real for real ``a``). For a non-integer ``p``, a
      matrix with an eigenvalue below ``-n·ε·‖A‖₂`` gives NaN, as ``jnp.power(-1.0, 0.5)``
      does (higher ones are taken as 0); a singular matrix and ``p < 0`` give non-finite entries.

    Raises:
      TypeError: ``a`` is not an array of a numeric dtype or has a half-precision dtype, or ``p``
        is not a Python int or float (a bool, a complex number or an array).
      ValueError: ``a`` is not of shape ``(..., n, n)``, or ``p`` is not finite.

    Notes:
      An exponent to differentiate or to trace is not supported: its derivative
      ``Q (Λ^p log Λ) Qᴴ`` is :func:`hermitian_function` of ``λ ↦ λ^p log λ`` at that ``p``.

    Examples:
      >>> import jax.numpy as jnp, rules
      >>> a = jnp.array([[2.0, 1.0], [1.0, 2.0]], dtype=jnp.float32)  # λ = 1, 3
      >>> y = rules.powmh(a, -0.5)
      >>> y @ a @ y
      Array([[1., 0.],
             [0., 1.]], dtype=float32)
    """
    a = as_inexact_matrix("powmh", "a", a, square=True)
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise TypeError(f"powmh: `p` must be a Python int or float (a static exponent); got "
                        f"{type(p).__name__}.")
    if not np.isfinite(p):
        raise ValueError(f"powmh: `p` must be finite; got {p}.")
    exponent = int(p) if float(p).is_integer() else float(p)
    return kernel.matrix_function(kernel.Power(exponent), a)


@jitted("f")
def hermitian_function(a: ArrayLike, f: Callable[[jax.Array], jax.Array]) -> jax.Array:
    r"""``f(A) = Q f(Λ) Qᴴ`` for Hermitian ``A = QΛQᴴ`` and an elementwise real function ``f``.

    .. math::
        \dot Y = Q\,(F \circ Q^H H(\dot A)\,Q)\,Q^H, \qquad
        \bar A = \overline{Q\,(F \circ Q^H H(\overline{\bar Y})\,Q)\,Q^H}, \qquad
        F_{ij} = f[\lambda_i, \lambda_j] =
        \begin{cases} \dfrac{f(\lambda_i) - f(\lambda_j)}{\lambda_i - \lambda_j} & \lambda_i \ne \lambda_j \\
        f'(\lambda_i) & \lambda_i = \lambda_j \end{cases}

    with ``H(X) = (X + Xᴴ)/2`` (Daleckii–Krein; the pullback in JAX's convention). ``f(A)`` is
    smooth wherever ``f`` is, repeated eigenvalues included, and so is this derivative; JAX's
    derivative through ``eigh`` divides by ``λ_i - λ_j`` and is NaN (or wrong, at eigenvalues
    split by rounding) there. ``f'`` is JAX's derivative of ``f`` (a JVP with tangent 1, as ``f``
    is elementwise). Derivation: ``docs/derivations/hermitian-functions.md``.

    What is read of ``a``: its Hermitian part ``(a + aᴴ)/2``, as :func:`rules.eigh` with
    ``symmetrize_input=True`` reads it. The function depends on nothing else, so the derivative in
    a direction ``Ȧ`` is that of ``H(Ȧ)``, and the gradient is Hermitian.

    Args:
      a: array of shape ``(..., n, n)``, Hermitian (real symmetric). Integers and booleans are
        promoted as in ``jnp.linalg``.
      f: an elementwise function of real arrays, differentiable twice by JAX (``jnp.tanh``,
        ``jax.nn.softplus``, ``lambda w: 1 / (1 + w)``), returning a real floating array of the
        shape of its argument (cast to its dtype). A static argument: a new function object (a
        new ``lambda`` at each call) compiles anew. It must not close over values being
        differentiated (JAX then raises: the rule differentiates ``a`` only).

    Returns:
      ``f(A)``, of the shape and dtype of ``a``: real symmetric for real ``a``, Hermitian for
      complex ``a``. Where ``f`` is NaN at an eigenvalue (outside its domain) every entry is NaN.

    Raises:
      TypeError: ``a`` is not an array of a numeric dtype or has a half-precision dtype; ``f`` is
        not callable or does not return a real floating array.
      ValueError: ``a`` is not of shape ``(..., n, n)``; ``f`` changes the shape of its argument.

    Notes:
      Forward: one eigendecomposition (``rules.eigh``'s kernel: LAPACK's ``syevd``/``heevd`` on
      CPU, cuSOLVER on GPU, JAX's own on TPU; Jacobi rotations for batches of tiny real
      matrices) and one product. Residuals: the input, ``Q``, ``λ``, ``F`` and ``f''(λ)``.
      Pushforward and pullback: four matrix products each. ``F`` where eigenvalues are close is
      the corrected trapezoidal rule ``(f'(λ_i) + f'(λ_j))/2 - (λ_i - λ_j)(f''(λ_i) -
      f''(λ_j))/12``, chosen where it agrees with the quotient to within the quotient's
      cancellation error: accurate to about ``ε^{4/5}`` relative at every gap, exact at equal
      eigenvalues. Second derivatives (``jax.hessian``, ``jvp`` of ``grad``) are the
      second-order Daleckii–Krein formula, with second divided differences ``f[λ_i, λ_k, λ_j]``
      (``f''(λ)/2`` at a triple eigenvalue): also exact at repeated eigenvalues, accurate to about
      ``√ε`` where eigenvalues are close but distinct, at ``O(n³)`` memory; third and higher
      derivatives differentiate the eigendecomposition and need distinct eigenvalues.

    References:
      Ju. L. Daleckiĭ, S. G. Kreĭn, "Integration and differentiation of functions of Hermitian
      operators and applications to the theory of perturbations", AMS Transl. (2) 47 (1965).
      N. J. Higham, "Functions of Matrices: Theory and Computation", SIAM (2008), Thm. 3.11 and
      §3.1. R. Bhatia, "Matrix Analysis", Springer (1997), §V.3 (second derivatives).

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a = jnp.eye(2, dtype=jnp.float32)  # λ = 1 twice
      >>> rules.hermitian_function(a, jnp.tanh)
      Array([[0.7615942, 0.       ],
             [0.       , 0.7615942]], dtype=float32)
      >>> g = jax.grad(lambda a: rules.hermitian_function(a, jnp.tanh)[0, 1])(a)  # JAX's: NaN
      >>> print(f"{g[0, 1]:.5f} = (1 - tanh²(1))/2")
      0.20999 = (1 - tanh²(1))/2
    """
    a = as_inexact_matrix("hermitian_function", "a", a, square=True)
    if not callable(f):
        raise TypeError(f"hermitian_function: `f` must be a callable (an elementwise function of "
                        f"the eigenvalues); got {type(f).__name__}.")
    w = jax.ShapeDtypeStruct(a.shape[:-1], jnp.finfo(a.dtype).dtype)
    out = jax.eval_shape(f, w)
    if not (isinstance(out, jax.ShapeDtypeStruct) and jnp.issubdtype(out.dtype, jnp.floating)):
        raise TypeError(f"hermitian_function: `f` must return a real floating array; given "
                        f"float eigenvalues {w.dtype}{list(w.shape)}, it returned {out}.")
    if out.shape != w.shape:
        raise ValueError(f"hermitian_function: `f` must be elementwise, returning an array of its "
                         f"argument's shape {w.shape}; got {out.shape}.")
    return kernel.matrix_function(kernel.Elementwise(f), a)
