"""Rules of the Sylvester equation ``AX + XB = C`` and the continuous Lyapunov equation
``AX + XAᴴ = Q``: every derivative is another solve with the forward's factors."""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.typing import ArrayLike

from .._core.arrays import conj, mH
from .._core.checks import promote_matrices
from .._core.dispatch import jitted
from .._core.rule import Rule
from .._kernels import sylvester as kernel
from .._kernels.products import batched_product, mm

__all__ = ["solve_continuous_lyapunov", "solve_sylvester"]

_METHODS = ("schur", "eigen")


# ==============================================================================================
# Sylvester equation


@jitted("method")
def solve_sylvester(A: ArrayLike, B: ArrayLike, C: ArrayLike, *,
                    method: str = "schur", tol: ArrayLike = 1e-8) -> jax.Array:
    r"""Solution ``X`` of the Sylvester equation ``AX + XB = C``, as ``jax.scipy.linalg.solve_sylvester``.

    .. math::
        A X + X B = C, \qquad
        A \dot X + \dot X B = \dot C - \dot A X - X \dot B, \qquad
        A^T G + G B^T = \bar X,\quad \bar C = G,\ \bar A = -G X^T,\ \bar B = -X^T G

    The equation has a unique solution exactly where no eigenvalue ``λ_i`` of ``A`` and ``μ_j`` of
    ``B`` sum to zero. The derivatives are Sylvester equations with the same ``A`` and ``B``,
    solved with the forward's factors. The map is holomorphic: complex inputs take plain
    transposes (JAX's convention). Derivation: ``docs/derivations/sylvester.md``.

    Args:
      A: shape ``(..., m, m)``.
      B: shape ``(..., n, n)``.
      C: shape ``(..., m, n)``. Batch axes of the three broadcast; integers and booleans are
        promoted as in ``jnp.linalg``, and the three to one dtype.
      method: ``"schur"`` (Bartels–Stewart, the default) or ``"eigen"`` (eigendecompositions:
        inaccurate where ``A`` or ``B`` is far from normal), the two methods of
        ``jax.scipy.linalg.solve_sylvester``. On the CPU only; GPUs and TPUs run the sign
        iteration for both (Notes).
      tol: on the CPU, a slice with ``|λ_i + μ_j| < tol`` for some pair (absolute, as in JAX) is
        NaN. Not read on GPUs and TPUs.

    Returns:
      ``X``, shape ``(..., m, n)``, of the common dtype. NaN in a slice without a unique solution,
      and on GPUs and TPUs also where the spectra of ``A`` and ``-B`` are not on opposite sides of
      the imaginary axis.

    Raises:
      TypeError: an argument is not an array of a numeric dtype (or half precision), or ``tol``
        is not a real scalar.
      ValueError: shapes that do not fit ``(..., m, m)``, ``(..., n, n)``, ``(..., m, n)`` or
        batch axes that do not broadcast (the message shows the three shapes), or an unknown
        ``method``.

    Notes:
      **CPU** (``cpu_route.sylvester_schur``): Bartels–Stewart with complex Schur forms
      ``A = U T Uᴴ``, ``B = V S Vᴴ`` (of a real matrix from its real Schur form):
      ``X = U Y Vᴴ`` with ``T Y + Y S = Uᴴ C V``, solved column by column with triangular solves
      (in blocks for large matrices). Every uniquely solvable equation; the error is of order
      ``ε`` times the condition of the equation, as ``scipy.linalg.solve_sylvester``'s (LAPACK's
      ``trsyl``). ``method="eigen"`` (``cpu_route.sylvester_eigen``) uses ``A = P Λ P⁻¹``,
      ``B = Q M Q⁻¹`` as JAX does.

      **GPU, TPU**: the matrix sign function of ``[[A, -C], [0, -B]]`` by the scaled Newton
      iteration (Roberts; Benner, Quintana-Ortí): inverses and products only. Its domain is the
      equations whose spectra of ``A`` and ``-B`` lie on opposite sides of the imaginary axis —
      ``A`` and ``B`` both with eigenvalues of positive real part (SPD ones, say) or both of
      negative real part (stable ones); elsewhere NaN, also for uniquely solvable equations. For
      spectra separated by another vertical line ``Re z = σ``, pass ``A - σI`` and ``B + σI``:
      the same equation. On well-conditioned equations its error is of order ``ε`` times their
      condition, as the Schur method's. It takes 6 to 10 steps on well-separated spectra and at
      most 32 (a slice still moving after those is NaN), each two inverses and two products.

      **Derivatives**: the factors of ``A`` and ``B`` (Schur forms, or every ``A_k⁻¹``, ``B_k⁻¹``
      of the iteration: ``32 (m² + n²)`` entries) are kept; each derivative is one more solve
      with them (four products and the triangular sweep, or two products per step) and the
      products with ``X``. A batch of ``C`` with ``A`` and ``B`` without batch axes factorises
      them once, and their cotangents contract the batch in one product. Derivatives of every
      order are again solves with the same factors.

    References:
      R. H. Bartels, G. W. Stewart, "Solution of the matrix equation AX + XB = C", Comm. ACM 15
      (1972). J. D. Roberts, "Linear model reduction and solution of the algebraic Riccati
      equation by use of the sign function", Int. J. Control 32 (1980). P. Benner,
      E. S. Quintana-Ortí, G. Quintana-Ortí, "Solving stable Sylvester equations via rational
      iterative schemes", J. Sci. Comput. 28 (2006). N. J. Higham, "Functions of Matrices:
      Theory and Computation", SIAM (2008), ch. 5.

    Examples:
      >>> import jax.numpy as jnp, rules
      >>> a = jnp.array([[2.0, 1.0], [0.0, 3.0]], jnp.float32)
      >>> b = jnp.array([[1.0, 0.0], [1.0, 1.0]], jnp.float32)
      >>> x = rules.solve_sylvester(a, b, a + b)          # X = I solves AX + XB = A + B
      >>> jnp.round(x, 5)
      Array([[1., 0.],
             [0., 1.]], dtype=float32)
    """
    fname = "solve_sylvester"
    if not isinstance(method, str) or method not in _METHODS:
        raise ValueError(f"{fname}: `method` must be 'schur' or 'eigen'; got {method!r}.")
    a, b, c = promote_matrices(fname, {"A": (A, True), "B": (B, True), "C": (C, False)})
    m, n = c.shape[-2:]
    if a.shape[-1] != m or b.shape[-1] != n:
        raise ValueError(f"{fname}: `A` (..., m, m), `B` (..., n, n) and `C` (..., m, n) must "
                         f"agree in m and n; got shapes {tuple(a.shape)}, {tuple(b.shape)} and "
                         f"{tuple(c.shape)}.")
    tol = _real_scalar(fname, "tol", tol, a.dtype)
    batch = _batch(fname, (("A", a), ("B", b), ("C", c)))
    if 0 in (m, n, *batch):
        return jnp.zeros((*batch, m, n), c.dtype)
    a, b, c = _shared_or_broadcast(batch, a, b, c)
    factors = kernel.sylvester_factors(lax.stop_gradient(a), lax.stop_gradient(b), method, tol)
    return _sylvester(a, b, c, factors, diagonal=method == "eigen", transpose=False)


def _sylvester_primal(a, b, c, factors, *, diagonal, transpose):
    del a, b
    return kernel.solve(factors, c, transpose=transpose, diagonal=diagonal)


def _sylvester_forward(a, b, c, factors, *, diagonal, transpose):
    # X through the rule itself: differentiating the forward (derivatives of order two and
    # more) then runs this rule's pushforward, never JAX's derivative of the stored factors.
    x = _sylvester(a, b, c, factors, diagonal=diagonal, transpose=transpose)
    return x, (a, b, x, factors)


def _sylvester_pushforward(res, a_dot, b_dot, c_dot, factors_dot, *, diagonal, transpose):
    """``Ẋ`` with ``op(A) Ẋ + Ẋ op(B) = Ċ - op(Ȧ) X - X op(Ḃ)``, ``op`` the transpose if
    ``transpose``."""
    del factors_dot  # the factors are functions of A and B, whose tangents carry the change
    a, b, x, factors = res
    rhs = _minus_products(c_dot, a_dot, x, b_dot, transpose)
    return _sylvester(a, b, rhs, factors, diagonal=diagonal, transpose=transpose)


def _sylvester_pullback(res, x_bar, *, diagonal, transpose):
    """``G`` from the transposed equation; ``C̄ = G``, ``Ā = -G Xᵀ``, ``B̄ = -Xᵀ G`` (their
    transposes for the transposed equation)."""
    a, b, x, factors = res
    g = _sylvester(a, b, x_bar, factors, diagonal=diagonal, transpose=not transpose)
    left, right = (x, g) if transpose else (g, x)
    return -_outer(a, left, right), -_inner(b, left, right), g, None


_sylvester = Rule("solve_sylvester", _sylvester_forward, _sylvester_pushforward,
                  _sylvester_pullback, primal=_sylvester_primal)


# ==============================================================================================
# Continuous Lyapunov equation


@jitted()
def solve_continuous_lyapunov(a: ArrayLike, q: ArrayLike) -> jax.Array:
    r"""Solution ``X`` of ``AX + XAᴴ = Q``, as ``scipy.linalg.solve_continuous_lyapunov``.

    .. math::
        A X + X A^H = Q, \qquad
        A \dot X + \dot X A^H = \dot Q - \dot A X - X \dot A^H, \qquad
        A^T G + G \bar A = \bar X,\quad \bar Q = G,\
        \bar A = -G X^T - \overline{G^T X}

    ``Ȧ`` enters twice, once conjugated: the solution is not holomorphic in a complex ``A``, and
    the pullback's second term is conjugated (JAX's convention, ``Re Σ Ā ⊙ Ȧ``). The equation has
    a unique solution where no two eigenvalues satisfy ``λ_i + λ̄_j = 0``; for a stable ``A`` and
    Hermitian ``Q``, ``X`` is Hermitian (negative definite for positive definite ``Q``).
    Derivation: ``docs/derivations/sylvester.md#lyapunov``.

    Args:
      a: shape ``(..., n, n)``.
      q: shape ``(..., n, n)``; batch axes broadcast with ``a``'s, and both are promoted to one
        dtype (integers as in ``jnp.linalg``).

    Returns:
      ``X``, shape ``(..., n, n)``, of the common dtype. NaN in a slice without a unique solution
      (on the CPU where some ``|λ_i + λ̄_j| ≤ n ε ‖A‖_F``), and on GPUs and TPUs also where ``A``
      has eigenvalues on both sides of the imaginary axis.

    Raises:
      TypeError: an argument is not an array of a numeric dtype (or half precision).
      ValueError: ``a`` or ``q`` is not of shape ``(..., n, n)`` with the same ``n``, or their
        batch axes do not broadcast.

    Notes:
      On the CPU Bartels–Stewart with one complex Schur form ``A = U T Uᴴ``
      (``cpu_route.lyapunov_schur``), as accurate as SciPy's. On GPUs and TPUs the sign iteration
      of :func:`solve_sylvester` on ``A`` alone (``B = Aᴴ`` iterates as the adjoint of ``A``):
      its domain is ``A`` stable (all ``Re λ < 0``, the control case) or anti-stable. The
      derivatives are solves with the forward's factors, as in :func:`solve_sylvester`.

    References:
      R. H. Bartels, G. W. Stewart, Comm. ACM 15 (1972). J. D. Roberts, Int. J. Control 32
      (1980). N. J. Higham, "Functions of Matrices: Theory and Computation", SIAM (2008), ch. 5.

    Examples:
      >>> import jax.numpy as jnp, rules
      >>> a = jnp.array([[-1.0, 0.0], [0.0, -2.0]], jnp.float32)
      >>> rules.solve_continuous_lyapunov(a, jnp.eye(2, dtype=jnp.float32))   # -1/(λ_i + λ_j)
      Array([[-0.5 ,  0.  ],
             [ 0.  , -0.25]], dtype=float32)
    """
    fname = "solve_continuous_lyapunov"
    a, q = promote_matrices(fname, {"a": (a, True), "q": (q, True)})
    n = a.shape[-1]
    if q.shape[-1] != n:
        raise ValueError(f"{fname}: `a` and `q` must have shapes (..., n, n) with the same n; got "
                         f"{tuple(a.shape)} and {tuple(q.shape)}.")
    batch = _batch(fname, (("a", a), ("q", q)))
    if 0 in (n, *batch):
        return jnp.zeros((*batch, n, n), q.dtype)
    a, q = _shared_or_broadcast(batch, a, q)
    return _lyapunov(a, q, kernel.lyapunov_factors(lax.stop_gradient(a)))


def _lyapunov_primal(a, q, factors):
    del a
    return kernel.solve(factors, q)


def _lyapunov_forward(a, q, factors):
    x = _sylvester(a, mH(a), q, factors, diagonal=False, transpose=False)
    return x, (a, x, factors)


def _lyapunov_pushforward(res, a_dot, q_dot, factors_dot):
    """``Ẋ`` with ``A Ẋ + Ẋ Aᴴ = Q̇ - Ȧ X - X Ȧᴴ``."""
    del factors_dot
    a, x, factors = res
    rhs = _minus_products(q_dot, a_dot, x, None if a_dot is None else mH(a_dot), False)
    return _sylvester(a, mH(a), rhs, factors, diagonal=False, transpose=False)


def _lyapunov_pullback(res, x_bar):
    """``G`` with ``Aᵀ G + G Ā = X̄``; ``Q̄ = G``, ``Ā = -G Xᵀ - conj(Gᵀ X)``."""
    a, x, factors = res
    g = _sylvester(a, mH(a), x_bar, factors, diagonal=False, transpose=True)
    return -(_outer(a, g, x) + conj(_inner(a, x, g))), g, None


_lyapunov = Rule("solve_continuous_lyapunov", _lyapunov_forward, _lyapunov_pushforward,
                 _lyapunov_pullback, primal=_lyapunov_primal)


# ==============================================================================================
# Shared pieces


def _minus_products(c_dot, a_dot, x, b_dot, transpose):
    """``Ċ - op(Ȧ) X - X op(Ḃ)``; a ``None`` tangent is zero (not all are)."""
    terms = [] if c_dot is None else [c_dot]
    if a_dot is not None:
        terms.append(-mm(a_dot.mT if transpose else a_dot, x))
    if b_dot is not None:
        terms.append(-mm(x, b_dot.mT if transpose else b_dot))
    return sum(terms[1:], terms[0])


def _outer(a, left, right):
    """``L Rᵀ``, summed over the batch where ``a`` has none."""
    return batched_product(left, right, False, True, sum_batch=a.ndim < left.ndim)


def _inner(b, left, right):
    """``Rᵀ L``, summed over the batch where ``b`` has none (the cotangent of ``X op(B)``)."""
    return batched_product(right, left, True, False, sum_batch=b.ndim < left.ndim)


def _real_scalar(fname: str, name: str, x: Any, dtype: Any) -> jax.Array:
    real = isinstance(x, (int, float)) and not isinstance(x, bool)
    if isinstance(x, (jax.Array, np.ndarray)):
        real = x.ndim == 0 and (jnp.issubdtype(x.dtype, jnp.floating)
                                or jnp.issubdtype(x.dtype, jnp.integer))
    if not real:
        raise TypeError(f"{fname}: `{name}` must be a real scalar; got "
                        f"{getattr(x, 'dtype', type(x).__name__)}"
                        f"{'' if jnp.ndim(x) == 0 else f' of shape {jnp.shape(x)}'}.")
    return jnp.asarray(x).astype(jnp.finfo(dtype).dtype)


def _batch(fname: str, named: tuple[tuple[str, jax.Array], ...]) -> tuple[int, ...]:
    try:
        return jnp.broadcast_shapes(*(x.shape[:-2] for _, x in named))
    except ValueError:
        shapes = [f"`{name}` {tuple(x.shape)}" for name, x in named]
        raise ValueError(f"{fname}: the batch axes of {', '.join(shapes[:-1])} and {shapes[-1]} "
                         "do not broadcast.") from None


def _shared_or_broadcast(batch: tuple[int, ...], *xs: jax.Array) -> list[jax.Array]:
    """The coefficient matrices (all but the last) kept without batch axes where none has any
    (factorised once, shared by the batch of the right-hand side); otherwise all broadcast."""
    *coefficients, rhs = xs
    if all(x.ndim == 2 for x in coefficients):
        return [*coefficients, jnp.broadcast_to(rhs, (*batch, *rhs.shape[-2:]))]
    return [jnp.broadcast_to(x, (*batch, *x.shape[-2:])) for x in xs]
