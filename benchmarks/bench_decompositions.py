"""Benchmarks of solve, det, slogdet, cholesky, cho_solve, eigh, svd and expm against JAX.

For each rule and size: the gradient of a scalar loss through ours and through JAX's own op
(``jax.grad`` of the same function), forward mode (``jax.jvp``) through both, and our pullback
alone against our forward alone. Sizes: a batch of 4096 3×3 matrices (the closed-form routes of
``rules/_kernels/small.py`` where a rule has one), 64×64 and 256×256.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

import rules
from rules._linalg import cholesky, dense, matfun, spectral
from rules.internal import routes

from ._harness import Table, fmt_time, interleaved

DTYPE = jnp.float32


def _rand(shape, seed):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), DTYPE)


def _eye(shape):
    return jnp.broadcast_to(jnp.eye(shape[-1], dtype=DTYPE), shape)


def _assert_close(got, want, what):
    # A benchmark of a wrong derivative is worthless: check agreement first (float32 tolerance).
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        err = float(jnp.max(jnp.abs(g - w)) / jnp.maximum(jnp.max(jnp.abs(w)), 1e-30))
        if not err < 2e-3:
            raise AssertionError(f"{what}: ours and JAX's derivatives differ (relative {err:.2g}).")


def _weights(fn, args, seed):
    out = jax.eval_shape(fn, *args)
    return [_rand(y.shape, seed + i) for i, y in enumerate(jax.tree_util.tree_leaves(out))]


def _loss(fn, weights, invariant):
    """``Σ_k <w_k, g_k(f(args))>``: every output of ``fn``, through ``invariant`` if given."""
    def loss(*args):
        out = fn(*args) if invariant is None else invariant(fn(*args))
        return sum(jnp.sum(w * y) for w, y in zip(weights, jax.tree_util.tree_leaves(out)))
    return loss


def _case(rule, static, ours, theirs, args, argnums, invariant, budget):
    """One row's numbers: forward, gradients, jvps, pullback alone."""
    weights = _weights(ours if invariant is None else lambda *a: invariant(ours(*a)), args, 10)
    grad_ours = jax.jit(jax.grad(_loss(ours, weights, invariant), argnums))
    grad_jax = jax.jit(jax.grad(_loss(theirs, weights, invariant), argnums))
    _assert_close(grad_ours(*args), grad_jax(*args), f"{rule.name} gradient")
    tangents = [_rand(args[i].shape, 20 + i) for i in argnums]

    def jvp(fn):
        def f(*args):
            def of_diff(*diff):
                full = list(args)
                for i, x in zip(argnums, diff):
                    full[i] = x
                return fn(*full)
            return jax.jvp(of_diff, tuple(args[i] for i in argnums), tuple(tangents))[1]
        return jax.jit(f)

    jvp_ours, jvp_jax = jvp(ours), jvp(theirs)
    if invariant is None:
        _assert_close(jvp_ours(*args), jvp_jax(*args), f"{rule.name} jvp")
    t_grad = interleaved([grad_ours, grad_jax], args, budget=budget)
    t_jvp = interleaved([jvp_ours, jvp_jax], args, budget=budget)
    forward = jax.jit(lambda *a: rule.forward(*a, **static))
    out, residuals = forward(*args)
    cotangent = jax.tree_util.tree_map(lambda y: _rand(y.shape, 30), out)
    pullback = jax.jit(lambda r, c: rule.pullback(r, c, **static))
    (t_fwd, t_pb), _ = interleaved([forward, lambda *a: pullback(residuals, cotangent)], args,
                                   budget=budget)
    return t_fwd, t_grad, t_jvp, t_pb


def _row(label, route, times):
    t_fwd, ((g_ours, g_jax), g_ratio), ((j_ours, j_jax), j_ratio), t_pb = times
    return [label, route, fmt_time(t_fwd), fmt_time(g_ours), fmt_time(g_jax), f"{g_ratio:.2f}",
            fmt_time(j_ours), fmt_time(j_jax), f"{j_ratio:.2f}", f"{t_pb / t_fwd:.2f}"]


COLUMNS = ["shape", "route", "forward (ours)", "grad ours", "grad JAX", "ratio", "jvp ours",
           "jvp JAX", "ratio", "pullback/forward"]


def _sizes(quick):
    return [(1024, 3, 3), (32, 32)] if quick else [(4096, 3, 3), (64, 64), (256, 256)]


def _label(shape):
    return "×".join(map(str, shape))


def _small_route(shape, closed="closed form (small.py)", other="LU"):
    return closed if shape[-1] <= routes.CLOSED_FORM_MAX_N else other


def _eigh_invariant(out):
    w, v = out
    return w, (v * jnp.cos(w)[..., None, :]) @ jnp.swapaxes(v, -1, -2)


def _svd_invariant(out):
    u, s, vh = out
    return s, (u * jnp.sin(s)[..., None, :]) @ vh


def tables(quick: bool) -> list[Table]:
    budget = 0.1 if quick else 1.0  # seconds per function and pair
    sizes = _sizes(quick)
    tables_ = []

    def table(title, rows, notes):
        t = Table(title, COLUMNS, rows=rows, notes=notes)
        tables_.append(t)

    # solve / det / slogdet
    rows = {"solve": [], "det": [], "slogdet": []}
    for shape in sizes:
        n = shape[-1]
        a = _rand(shape, 0) / math.sqrt(n) + _eye(shape)   # det near 1: no overflow at n = 256
        b = _rand((*shape[:-1], 4), 1)
        route = _small_route(shape, other="LU of [Aᵀ, I]" if n < routes.LU_WITH_IDENTITY_MAX_N
                             else "LU of Aᵀ, L⁻¹P by a solve")
        lu_route = "LU of [A, B]" if n < routes.LU_WITH_RHS_MAX_N else "LU of A"
        rows["solve"].append(_row(_label(shape) + " (b: k=4)",
                                  _small_route(shape, other=lu_route), _case(
            dense._solve, {}, rules.solve, jnp.linalg.solve, (a, b), (0, 1), None, budget)))
        rows["det"].append(_row(_label(shape), route, _case(
            dense._det, {}, rules.det, jnp.linalg.det, (a,), (0,), None, budget)))
        rows["slogdet"].append(_row(_label(shape), route, _case(
            dense._slogdet, {}, lambda a: tuple(rules.slogdet(a)),
            lambda a: tuple(jnp.linalg.slogdet(a)), (a,), (0,), None, budget)))
    table("`rules.solve` (float32)", rows["solve"],
          ["Gradient of `Σ W ⊙ solve(A, B)` in A and B; jvp in both. JAX: `jnp.linalg.solve` "
           "(LU + custom_linear_solve). Ours: the closed-form inverse for n ≤ 4, else for n < "
           f"{routes.LU_WITH_RHS_MAX_N} the LU of [A | B] (getrf leaves L⁻¹PB beside the factors: "
           "one triangular solve left), from there the LU of A; factors (and the row "
           "permutation, where formed) reused by both derivatives."])
    table("`rules.det` (float32)", rows["det"],
          ["JAX: closed form for n = 2, 3 differentiated by autodiff; LU + a second LU in its "
           "cofactor JVP for n ≥ 4. Ours: the cofactor matrix is the residual, from the LU of "
           "[Aᵀ | I] (getrf leaves L⁻¹P beside the factors: no permutation to undo), from n = "
           f"{routes.LU_WITH_IDENTITY_MAX_N} from the LU of Aᵀ and a unit-lower solve with the "
           "permutation matrix (on the CPU; `rules/_kernels/routes.py`)."])
    table("`rules.slogdet` (float32)", rows["slogdet"],
          ["Loss uses both outputs (the sign's cotangent is zero for real input)."])

    # cholesky / cho_solve
    chol_rows, cho_rows = [], []
    for shape in sizes:
        n = shape[-1]
        g = _rand(shape, 2)
        a = g @ jnp.swapaxes(g, -1, -2) / n + _eye(shape)
        l = jnp.linalg.cholesky(a)
        b = _rand((*shape[:-1], 4), 3)
        chol_route = _small_route(
            shape, "closed form, closed-form L⁻¹ (small.py)",
            "LAPACK potrf, two triangular solves" + (
                ", blocked triangular products" if n >= routes.BLOCKED_TRIANGULAR_MIN_N else ""))
        chol_rows.append(_row(_label(shape), chol_route, _case(
            cholesky._cholesky, {"symmetrize_input": True}, rules.cholesky,
            jnp.linalg.cholesky, (a,), (0,), None, budget)))
        cho_route = _small_route(shape, "products with the closed-form L⁻¹ (small.py)",
                                 "two triangular solves")
        cho_rows.append(_row(_label(shape) + " (b: k=4)", cho_route, _case(
            cholesky._cho_solve, {}, lambda l, b: rules.cho_solve((l, True), b),
            lambda l, b: jax.scipy.linalg.cho_solve((jnp.tril(l), True), b), (l, b), (0, 1), None,
            budget)))
    table("`rules.cholesky` (float32)", chol_rows, ["Gradient of `Σ W ⊙ cholesky(A)`."])
    table("`rules.cho_solve` (float32)", cho_rows,
          ["JAX's column is `jax.scipy.linalg.cho_solve` on `tril(L)` (it reads one triangle "
           "but would differentiate both)."])

    # eigh / svd
    eigh_rows, svd_rows = [], []
    for shape in sizes:
        a = _rand(shape, 4)
        h = (a + jnp.swapaxes(a, -1, -2)) / 2
        jacobi = shape[-1] <= routes.JACOBI_MAX_N
        eigh_rows.append(_row(_label(shape), "Jacobi (small.py)" if jacobi else "LAPACK syevd",
                              _case(
            spectral._eigh, {"lower": True, "symmetrize_input": True, "degeneracy_tol": None},
            lambda a: tuple(rules.eigh(a)), lambda a: tuple(jnp.linalg.eigh(a)), (h,), (0,),
            _eigh_invariant, budget)))
        svd_rows.append(_row(_label(shape), "one-sided Jacobi (small.py)" if jacobi else
                             "LAPACK gesdd", _case(
            spectral._svd, {"full_matrices": False, "compute_uv": True, "degeneracy_tol": None},
            lambda a: tuple(rules.svd(a)), lambda a: tuple(jnp.linalg.svd(a, full_matrices=False)),
            (a,), (0,), _svd_invariant, budget)))
    table("`rules.eigh` (float32)", eigh_rows,
          ["Loss `Σ w ⊙ λ + Σ W ⊙ V cos(Λ) Vᵀ` (sign invariant). JAX: LAPACK syevd per matrix. "
           "Ours: the same for n > 3; for real n ≤ 3 cyclic Jacobi on whole batch arrays."])
    table("`rules.svd` (thin, float32)", svd_rows,
          ["Loss `Σ w ⊙ s + Σ W ⊙ U sin(S) Vᴴ` (sign invariant). JAX: LAPACK gesdd per matrix. "
           "Ours: the same for n > 3; for real square n ≤ 3 one-sided Jacobi on whole batch "
           "arrays."])

    # expm
    expm_rows = []
    for shape in sizes:
        a = _rand(shape, 5) / math.sqrt(shape[-1])
        route = "Padé 7, " + _small_route(shape, "closed-form denominator inverse",
                                          "denominator as U, L⁻¹P (LU of [q | I])")
        expm_rows.append(_row(_label(shape), route, _case(
            matfun._expm, {}, rules.expm, jax.scipy.linalg.expm, (a,), (0,), None, budget)))
    table("`rules.expm` (float32)", expm_rows,
          ["A = G/√n, G standard normal: ‖A‖₂ ≈ 2, ‖A‖₁ ≈ 0.8√n, so one squaring at 64×64 and "
           "256×256 and none at 3×3. JAX's `jax.scipy.linalg.expm` evaluates every Padé branch and "
           "16 conditional squarings per slice of a batch (vmap of switch and cond); ours one Padé "
           "degree and max-s squarings per batch. Both derivatives are Al-Mohy & Higham's "
           "recurrence on the stored intermediates."])
    return tables_
