"""Benchmarks of rules/_linalg.py: inv, qr, lq against JAX's own autodiff of the same function."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import rules
from rules._linalg import inv_pullback, lq_pullback, qr_pullback

from ._harness import Table, compile_time, fmt_time, median_time

DTYPE = jnp.float32


def _rand(shape, seed):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), DTYPE)


def _lq_with_jax(a):
    q, r = jnp.linalg.qr(jnp.swapaxes(a, -1, -2))
    return jnp.swapaxes(r, -1, -2), jnp.swapaxes(q, -1, -2)


def _weighted_sum(fn, weights):
    """``a ↦ Σ_k <w_k, f(a)_k>``: a scalar loss that uses every output of ``fn``."""
    def loss(a):
        return sum(jnp.sum(w * y) for w, y in zip(weights, jax.tree_util.tree_leaves(fn(a))))
    return loss


def _row(label, ours, theirs, pullback, pullback_args, a, repeats):
    weights = [_rand(y.shape, 1 + i) for i, y in enumerate(jax.tree_util.tree_leaves(
        jax.eval_shape(ours, a)))]
    # Compile times first: once a function has run, compiling it again hits JAX's cache.
    c_ours = compile_time(jax.grad(_weighted_sum(ours, weights)), a)
    c_jax = compile_time(jax.grad(_weighted_sum(theirs, weights)), a)
    forward = jax.jit(ours)
    grad_ours = jax.jit(jax.grad(_weighted_sum(ours, weights)))
    grad_jax = jax.jit(jax.grad(_weighted_sum(theirs, weights)))
    t_fwd = median_time(forward, a, repeats=repeats)
    t_ours = median_time(grad_ours, a, repeats=repeats)
    t_jax = median_time(grad_jax, a, repeats=repeats)
    t_pb = median_time(jax.jit(pullback), *pullback_args(forward(a), weights), repeats=repeats)
    return [label, fmt_time(t_fwd), fmt_time(t_ours), fmt_time(t_jax), f"{t_ours / t_jax:.2f}",
            f"{t_pb / t_fwd:.2f}", f"{c_ours:.2f} s / {c_jax:.2f} s"]


def tables(quick: bool) -> list[Table]:
    repeats = 3 if quick else 15
    columns = ["shape", "forward", "our gradient", "JAX gradient", "ratio ours/JAX",
               "pullback/forward", "compile ours / JAX"]

    inv_shapes = [(16,), (4096, 4, 4)] if quick else [(64,), (256,), (1024,), (4096, 4, 4)]
    inv_table = Table("Matrix inverse `rules.inv` (float32)", columns)
    for shape in inv_shapes:
        shape = (shape[0], shape[0]) if len(shape) == 1 else shape
        n = shape[-1]
        a = _rand(shape, 0) + 2 * np.sqrt(n) * jnp.eye(n, dtype=DTYPE)
        inv_table.rows.append(_row("×".join(map(str, shape)), rules.inv, jnp.linalg.inv,
                                   inv_pullback, lambda b, w: (b, w[0]), a, repeats))
    inv_table.notes.append("Gradient of `Σ W ⊙ inv(A)`; pullback/forward is `-Bᵀ B̄ Bᵀ` alone over "
                           "the forward `jnp.linalg.inv`.")

    qr_shapes = [(64, 16), (1024, 8, 8)] if quick else [(512, 64), (256, 256), (64, 512), (1024, 8, 8)]
    qr_table = Table("QR `rules.qr` (reduced, float32)", columns)
    lq_table = Table("LQ `rules.lq` (float32)", columns)
    for shape in qr_shapes:
        a = _rand(shape, 0)
        label = "×".join(map(str, shape))
        qr_table.rows.append(_row(label, rules.qr, jnp.linalg.qr, qr_pullback,
                                  lambda out, w: (out[0], out[1], w[0], w[1]), a, repeats))
        lq_table.rows.append(_row(label, rules.lq, _lq_with_jax, lq_pullback,
                                  lambda out, w: (out[0], out[1], w[0], w[1]), a, repeats))
    qr_table.notes.append("Gradient of `Σ W₁ ⊙ Q + Σ W₂ ⊙ R`. JAX differentiates QR through its JVP "
                          "rule, transposed.")
    lq_table.notes.append("JAX has no LQ: its column is autodiff of `qr(Aᵀ)` transposed.")
    return [inv_table, qr_table, lq_table]
