r"""Matrix square roots by the scaled Denman–Beavers iteration, chains of them for the inverse
scaling and squaring logarithm, and the Fréchet derivatives of both on the recorded iterates.

The product form of the Denman–Beavers iteration (Higham, *Functions of Matrices*, (6.29)) with
determinant scaling,

.. math::
    N_k = M_k^{-1}, \quad \mu_k = |\det M_k|^{-1/(2n)}, \quad
    M_{k+1} = \tfrac12\big(I + \tfrac12(\mu_k^2 M_k + \mu_k^{-2} N_k)\big), \quad
    X_{k+1} = \tfrac12(\mu_k X_k + \mu_k^{-1} X_k N_k),

from ``M₀ = X₀ = B``, gives ``X_k → B^{1/2}`` and ``M_k → I`` quadratically (``X_k² = B M_k`` at
every step) for every ``B`` without eigenvalues on the closed negative real axis. It needs one
inverse and one product per step, and runs the same on every platform. :func:`iterate` runs it
for one square root (:func:`sqrtm`) or a chain of them (:func:`logm`: square roots until the
Padé approximant fits, :func:`pade_fits`), each slice of a batch to its own convergence,
recording ``N_k`` and ``μ_k``; :func:`frechet` differentiates the recorded steps.
:func:`log_pade` is the partial fraction form of the ``[m/m]`` Padé approximant of
``log(I + Y)``, :func:`log_pade_frechet` its derivative.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._core.arrays import eye_like, norm1
from .._core.sharding import match_varying
from .lu import inverse, lu_with_lower_inverse, slogdet_from_lu, upper_solve
from .products import mm
from .small import closed_form_applies

__all__ = ["LOG_PADE", "MAX_STEPS", "LogmIntermediates", "RootSteps", "frechet", "iterate",
           "log_abs_det", "log_pade", "log_pade_frechet", "logm", "logm_frechet",
           "pade_fits", "sqrtm"]

# Steps of the iteration one call may take, all square roots of a chain together. Determinant
# scaling brings a matrix of condition 1e16 to rounding level in about ten steps; a chain of
# ``logm`` square roots takes a few more per root; only eigenvalues within a small angle of the
# negative real axis need more. A slice that has not converged by then gives NaN.
MAX_STEPS = {"sqrtm": 32, "logm": 64}

# Scaling is switched off near convergence (Higham, Functions of Matrices, §6.7): there ``μ ≈ 1``
# and the determinant only adds rounding.
_SCALING_OFF = 1e-2

# [m/m] Padé approximants of log(1 + y) in partial fractions, with θ_m the largest ‖Y‖ for which
# the backward error bound of r_m (Al-Mohy & Higham 2012, §2) is below the unit roundoff: the
# degree balances the cost of one more square root (a few iteration steps) against that of one
# more term (one inverse).
LOG_PADE = {jnp.dtype(jnp.float64): (12, 0.586), jnp.dtype(jnp.float32): (6, 0.646)}


def _real_dtype(x: jax.Array) -> jnp.dtype:
    return jnp.finfo(x.dtype).dtype


# ==============================================================================================
# The iteration


class RootSteps(NamedTuple):
    """What :func:`frechet` reads of :func:`iterate`: the start, and the first ``taken`` entries
    of the step buffers.

    ``b`` is the matrix whose square root was taken first, ``start_done`` the slices that took
    none and ``finished`` those that converged; ``inv`` holds ``N_k`` (``(S, ..., n, n)``),
    ``mu`` holds ``μ_k`` (real, ``(S, ...)``), ``mode`` what step ``k`` ended for each slice:
    0 no square root, 1 a square root that the next continues from, 2 the last square root;
    ``first`` whether it was the first step of a square root.
    """

    b: jax.Array
    start_done: jax.Array
    finished: jax.Array
    inv: jax.Array
    mu: jax.Array
    mode: jax.Array
    first: jax.Array
    taken: jax.Array


def _inverse_and_log_abs_det(m: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``M⁻¹`` and ``log|det M|``: Gauss–Jordan elimination for tiny matrices, else one LU.

    Both pivot by rows. ``M₀ = B`` is as ill-conditioned as ``B``, and there the error of the
    adjugate formula's inverse (:mod:`.small`), which is no backward error, would be the leading
    error of the square root: it grows with ``κ(B)`` where a pivoted elimination's stays a
    backward error of ``B``.
    """
    if closed_form_applies(m):
        return _gauss_jordan(m)
    lu, pivots, lower_inv = lu_with_lower_inverse(m)
    return upper_solve(lu, lower_inv), slogdet_from_lu(lu, pivots)[1]


def _gauss_jordan(m: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Gauss–Jordan elimination with partial pivoting on ``[M | I]``, unrolled for ``n ≤ 4``.

    Elementwise on the batch's entries (one fused loop, as the closed forms of :mod:`.small`);
    the pivot rows are chosen and swapped by selects. Its inverse has the accuracy of one from
    an LU factorisation with partial pivoting (Higham, *Accuracy and Stability of Numerical
    Algorithms*, §14.4).
    """
    n = m.shape[-1]
    one, zero = jnp.ones(m.shape[:-2], m.dtype), jnp.zeros(m.shape[:-2], m.dtype)
    rows = [[m[..., i, j] for j in range(n)] + [one if j == i else zero for j in range(n)]
            for i in range(n)]
    log_det = jnp.zeros(m.shape[:-2], _real_dtype(m))
    for k in range(n):
        pivot = jnp.full(m.shape[:-2], k)
        largest = jnp.abs(rows[k][k])
        for r in range(k + 1, n):
            larger = jnp.abs(rows[r][k]) > largest
            pivot = jnp.where(larger, r, pivot)
            largest = jnp.where(larger, jnp.abs(rows[r][k]), largest)
        top = rows[k]
        for r in range(k + 1, n):
            top = [jnp.where(pivot == r, x, t) for x, t in zip(rows[r], top)]
            rows[r] = [jnp.where(pivot == r, t, x) for x, t in zip(rows[r], rows[k])]
        log_det = log_det + jnp.log(jnp.abs(top[k]))
        rows[k] = [x / top[k] for x in top]
        for r in range(n):
            if r != k:
                factor = rows[r][k]
                rows[r] = [x - factor * y for x, y in zip(rows[r], rows[k])]
    inv = jnp.stack([jnp.stack(row[n:], axis=-1) for row in rows], axis=-2)
    return inv, log_det


def log_abs_det(a: jax.Array) -> jax.Array:
    """``log|det A|`` per slice (real), from the pivots: no overflow of ``det A`` itself."""
    if closed_form_applies(a):
        return _gauss_jordan(a)[1]
    lu, pivots, _ = lax.linalg.lu(a)
    return slogdet_from_lu(lu, pivots)[1]


def pade_fits(y: jax.Array) -> jax.Array:
    """Whether ``r_m(Y)`` is accurate to the unit roundoff, per slice: ``α_p(Y) ≤ θ_m`` for some
    ``2 ≤ p ≤ p_max``, ``α_p(Y) = max(‖Y^p‖₁^{1/p}, ‖Y^{p+1}‖₁^{1/(p+1)})``.

    The error of ``r_m`` is a power series from ``Y^{2m+1}`` on, bounded by the same series in
    ``α_p(Y)`` for ``p(p − 1) ≤ 2m + 1`` (Al-Mohy & Higham 2012, Thm. 4.2): ``p_max = 5`` for
    ``m = 12``, 4 for ``m = 6``. ``α_p(Y) ≤ ‖Y‖``, equal for a normal ``Y``; for one far from
    normal ``α_p`` is much smaller and the logarithm takes fewer square roots, each of which
    costs accuracy there. The powers up to ``Y^{p_max + 1}``: five products, four in single
    precision.
    """
    degree, theta = LOG_PADE[_real_dtype(y)]
    p_max = max(p for p in range(2, 6) if p * (p - 1) <= 2 * degree + 1)
    powers = {1: y, 2: mm(y, y)}
    for k in range(3, p_max + 2):
        powers[k] = mm(powers[k // 2], powers[k - k // 2])
    d = {k: norm1(powers[k]) ** (1 / k) for k in range(2, p_max + 2)}
    alpha = functools.reduce(jnp.minimum,
                             [jnp.maximum(d[p], d[p + 1]) for p in range(2, p_max + 1)])
    return alpha <= theta


def _x_inv(x: jax.Array, inv: jax.Array, first: jax.Array) -> jax.Array:
    """``X_k N_k``; ``I`` at the first step of a square root, where ``X₀ = M₀``. Formed as a
    product there, its error ``u κ(M₀)`` relative to ``I`` is no backward error of anything: with
    the scaling ``μ₀`` it would be the leading error of the square root."""
    return jnp.where(first[..., None, None], eye_like(x), mm(x, inv))


def iterate(b: jax.Array, done: jax.Array, *, chain: bool, max_steps: int,
            record: bool) -> tuple[jax.Array, jax.Array, jax.Array, RootSteps | None]:
    """Square roots of ``b`` by the scaled product Denman–Beavers iteration, slice by slice.

    Without ``chain``, one square root per slice. With it, a chain: after each square root ``R``
    the slice stops if :func:`pade_fits` ``(R − I)`` and otherwise starts the square root of
    ``R``; slices already ``done`` take none. A square root ends with the step from ``M_k`` with
    ``‖M_k − I‖₁ ≤ √u``, whose ``M_{k+1} − I = (M_k − I)² N_k / 4`` is at rounding level. The
    batch steps until every slice is done or ``max_steps`` steps are taken. A slice that is done
    keeps stepping at its fixed point ``M = I`` (``N = I``, ``μ = 1``, ``X`` unchanged), so that no
    step needs a mask; a slice done at the start begins there, with ``M₀ = I``.

    With ``record`` the loop is a scan of ``max_steps`` steps, each a conditional that does
    nothing once the batch is done (:func:`_steps`), so that JAX can differentiate the recorded
    steps in reverse: second derivatives (:func:`frechet` in the residuals) go through them.
    Without it, a ``lax.while_loop``, which stops at the batch's last step with no test per step
    left; it serves the value alone, which JAX never differentiates (the rules' primal).

    Returns:
      ``(R, s, done, steps)``: the last square root of each slice, the number of square roots
      taken, whether the slice finished, and with ``record`` the :class:`RootSteps`.
    """
    n = b.shape[-1]
    real = _real_dtype(b)
    tol = math.sqrt(jnp.finfo(b.dtype).eps / 2)
    eye = eye_like(b)
    batch = b.shape[:-2]

    def step(carry):
        k, m, x, first, s, done = carry
        delta = norm1(m - eye)
        inv, log_det = _inverse_and_log_abs_det(m)
        mu = jnp.where(delta < _SCALING_OFF, jnp.ones((), real), jnp.exp(log_det / (-2 * n)))
        mu_c = mu.astype(b.dtype)[..., None, None]
        m_next = (eye + (mu_c * mu_c * m + inv / (mu_c * mu_c)) / 2) / 2
        x_next = (mu_c * x + _x_inv(x, inv, first) / mu_c) / 2
        ends = ~done & (delta <= tol)
        if not chain:
            last = ends
        else:  # the test's products only at a step where some square root ends
            last = ends & lax.cond(jnp.any(ends), lambda x, ends: pade_fits(x - eye),
                                   lambda x, ends: ends, x_next, ends)
        mode = jnp.where(ends, jnp.where(last, 2, 1), 0).astype(jnp.int8)
        restart = ends & ~last
        m = jnp.where(restart[..., None, None], x_next, m_next)
        record_k = (inv, mu, mode, first) if record else ()
        return (k + 1, m, x_next, restart, s + ends.astype(s.dtype), done | last), record_k

    # A step not taken records the fixed point's step (N = I, μ = 1, no square root ends), which
    # :func:`frechet` does not read either. Under shard_map every carry and record varies over
    # the axes the input varies over.
    skipped = match_varying(eye, jnp.ones(batch, real), jnp.zeros(batch, jnp.int8),
                            jnp.zeros(batch, bool), b)[:-1] if record else ()
    state = match_varying(jnp.zeros((), jnp.int32), jnp.where(done[..., None, None], eye, b), b,
                          ~done, jnp.zeros(batch, jnp.int32), done)
    if not record:
        count, _, x, _, s, finished = lax.while_loop(
            lambda carry: (carry[0] < max_steps) & ~jnp.all(carry[5]),
            lambda carry: step(carry)[0], state)
        return x, s, finished, None
    (count, _, x, _, s, finished), buffers = _steps(
        lambda carry, _: lax.cond(~jnp.all(carry[5]), step, lambda c: (c, skipped), carry),
        state, jnp.arange(max_steps), lambda carry, start: ~jnp.all(carry[5]), skipped)
    inv, mu, mode, first = buffers
    return x, s, finished, RootSteps(b, done, finished, inv, mu, mode, first, count)


def _steps(body: Callable[[Any, Any], tuple[Any, Any]], carry: Any, xs: Any,
           enter: Callable[[Any, int], jax.Array], skipped: Any) -> tuple[Any, Any]:
    """``lax.scan(body, carry, xs)`` in two stretches, the first ``_FIRST_STRETCH`` steps and
    the rest, each entered only if ``enter(carry, start)``; one not entered outputs ``skipped``
    for each of its steps.

    A ``lax.while_loop`` would stop at the last step some slice needs, but JAX cannot
    reverse-differentiate one, and second derivatives go through these loops (reverse over
    reverse). Each step of ``body`` tests in a conditional of its own whether it has work; the
    second stretch spares a batch done early those tests.
    """
    length = jax.tree_util.tree_leaves(xs)[0].shape[0]
    bounds = [0, min(_FIRST_STRETCH, length), length]
    outputs = []
    for start, stop in zip(bounds[:-1], bounds[1:]):
        part = jax.tree_util.tree_map(lambda v: v[start:stop], xs)
        fill = jax.tree_util.tree_map(
            lambda v: jnp.broadcast_to(v, (stop - start, *v.shape)), skipped)
        carry, ys = lax.cond(enter(carry, start), lambda c, p: lax.scan(body, c, p),
                             lambda c, p: (c, fill), carry, part)
        outputs.append(ys)
    return carry, jax.tree_util.tree_map(lambda *ys: jnp.concatenate(ys), *outputs)


_FIRST_STRETCH = 8  # steps: a well-conditioned square root converges within them


# ==============================================================================================
# Fréchet derivative of the recorded steps


def frechet(steps: RootSteps, e: jax.Array, transpose: bool = False) -> jax.Array:
    r"""The derivative of the recorded iteration in the direction ``e``; with ``transpose``,
    that of the same iteration on ``Bᵀ``, ``L(Bᵀ, E)``: the pullback in JAX's pairing.

    From ``Ṁ₀ = Ẋ₀ = E`` (``Ṁ₀ = 0`` where no square root was taken), per step, with ``μ_k``
    held fixed (the limit does not depend on the scaling), five products:

    .. math::
        \dot M_{k+1} = \tfrac14(\mu_k^2\dot M_k - \mu_k^{-2}N_k\dot M_kN_k), \qquad
        \dot X_{k+1} = \tfrac12\big(\mu_k\dot X_k + \mu_k^{-1}(\dot X_k - X_kN_k\dot M_k)N_k\big),

    with ``X_kN_k`` formed again from ``X_k``, which the recurrence carries
    (``X_{k+1} = (μ_k X_k + μ_k^{-1} X_kN_k)/2``; ``I`` at the first step of a square root, where
    ``Ẋ_k = Ṁ_k`` and the term vanishes exactly). A step that ends a square root adds the limit of
    the steps not taken, ``Ẋ_∞ = Ẋ_{k+1} − X_kN_k Ṁ_{k+1}/2`` (the step at ``M = I``, after which
    ``Ṁ = 0``); the next square root starts from ``Ṁ = Ẋ = Ẋ_∞``, and after the last ``Ṁ = 0``.
    For one square root the result is ``L_{√}(B, E)``, the solution of ``X L + L X = E``. A
    slice that did not finish gives NaN.

    The iteration on ``Bᵀ`` has the iterates ``M_kᵀ``, ``N_kᵀ``, ``X_kᵀ`` and the same ``μ_k``
    (they are rational functions of ``B``), and ``L(Bᵀ, ·)`` is the adjoint of ``L(B, ·)`` for a
    function with a real power series: the pullback runs the same recurrence forward, on the
    transposed iterates. The recorded steps are scanned, each past ``taken`` skipped by a
    conditional (:func:`_steps`): JAX differentiates this in the residuals, in reverse too, for
    second derivatives.
    """
    def step(carry, record):
        x, m_dot, x_dot = carry
        inv, mu, mode, first = record
        if transpose:
            inv = inv.mT
        mu = mu.astype(inv.dtype)[..., None, None]
        mode = mode[..., None, None]
        xn = _x_inv(x, inv, first)
        p = mm(m_dot, inv)
        m_next = (mu * mu * m_dot - mm(inv, p) / (mu * mu)) / 4
        x_next = (mu * x_dot + (mm(x_dot, inv) - mm(xn, p)) / mu) / 2

        def ends(m_next, x_next):
            limit = x_next - mm(xn, m_next) / 2
            return jnp.where(mode == 1, limit, jnp.where(mode == 2, 0, m_next)), \
                jnp.where(mode > 0, limit, x_next)

        m_dot, x_dot = lax.cond(jnp.any(mode > 0), ends, lambda m, x: (m, x), m_next, x_next)
        return (mu * x + xn / mu) / 2, m_dot, x_dot

    def body(carry, k_record):
        k, record = k_record
        return lax.cond(k < steps.taken, step, lambda c, r: c, carry, record), ()

    b = steps.b.mT if transpose else steps.b
    m_dot = jnp.where(steps.start_done[..., None, None], jnp.zeros_like(e), e)
    records = (steps.inv, steps.mu, steps.mode, steps.first)
    (_, _, x_dot), _ = _steps(body, match_varying(b, m_dot, e),
                              (jnp.arange(steps.inv.shape[0], dtype=steps.taken.dtype), records),
                              lambda carry, start: start < steps.taken, ())
    return jnp.where(steps.finished[..., None, None], x_dot, jnp.nan)


# ==============================================================================================
# The Padé approximant of log(I + Y)


def _nodes_weights(m: int, dtype: jnp.dtype) -> tuple[jax.Array, jax.Array]:
    """Gauss–Legendre nodes and weights on [0, 1]: ``log(1 + y) = ∫₀¹ y/(1 + ty) dt``."""
    t, w = np.polynomial.legendre.leggauss(m)
    return jnp.asarray((1 + t) / 2, dtype), jnp.asarray(w / 2, dtype)


def log_pade(y: jax.Array) -> tuple[jax.Array, jax.Array]:
    r"""``r_m(Y) = Σ_j α_j (I + β_j Y)⁻¹ Y`` (degree ``m`` of :data:`LOG_PADE`) and the inverses.

    The ``m``-point Gauss–Legendre rule for ``log(1 + y) = ∫₀¹ y/(1 + ty) dt`` is the ``[m/m]``
    Padé approximant (nodes ``β_j``, weights ``α_j``). Returns ``(r_m(Y), Q)`` with
    ``Q[j] = (I + β_j Y)⁻¹``, shape ``(m, ..., n, n)``: the ``m`` inverses as one batch.
    """
    nodes, weights = _nodes_weights(LOG_PADE[_real_dtype(y)][0], y.dtype)
    scale = (...,) + (None,) * y.ndim
    q = inverse(eye_like(y)[None] + nodes[scale] * y[None])
    return mm(jnp.tensordot(weights, q, axes=1), y), q


def log_pade_frechet(q: jax.Array, e: jax.Array, transpose: bool = False) -> jax.Array:
    r"""``L_{r_m}(Y, E) = Σ_j α_j Q_j E Q_j`` (with ``transpose``, ``Σ_j α_j Q_jᵀ E Q_jᵀ``).

    ``d[(I + βY)⁻¹Y] = (I + βY)⁻¹ Ẏ (I − β(I + βY)⁻¹Y) = Q Ẏ Q``: two products a term.
    """
    _, weights = _nodes_weights(q.shape[0], q.dtype)
    if transpose:
        q = q.mT
    return jnp.tensordot(weights, mm(mm(q, e[None]), q), axes=1)


# ==============================================================================================
# The square root and the logarithm


def sqrtm(a: jax.Array, record: bool = True) -> tuple[jax.Array, RootSteps | None]:
    """``A^{1/2}`` of a non-empty ``(..., n, n)`` batch (NaN where the iteration does not
    converge in ``MAX_STEPS["sqrtm"]`` steps), and with ``record`` the steps :func:`frechet`
    differentiates."""
    x, _, finished, steps = iterate(a, jnp.zeros(a.shape[:-2], bool), chain=False,
                                    max_steps=MAX_STEPS["sqrtm"], record=record)
    return jnp.where(finished[..., None, None], x, jnp.nan), steps


class LogmIntermediates(NamedTuple):
    """What :func:`logm_frechet` reads of :func:`logm`: the square roots' steps, the inverses
    ``(I + β_j Y)⁻¹`` of the Padé step, the number of square roots ``s`` and the scale ``c``
    (per slice)."""

    steps: RootSteps
    pade: jax.Array
    s: jax.Array
    c: jax.Array


def logm(a: jax.Array, record: bool = True) -> tuple[jax.Array, LogmIntermediates | None]:
    r"""``log A`` of a non-empty ``(..., n, n)`` batch by inverse scaling and squaring.

    ``A = c B`` with ``c = 2^k`` the power of two nearest ``|det A|^{1/n}`` (exact, and
    ``log A = log B + k log 2 · I``); ``s`` square roots of ``B`` until :func:`pade_fits`
    ``(B^{1/2^s} − I)`` (:func:`iterate`, each slice its own ``s``), then
    ``log A = 2^s r_m(B^{1/2^s} − I) + k log 2 · I`` with the Padé approximant :func:`log_pade`.
    NaN where the square roots do not converge in ``MAX_STEPS["logm"]`` steps.
    """
    n = a.shape[-1]
    eye = eye_like(a)
    # The power of two keeps B exact; ``c`` is piecewise constant in A (no derivative).
    k = jnp.round(log_abs_det(a) / (n * math.log(2)))
    c = jnp.exp2(k).astype(a.dtype)[..., None, None]
    b = a / c
    root, s, finished, steps = iterate(b, pade_fits(b - eye), chain=True,
                                       max_steps=MAX_STEPS["logm"], record=record)
    r, q = log_pade(root - eye)
    out = _exp2(s, a.dtype) * r + (k * math.log(2)).astype(a.dtype)[..., None, None] * eye
    out = jnp.where(finished[..., None, None], out, jnp.nan)
    return out, (LogmIntermediates(steps, q, s, c) if steps is not None else None)


def logm_frechet(res: LogmIntermediates, e: jax.Array, transpose: bool = False) -> jax.Array:
    r"""``L_{log}(A, E)`` (with ``transpose``, ``L_{log}(Aᵀ, E)``, the pullback) from
    :func:`logm`'s intermediates: the chain rule through the scale, the square roots and the
    Padé step, ``L = 2^s L_{r_m}(Y, L_{x^{1/2^s}}(B, E/c))`` (the adjoint in reverse order)."""
    steps, q, s, c = res
    scale = _exp2(s, e.dtype)
    if transpose:
        return frechet(steps, scale * log_pade_frechet(q, e, transpose=True), transpose=True) / c
    return scale * log_pade_frechet(q, frechet(steps, e / c))


def _exp2(s: jax.Array, dtype: jnp.dtype) -> jax.Array:
    """``2^s`` per slice, broadcastable against the slices' matrices."""
    return jnp.exp2(s.astype(jnp.finfo(dtype).dtype)).astype(dtype)[..., None, None]
