"""Closed forms and Jacobi methods for tiny matrices (inverse, determinant, Cholesky, eigh, SVD).

A batched LU, Cholesky or eigensolver handles a batch of tiny matrices one call per slice (LAPACK
on the CPU), or with kernels whose tiles are far larger than the matrices (GPU, TPU). The formulas
below are elementwise expressions in the entries, evaluated on whole batch arrays: one fused loop
over the batch, with the same or fewer operations and no solver call, on every platform. The
sizes they serve are in :mod:`.routes` (``CLOSED_FORM_MAX_N``, ``JACOBI_MAX_N``).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from .._core.checks import (
    HALF_DTYPES,
    INEXACT_DTYPES,
    REAL_DTYPES,
    check_matrix,
    is_half,
)
from . import routes

__all__ = ["closed_form_applies", "closed_form_cholesky", "closed_form_cofactors",
           "closed_form_inv", "closed_form_lower_inv", "cofactor_entries", "jacobi_applies",
           "jacobi_eigh", "jacobi_svd"]


def closed_form_applies(a: jax.Array) -> bool:
    """Whether the closed forms below serve ``a``: ``n ≤ routes.CLOSED_FORM_MAX_N``, not half
    precision (which goes to JAX's own functions)."""
    return a.shape[-1] <= routes.CLOSED_FORM_MAX_N and not is_half(a)


def jacobi_applies(a: jax.Array) -> bool:
    """Whether the Jacobi methods below serve ``a``: a batch of at least
    ``routes.JACOBI_MIN_BATCH`` real (float32, float64) square matrices with
    ``n ≤ routes.JACOBI_MAX_N``."""
    n = a.shape[-1]
    batch = math.prod(a.shape[:-2])
    return (a.shape[-2] == n <= routes.JACOBI_MAX_N and batch >= routes.JACOBI_MIN_BATCH
            and a.dtype in (jnp.float32, jnp.float64))


# Cyclic Jacobi converges quadratically: on 3 × 3 matrices, 4 sweeps reach rounding level in
# float32 and float64 (3 do not, in float64); the fifth is a margin.
_JACOBI_SWEEPS = 5


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
      ill-conditioned input. It costs ``O(n!·n)`` flops per slice, fewer than an LU for
      ``n ≤ 4``, in one fused loop over the batch instead of a solver call per slice.

    Examples:
      >>> import jax.numpy as jnp
      >>> from rules._kernels.small import closed_form_inv
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
      >>> from rules._kernels.small import closed_form_cofactors
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


def closed_form_cholesky(a: jax.Array) -> jax.Array:
    r"""Lower Cholesky factor of a batch of ``n × n`` Hermitian positive definite matrices, ``n ≤ 4``.

    .. math::
        l_{jj} = \Big(a_{jj} - \sum_{k<j} |l_{jk}|^2\Big)^{1/2}, \qquad
        l_{ij} = \Big(a_{ij} - \sum_{k<j} l_{ik}\,\overline{l_{jk}}\Big) \Big/ l_{jj}
        \quad (i > j),

    column by column, as LAPACK's unblocked ``potf2`` (the same backward-stable algorithm),
    unrolled on whole batch arrays: one fused loop over the batch instead of one ``potrf`` call
    per slice. Only the lower triangle of ``a`` is read (the real part of its diagonal).

    Args:
      a: array of shape ``(..., n, n)`` with ``n ≤ 4``; float32, float64, complex64 or complex128.

    Returns:
      ``L``, shape and dtype of ``a``, zero above the diagonal. A slice that is not positive
      definite (a pivot ``≤ 0`` or NaN) has NaN on and below the diagonal, as
      ``jnp.linalg.cholesky`` gives.

    Raises:
      TypeError, ValueError: as :func:`closed_form_inv`.

    Examples:
      >>> import jax.numpy as jnp
      >>> from rules._kernels.small import closed_form_cholesky
      >>> closed_form_cholesky(jnp.array([[4.0, 2.0], [2.0, 2.0]], dtype=jnp.float32))
      Array([[2., 0.],
             [1., 1.]], dtype=float32)
    """
    check_matrix("closed_form_cholesky", "a", a, square=True)
    _check_size("closed_form_cholesky", a, "jnp.linalg.cholesky")
    n = a.shape[-1]
    if n == 0:
        return a
    l: list[list[jax.Array]] = [[jnp.zeros(a.shape[:-2], a.dtype)] * n for _ in range(n)]
    definite = jnp.ones(a.shape[:-2], bool)
    for j in range(n):
        pivot = jnp.real(a[..., j, j] - sum(l[j][k] * jnp.conj(l[j][k]) for k in range(j)))
        definite &= pivot > 0
        l[j][j] = jnp.sqrt(pivot).astype(a.dtype)
        for i in range(j + 1, n):
            l[i][j] = (a[..., i, j] - sum(l[i][k] * jnp.conj(l[j][k]) for k in range(j))) / l[j][j]
    lower = [[jnp.where(definite, x, jnp.nan) if j <= i else x for j, x in enumerate(row)]
             for i, row in enumerate(l)]
    return jnp.stack([jnp.stack(row, axis=-1) for row in lower], axis=-2)


def closed_form_lower_inv(l: jax.Array) -> jax.Array:
    r"""Inverse of a batch of ``n × n`` lower triangular matrices, ``n ≤ 4``, by substitution.

    .. math::
        x_{ii} = 1 / l_{ii}, \qquad x_{ij} = -\Big(\sum_{j \le k < i} l_{ik}\,x_{kj}\Big)
        \Big/ l_{ii} \quad (i > j),

    unrolled on whole batch arrays; only the lower triangle of ``l`` is read. For a triangular
    matrix this is as accurate as the solves it replaces (LAPACK's ``trtri`` is the same
    recurrence), and a product with it costs a fused loop instead of a ``trsm`` call per slice.
    A zero on the diagonal gives inf/nan entries, as a triangular solve does.

    Args:
      l: array of shape ``(..., n, n)`` with ``n ≤ 4``, of a floating or complex dtype.

    Returns:
      ``L⁻¹``, shape and dtype of ``l``, zero above the diagonal.

    Raises:
      TypeError: ``l`` is not an array of a floating or complex dtype.
      ValueError: ``l`` is not of shape ``(..., n, n)``, or ``n > 4``.
    """
    check_matrix("closed_form_lower_inv", "l", l, square=True)
    _check_size("closed_form_lower_inv", l, "lax.linalg.triangular_solve")
    n = l.shape[-1]
    if n == 0:
        return l
    zero = jnp.zeros(l.shape[:-2], l.dtype)
    inv_diag = [1 / l[..., i, i] for i in range(n)]
    x = [[inv_diag[i] if i == j else zero for j in range(n)] for i in range(n)]
    for j in range(n):
        for i in range(j + 1, n):
            x[i][j] = -sum(l[..., i, k] * x[k][j] for k in range(j, i)) * inv_diag[i]
    return jnp.stack([jnp.stack(row, axis=-1) for row in x], axis=-2)


def _check_size(fname, a, alternative):
    if a.shape[-1] > routes.CLOSED_FORM_MAX_N:
        raise ValueError(f"{fname}: `a` must have shape (..., n, n) with n ≤ "
                         f"{routes.CLOSED_FORM_MAX_N}; got {tuple(a.shape)}. Use {alternative}.")


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


def _check_jacobi(fname: str, a: jax.Array, instead: str) -> int:
    """``n`` of a real square ``(..., n, n)`` batch with ``n ≤ routes.JACOBI_MAX_N``, or a clear
    error."""
    check_matrix(fname, "a", a, square=True, dtypes=REAL_DTYPES)
    n = a.shape[-1]
    if n > routes.JACOBI_MAX_N:
        raise ValueError(f"{fname}: `a` must have shape (..., n, n) with n ≤ "
                         f"{routes.JACOBI_MAX_N}; "
                         f"got {tuple(a.shape)}. Use {instead}.")
    return n


def jacobi_eigh(a: jax.Array, lower: bool = True,
                symmetrize_input: bool = True) -> tuple[jax.Array, jax.Array]:
    r"""Eigendecomposition ``A = V diag(λ) Vᵀ`` of a batch of real symmetric ``n × n``, ``n ≤ 3``.

    Cyclic Jacobi: each step zeroes the off-diagonal entry ``a_pq`` with the rotation
    ``J(c, s)``,

    .. math::
        \theta = \frac{a_{qq} - a_{pp}}{2 a_{pq}}, \quad
        t = \frac{\operatorname{sign}\theta}{|\theta| + \sqrt{\theta^2 + 1}}, \quad
        c = \frac{1}{\sqrt{t^2 + 1}}, \quad s = t c, \quad
        A \leftarrow J^T A J, \quad V \leftarrow V J,

    (Golub & Van Loan, *Matrix Computations*, §8.5; ``t`` is the smaller root, so the rotation
    angle is at most π/4; ``docs/derivations/decompositions.md#jacobi``). A fixed number of sweeps over the pairs ``(p, q)``, each on whole
    batch arrays, then a sorting network that orders the eigenvalues ascending as
    ``jnp.linalg.eigh`` does. Jacobi's method is backward stable, with eigenvalues at least as
    accurate as LAPACK's ``syevd`` and orthonormal eigenvectors to rounding.

    Args:
      a: array of shape ``(..., n, n)``, ``n ≤ 3``, float32 or float64.
      lower: the triangle read when ``symmetrize_input`` is false.
      symmetrize_input: decompose ``(A + Aᵀ)/2`` instead of one triangle.

    Returns:
      ``(λ, V)``: eigenvalues ascending, shape ``(..., n)``; eigenvectors in the columns of ``V``,
      shape and dtype of ``a``. An exactly diagonal (block) matrix is returned unrotated, so an
      exactly degenerate spectrum stays exactly degenerate. Non-finite input gives NaN.

    Raises:
      TypeError: ``a`` is not a float32 or float64 array.
      ValueError: ``a`` is not of shape ``(..., n, n)``, or ``n > 3``.

    Notes:
      Eigenvector signs may differ from LAPACK's (neither is specified).

    Examples:
      >>> import jax.numpy as jnp
      >>> from rules._kernels.small import jacobi_eigh
      >>> w, v = jacobi_eigh(jnp.array([[2.0, 1.0], [1.0, 2.0]], dtype=jnp.float32))
      >>> w
      Array([1., 3.], dtype=float32)
    """
    n = _check_jacobi("jacobi_eigh", a, "rules.eigh")
    if n == 0:
        return jnp.zeros(a.shape[:-1], a.dtype), a

    def entry(i, j):
        if symmetrize_input:
            return a[..., i, j] if i == j else (a[..., i, j] + a[..., j, i]) / 2
        return a[..., max(i, j), min(i, j)] if lower else a[..., min(i, j), max(i, j)]

    # The upper triangle of the iterate (p < q) and V, as lists of batch arrays: every rotation is
    # elementwise, and the loop over sweeps keeps each fused computation one sweep deep.
    upper = {(i, j): entry(i, j) for i in range(n) for j in range(i, n)}
    one, zero = jnp.ones_like(upper[0, 0]), jnp.zeros_like(upper[0, 0])
    v = {(i, j): one if i == j else zero for i in range(n) for j in range(n)}
    upper, v = lax.fori_loop(0, _JACOBI_SWEEPS, lambda _, state: _jacobi_sweep(n, *state),
                             (upper, v))
    w = [upper[i, i] for i in range(n)]
    cols = [[v[r, i] for r in range(n)] for i in range(n)]
    for i, j in [(0, 1), (1, 2), (0, 1)][:{1: 0, 2: 1, 3: 3}[n]]:  # sorting network
        swap = w[i] > w[j]
        w[i], w[j] = jnp.where(swap, w[j], w[i]), jnp.where(swap, w[i], w[j])
        cols[i], cols[j] = ([jnp.where(swap, y, x) for x, y in zip(cols[i], cols[j])],
                            [jnp.where(swap, x, y) for x, y in zip(cols[i], cols[j])])
    vectors = jnp.stack([jnp.stack([cols[j][r] for j in range(n)], axis=-1) for r in range(n)],
                        axis=-2)
    return jnp.stack(w, axis=-1), vectors


def _jacobi_sweep(n, upper, v):
    """One cyclic sweep: a rotation for each pair ``p < q``, on the upper triangle and on ``V``."""
    upper, v = dict(upper), dict(v)

    def get(i, j):
        return upper[min(i, j), max(i, j)]

    def put(i, j, x):
        upper[min(i, j), max(i, j)] = x

    for p in range(n):
        for q in range(p + 1, n):
            apq = upper[p, q]
            nonzero = apq != 0
            theta = (upper[q, q] - upper[p, p]) / (2 * jnp.where(nonzero, apq, 1))
            # |θ| beyond √max overflows θ² to inf and gives t = 0: a_pq is then below rounding
            # of the diagonal gap, and leaving it is exact to working precision.
            t = jnp.where(theta >= 0, 1, -1) / (jnp.abs(theta) + jnp.sqrt(theta * theta + 1))
            t = jnp.where(nonzero, t, 0)
            c = lax.rsqrt(t * t + 1)
            s = t * c
            for r in range(n):
                if r not in (p, q):
                    arp, arq = get(r, p), get(r, q)
                    put(r, p, c * arp - s * arq)
                    put(r, q, s * arp + c * arq)
            upper[p, p], upper[q, q] = upper[p, p] - t * apq, upper[q, q] + t * apq
            upper[p, q] = jnp.zeros_like(apq)
            for r in range(n):
                vrp, vrq = v[r, p], v[r, q]
                v[r, p], v[r, q] = c * vrp - s * vrq, s * vrp + c * vrq
    return upper, v


def jacobi_svd(a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""Singular value decomposition ``A = U diag(s) Vᵀ`` of a batch of real ``n × n``, ``n ≤ 3``.

    One-sided (Hestenes) Jacobi: rotations of column pairs ``(a_p, a_q)`` of ``A`` (and of ``V``)
    until the columns are orthogonal, each the Jacobi rotation of ``AᵀA``'s entry ``(p, q)``,

    .. math::
        \zeta = \frac{\|a_q\|^2 - \|a_p\|^2}{2\, a_p^T a_q}, \quad
        t = \frac{\operatorname{sign}\zeta}{|\zeta| + \sqrt{\zeta^2 + 1}}, \quad
        c = \frac{1}{\sqrt{t^2 + 1}}, \quad s = t c,

    without forming ``AᵀA`` (Demmel & Veselić, SIAM J. Matrix Anal. Appl. 13 (1992);
    ``docs/derivations/decompositions.md#jacobi``). Then
    ``s_i = ‖a_i‖`` (sorted descending, as ``jnp.linalg.svd``), ``u_0 = a_0/s_0``, ``u_1`` the
    normalised part of ``a_1`` orthogonal to ``u_0``, and for ``n = 3`` ``u_2 = ±u_0 × u_1``: ``U`` is
    orthogonal to rounding even where singular values vanish (a rank-deficient ``A``). ``A`` is
    first scaled by a power of two (exact) so that no column norm overflows or underflows.

    Args:
      a: array of shape ``(..., n, n)``, ``n ≤ 3``, float32 or float64.

    Returns:
      ``(U, s, Vh)``: ``U`` and ``Vh = Vᵀ`` of the shape and dtype of ``a``, ``s`` of shape
      ``(..., n)``. Non-finite input gives NaN.

    Raises:
      TypeError: ``a`` is not a float32 or float64 array.
      ValueError: ``a`` is not of shape ``(..., n, n)``, or ``n > 3``.

    Notes:
      Signs of singular vector pairs may differ from LAPACK's (neither is specified).

    Examples:
      >>> import jax.numpy as jnp
      >>> from rules._kernels.small import jacobi_svd
      >>> jacobi_svd(jnp.array([[0.0, 2.0], [1.0, 0.0]], dtype=jnp.float32))[1]
      Array([2., 1.], dtype=float32)
    """
    n = _check_jacobi("jacobi_svd", a, "rules.svd")
    if n == 0:
        return a, jnp.zeros(a.shape[:-1], a.dtype), a
    biggest = jnp.max(jnp.abs(a), axis=(-2, -1))
    exponent = jnp.frexp(jnp.where((biggest > 0) & jnp.isfinite(biggest), biggest, 1))[1]
    scaled = jnp.ldexp(a, -exponent[..., None, None])
    cols = {(r, c): scaled[..., r, c] for r in range(n) for c in range(n)}
    one, zero = jnp.ones_like(cols[0, 0]), jnp.zeros_like(cols[0, 0])
    v = {(r, c): one if r == c else zero for r in range(n) for c in range(n)}
    cols, v = lax.fori_loop(0, _JACOBI_SWEEPS, lambda _, state: _one_sided_sweep(n, *state),
                            (cols, v))
    a_cols = [[cols[r, c] for r in range(n)] for c in range(n)]
    v_cols = [[v[r, c] for r in range(n)] for c in range(n)]
    s = [jnp.sqrt(sum(x * x for x in col)) for col in a_cols]
    for i, j in [(0, 1), (1, 2), (0, 1)][:{1: 0, 2: 1, 3: 3}[n]]:  # sorting network, descending
        swap = s[i] < s[j]
        s[i], s[j] = jnp.where(swap, s[j], s[i]), jnp.where(swap, s[i], s[j])
        for vecs in (a_cols, v_cols):
            vecs[i], vecs[j] = ([jnp.where(swap, y, x) for x, y in zip(vecs[i], vecs[j])],
                                [jnp.where(swap, x, y) for x, y in zip(vecs[i], vecs[j])])
    u_cols = _orthonormal_left_vectors(a_cols, s)
    u = jnp.stack([jnp.stack([u_cols[c][r] for c in range(n)], axis=-1) for r in range(n)], axis=-2)
    vh = jnp.stack([jnp.stack(v_cols[r], axis=-1) for r in range(n)], axis=-2)
    return u, jnp.ldexp(jnp.stack(s, axis=-1), exponent[..., None]), vh


def _one_sided_sweep(n, cols, v):
    """One cyclic sweep of column rotations, on the columns of ``A`` and of ``V``."""
    cols, v = dict(cols), dict(v)
    for p in range(n):
        for q in range(p + 1, n):
            alpha = sum(cols[r, p] * cols[r, p] for r in range(n))
            beta = sum(cols[r, q] * cols[r, q] for r in range(n))
            gamma = sum(cols[r, p] * cols[r, q] for r in range(n))
            nonzero = gamma != 0
            zeta = (beta - alpha) / (2 * jnp.where(nonzero, gamma, 1))
            t = jnp.where(zeta >= 0, 1, -1) / (jnp.abs(zeta) + jnp.sqrt(zeta * zeta + 1))
            t = jnp.where(nonzero, t, 0)
            c = lax.rsqrt(t * t + 1)
            s = t * c
            for m in (cols, v):
                for r in range(n):
                    x_p, x_q = m[r, p], m[r, q]
                    m[r, p], m[r, q] = c * x_p - s * x_q, s * x_p + c * x_q
    return cols, v


def _orthonormal_left_vectors(a_cols, s):
    """``u_i = a_i / s_i`` made exactly orthonormal: Gram–Schmidt, then a cross product.

    A zero column (a singular value that is exactly zero) gets a unit vector orthogonal to the
    ones before it, and the last vector's sign is that of ``a_{n-1}``, so ``A v_i = s_i u_i``.
    """
    n = len(a_cols)

    def normalise(x):
        norm = jnp.sqrt(sum(y * y for y in x))
        ok = norm > 0
        return [y / jnp.where(ok, norm, 1) for y in x], ok

    one, zero = jnp.ones_like(s[0]), jnp.zeros_like(s[0])
    u0, ok0 = normalise(a_cols[0])
    u0 = [jnp.where(ok0, y, one if r == 0 else zero) for r, y in enumerate(u0)]
    if n == 1:
        return [u0]
    if n == 2:
        perp = [-u0[1], u0[0]]
        sign = jnp.where(perp[0] * a_cols[1][0] + perp[1] * a_cols[1][1] < 0, -1, 1)
        return [u0, [sign * y for y in perp]]
    d = sum(x * y for x, y in zip(u0, a_cols[1]))
    u1, ok1 = normalise([y - d * x for x, y in zip(u0, a_cols[1])])
    # Fallback for a zero remainder: u0 × e_r for the axis r least aligned with u0.
    r_min = jnp.argmin(jnp.stack([jnp.abs(y) for y in u0], axis=-1), axis=-1)
    e = [(r_min == r).astype(u0[0].dtype) for r in range(3)]
    fallback, _ = normalise(_cross(u0, e))
    u1 = [jnp.where(ok1, y, f) for y, f in zip(u1, fallback)]
    u2 = _cross(u0, u1)
    sign = jnp.where(sum(x * y for x, y in zip(u2, a_cols[2])) < 0, -1, 1)
    return [u0, u1, [sign * y for y in u2]]


def _cross(x, y):
    return [x[1] * y[2] - x[2] * y[1], x[2] * y[0] - x[0] * y[2], x[0] * y[1] - x[1] * y[0]]
