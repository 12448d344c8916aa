"""Rules of the polar decomposition ``A = UP`` (or ``A = PU``): the unitary factor, exact at
repeated singular values to every order, and the positive factor ``P = sym(UᴴA)``.

Derivation: ``docs/derivations/polar.md``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from .._core.arrays import conj, hermitian_part, mH
from .._core.checks import as_inexact_matrix
from .._core.dispatch import jitted
from .._core.rule import Rule
from .._kernels import polar as kernel
from .._kernels.products import mm, mm_h

__all__ = ["polar"]


@jitted("side", "method", "eps", "max_iterations")
def polar(a: ArrayLike, side: str = "right", *, method: str = "qdwh", eps: float | None = None,
          max_iterations: int | None = None) -> tuple[jax.Array, jax.Array]:
    r"""Polar decomposition ``A = UP`` (``side="right"``) or ``A = PU`` (``"left"``), as
    ``jax.scipy.linalg.polar``, with derivatives that exist at repeated singular values.

    For ``A`` of shape ``(m, n)`` and full rank ``k = min(m, n)``, with the thin SVD
    ``A = W diag(s) Vᴴ``: ``U = W Vᴴ`` (orthonormal columns if ``m ≥ n``, rows if ``m < n``),
    ``P = sym(UᴴA) = V diag(s) Vᴴ = (AᴴA)^{1/2}`` (right, ``n × n``) or
    ``P = sym(AUᴴ) = W diag(s) Wᴴ = (AAᴴ)^{1/2}`` (left, ``m × m``), ``sym(X) = (X + Xᴴ)/2``.
    For ``m ≥ n``, with ``Π = WᴴȦV`` and ``S_ij = s_i + s_j``,

    .. math::
        \dot U = W\big((\Pi - \Pi^H) \oslash S\big)V^H + (I - WW^H)\,\dot A\,V\Sigma^{-1}V^H,
        \qquad \dot P = \operatorname{sym}(\dot U^HA + U^H\dot A) ,

    a map ``Ȧ ↦ U̇`` that is self-adjoint (``U`` is the gradient of the nuclear norm ``tr P``), so
    that in the papers' pairing ``Re tr(Xᴴ Y)`` the pullback of ``U`` is the same formula applied
    to ``Ū``; ``P`` adds ``Ū += A sym(P̄)``, ``Ā += U sym(P̄)``. The wide case is the conjugate
    transpose of the tall one: ``U(A) = U(Aᴴ)ᴴ``.

    Args:
      a: array of shape ``(..., m, n)``; integers and booleans are promoted as ``jnp.linalg``
        promotes them.
      side: ``"right"`` (``A = UP``, the default) or ``"left"`` (``A = PU``).
      method: ``"qdwh"`` (JAX's default) or ``"svd"``, JAX's two algorithms. For full-rank input
        both compute these factors, and here both run the SVD (Notes).
      eps, max_iterations: accepted as ``jax.scipy.linalg.polar`` accepts them: there they bound
        the QDWH iteration (stop at a relative change below ``(4 eps)^{1/3}`` or after
        ``max_iterations`` steps). The SVD has no such iteration; they change nothing here.

    Returns:
      ``(U, P)``: ``U`` of the shape and dtype of ``a``; ``P`` Hermitian positive semidefinite,
      of shape ``(..., n, n)`` (right) or ``(..., m, m)`` (left) and the dtype of ``a``.

    Raises:
      TypeError: ``a`` is not an array of a numeric dtype (or is half precision off the TPU),
        ``eps`` is not a number or ``max_iterations`` not an int.
      ValueError: ``a`` has rank < 2, ``side`` is not ``"right"``/``"left"``, ``method`` is not
        ``"qdwh"``/``"svd"``, ``eps ≤ 0`` or ``max_iterations < 0``.

    Notes:
      Forward, on every platform: one thin SVD (``jnp.linalg.svd``; one-sided Jacobi for batches
      of 32 or more real square ``3 × 3`` or smaller matrices), ``U = W Vᴴ``, then ``P = sym(UᴴA)``:
      backward stable, ``U`` orthonormal to a few ulps; ``scipy.linalg.polar`` and JAX's
      ``method="svd"`` compute the same. JAX's ``method="qdwh"`` iterates QR- and
      Cholesky-based Halley steps to the same factors, but takes only ``m ≥ n`` with
      ``side="right"`` and ``m < n`` with ``side="left"`` (``NotImplementedError`` otherwise);
      here every shape and side is computed, whatever ``method``.

      Derivatives: they divide by ``s_i + s_j`` and ``s_i``, never by ``s_i - s_j``, so they are
      finite and exact at repeated singular values and at orthogonal input, where JAX's
      ``method="svd"`` gradient is NaN (and its default method has no reverse mode). Residuals
      ``W``, ``s``, ``V`` (``U`` and ``P`` too, read only by second derivatives; ``U``, ``A`` for
      ``P``); ``U``'s pushforward and pullback cost four products of ``A``'s size, ``P``'s two
      more (JAX skips them when ``P`` is unused).
      Second and higher derivatives are exact there too: they differentiate the same map written
      as ``U̇ = UX + (I - UUᴴ)ȦP⁻¹`` with ``XP + PX = UᴴȦ - ȦᴴU``, whose Sylvester solve and
      ``P⁻¹`` are differentiated in ``P`` (``rules/_kernels/polar.py``), never through ``V``.

      Rank-deficient ``A``: ``U`` is not unique (the SVD's choice is returned, as SciPy and JAX's
      ``method="svd"`` do; JAX's QDWH may return another: ``U = 0`` for ``A = 0``, ``I`` here) and
      has no derivative. An exactly zero singular value gives NaN derivatives; a numerically zero
      one, derivatives of size ``1/s_min``.

    References:
      N. J. Higham, "Functions of Matrices: Theory and Computation", SIAM (2008), ch. 8.
      C. Kenney, A. J. Laub, "Polar decomposition and matrix sign function condition
      estimates", SIAM J. Sci. Stat. Comput. 12 (1991).
      Y. Nakatsukasa, Z. Bai, F. Gygi, "Optimizing Halley's iteration for computing the matrix
      polar decomposition", SIAM J. Matrix Anal. Appl. 31 (2010) (JAX's QDWH).

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a = jnp.eye(2, dtype=jnp.float32)  # orthogonal: s = (1, 1)
      >>> x = jnp.array([[1.0, 2.0], [3.0, 4.0]], dtype=jnp.float32)
      >>> jax.grad(lambda a: jnp.sum(rules.polar(a)[0] * x))(a)  # (X - Xᵀ)/2; JAX's: NaN
      Array([[ 0. , -0.5],
             [ 0.5,  0. ]], dtype=float32)
    """
    a = as_inexact_matrix("polar", "a", a)
    if side not in ("right", "left"):
        raise ValueError(f"polar: `side` must be 'right' or 'left'; got {side!r}.")
    if method not in ("qdwh", "svd"):
        raise ValueError(f"polar: `method` must be 'qdwh' or 'svd'; got {method!r}.")
    _check_iteration_bounds(eps, max_iterations)
    m, n = a.shape[-2:]
    # A wide A is the conjugate transpose of a tall one, and U(Aᴴ) = U(A)ᴴ.
    u = _unitary(a) if m >= n else mH(_unitary(mH(a)))
    return u, _positive(u, a, left=side == "left")


def _check_iteration_bounds(eps, max_iterations) -> None:
    if eps is not None:
        if isinstance(eps, bool) or not isinstance(eps, (int, float)):
            raise TypeError(f"polar: `eps` must be None or a float > 0; got {type(eps).__name__}.")
        if not eps > 0:
            raise ValueError(f"polar: `eps` must be None or a float > 0; got {eps}.")
    if max_iterations is not None:
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int):
            raise TypeError(f"polar: `max_iterations` must be None or an int ≥ 0; got "
                            f"{type(max_iterations).__name__}.")
        if max_iterations < 0:
            raise ValueError(f"polar: `max_iterations` must be None or an int ≥ 0; got "
                             f"{max_iterations}.")


# ==============================================================================================
# The unitary factor of a tall (m ≥ n) matrix


def _unitary_forward(a):
    w, s, v, u, p = _decomposition(a)
    return u, (w, s, v, u, p)


def _unitary_pushforward(res, a_dot):
    return _derivative(res, a_dot)


def _unitary_pullback(res, u_bar):
    """The derivative is self-adjoint in ``Re tr(Xᴴ Y)``; JAX's pairing conjugates both sides."""
    return (conj(_derivative(res, conj(u_bar))),)


_unitary = Rule("polar_unitary", _unitary_forward, _unitary_pushforward, _unitary_pullback)


@jax.custom_jvp
def _derivative(res, a_dot):
    """``U̇ = W((Π - Πᴴ) ⊘ S)Vᴴ + (I - WWᴴ)ȦVΣ⁻¹Vᴴ``, ``Π = WᴴȦV``, ``S_ij = s_i + s_j``."""
    w, s, v = res[:3]
    sc = s.astype(w.dtype)
    av = mm(a_dot, v)
    pi = mm_h(w, av)
    omega = (pi - mH(pi)) / (sc[..., :, None] + sc[..., None, :])
    if w.shape[-2] == w.shape[-1]:  # W is unitary: no complement
        return mm(mm(w, omega), mH(v))
    return mm(mm(w, omega) + (av - mm(w, pi)) / sc[..., None, :], mH(v))


# Higher derivatives differentiate the residuals W, s, V, which have no derivative where singular
# values repeat (at orthogonal A, say). They take instead the derivative of the same map written
# in U, P and the solve of XP + PX = C (and P⁻¹): smooth functions of A wherever it has full rank.


@_derivative.defjvp
def _derivative_jvp(primals, tangents):
    return _derivative(*primals), jax.jvp(_sylvester_derivative, primals, tangents)[1]


def _sylvester_derivative(res, a_dot):
    """:func:`_derivative` as ``U̇ = UX + (I - UUᴴ)ȦP⁻¹`` with ``XP + PX = UᴴȦ - ȦᴴU``."""
    _, s, v, u, p = res
    g = mm_h(u, a_dot)
    x = kernel.sylvester(p, s, v, g - mH(g))
    if u.shape[-2] == u.shape[-1]:
        return mm(u, x)
    p_inv = kernel.inverse(p, s, v)
    return mm(u, x - mm(g, p_inv)) + mm(a_dot, p_inv)


@jax.custom_jvp
def _decomposition(a):
    """``(W, s, V, U, P)`` (:func:`rules._kernels.polar.factors`). The tangents of ``U`` and
    ``P = UᴴA`` follow from :func:`_derivative`; those of ``W``, ``s`` and ``V`` are zero: they
    enter only maps whose derivatives are taken in ``U`` and ``P`` (above)."""
    return kernel.factors(a)


@_decomposition.defjvp
def _decomposition_jvp(primals, tangents):
    (a,), (a_dot,) = primals, tangents
    out = _decomposition(a)
    w, s, v, u = out[:4]
    u_dot = _derivative(out, a_dot)
    p_dot = hermitian_part(mm_h(u_dot, a) + mm_h(u, a_dot))
    return out, (jnp.zeros_like(w), jnp.zeros_like(s), jnp.zeros_like(v), u_dot, p_dot)


# ==============================================================================================
# The positive factor: P = sym(UᴴA) (right) or H = sym(AUᴴ) (left)


def _positive_forward(u, a, *, left):
    return hermitian_part(mm(a, mH(u)) if left else mm_h(u, a)), (u, a)


def _positive_pushforward(res, u_dot, a_dot, *, left):
    """``Ṗ = sym(U̇ᴴA + UᴴȦ)`` (right) or ``sym(AU̇ᴴ + ȦUᴴ)`` (left); a ``None`` tangent is zero."""
    u, a = res
    pairs = [(x, y) for x, y in ((u_dot, a), (u, a_dot)) if x is not None and y is not None]
    terms = [mm(y, mH(x)) if left else mm_h(x, y) for x, y in pairs]
    return hermitian_part(terms[0] + terms[1] if len(terms) == 2 else terms[0])


def _positive_pullback(res, h_bar, *, left):
    """Right: ``Ū = A sym(P̄)``, ``Ā = U sym(P̄)``; left: ``Ū = sym(H̄) A``, ``Ā = sym(H̄) U``, in the
    papers' pairing (conjugated at the boundary into JAX's)."""
    u, a = res
    g = hermitian_part(conj(h_bar))
    bars = (mm(g, a), mm(g, u)) if left else (mm(a, g), mm(u, g))
    return tuple(conj(x) for x in bars)


_positive = Rule("polar_positive", _positive_forward, _positive_pushforward, _positive_pullback)
