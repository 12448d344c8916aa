r"""Sylvester equations ``AX + XB = C``: one factorisation of ``A`` and ``B``, many solves.

The forward and every derivative of :func:`rules.solve_sylvester` and
:func:`rules.solve_continuous_lyapunov` solve equations with the same ``A`` and ``B`` and another
right-hand side, so the work that depends on ``A`` and ``B`` alone is done once
(:func:`sylvester_factors`, :func:`lyapunov_factors`) and each solve (:func:`solve`) reuses it.

* **CPU** (``cpu_route.sylvester_schur``, ``cpu_route.lyapunov_schur``): Bartels–Stewart with the
  complex Schur forms ``A = U T Uᴴ``, ``B = V S Vᴴ`` (LAPACK's ``gees``; of a real matrix, its real
  Schur form made triangular by one rotation per 2 × 2 block). A solve
  (``cpu_route.similarity_solve``) is ``X = U Y Vᴴ`` with ``T Y + Y S = Uᴴ C V``, solved column by
  column (``T + s_jj I`` is triangular; large matrices in blocks): four products and the
  triangular sweep, ``O(mn(m + n))``. ``cpu_route.sylvester_eigen`` is
  ``jax.scipy.linalg.solve_sylvester``'s ``method="eigen"``: eigendecompositions
  ``A = P Λ P⁻¹``, ``B = Q M Q⁻¹`` (LAPACK's ``geev``), and ``Y = (P⁻¹ C Q) / (λ_i + μ_j)``. Both
  are :class:`Similarity` factors.
* **GPU, TPU** (the default route): the matrix sign function of
  ``H = [[A, -C], [0, -B]]`` by the scaled Newton iteration ``H ← (μH + H⁻¹/μ)/2``. Where the
  spectra of ``A`` and ``-B`` lie on opposite sides of the imaginary axis,
  ``sign(H) = [[sI, -2sX], [0, -sI]]`` with ``s = ±1`` the side of ``A``'s. The diagonal blocks
  iterate on their own (``A_{k+1} = (μ_k A_k + A_k⁻¹/μ_k)/2``, ``B`` alike) and the corner is
  linear in ``C``: ``C_{k+1} = (μ_k C_k + A_k⁻¹ C_k B_k⁻¹/μ_k)/2``, ``X = s C_∞/2``. The
  factorisation keeps every ``A_k⁻¹``, ``B_k⁻¹`` and ``μ_k`` (:class:`SignIterates`); a solve is two
  products per step. Inverses and products only: no ``schur`` or ``eig``.

Where the equation has no unique solution (or the route cannot solve it) the factors say so
(``solvable``) and every solve with them is NaN.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .._core.arrays import HIGHEST, as_complex, eye_like, mH
from .lu import inverse
from .products import mm
from .routes import cpu_route

__all__ = ["BLOCK", "BLOCKED_MIN_N", "MAX_SIGN_STEPS", "SignIterates", "Similarity",
           "SylvesterFactors", "lyapunov_factors", "solve", "sylvester_factors"]

# Newton steps of the sign iteration kept (and taken at most). Scaled Newton converges in 6 to 10
# steps where the spectra keep a fair distance from the imaginary axis, in about 13 where that
# distance is 1e-6 of their size, and in 20 to 30 where A is far from normal (and the equation
# ill-conditioned); a slice still moving after this many steps is NaN.
MAX_SIGN_STEPS = 32
# The triangular Sylvester solve: column by column below this size; from it in blocks of BLOCK,
# whose shifted triangular matrices stay in cache (beyond, each column writes and reads an m × m
# matrix), at the cost of a nested loop that compiles more slowly.
BLOCKED_MIN_N = 128
BLOCK = 32
# Norm scaling is switched off once a step changes the iterates by less than this (relative):
# close to convergence μ ≈ 1, and a μ computed from rounded norms would only disturb the quadratic
# convergence (Higham 2008, ch. 5).
_SCALING_OFF = 1e-2


class Similarity(NamedTuple):
    """``A = P T P⁻¹`` with ``T`` upper triangular: a Schur form (``P`` unitary) or an
    eigendecomposition (``T`` diagonal). Complex, shape ``(..., m, m)`` each."""

    p: jax.Array
    p_inv: jax.Array
    t: jax.Array


class SignIterates(NamedTuple):
    """What a solve reads of the sign iteration, step ``k`` in the leading axis.

    ``a_inv``: ``A_k⁻¹``, shape ``(K, ..., m, m)``; ``b_inv``: ``B_k⁻¹`` (``(K, ..., n, n)``), or
    ``None`` where ``B = Aᴴ`` (Lyapunov: ``B_k⁻¹ = (A_k⁻¹)ᴴ``); ``scale``: ``μ_k``, ``(K, ...)``;
    ``steps``: the steps taken (the most over the batch, int32); ``side``: ``s = ±1`` per slice.
    A slice that converged before the others keeps ``A_k⁻¹ = B_k⁻¹ = I``, ``μ_k = 1``: steps that
    leave ``C_k`` as it is.
    """

    a_inv: jax.Array
    b_inv: jax.Array | None
    scale: jax.Array
    steps: jax.Array
    side: jax.Array


class SylvesterFactors(NamedTuple):
    """The factors of ``A`` and ``B`` for solves of ``AX + XB = C``, per slice of their batch.

    ``a``, ``b``: :class:`Similarity` of ``A`` and ``B`` (CPU); ``sign``: :class:`SignIterates`
    (GPU, TPU); the fields of the route not taken are zeros, which XLA removes with the
    computations that do not read them. ``solvable``: bool per slice, false where a solve is NaN.
    """

    a: Similarity
    b: Similarity
    sign: SignIterates
    solvable: jax.Array


# ==============================================================================================
# Factorisations


def sylvester_factors(a: jax.Array, b: jax.Array, method: str, tol: jax.Array
                      ) -> SylvesterFactors:
    """Factors of non-empty square ``a`` ``(..., m, m)`` and ``b`` ``(..., n, n)`` (same batch).

    On the CPU the Schur forms (``method="schur"``, ``cpu_route.sylvester_schur``) or the
    eigendecompositions (``"eigen"``, ``cpu_route.sylvester_eigen``); a slice with
    ``min |λ_i(A) + μ_j(B)| < tol`` is unsolvable, as in ``jax.scipy.linalg.solve_sylvester``.
    Elsewhere the sign iteration; ``tol`` is not read there.
    """
    def sign(a, b, tol):
        return _sign_factors(a, b)

    if method == "eigen":
        return cpu_route("sylvester_eigen", _eigen_factors, sign, a, b, tol)
    return cpu_route("sylvester_schur", _schur_factors, sign, a, b, tol)


def lyapunov_factors(a: jax.Array) -> SylvesterFactors:
    """Factors of ``a`` and ``b = aᴴ`` for ``AX + XAᴴ = Q`` (non-empty square ``a``).

    On the CPU one Schur form (``cpu_route.lyapunov_schur``), whose conjugate transpose, reversed,
    is the Schur form of ``Aᴴ``; a slice with ``|λ_i + λ̄_j| ≤ n ε ‖A‖_F`` for some pair is
    unsolvable. Elsewhere the sign iteration of ``A`` alone.
    """
    return cpu_route("lyapunov_schur", _schur_lyapunov_factors,
                     functools.partial(_sign_factors, b=None), a)


def _diagonal(x: jax.Array) -> jax.Array:
    return jnp.diagonal(x, axis1=-2, axis2=-1)


def _schur(a):
    """The complex Schur form; of a real matrix from its real Schur form (:func:`_complex_schur`),
    which LAPACK computes in real arithmetic: a real flop is a quarter of a complex one, and the
    conversion is ``O(n²)``."""
    t, u = lax.linalg.schur(a)
    if not jnp.iscomplexobj(a):
        t, u = _complex_schur(t, u)
    return Similarity(u, mH(u), t)


def _complex_schur(t, u):
    """``A = U T Uᵀ`` real quasi-triangular to complex triangular (SciPy's ``rsf2csf``).

    Each 2 × 2 block (a nonzero ``t[k, k-1]``) is triangularised by the rotation ``G`` whose
    first column is the unit eigenvector ``(μ, t[k, k-1])/r`` of the block shifted by
    ``t[k, k]`` (``μ = λ - t[k, k]``): ``T ← G T Gᴴ`` on rows and columns ``k-1, k``,
    ``U ← U Gᴴ``, from the last block up, on whole rows and columns: real Schur blocks do not
    overlap, so the entries they mix below the diagonal outside the block are zeros. One step
    per ``k``, elementwise on the batch; ``G = I`` where ``t[k, k-1] = 0``.
    """
    t, u = as_complex(t), as_complex(u)
    if t.shape[-1] == 1:
        return t, u
    eps = jnp.finfo(t.dtype).eps
    rows, cols = t.ndim - 2, t.ndim - 1

    def rotate(carry, k):
        t, u = carry
        pair = lax.dynamic_slice_in_dim(t, k - 1, 2, axis=rows)
        block = lax.dynamic_slice_in_dim(pair, k - 1, 2, axis=cols)
        p, q, r, s = block[..., 0, 0], block[..., 0, 1], block[..., 1, 0], block[..., 1, 1]
        mu = (p - s) / 2 + jnp.sqrt(((p - s) / 2) ** 2 + q * r)
        split = jnp.abs(r) > eps * (jnp.abs(p) + jnp.abs(s))
        norm = jnp.where(split, jnp.hypot(jnp.abs(mu), jnp.abs(r)), 1).astype(t.dtype)
        c, s = jnp.where(split, mu / norm, 1), jnp.where(split, r / norm, 0)
        g = jnp.stack([jnp.stack([jnp.conj(c), s], -1), jnp.stack([-s, c], -1)], -2)
        t = lax.dynamic_update_slice_in_dim(t, mm(g, pair), k - 1, axis=rows)
        t = lax.dynamic_update_slice_in_dim(
            t, mm(lax.dynamic_slice_in_dim(t, k - 1, 2, axis=cols), mH(g)), k - 1, axis=cols)
        u = lax.dynamic_update_slice_in_dim(
            u, mm(lax.dynamic_slice_in_dim(u, k - 1, 2, axis=cols), mH(g)), k - 1, axis=cols)
        return (t, u), None

    n = t.shape[-1]
    (t, u), _ = lax.scan(rotate, (t, u), jnp.arange(n - 1, 0, -1))
    return jnp.triu(t), u


def _schur_factors(a, b, tol):
    sa, sb = _schur(a), _schur(b)
    return SylvesterFactors(sa, sb, _no_sign_iterates(a, b), _separated(sa, sb, tol))


def _eigen_factors(a, b, tol):
    def eigen(x):
        w, p = lax.linalg.eig(x, compute_left_eigenvectors=False)  # complex for real x too
        return Similarity(p, inverse(p), w[..., :, None] * eye_like(p))

    sa, sb = eigen(a), eigen(b)
    return SylvesterFactors(sa, sb, _no_sign_iterates(a, b), _separated(sa, sb, tol))


def _schur_lyapunov_factors(a):
    sa = _schur(a)
    # Aᴴ = U Tᴴ Uᴴ = (UJ)(J Tᴴ J)(J Uᴴ) with J the reversal: J Tᴴ J is upper triangular.
    sb = Similarity(sa.p[..., :, ::-1], sa.p_inv[..., ::-1, :], mH(sa.t)[..., ::-1, ::-1])
    n = a.shape[-1]
    eps = jnp.finfo(a.dtype).eps
    norm = jnp.sqrt(jnp.sum(jnp.abs(sa.t) ** 2, axis=(-2, -1)))
    return SylvesterFactors(sa, sb, _no_sign_iterates(a, None),
                            _min_gap(sa, sb) > (n * eps) * norm)


def _min_gap(sa, sb):
    """``min |λ_i(A) + μ_j(B)|`` per slice, from the diagonals of the triangular factors."""
    gaps = _diagonal(sa.t)[..., :, None] + _diagonal(sb.t)[..., None, :]
    return jnp.min(jnp.abs(gaps), axis=(-2, -1))


def _separated(sa, sb, tol):
    # As jax.scipy.linalg.solve_sylvester: NaN where some |λ_i + μ_j| < tol (and where the
    # factorisation is not finite: the comparison is then false).
    return _min_gap(sa, sb) >= tol


def _no_sign_iterates(a, b):
    real = jnp.finfo(a.dtype).dtype
    batch = a.shape[:-2]
    return SignIterates(
        jnp.zeros((MAX_SIGN_STEPS, *a.shape), a.dtype),
        None if b is None else jnp.zeros((MAX_SIGN_STEPS, *b.shape), b.dtype),
        jnp.zeros((MAX_SIGN_STEPS, *batch), real), jnp.zeros((), jnp.int32),
        jnp.zeros(batch, real))


def _no_similarity(x):
    z = jnp.zeros(x.shape, as_complex(x).dtype)
    return Similarity(z, z, z)


def _aligned(x, like):
    """``x`` with leading unit axes up to the rank of ``like`` (explicit rank promotion)."""
    return x.reshape((1,) * (like.ndim - x.ndim) + x.shape)


def _per_slice(x, like):
    """A value per slice of the factors' batch, against the matrices ``like``."""
    return _aligned(x[..., None, None], like)


def _sqnorm(x):
    return jnp.sum(jnp.real(x * jnp.conj(x)), axis=(-2, -1))


def _sign_factors(a, b):
    """The scaled Newton iteration of the diagonal blocks of ``sign([[A, ·], [0, -B]])``.

    Frobenius-norm scaling ``μ_k = (‖H_k⁻¹‖/‖H_k‖)^{1/2}`` of the block-diagonal part (Higham
    2008, ch. 5), off once a step moves the iterates by less than ``_SCALING_OFF``. A slice has
    converged after a step that moves them by less than ``√ε`` (relative): quadratic convergence
    leaves an error of order ε. It is solvable where it converged with ``A_∞ = sI`` and
    ``B_∞ = sI`` (traces ``sm`` and ``sn``): the spectra of ``A`` and ``-B`` are then on opposite
    sides of the imaginary axis. ``b=None`` iterates ``A`` for ``B = Aᴴ``.
    """
    lyapunov = b is None
    real = jnp.finfo(a.dtype).dtype
    batch = a.shape[:-2]
    done_tol = jnp.sqrt(jnp.finfo(real).eps).astype(real)

    def norms(x, y):
        return _sqnorm(x) + _sqnorm(y)

    def newton(x, x_inv, mu):
        return (mu * x + x_inv / mu) / 2

    def step(state):
        k, ak, b_state, done, moved, a_inv, b_inv, scale = state
        bk = mH(ak) if lyapunov else b_state
        ai = inverse(ak)
        bi = mH(ai) if lyapunov else inverse(bk)
        mu = jnp.where(moved > _SCALING_OFF, (norms(ai, bi) / norms(ak, bk)) ** 0.25, 1)
        mu = jnp.where(done, 1, mu).astype(real)
        m_a = mu[..., None, None].astype(a.dtype)
        a_next, b_next = newton(ak, ai, m_a), newton(bk, bi, m_a)
        change = jnp.sqrt(norms(a_next - ak, b_next - bk) / norms(a_next, b_next))
        keep = done[..., None, None]
        a_inv = a_inv.at[k].set(jnp.where(keep, eye_like(ai), ai))
        if not lyapunov:
            b_inv = b_inv.at[k].set(jnp.where(keep, eye_like(bi), bi))
            b_state = jnp.where(keep, bk, b_next)
        moved = jnp.where(done, moved, change)
        return (k + 1, jnp.where(keep, ak, a_next), b_state, done | (change <= done_tol), moved,
                a_inv, b_inv, scale.at[k].set(mu))

    def more(state):
        k, *_, done = state[:4]
        return (k < MAX_SIGN_STEPS) & ~jnp.all(done)

    zeros = _no_sign_iterates(a, b)
    state = (jnp.zeros((), jnp.int32), a, b, jnp.zeros(batch, bool), jnp.full(batch, jnp.inf, real),
             zeros.a_inv, zeros.b_inv, jnp.ones((MAX_SIGN_STEPS, *batch), real))
    steps, ak, bk, done, _, a_inv, b_inv, scale = lax.while_loop(more, step, state)
    trace_a = jnp.real(jnp.trace(ak, axis1=-2, axis2=-1))
    side = jnp.where(trace_a < 0, -1, 1).astype(real)
    solvable = done & (jnp.abs(trace_a - side * a.shape[-1]) < 0.5)
    if not lyapunov:
        trace_b = jnp.real(jnp.trace(bk, axis1=-2, axis2=-1))
        solvable &= jnp.abs(trace_b - side * b.shape[-1]) < 0.5
    return SylvesterFactors(_no_similarity(a), _no_similarity(a if lyapunov else b),
                            SignIterates(a_inv, b_inv, scale, steps, side), solvable)


# ==============================================================================================
# Solves


def solve(factors: SylvesterFactors, c: jax.Array, *, transpose: bool = False,
          diagonal: bool = False) -> jax.Array:
    """``X`` with ``AX + XB = C``, or ``AᵀX + XBᵀ = C`` with ``transpose``, from the factors.

    ``c`` has shape ``(..., m, n)``, its batch that of the factors or any batch where the factors
    have none. ``diagonal``: the :class:`Similarity` factors are eigendecompositions. On the CPU
    by the similarity factors (``cpu_route.similarity_solve``), elsewhere by the stored sign
    iteration. NaN in the slices that are not ``solvable``.
    """
    x = cpu_route("similarity_solve",
                  functools.partial(_similarity_solve, transpose=transpose, diagonal=diagonal),
                  functools.partial(_sign_solve, transpose=transpose), factors, c)
    return jnp.where(_per_slice(factors.solvable, x), x, jnp.nan)


def _similarity_solve(factors, c, *, transpose, diagonal):
    sa, sb = factors.a, factors.b
    if transpose:  # AᵀX + XBᵀ = C  ⇔  B Xᵀ + Xᵀ A = Cᵀ
        sa, sb, c = sb, sa, c.mT
    y = _triangular_sylvester(sa.t, sb.t, mm(mm(sa.p_inv, c.astype(sa.t.dtype)), sb.p), diagonal)
    x = mm(mm(sa.p, y), sb.p_inv)
    x = x if jnp.iscomplexobj(c) else jnp.real(x)
    return x.mT if transpose else x


def _triangular_sylvester(t, s, f, diagonal):
    """``Y`` with ``T Y + Y S = F`` for upper triangular ``T`` (``m × m``) and ``S`` (``n × n``).

    Diagonal factors divide. Up to ``BLOCKED_MIN_N`` column by column (:func:`_column_sweep`);
    beyond, in ``BLOCK × BLOCK`` blocks (:func:`_blocked_sweep`).
    """
    if diagonal:
        return f / _aligned(_diagonal(t)[..., :, None] + _diagonal(s)[..., None, :], f)
    if max(f.shape[-2:]) < BLOCKED_MIN_N:
        return _column_sweep(t, s, f)
    return _blocked_sweep(t, s, f)


def _column_sweep(t, s, f):
    """Column ``j`` of ``Y`` solves ``(T + s_jj I) y_j = f_j - Σ_{k<j} s_kj y_k``, in turn; the
    columns not yet solved are zero, so that sum is ``Y s_j``."""
    batch, (m, n) = f.shape[:-2], f.shape[-2:]
    # Tᵀ, lower triangular, solved transposed: LAPACK's trsm reads it column-major, which is
    # Tᵀ's layout as XLA stores it (row-major), so no copy of the matrix per column.
    t_t = jnp.broadcast_to(t.mT, (*batch, m, m))
    s = jnp.broadcast_to(s, (*batch, n, n))
    eye = eye_like(t_t)
    last = f.ndim - 1

    def column(y, j):
        s_j = lax.dynamic_index_in_dim(s, j, axis=last)  # (..., n, 1)
        rhs = lax.dynamic_index_in_dim(f, j, axis=last) - jnp.matmul(y, s_j, precision=HIGHEST)
        shifted = t_t + lax.dynamic_index_in_dim(s_j, j, axis=last - 1) * eye
        y_j = lax.linalg.triangular_solve(shifted, rhs, left_side=True, lower=True,
                                          transpose_a=True)
        return lax.dynamic_update_index_in_dim(y, y_j, j, axis=last), None

    return lax.scan(column, jnp.zeros_like(f), jnp.arange(n))[0]


def _blocked_sweep(t, s, f):
    """:func:`_column_sweep` on ``b × b`` blocks (``b = BLOCK``), the rest in products.

    Block column ``J`` in turn: ``R_J = F_J - Y S_{:J}`` (the columns not yet solved are zero),
    then block rows ``I`` from the last: ``T_II Y_IJ + Y_IJ S_JJ = R_IJ - T_{I:} Y_J``, a column
    sweep whose shifted matrices are ``b × b``. The column sweep forms and reads an ``m × m``
    matrix per column; here those stay in cache and the rest of the work, the same
    ``O(mn(m + n))``, is matrix products. ``T`` and ``S`` are padded to multiples of ``b`` with
    a diagonal ``d > max|t_ii| + max|s_jj|``, ``F`` with zeros: every padded block of ``Y``
    solves an equation with zero right-hand side and nonsingular shifts, so it is zero.
    """
    b = BLOCK
    batch, (m, n) = f.shape[:-2], f.shape[-2:]
    size_m, size_n = -(-m // b) * b, -(-n // b) * b
    t, s = jnp.broadcast_to(t, (*batch, m, m)), jnp.broadcast_to(s, (*batch, n, n))
    d = 1 + jnp.max(jnp.abs(_diagonal(t)), axis=-1) + jnp.max(jnp.abs(_diagonal(s)), axis=-1)

    def pad(x, size):
        k = x.shape[-1]
        padded = jnp.zeros((*x.shape[:-2], size, size), x.dtype).at[..., :k, :k].set(x)
        i = jnp.arange(k, size)
        return padded.at[..., i, i].set(d[..., None].astype(x.dtype))

    t, s = pad(t, size_m), pad(s, size_n)
    f = jnp.zeros((*batch, size_m, size_n), f.dtype).at[..., :m, :n].set(f)
    rows, cols = f.ndim - 2, f.ndim - 1

    def block_column(y, jb):
        s_j = lax.dynamic_slice_in_dim(s, jb, b, axis=cols)
        r = lax.dynamic_slice_in_dim(f, jb, b, axis=cols) - mm(y, s_j)
        s_jj = lax.dynamic_slice_in_dim(s_j, jb, b, axis=rows)

        def block_row(y_j, ib):
            t_i = lax.dynamic_slice_in_dim(t, ib, b, axis=rows)
            rhs = lax.dynamic_slice_in_dim(r, ib, b, axis=rows) - mm(t_i, y_j)
            y_ij = _column_sweep(lax.dynamic_slice_in_dim(t_i, ib, b, axis=cols), s_jj, rhs)
            return lax.dynamic_update_slice_in_dim(y_j, y_ij, ib, axis=rows), None

        y_j = lax.scan(block_row, jnp.zeros_like(r), jnp.arange(size_m - b, -1, -b))[0]
        return lax.dynamic_update_slice_in_dim(y, y_j, jb, axis=cols), None

    return lax.scan(block_column, jnp.zeros_like(f), jnp.arange(0, size_n, b))[0][..., :m, :n]


def _sign_solve(factors, c, *, transpose):
    it = factors.sign

    def step(k, ck):
        ai = it.a_inv[k]
        bi = mH(ai) if it.b_inv is None else it.b_inv[k]
        if transpose:
            ai, bi = ai.mT, bi.mT
        mu = _per_slice(it.scale[k], c).astype(c.dtype)
        return (mu * ck + mm(mm(ai, ck), bi) / mu) / 2

    side = _per_slice(it.side, c).astype(c.dtype)
    return side * lax.fori_loop(0, it.steps, step, c) / 2
