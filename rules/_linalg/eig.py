r"""Rules of the eigendecomposition of general square matrices: ``eig`` and ``eigvals``.

``A = V Λ V⁻¹`` with ``Λ = diag(λ)``; every derivative is written with ``P = V⁻¹ Ȧ V``:
``λ̇ = diag(P)`` and ``V̇ = V (F ∘ P)`` plus a multiple of each column that keeps LAPACK's
normalisation of the eigenvectors (the gauge). Derivation: ``docs/derivations/eig.md``.

Platforms. The decomposition is JAX's ``eig`` primitive (LAPACK's ``geev``), which lowers for the
CPU and for CUDA and ROCm GPUs only. No algorithm made of matrix products, solves and Hermitian
decompositions computes the eigenvalues of a non-normal matrix soundly, so there is no TPU route:
lowering for any other platform (``jit`` on a TPU, ``jax.export`` with ``platforms=["tpu"]``)
raises a ``NotImplementedError`` that names the function and the platform
(``_platform_check``), instead of JAX's error about a missing translation rule.

Complex convention. Derived directly in JAX's bilinear pairing ``Re Σ X̄ ⊙ Ẋ``; for real input
the cotangent of ``a`` is the real part (``docs/derivations/conventions.md#complex``).
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import batching, mlir
from jax.typing import ArrayLike

from .._core.arrays import conj
from .._core.checks import as_inexact_matrix
from .._core.dispatch import jitted
from .._core.rule import Rule
from .._kernels.lu import inverse
from .._kernels.products import laid_out, mm
from .spectral import default_degeneracy_tol

__all__ = ["EigResult", "eig", "eigvals"]

# JAX's own result class (``jax.numpy.linalg`` does not export it), so that results and
# cotangents of these rules and of ``jnp.linalg.eig`` are interchangeable pytrees.
if TYPE_CHECKING:  # the same class, for type checkers
    from jax._src.numpy.linalg import EigResult
else:
    EigResult = type(jax.eval_shape(lambda: jnp.linalg.eig(jnp.eye(1, dtype=jnp.float32))))


# ==============================================================================================
# The public functions


@jitted()
def eig(a: ArrayLike) -> EigResult:
    r"""Eigendecomposition ``A = V diag(λ) V⁻¹`` of general square matrices, differentiable.

    As ``jnp.linalg.eig``: eigenvalues in LAPACK's order (not sorted), eigenvectors in the
    columns of ``V``, each of unit 2-norm with its largest-magnitude component real (LAPACK's
    ``geev`` normalisation). With ``P = V⁻¹ Ȧ V``, ``F_ij = 1/(λ_j - λ_i)`` (``i ≠ j``),
    ``F_ii = 0``, ``U = V (F ∘ P)`` and ``k_j`` the row of ``v_j``'s real component:

    .. math::
        \dot\lambda = \operatorname{diag}(P), \qquad
        \dot v_j = u_j + c_j v_j, \quad
        c_j = -\operatorname{Re}(v_j^H u_j) - i\,\frac{\operatorname{Im} u_{k_j j}}{v_{k_j j}},

    the ``c_j`` keeping ``‖v_j‖ = 1`` and ``v_{k_j j}`` real. In JAX's convention, with
    ``g_j = (Vᵀ V̄)_jj`` and ``Ū = V̄ - conj(V) diag(Re g) - i E diag(Im g / v_k)`` (``E`` the
    one-hot rows ``k_j``):

    .. math::
        \bar A = V^{-T}\big(\operatorname{diag}(\bar\lambda) + F \circ (V^T \bar U)\big) V^T

    (its real part for real ``a``). Derivation: ``docs/derivations/eig.md``.

    Args:
      a: array of shape ``(..., n, n)``. Integers and booleans are promoted as
        ``jnp.linalg.eig`` promotes them; float16/bfloat16 are refused.

    Returns:
      ``EigResult(eigenvalues, eigenvectors)`` (``jnp.linalg.eig``'s own result type):
      eigenvalues of shape ``(..., n)``, eigenvectors of shape ``(..., n, n)``, both complex
      (complex64 for float32/complex64 input, complex128 for float64/complex128), as in
      ``jnp.linalg.eig``. If LAPACK fails on a matrix, its slice is NaN.

    Raises:
      TypeError: ``a`` is not an array of a numeric dtype, or is float16/bfloat16.
      ValueError: ``a`` is not of shape ``(..., n, n)``.
      NotImplementedError: at lowering, for a platform other than CPU, CUDA and ROCm (a TPU).

    Notes:
      Which losses have exact gradients. An eigenvector is defined up to a complex scale; the
      unit norm fixes its modulus, and only LAPACK's convention fixes its phase ``e^{iθ}``
      (for real eigenvectors of real input: its sign). Exact, whatever the convention: every loss
      invariant under ``v_j → e^{iθ_j} v_j``: functions of the eigenvalues, ``|v_jᴴ x|²``,
      ``|v_j|²`` entrywise, the rank-one projectors ``v_j v_jᴴ``, the spectral projectors
      ``v_j y_jᴴ / (y_jᴴ v_j)`` and ``V f(Λ) V⁻¹``. Other losses (``Re v_j``, a sum of
      eigenvector entries) depend on LAPACK's choice of phase: they get the derivative of
      LAPACK's normalisation with that choice held fixed, as
      ``jax.lax.linalg.eig(..., enable_eigvec_derivs=True)`` does, but LAPACK's real component
      ``v_{k_j j}`` may change sign, and ``k_j`` jump, between nearby matrices, so such a loss is
      not even a continuous function of ``A`` and finite differences need not agree.

      Repeated eigenvalues. The eigenvectors are differentiable only where the eigenvalues are
      distinct. A pair with ``|λ_i - λ_j| ≤ ε^{3/4} max |λ|`` (a repeated eigenvalue, which LAPACK
      may return split by rounding) makes the derivatives of ``v_i`` and ``v_j`` NaN wherever
      the tangent (cotangent) couples them, not a finite wrong number; the other eigenvectors
      and every eigenvalue derivative stay finite. At a repeated non-defective eigenvalue the
      individual eigenvalues are not differentiable either; ``λ̇ = diag(V⁻¹ȦV)`` is then exact
      for symmetric functions ``Σ_i f(λ_i)`` (``Σ |λ_i|²``, ``tr f(A)``). At a defective
      eigenvalue (a Jordan block) the eigenvalues move as the square root of a perturbation and
      have no derivative: ``V`` is singular to working precision and the derivatives are inf,
      NaN or of the order of ``1/ε``.

      Algorithm and platforms: JAX's ``eig`` primitive, right eigenvectors only. CPU: LAPACK
      ``geev`` (Hessenberg reduction and shifted QR iterations; backward stable, so a simple
      eigenvalue's error is about ``ε‖A‖`` times its condition number ``1/|y_jᴴ v_j|``, ``y_j``
      the unit left eigenvector). CUDA: cuSOLVER's ``geev`` where cuSOLVER ≥ 11.7.1, otherwise
      LAPACK on the CPU beside the GPU (JAX's choice). ``jax.export`` for ``cuda`` raises JAX's
      ``ValueError`` about custom calls without compatibility guarantees (``cuhybrid_eig_*``,
      ``cusolver_geev_ffi``), as for ``jnp.linalg.eig``; with
      ``disabled_checks=[jax.export.DisabledSafetyCheck.custom_call(name)]`` it exports, for the
      same jaxlib. TPU: no method, a ``NotImplementedError`` naming the platform at lowering.
      Residuals: ``λ``, ``V`` and ``V⁻¹`` (one LU more than the forward); the pushforward and the
      pullback are three complex matrix products each, the gauge terms elementwise. Second
      derivatives differentiate the decomposition by the same formulas.

    References:
      M. B. Giles, "An extended collection of matrix derivative results for forward and reverse
      mode algorithmic differentiation" (2008), §3.1. J. R. Magnus, "On differentiating
      eigenvalues and eigenvectors", Econometric Theory 1 (1985). E. Anderson et al., LAPACK
      Users' Guide, 3rd ed. (1999), ``xGEEV``.

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a = jnp.array([[2.0, 1.0], [0.0, 3.0]], dtype=jnp.float32)  # λ = 2, 3
      >>> rules.eig(a).eigenvalues
      Array([2.+0.j, 3.+0.j], dtype=complex64)
      >>> x = jnp.array([1.0, 0.0], dtype=jnp.complex64)
      >>> loss = lambda a: jnp.abs(jnp.vdot(rules.eig(a).eigenvectors[:, 1], x)) ** 2
      >>> g = jax.grad(loss)(a)  # |v₂ᴴx|², invariant to v₂'s phase; JAX's: NotImplementedError
      >>> jnp.round(g, 4)
      Array([[ 0.5,  0.5],
             [-0.5, -0.5]], dtype=float32)
    """
    a = as_inexact_matrix("eig", "a", a, square=True)
    return _eig(a, real=not jnp.iscomplexobj(a))


@jitted()
def eigvals(a: ArrayLike) -> jax.Array:
    r"""Eigenvalues of general square matrices, differentiable, as ``jnp.linalg.eigvals``.

    With ``A = V diag(λ) V⁻¹``:

    .. math::
        \dot\lambda = \operatorname{diag}(V^{-1}\dot A V), \qquad
        \bar A = V^{-T}\operatorname{diag}(\bar\lambda)\,V^T

    (JAX's convention; its real part for real ``a``). Derivation: ``docs/derivations/eig.md``.

    Args:
      a: array of shape ``(..., n, n)``; integers and booleans are promoted as
        ``jnp.linalg.eigvals`` promotes them; float16/bfloat16 are refused.

    Returns:
      The eigenvalues, shape ``(..., n)``, complex (complex64 for float32/complex64 input,
      complex128 otherwise), in LAPACK's order, as ``jnp.linalg.eigvals``.

    Raises:
      TypeError: ``a`` is not an array of a numeric dtype, or is float16/bfloat16.
      ValueError: ``a`` is not of shape ``(..., n, n)``.
      NotImplementedError: at lowering, for a platform other than CPU, CUDA and ROCm (a TPU).

    Notes:
      The value is LAPACK's ``geev`` without eigenvectors (platforms as in :func:`rules.eig`); the
      derivatives run ``geev`` with right eigenvectors and one LU for ``V⁻¹`` (the residuals),
      then one product each: ``Ȧ V`` for the pushforward, ``(V⁻ᵀ diag(λ̄)) Vᵀ`` for the
      pullback. A simple eigenvalue is differentiable; at a repeated non-defective one the
      derivative is exact for symmetric functions of the eigenvalues (``Σ |λ_i|²``, ``Σ λ_i``),
      and at a defective one it is inf, NaN or of the order of ``1/ε`` (:func:`rules.eig`,
      Notes). Second derivatives need the eigenvector derivative and are NaN along directions
      that split a repeated eigenvalue. JAX differentiates ``jnp.linalg.eigvals`` once, by a JVP
      rule (reverse mode by transposition), which this one equals; its second derivative raises
      (the JVP runs ``eig`` with eigenvectors, whose derivative JAX refuses by default).

    References:
      M. B. Giles (2008), §3.1; J. R. Magnus (1985).

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a = jnp.array([[0.0, -2.0], [1.0, 0.0]], dtype=jnp.float32)  # λ = ±i√2
      >>> rules.eigvals(a)
      Array([0.+1.4142135j, 0.-1.4142135j], dtype=complex64)
      >>> jax.grad(lambda a: jnp.sum(jnp.abs(rules.eigvals(a)) ** 2))(a)  # = 2 det A near a
      Array([[ 0., -2.],
             [ 4.,  0.]], dtype=float32)
    """
    a = as_inexact_matrix("eigvals", "a", a, square=True)
    return _eigvals(a, real=not jnp.iscomplexobj(a))


# ==============================================================================================
# eig


def _eig_primal(a, *, real):
    del real
    return EigResult(*_geev("eig", a, vectors=True))


def _eig_forward(a, *, real):
    del real
    w, v = _eig_decomposition(a, "eig")
    return EigResult(w, v), (w, v, inverse(v))


def _eig_pushforward(res, a_dot, *, real):
    del real
    w, v, v_inv = res
    return _eig_tangent(w, v, v_inv, a_dot)


def _eig_pullback(res, ct, *, real):
    """``Ā = V⁻ᵀ (diag(λ̄) + F ∘ (Vᵀ Ū)) Vᵀ`` with ``Ū`` the cotangent of ``U = V (F ∘ P)``."""
    w, v, v_inv = res
    w_bar, v_bar = ct
    g = jnp.sum(v * v_bar, axis=-2)  # ⟨v̄_j, v_j⟩: what the gauge term c_j v_j pairs with
    real_row, v_k = _real_component(v)
    u_bar = (v_bar - conj(v) * g.real.astype(v.dtype)[..., None, :]
             - jnp.where(real_row, _times_i(g.imag / v_k)[..., None, :], 0))
    v_t = laid_out(v.mT)
    f, repeated = _inverse_gaps(w)
    inner = _add_to_diagonal(_times_gaps(f, repeated, mm(v_t, u_bar)), w_bar)
    a_bar = mm(laid_out(v_inv.mT), mm(inner, v_t))
    return (a_bar.real if real else a_bar,)


_eig = Rule("eig", _eig_forward, _eig_pushforward, _eig_pullback, primal=_eig_primal)


def _eig_tangent(w, v, v_inv, a_dot, times_gaps=None):
    """``λ̇ = diag(P)``, ``v̇_j = u_j + c_j v_j`` with ``P = V⁻¹ Ȧ V`` and ``U = V (F ∘ P)``;
    ``F ∘ P`` by ``times_gaps`` (:func:`_times_gaps` by default)."""
    p = mm(v_inv, mm(a_dot.astype(v.dtype), v))
    f, repeated = _inverse_gaps(w)
    u = mm(v, (times_gaps or _times_gaps)(f, repeated, p))
    real_row, v_k = _real_component(v)
    norm = -jnp.sum(conj(v) * u, axis=-2).real  # Re c_j: keeps ‖v_j‖ = 1
    phase = -jnp.sum(jnp.where(real_row, u, 0), axis=-2).imag / v_k  # Im c_j: keeps v_kj real
    return EigResult(jnp.diagonal(p, axis1=-2, axis2=-1),
                     u + v * lax.complex(norm, phase)[..., None, :])


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _eig_decomposition(a, fname):
    """``(λ, V)``; differentiated by :func:`_eig_tangent` (second derivatives of the rules)."""
    return EigResult(*_geev(fname, a, vectors=True))


@_eig_decomposition.defjvp
def _eig_decomposition_jvp(fname, primals, tangents):
    w, v = out = _eig_decomposition(primals[0], fname)
    return out, _eig_tangent(w, v, inverse(v), tangents[0], _times_gaps_linear)


def _inverse_gaps(w):
    """``F_ij = 1/(λ_j - λ_i)`` and the mask of repeated pairs ``|λ_j - λ_i| ≤ ε^{3/4} max|λ|``.

    ``F`` is zero on the diagonal and at repeated pairs; :func:`_times_gaps` puts NaN there.
    """
    diff = w[..., None, :] - w[..., :, None]
    close = jnp.abs(diff) <= default_degeneracy_tol(w)[..., None]
    f = jnp.where(close, 0, 1 / jnp.where(close, 1, diff))
    diagonal = jnp.broadcast_to(jnp.eye(w.shape[-1], dtype=bool), diff.shape)
    return f, close & ~diagonal


def _times_gaps(f, repeated, x):
    """``F ∘ X``, NaN where a repeated pair meets a nonzero entry of ``X``.

    The eigenvectors of a repeated eigenvalue have no derivative: a tangent (cotangent) that
    moves them gives NaN, one that leaves them alone (a zero entry) contributes nothing, so the
    other eigenvectors and the eigenvalues keep their finite derivatives.
    """
    return jnp.where(repeated & (x != 0), jnp.nan, f * x)


def _times_gaps_linear(f, repeated, x):
    """``F ∘ X`` with NaN at every repeated pair: linear in ``X``, so that JAX can transpose it
    (reverse over reverse differentiates the decomposition through this); :func:`_times_gaps`'
    test of ``X``'s entries is not."""
    return jnp.where(repeated, jnp.nan, f) * x


def _real_component(v):
    """One-hot rows ``k_j`` of the component LAPACK made real in each column, and ``v_{k_j j}``.

    ``geev`` scales each eigenvector so that its largest-magnitude component is real, its
    imaginary part exactly zero: the largest of the exactly real components is that one, also
    where rounding makes another component's magnitude tie with it. Entries have ``|v_ij| ≤ 1``,
    so adding 2 to the exactly real ones ranks them first; without any, the largest is taken.
    """
    magnitude = jnp.abs(v) + jnp.where(v.imag == 0, 2, 0).astype(v.real.dtype)
    rows = lax.broadcasted_iota(jnp.int32, v.shape, v.ndim - 2)
    real_row = rows == lax.argmax(magnitude, v.ndim - 2, jnp.int32)[..., None, :]
    return real_row, jnp.sum(jnp.where(real_row, v.real, 0), axis=-2)


def _times_i(x):
    """``i x`` for a real array ``x``, as a complex array of the matching precision."""
    return lax.complex(jnp.zeros_like(x), x)


def _add_to_diagonal(x, d):
    """``X + diag(d)`` by a scatter into the diagonal (``d`` is not fused into the n × n loop)."""
    i = jnp.arange(x.shape[-1])
    return x.at[..., i, i].add(d)


# ==============================================================================================
# eigvals


def _eigvals_primal(a, *, real):
    del real
    return _geev("eigvals", a, vectors=False)[0]


def _eigvals_forward(a, *, real):
    del real
    w, v = _eig_decomposition(a, "eigvals")
    return w, (v, inverse(v))


def _eigvals_pushforward(res, a_dot, *, real):
    """``λ̇_i = (V⁻¹ Ȧ V)_ii = Σ_j (V⁻ᵀ)_ji (Ȧ V)_ji``: one product."""
    del real
    v, v_inv = res
    return jnp.sum(v_inv.mT * mm(a_dot.astype(v.dtype), v), axis=-2)


def _eigvals_pullback(res, w_bar, *, real):
    """``Ā = V⁻ᵀ diag(λ̄) Vᵀ``: one product."""
    v, v_inv = res
    a_bar = mm(v_inv.mT * w_bar[..., None, :], laid_out(v.mT))
    return (a_bar.real if real else a_bar,)


_eigvals = Rule("eigvals", _eigvals_forward, _eigvals_pushforward, _eigvals_pullback,
                primal=_eigvals_primal)


# ==============================================================================================
# The decomposition and the platforms it lowers for

_PLATFORMS = ("cpu", "cuda", "rocm")  # where jax.lax.linalg.eig has a lowering


def _geev(fname: str, a: jax.Array, *, vectors: bool) -> list[jax.Array]:
    """``[λ]`` or ``[λ, V]`` by JAX's ``eig`` primitive, behind the platform check."""
    return lax.linalg.eig(_platform_check.bind(a, fname=fname), compute_left_eigenvectors=False,
                          compute_right_eigenvectors=vectors)


def _unsupported_platform(ctx: mlir.LoweringRuleContext, a: mlir.ir.Value, *, fname: str
                          ) -> list[mlir.ir.Value]:
    platforms = [p for p in (ctx.platforms or ctx.module_context.platforms)
                 if p not in _PLATFORMS]
    raise NotImplementedError(
        f"rules.{fname}: the eigendecomposition of a general (non-Hermitian) matrix has no "
        f"method on platform {', '.join(map(repr, platforms))}. JAX's eig primitive (LAPACK or "
        f"cuSOLVER geev) lowers for {', '.join(_PLATFORMS)} only, and no algorithm made of "
        f"matrix products, solves and Hermitian decompositions computes it soundly. Use "
        f"rules.eigh for Hermitian matrices, or run {fname} on a CPU device.")


# The identity on the matrix to decompose, whose lowering raises for a platform where JAX's eig
# has none: the platform is known only at lowering (``jax.export`` lowers for any), and a
# per-platform lowering rule is chosen by JAX for each platform of a multi-platform export too.
_platform_check = Primitive("eig_platform_check")
_platform_check.def_impl(lambda a, *, fname: a)
_platform_check.def_abstract_eval(lambda a, *, fname: a)
batching.primitive_batchers[_platform_check] = (
    lambda args, dims, *, fname: (_platform_check.bind(*args, fname=fname), dims[0]))
mlir.register_lowering(_platform_check, _unsupported_platform)
for _platform in _PLATFORMS:
    mlir.register_lowering(_platform_check, lambda ctx, a, *, fname: [a], platform=_platform)
