"""Rules of spectral decompositions: the Hermitian eigendecomposition and the SVD.

Degeneracy. Both derivatives divide by differences of eigenvalues (singular values). A pair closer
than a tolerance counts as degenerate and contributes zero: that is the exact derivative of every
loss that is invariant under rotations inside the degenerate eigenspaces (the loss's cotangent
has no component along those rotations), and it stays finite where JAX's rules divide by zero.
Derivation: ``docs/derivations/decompositions.md#degeneracy``.

Complex convention. ``eigh`` is derived directly in JAX's bilinear pairing; ``svd``'s pullback, as
in the papers, for ``Re tr(Xᴴ Y)`` and wrapped with ``conj`` (``docs/derivations/conventions.md``).

Higher derivatives. Second derivatives differentiate the decomposition once more, by the same
formulas (``_eigh_decomposition``, ``_svd_decomposition``). At a degenerate spectrum they are NaN,
as JAX's are: they depend on the loss beyond its gradient (for ``Σ f(λ_i)``, on the limit of
``(f'(λ_j) - f'(λ_i))/(λ_j - λ_i)`` inside a degenerate block), which no linear pushforward of the
decomposition supplies, and zeroing the degenerate terms there would give finite wrong numbers.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Literal, overload

import jax
import jax.numpy as jnp
from jax import lax
from jax.typing import ArrayLike

from .._core.arrays import conj, eye_like, hermitian_part, mH
from .._core.checks import as_inexact_matrix
from .._core.dispatch import jitted
from .._core.rule import Rule
from .._kernels import jax_ops
from .._kernels import spectral as kernel
from .._kernels.products import laid_out, mm, mm_h
from .._kernels.small import jacobi_applies

__all__ = ["EighResult", "SVDResult", "default_degeneracy_tol", "eigh", "svd"]

# JAX's own result classes (``jax.numpy.linalg`` does not export them), so that results and
# cotangents of these rules and of jnp.linalg's functions are interchangeable pytrees.
if TYPE_CHECKING:  # the same classes, for type checkers
    from jax._src.numpy.linalg import EighResult, SVDResult
else:
    EighResult = type(jax.eval_shape(lambda: jax_ops.eigh(jnp.eye(1, dtype=jnp.float32))))
    SVDResult = type(jax.eval_shape(lambda: jax_ops.svd(jnp.eye(1, dtype=jnp.float32))))


def default_degeneracy_tol(values: jax.Array) -> jax.Array:
    r"""The default ``degeneracy_tol``: ``ε^{3/4} · max |λ|`` per matrix of the batch.

    ``ε`` is the machine epsilon of ``values``' dtype (``1.8e-12`` relative in float64, ``6.4e-6``
    in float32). LAPACK returns an exactly degenerate spectrum split by rounding, about
    ``n · ε · max |λ|``; the tolerance is far above that, so rounding-split pairs count as
    degenerate, and far below any gap that a derivative could resolve in that precision (a gap
    ``δ`` amplifies rounding errors by ``ε · max |λ| / δ ≤ ε^{1/4}``). The same choice as
    MatrixAlgebraKit.jl's pullbacks.

    Args:
      values: eigenvalues or singular values, shape ``(..., k)``, ``k ≥ 1``.

    Returns:
      The tolerance, shape ``(..., 1)``, of ``values``' real dtype.
    """
    magnitude = jnp.abs(values)
    return jnp.finfo(magnitude.dtype).eps ** 0.75 * jnp.max(magnitude, axis=-1, keepdims=True)


def _tolerance(values, degeneracy_tol):
    """The tolerance of each matrix of the batch, shape ``(..., 1)``, for sorted ``values``.

    Eigenvalues come ascending and singular values descending, so ``max |λ|`` is at one end:
    an elementwise maximum instead of a reduction over the spectrum (a separate kernel on CPU).
    """
    if degeneracy_tol is None:
        if values.shape[-1] == 0:
            return default_degeneracy_tol(values)
        ends = jnp.maximum(jnp.abs(values[..., :1]), jnp.abs(values[..., -1:]))
        return jnp.finfo(ends.dtype).eps ** 0.75 * ends
    return jnp.full((*values.shape[:-1], 1), degeneracy_tol, jnp.abs(values).dtype)


def _check_tol(fname: str, degeneracy_tol) -> float | None:
    if degeneracy_tol is None:
        return None
    if isinstance(degeneracy_tol, bool) or not isinstance(degeneracy_tol, (int, float)):
        raise TypeError(f"{fname}: `degeneracy_tol` must be None or a Python float ≥ 0; got "
                        f"{type(degeneracy_tol).__name__}.")
    if not degeneracy_tol >= 0:
        raise ValueError(f"{fname}: `degeneracy_tol` must be None or a Python float ≥ 0; got "
                         f"{degeneracy_tol}.")
    return float(degeneracy_tol)


def _reciprocal(x, degenerate, fill):
    """``1/x``, and ``fill`` where ``degenerate`` (with finite derivatives elsewhere)."""
    if fill == 0:  # 1/∞ = 0, and d(1/x) = -ẋ/x² = 0 there: one select fewer per entry
        return 1 / jnp.where(degenerate, jnp.inf, x)
    return jnp.where(degenerate, fill, 1 / jnp.where(degenerate, 1, x))


def _pair_reciprocal(x, degenerate, fill):
    """``1/x`` for the off-diagonal pairs, ``fill`` for degenerate pairs, ``0`` on the diagonal.

    The diagonal (``x = 0``) is degenerate too, so it needs no mask of its own when ``fill = 0``.
    """
    if fill == 0:
        return _reciprocal(x, degenerate, fill)
    diagonal = jnp.broadcast_to(jnp.eye(x.shape[-1], dtype=bool), x.shape)
    return jnp.where(diagonal, 0, _reciprocal(jnp.where(diagonal, 1, x), degenerate, fill))


# The fill of degenerate terms: zero in the rules' derivatives; NaN in the derivative of the
# decomposition that second derivatives use (module doc).
_FIRST, _SECOND = 0.0, float("nan")


# ==============================================================================================
# Hermitian eigendecomposition


@jitted("UPLO", "symmetrize_input", "degeneracy_tol")
def eigh(a: ArrayLike, UPLO: Literal["L", "U"] | None = None, symmetrize_input: bool = True, *,
         degeneracy_tol: float | None = None) -> EighResult:
    r"""Eigendecomposition ``A = V diag(λ) Vᴴ`` of Hermitian matrices, finite at degenerate spectra.

    Eigenvalues ascending, eigenvectors in the columns of ``V``, as ``jnp.linalg.eigh``. With
    ``M = Vᴴ Ȧ V`` and ``F_ij = 1/(λ_j - λ_i)`` for ``|λ_j - λ_i| > tol``, ``F_ij = 0`` otherwise:

    .. math::
        \dot\lambda = \operatorname{Re}\operatorname{diag}(M), \qquad \dot V = V (F \circ M),
        \qquad \bar A = \operatorname{conj}(V)\,\big(\operatorname{diag}(\bar\lambda)
        + F \circ (V^T \bar V)\big)\, V^T

    (the pullback in JAX's convention; ``λ`` is ``eigenvalues``, ``V`` is ``eigenvectors``).
    Derivation: ``docs/derivations/decompositions.md#eigh``.

    What is read of ``a`` (as in ``jnp.linalg.eigh``): with ``symmetrize_input=True`` the matrix
    decomposed is ``(A + Aᴴ)/2``, the function depends on the Hermitian part of ``a`` only and its
    gradient is Hermitian. With ``symmetrize_input=False`` LAPACK reads the triangle ``UPLO`` of
    ``a`` alone, and the derivatives are the formulas above applied to the tangent as given
    (as JAX's), which are correct for Hermitian tangents.

    Args:
      a: array of shape ``(..., n, n)``, Hermitian (real symmetric). Integers and booleans are
        promoted as ``jnp.linalg.eigh`` promotes them; float16/bfloat16 go to JAX's forward.
      UPLO: ``"L"`` (default) or ``"U"``: the triangle read when ``symmetrize_input=False``.
      symmetrize_input: decompose ``(A + Aᴴ)/2`` (``True``) or the triangle ``UPLO``.
      degeneracy_tol: pairs of eigenvalues with ``|λ_i - λ_j| ≤ degeneracy_tol`` are degenerate
        and contribute zero to the derivatives. ``None`` (default):
        :func:`~rules._linalg.spectral.default_degeneracy_tol`, ``ε^{3/4} · max |λ|`` per
        matrix. A Python float (absolute, in units of the eigenvalues); ``0.0`` treats only
        exactly equal eigenvalues as degenerate.

    Returns:
      ``EighResult(eigenvalues, eigenvectors)`` (``jnp.linalg.eigh``'s own result type):
      eigenvalues of shape ``(..., n)`` and the real dtype of ``a``, eigenvectors of the shape and
      dtype of ``a``.

    Raises:
      TypeError: ``a`` is not an array of a numeric dtype, or ``degeneracy_tol`` is not a float.
      ValueError: ``a`` is not of shape ``(..., n, n)``, ``UPLO`` is not ``"L"``/``"U"``/``None``,
        or ``degeneracy_tol`` is negative.

    Notes:
      Exact gradients: every loss that is invariant under ``V_D → V_D W`` for each degenerate
      eigenspace ``D`` (``W`` unitary), and under the phase of each eigenvector: symmetric
      functions of the eigenvalues (``Σ f(λ_i)``), spectral projectors ``V_D V_Dᴴ``, quadratic forms
      ``|v_iᴴ x|`` of non-degenerate eigenvectors, ``tr(f(A))``. Where JAX's gradient of such a loss
      is finite they agree; at a degenerate spectrum JAX's is NaN (jax-ml/jax#669, #4646) and
      this one is finite and equal to finite differences. Ill-defined: losses that depend on the
      basis chosen inside a degenerate eigenspace, or on an eigenvector's phase; a nearly (not
      exactly) degenerate pair below the tolerance is then treated as degenerate. The eigenvector
      tangent has ``Vᴴ V̇`` zero on the diagonal and inside degenerate blocks (the gauge of
      ``jax.jvp``). Residuals: ``λ`` and ``V``; pullback and pushforward are three products each.
      For batches of 32 or more real ``n ≤ 3`` matrices the decomposition is Jacobi's
      (``rules/_kernels/small.py``, as accurate as LAPACK's ``syevd``, one fused loop over the
      batch); eigenvector signs may then differ from ``jnp.linalg.eigh``'s.

    References:
      M. Giles (2008), §3.1; H.-J. Liao et al., "Differentiable programming tensor networks",
      arXiv:1903.09650 (degeneracies); J. Haegeman, MatrixAlgebraKit.jl pullbacks (tolerance).

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a = jnp.diag(jnp.array([1.0, 1.0, 2.0], dtype=jnp.float32))  # λ = 1 twice
      >>> x = jnp.array([0.3, -0.5, 0.8], dtype=jnp.float32)
      >>> jax.grad(lambda a: jnp.abs(rules.eigh(a).eigenvectors[:, 2] @ x))(a)  # JAX's: NaN
      Array([[ 0.  ,  0.  ,  0.15],
             [ 0.  ,  0.  , -0.25],
             [ 0.15, -0.25,  0.  ]], dtype=float32)
    """
    a = as_inexact_matrix("eigh", "a", a, square=True)
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"eigh: `UPLO` must be one of None, 'L', 'U'; got {UPLO!r}.")
    return _eigh(a, lower=UPLO != "U", symmetrize_input=bool(symmetrize_input),
                 degeneracy_tol=_check_tol("eigh", degeneracy_tol))


def _eigh_forward(a, *, lower, symmetrize_input, degeneracy_tol):
    out = _eigh_decomposition(a, lower, symmetrize_input, degeneracy_tol)
    return out, out


def _eigh_pushforward(res, a_dot, *, lower, symmetrize_input, degeneracy_tol):
    del lower
    return _eigh_tangent(res, a_dot, symmetrize_input, degeneracy_tol, _FIRST)


def _eigh_pullback(res, ct, *, lower, symmetrize_input, degeneracy_tol):
    """``Ā = conj(V) (diag(λ̄) + F ∘ (Vᵀ V̄)) Vᵀ``, its Hermitian part if the input was symmetrised.

    The Hermitian part of ``conj(V) K Vᵀ`` is ``conj(V) herm(K) Vᵀ``, and with ``F`` real and
    antisymmetric ``herm(F ∘ G) = ½ F ∘ (G - Gᴴ)``: taken on the n × n inner matrix, inside the
    elementwise pass that forms it, instead of one more pass over the result.
    """
    del lower
    w, v = res
    w_bar, v_bar = ct
    f = _inverse_differences(w, _tolerance(w, degeneracy_tol), _FIRST).astype(v.dtype)
    v_t = laid_out(v.mT)
    g = mm(v_t, v_bar)
    inner = _add_to_diagonal(0.5 * f * (g - mH(g)) if symmetrize_input else f * g,
                             w_bar.astype(v.dtype))
    return (mm(conj(v), mm(inner, v_t)),)


_eigh = Rule("eigh", _eigh_forward, _eigh_pushforward, _eigh_pullback)


def _eigh_tangent(res, a_dot, symmetrize_input, degeneracy_tol, fill):
    """``λ̇ = Re diag(M)``, ``V̇ = V (F ∘ M)`` with ``M = Vᴴ Ȧ V``."""
    w, v = res
    if symmetrize_input:
        a_dot = hermitian_part(a_dot)
    m = mm_h(v, mm(a_dot, v))
    f = _inverse_differences(w, _tolerance(w, degeneracy_tol), fill).astype(m.dtype)
    return EighResult(jnp.diagonal(m, axis1=-2, axis2=-1).real, mm(v, f * m))


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2, 3))
def _eigh_decomposition(a, lower, symmetrize_input, degeneracy_tol):
    return EighResult(*kernel.eigh(a, lower=lower, symmetrize_input=symmetrize_input))


@_eigh_decomposition.defjvp
def _eigh_decomposition_jvp(lower, symmetrize_input, degeneracy_tol, primals, tangents):
    out = _eigh_decomposition(primals[0], lower, symmetrize_input, degeneracy_tol)
    return out, _eigh_tangent(out, tangents[0], symmetrize_input, degeneracy_tol, _SECOND)


def _inverse_differences(w, tol, fill):
    """``F_ij = 1/(w_j - w_i)``; ``fill`` where ``|w_j - w_i| ≤ tol``, ``0`` on the diagonal."""
    diff = w[..., None, :] - w[..., :, None]
    return _pair_reciprocal(diff, jnp.abs(diff) <= tol[..., None], fill)


def _add_to_diagonal(x, d):
    """``X + diag(d)`` by a scatter into the diagonal.

    Not ``X + d[..., None] * I``: XLA fuses the computation of ``d`` (often the loss's own
    cotangent, ``cos λ``, ...) into that n × n elementwise loop and evaluates it n times per entry.
    """
    i = jnp.arange(x.shape[-1])
    return x.at[..., i, i].add(d)


# ==============================================================================================
# Singular value decomposition


@overload
def svd(a: ArrayLike, full_matrices: bool = True, compute_uv: Literal[True] = True,
        hermitian: bool = False, subset_by_index: tuple[int, int] | None = None, *,
        degeneracy_tol: float | None = None) -> SVDResult: ...
@overload
def svd(a: ArrayLike, full_matrices: bool, compute_uv: Literal[False], hermitian: bool = False,
        subset_by_index: tuple[int, int] | None = None, *,
        degeneracy_tol: float | None = None) -> jax.Array: ...
@overload
def svd(a: ArrayLike, full_matrices: bool = True, *, compute_uv: Literal[False],
        hermitian: bool = False, subset_by_index: tuple[int, int] | None = None,
        degeneracy_tol: float | None = None) -> jax.Array: ...
@jitted("full_matrices", "compute_uv", "hermitian", "subset_by_index", "degeneracy_tol")
def svd(a: ArrayLike, full_matrices: bool = True, compute_uv: bool = True,
        hermitian: bool = False, subset_by_index: tuple[int, int] | None = None, *,
        degeneracy_tol: float | None = None) -> SVDResult | jax.Array:
    r"""Singular value decomposition ``A = U diag(s) Vᴴ``, finite at degenerate singular values.

    As ``jnp.linalg.svd``: ``s`` descending, ``Vh = Vᴴ``, full ``U`` and ``Vh`` by default. With
    ``k = min(m, n)``, the thin factors ``U`` (``m × k``) and ``V`` (``n × k``), ``P = Uᴴ Ȧ V``,
    ``F_ij = 1/(s_j² - s_i²)`` and ``s⁻¹`` zeroed where ``|s_j - s_i| ≤ tol`` resp. ``s_i ≤ tol``:

    .. math::
        \dot s = \operatorname{Re}\operatorname{diag} P, \quad
        \dot U = U\big(F\circ(PS + SP^H) + i\operatorname{Im}\operatorname{diag}(P)\,S^{-1}\big)
                 + (I - UU^H)\dot A V S^{-1}, \quad
        \dot V = V\big(F\circ(SP + P^HS)\big) + (I - VV^H)\dot A^H U S^{-1}

    and, in the papers' convention (the rule conjugates at the boundary for complex dtypes), with
    ``Γ_U = Uᴴ Ū``, ``Γ_V = Vᴴ V̄``, ``skew(X) = X - Xᴴ``:

    .. math::
        \bar A = U\big(F\circ\operatorname{skew}(\Gamma_U)\,S + S\,F\circ\operatorname{skew}(\Gamma_V)
        + \operatorname{diag}(\bar s) + i\operatorname{Im}\operatorname{diag}(\Gamma_U)S^{-1}\big)V^H
        + (I - UU^H)\bar U S^{-1} V^H + U S^{-1}\bar V^H (I - VV^H)

    (Townsend 2016; Wan & Zhang 2019 for the phase term; the last two terms vanish for square
    ``A``). Derivation: ``docs/derivations/decompositions.md#svd``.

    Args:
      a: array of shape ``(..., m, n)``; integers and booleans are promoted as ``jnp.linalg.svd``
        promotes them, float16/bfloat16 go to JAX's forward.
      full_matrices: return ``U`` of shape ``(..., m, m)`` and ``Vh`` of shape ``(..., n, n)``
        (``True``, the default, as in ``jnp.linalg.svd``) or the thin ``(..., m, k)`` and
        ``(..., k, n)``. The extra columns span the orthogonal complement, a gauge; see Notes.
      compute_uv: return ``SVDResult(U, S, Vh)`` (``True``) or the singular values only.
      hermitian: ``a`` is Hermitian: the SVD from :func:`rules.eigh`, ``s = |λ|`` sorted
        descending, ``U`` the eigenvectors in that order, ``Vh = (U sign(λ))ᴴ``, as
        ``jnp.linalg.svd`` computes it (differentiated through ``rules.eigh``).
      subset_by_index: ``None`` or ``(0, min(m, n))`` (every singular value). JAX computes other
        ranges on TPU only; here they raise ``NotImplementedError``. As in JAX, a range other
        than all with ``full_matrices=True`` is a ``ValueError``.
      degeneracy_tol: singular values with ``|s_i - s_j| ≤ degeneracy_tol`` are degenerate and
        contribute zero, and ``s_i ≤ degeneracy_tol`` counts as degenerate with the implicit zero
        singular values of a non-square matrix. ``None`` (default): ``ε^{3/4} · max s`` per matrix
        (:func:`~rules._linalg.spectral.default_degeneracy_tol`); a Python float is absolute.

    Returns:
      ``SVDResult(U, S, Vh)`` (``jnp.linalg.svd``'s own result type) or, for
      ``compute_uv=False``, the array of singular values of shape ``(..., k)`` and the real dtype
      of ``a``.

    Raises:
      TypeError: ``a`` is not an array of a numeric dtype, or ``degeneracy_tol`` is not a float.
      ValueError: ``a`` has rank < 2 (or is not square with ``hermitian=True``),
        ``degeneracy_tol`` is negative, or ``subset_by_index`` is not a pair of indices.
      NotImplementedError: ``subset_by_index`` selects less than every singular value.

    Notes:
      Exact gradients: losses invariant under ``(u_i, v_i) → (e^{iθ}u_i, e^{iθ}v_i)`` (signs, for
      real ``a``) and under ``(U_D, V_D) → (U_D W, V_D W)`` inside each degenerate block ``D``:
      functions of ``s``, ``U diag(f(s)) Vᴴ``, the projectors ``U_D U_Dᴴ`` and ``V_D V_Dᴴ``,
      ``|u_iᴴ x|`` of non-degenerate singular vectors. At equal singular values JAX's gradient of
      these is NaN (jax-ml/jax#8732); this one is finite and equal to finite differences.
      Ill-defined: a loss that depends on the relative phase (sign) of ``u_i`` and ``v_i`` through
      anything but ``A``, or on a basis inside a degenerate block; the gradient is then that of
      the gauge ``jax.jvp`` uses (``Vᴴ V̇`` zero on the diagonal).
      ``full_matrices=True``: the last ``m - k`` columns ``U₂`` of ``U`` are an arbitrary
      orthonormal basis of the complement of ``range(U₁)``. Their derivative is defined as the
      smallest motion that keeps ``U`` unitary, ``U̇₂ = -U₁ U̇₁ᴴ U₂`` (so ``U₂ᴴ U̇₂ = 0``), likewise
      for ``V``; losses that depend on ``U₂`` only through ``U₂ U₂ᴴ`` get exact gradients. (JAX
      does not differentiate ``full_matrices=True`` for non-square input.)
      Residuals: ``U``, ``s``, ``Vh``. For batches of 32 or more real square ``n ≤ 3`` matrices
      the decomposition is one-sided Jacobi (``rules/_kernels/small.py``, as accurate as LAPACK's
      ``gesdd``, one fused loop over the batch); singular-vector signs may then differ from
      ``jnp.linalg.svd``'s.

    References:
      J. Townsend, "Differentiating the singular value decomposition" (2016).
      Z.-Q. Wan, S.-X. Zhang, "Automatic differentiation for complex valued SVD",
      arXiv:1909.02659.
      M. Seeger et al., "Auto-differentiating linear algebra", arXiv:1710.08717.

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a = jnp.array([[0.0, 1.0], [1.0, 0.0], [0.0, 0.0]], dtype=jnp.float32)  # s = (1, 1)
      >>> x = jnp.array([1.0, 2.0, 3.0], dtype=jnp.float32)
      >>> u = lambda a: rules.svd(a, full_matrices=False).U
      >>> loss = lambda a: jnp.sum((u(a) @ u(a).T @ x) ** 2)  # the range's projector
      >>> jax.grad(loss)(a)  # 2 (I - UUᵀ)x (A⁺UUᵀx)ᵀ; JAX's: NaN
      Array([[-0., -0.],
             [-0., -0.],
             [12.,  6.]], dtype=float32)
    """
    a = as_inexact_matrix("svd", "a", a)
    m, n = a.shape[-2:]
    _check_subset(a, full_matrices, subset_by_index)
    tol = _check_tol("svd", degeneracy_tol)
    if hermitian:
        if m != n:
            raise ValueError(f"svd: `a` must have shape (..., n, n) with `hermitian=True`; got "
                             f"{tuple(a.shape)}.")
        return _hermitian_svd(a, bool(compute_uv), tol)
    full = bool(full_matrices) and bool(compute_uv) and m != n
    return _svd(a, full_matrices=full, compute_uv=bool(compute_uv), degeneracy_tol=tol)


def _check_subset(a, full_matrices, subset_by_index):
    """``subset_by_index`` as ``jnp.linalg.svd`` takes it, where JAX computes it off the TPU."""
    if subset_by_index is None:
        return
    k = min(a.shape[-2:])
    if not (isinstance(subset_by_index, (tuple, list)) and len(subset_by_index) == 2
            and all(isinstance(i, int) for i in subset_by_index)):
        raise ValueError(f"svd: `subset_by_index` must be None or a pair of ints (start, end); "
                         f"got {subset_by_index!r}.")
    if tuple(subset_by_index) == (0, k):
        return
    if full_matrices:
        raise ValueError("svd: full_matrices and subset_by_index cannot both be set (as in "
                         "jnp.linalg.svd).")
    raise NotImplementedError(f"svd: `subset_by_index={tuple(subset_by_index)}` selects part of "
                              f"the {k} singular values; JAX computes that on TPU only, and "
                              f"rules.svd not at all. Slice the full result instead.")


def _hermitian_svd(a, compute_uv, degeneracy_tol):
    """``jnp.linalg.svd(a, hermitian=True)``'s computation on :func:`eigh`'s decomposition."""
    w, v = eigh(a, degeneracy_tol=degeneracy_tol)
    s = jnp.abs(w)
    if not compute_uv:
        return lax.rev(lax.sort(s, dimension=s.ndim - 1), dimensions=(s.ndim - 1,))
    index = lax.broadcasted_iota(jnp.int32, s.shape, s.ndim - 1)
    s, index, sign = lax.sort((s, index, jnp.sign(w)), dimension=s.ndim - 1, num_keys=1)
    s, index, sign = (lax.rev(x, dimensions=(s.ndim - 1,)) for x in (s, index, sign))
    u = jnp.take_along_axis(v, index[..., None, :], axis=-1)
    return SVDResult(u, s, mH(u * sign[..., None, :].astype(u.dtype)))


def _svd_primal(a, *, full_matrices, compute_uv, degeneracy_tol):
    del degeneracy_tol
    if compute_uv or jacobi_applies(a):  # the decomposition the derivatives use
        usv = SVDResult(*kernel.svd(a, full_matrices=full_matrices))
        return usv if compute_uv else usv.S
    return jax_ops.svd(a, compute_uv=False)


def _svd_forward(a, *, full_matrices, compute_uv, degeneracy_tol):
    usv = _svd_decomposition(a, full_matrices, degeneracy_tol)
    return (usv if compute_uv else usv.S), usv


def _svd_pushforward(res, a_dot, *, full_matrices, compute_uv, degeneracy_tol):
    if not compute_uv:
        u, s, vh = res
        k = s.shape[-1]
        p = mm_h(u[..., :, :k], mm(a_dot, mH(vh[..., :k, :])))
        return jnp.diagonal(p, axis1=-2, axis2=-1).real
    return _svd_tangent(res, a_dot, full_matrices, degeneracy_tol, _FIRST)


def _svd_tangent(res, a_dot, full_matrices, degeneracy_tol, fill):
    u, s, vh = res
    k = s.shape[-1]
    u1, v1 = u[..., :, :k], mH(vh[..., :k, :])
    a_v = mm(a_dot, v1)
    p = mm_h(u1, a_v)
    s_dot = jnp.diagonal(p, axis1=-2, axis2=-1).real
    f, s_inv = _svd_gaps(s, _tolerance(s, degeneracy_tol), fill)
    f = f.astype(p.dtype)
    ps = p * s.astype(p.dtype)[..., None, :]
    sp = s.astype(p.dtype)[..., :, None] * p
    omega_u = f * (ps + mH(ps))
    s_inv = s_inv.astype(p.dtype)
    if jnp.iscomplexobj(p):  # the relative phase of u_i and v_i, put on u_i (as JAX does)
        phase = 1j * jnp.diagonal(p, axis1=-2, axis2=-1).imag.astype(p.dtype) * s_inv
        omega_u = omega_u + phase[..., None] * eye_like(p)
    u_dot = mm(u1, omega_u)
    v_dot = mm(v1, f * (sp + mH(sp)))
    m, n = a_dot.shape[-2:]
    if m > k:
        u_out = (a_v - mm(u1, p)) * s_inv[..., None, :]  # (I - UUᴴ) Ȧ V S⁻¹
        u_dot = u_dot + u_out
        if full_matrices:  # U̇₂ = -U₁ U̇₁ᴴ U₂ = -U₁ (outward part of U̇₁)ᴴ U₂
            u_dot = jnp.concatenate([u_dot, -mm(u1, mm(mH(u_out), u[..., :, k:]))], axis=-1)
    if n > k:
        v_out = (mm(mH(a_dot), u1) - mm(v1, mH(p))) * s_inv[..., None, :]
        v_dot = v_dot + v_out
        if full_matrices:
            v_dot = jnp.concatenate([v_dot, -mm(v1, mm(mH(v_out), mH(vh[..., k:, :])))], axis=-1)
    return SVDResult(u_dot, s_dot, mH(v_dot))


@functools.partial(jax.custom_jvp, nondiff_argnums=(1, 2))
def _svd_decomposition(a, full_matrices, degeneracy_tol):
    return SVDResult(*kernel.svd(a, full_matrices=full_matrices))


@_svd_decomposition.defjvp
def _svd_decomposition_jvp(full_matrices, degeneracy_tol, primals, tangents):
    out = _svd_decomposition(primals[0], full_matrices, degeneracy_tol)
    return out, _svd_tangent(out, tangents[0], full_matrices, degeneracy_tol, _SECOND)


def _svd_pullback(res, ct, *, full_matrices, compute_uv, degeneracy_tol):
    u, s, vh = res
    k = s.shape[-1]
    if not compute_uv:
        return (conj(mm(u[..., :, :k] * ct.astype(u.dtype)[..., None, :], vh[..., :k, :])),)
    u_bar, s_bar, vh_bar = ct
    # The papers' convention: conjugate JAX's cotangents (V̄ = conj(Vh̄ᴴ) = Vh̄ᵀ).
    return (conj(svd_pullback(u, s, vh, conj(u_bar), s_bar, vh_bar.mT,
                              _tolerance(s, degeneracy_tol))),)


_svd = Rule("svd", _svd_forward, _svd_pushforward, _svd_pullback, primal=_svd_primal)


def svd_pullback(u, s, vh, u_bar, s_bar, v_bar, tol):
    """``Ā`` of ``A = U diag(s) Vᴴ`` in the papers' convention (``Re tr(Xᴴ Y)``), any shape.

    ``u``, ``vh`` thin or full; ``u_bar``, ``v_bar`` the cotangents of ``U`` and ``V = Vhᴴ`` of the
    same shapes; ``tol`` the degeneracy tolerance, shape ``(..., 1)``.
    """
    k = s.shape[-1]
    m, n = u.shape[-2], vh.shape[-1]
    u1, v1 = u[..., :, :k], mH(vh[..., :k, :])
    ub1, vb1 = u_bar[..., :, :k], v_bar[..., :, :k]
    if u.shape[-1] > k:  # full U: fold the cotangent of U₂ (U̇₂ = -U₁ U̇₁ᴴ U₂) into U₁'s
        u2, ub2 = u[..., :, k:], u_bar[..., :, k:]
        ub1 = ub1 - mm(u2, mm(mH(ub2), u1))
    if v_bar.shape[-1] > k:
        v2, vb2 = mH(vh[..., k:, :]), v_bar[..., :, k:]
        vb1 = vb1 - mm(v2, mm(mH(vb2), v1))
    f, s_inv = _svd_gaps(s, tol, _FIRST)
    f, sc = f.astype(u.dtype), s.astype(u.dtype)
    gu, gv = mm_h(u1, ub1), mm(mH(v1), vb1)
    inner = (f * (gu - mH(gu))) * sc[..., None, :] + sc[..., :, None] * (f * (gv - mH(gv)))
    diag = s_bar.astype(u.dtype)
    if jnp.iscomplexobj(gu):
        diag = diag + 1j * (jnp.diagonal(gu, axis1=-2, axis2=-1).imag * s_inv).astype(diag.dtype)
    inner = _add_to_diagonal(inner, diag)
    s_inv = s_inv.astype(u.dtype)
    if m > k:  # A̅ = (U (K - Γ_U S⁻¹) + Ū S⁻¹) Vᴴ
        left = mm(u1, inner - gu * s_inv[..., None, :]) + ub1 * s_inv[..., None, :]
        return mm(left, mH(v1))
    if n > k:  # A̅ = U ((K - S⁻¹ Γ_Vᴴ) Vᴴ + S⁻¹ V̄ᴴ)
        right = mm(inner - s_inv[..., :, None] * mH(gv), mH(v1)) + s_inv[..., :, None] * mH(vb1)
        return mm(u1, right)
    return mm(u1, mm(inner, mH(v1)))


def _svd_gaps(s, tol, fill):
    """``F_ij = 1/(s_j² - s_i²)`` and ``1/s_i``; ``fill`` where degenerate (see ``svd``)."""
    diff = s[..., None, :] - s[..., :, None]
    f = _pair_reciprocal(diff * (s[..., None, :] + s[..., :, None]), jnp.abs(diff) <= tol[..., None],
                         fill)
    return f, _reciprocal(s, s <= tol, fill)
