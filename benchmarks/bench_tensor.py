"""Benchmarks of rules/_tensor.py and rules/_cayley.py against JAX's autodiff of plain jnp code."""
from __future__ import annotations

import math
import os

import jax
import jax.numpy as jnp
import numpy as np

import rules

from ._harness import Table, fmt_time, median_time, temp_memory

DTYPE = jnp.float32


def _rand(shape, seed):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), DTYPE)


def _mT(x):
    return jnp.swapaxes(x, -1, -2)


def _fmt_bytes(n: int | None) -> str:
    if n is None:
        return "n/a"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _timed_pair(ours, theirs, args, repeats, rounds):
    """Medians of both functions, measured alternately ``rounds`` times; the best of each.

    Other processes share the CPU: alternating (each function goes first every other round) and
    keeping the best round cancels slow phases and order effects.
    """
    best = {ours: math.inf, theirs: math.inf}
    for r in range(rounds):
        for fn in ((ours, theirs) if r % 2 == 0 else (theirs, ours)):
            best[fn] = min(best[fn], median_time(fn, *args, repeats=repeats))
    return best[ours], best[theirs]


def _assert_close(got, want, what):
    # A benchmark of a wrong gradient is worthless: check agreement first (float32 tolerance).
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        err = float(jnp.max(jnp.abs(g - w)) / jnp.maximum(jnp.max(jnp.abs(w)), 1e-30))
        if not err < 1e-3:
            raise AssertionError(f"{what}: ours and JAX's gradients differ (relative {err:.2g}).")


# ==============================================================================================
# Volume-preserving attention


def plain_attention(x, a, weighting):
    """The layer written with plain jnp ops, as a user would (JAX differentiates it)."""
    t, d = x.shape[-2:]
    if weighting == "skew":
        c = x @ ((a - a.T) / 2) @ _mT(x)
    else:
        p = jnp.tril(x @ a @ _mT(x), -1) / math.sqrt(d)
        c = p - _mT(p)
    eye = jnp.broadcast_to(jnp.eye(t, dtype=x.dtype), c.shape)
    return _mT((eye - c) @ jnp.linalg.inv(eye + c)) @ x


def _attention_table(quick: bool) -> Table:
    sizes = [(1024, 3, 3), (32, 16, 8)] if quick else [(16384, 3, 3), (256, 32, 16), (16, 256, 64)]
    repeats, rounds = (3, 1) if quick else (15, 4)
    table = Table("Volume-preserving attention gradient (float32)",
                  ["weighting", "(batch, T, d)", "our gradient", "JAX gradient", "ratio ours/JAX",
                   "temp memory ours", "temp memory JAX"])
    for batch, t, d in sizes:
        x, a, y_bar = _rand((batch, t, d), 0) / 2, _rand((d, d), 1), _rand((batch, t, d), 2)
        for weighting in ("skew", "arbitrary"):
            def loss(layer, weighting=weighting):
                return lambda x, a: jnp.sum(y_bar * layer(x, a, weighting=weighting))

            ours = jax.grad(loss(rules.volume_preserving_attention), argnums=(0, 1))
            theirs = jax.grad(loss(plain_attention), argnums=(0, 1))
            ours_jit, theirs_jit = jax.jit(ours), jax.jit(theirs)
            # Agreement in float64: at (16, 256, 64) I + C is ill-conditioned enough that two
            # correct float32 gradients differ by ~1e-2.
            x64, a64 = x.astype(jnp.float64), a.astype(jnp.float64)
            _assert_close(ours_jit(x64, a64), theirs_jit(x64, a64), f"attention {weighting} {batch, t, d}")
            t_ours, t_jax = _timed_pair(ours_jit, theirs_jit, (x, a), repeats, rounds)
            table.rows.append([weighting, f"({batch}, {t}, {d})", fmt_time(t_ours),
                               fmt_time(t_jax), f"{t_ours / t_jax:.2f}",
                               _fmt_bytes(temp_memory(ours, x, a)),
                               _fmt_bytes(temp_memory(theirs, x, a))])
    table.notes += [
        "Gradient of `Σ Ȳ ⊙ attention(x, A)` with respect to `x` and `A` (forward included). "
        "JAX's column differentiates the layer written with `jnp` ops and `jnp.linalg.inv`.",
        "Goal: ratio ≤ 0.75 at every size and ≤ 0.5 at the rigid-body size (16384, 3, 3), with no "
        "more temporary memory than JAX (XLA's `memory_analysis().temp_size_in_bytes`).",
        f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}: jaxlib's CPU "
        "LAPACK (OpenBLAS) triangular solves slow down 100× or more when its threads compete for "
        "a busy CPU; both columns use them (JAX's twice as many), so set it to 1 on shared "
        "machines.",
    ]
    return table


# ==============================================================================================
# Tensor products

# name: (rule, plain-jnp reference, operand shapes from (batch, m, k, n))
_PRODUCTS = {
    "tensor_tensor_mul": (rules.tensor_tensor_mul, jnp.matmul,
                          lambda b, m, k, n: ((b, m, k), (b, k, n))),
    "tensor_transpose_tensor_mul": (rules.tensor_transpose_tensor_mul,
                                    lambda a, b: jnp.einsum("bkm,bkn->bmn", a, b),
                                    lambda b, m, k, n: ((b, k, m), (b, k, n))),
    "mat_tensor_mul": (rules.mat_tensor_mul, jnp.matmul, lambda b, m, k, n: ((m, k), (b, k, n))),
    "tensor_mat_mul": (rules.tensor_mat_mul, jnp.matmul, lambda b, m, k, n: ((b, m, k), (k, n))),
    "tensor_transpose_mat_mul": (rules.tensor_transpose_mat_mul,
                                 lambda a, w: jnp.einsum("bkm,kn->bmn", a, w),
                                 lambda b, m, k, n: ((b, k, m), (k, n))),
    "tensor_transpose": (rules.tensor_transpose, _mT, lambda b, m, k, n: ((b, m, k),)),
}


def _tensor_table(quick: bool) -> Table:
    sizes = [(256, 3, 3, 3), (16, 16, 16, 16)] if quick else [
        (16384, 3, 3, 3), (1024, 32, 32, 32), (64, 128, 128, 128)]
    repeats, rounds = (3, 1) if quick else (15, 4)
    table = Table("Batched tensor products (float32)",
                  ["op", "(batch, m, k, n)", "forward", "our gradient", "JAX gradient",
                   "ratio ours/JAX", "pullback/forward"])
    for size in sizes:
        for name, (rule, ref, shapes) in _PRODUCTS.items():
            args = tuple(_rand(s, i) for i, s in enumerate(shapes(*size)))
            argnums = tuple(range(len(args)))
            c = _rand(jax.eval_shape(rule, *args).shape, 9)

            def loss(f):
                return lambda *args: jnp.sum(c * f(*args))

            ours, theirs = (jax.jit(jax.grad(loss(f), argnums)) for f in (rule, ref))
            _assert_close(ours(*args), theirs(*args), f"{name} {size}")
            t_ours, t_jax = _timed_pair(ours, theirs, args, repeats, rounds)
            # The vjp's forward output is unused, so XLA removes it: this times the pullback alone.
            pullback = jax.jit(lambda c, *args: jax.vjp(rule, *args)[1](c))
            t_fwd, t_pb = _timed_pair(jax.jit(rule), lambda *a: pullback(c, *a), args, repeats,
                                      rounds)
            table.rows.append([name, str(size), fmt_time(t_fwd), fmt_time(t_ours), fmt_time(t_jax),
                               f"{t_ours / t_jax:.2f}", f"{t_pb / t_fwd:.2f}"])
    table.notes += [
        "Gradient of `Σ C̄ ⊙ op(A, B)` with respect to every operand; JAX's column differentiates "
        "`jnp.matmul`/`jnp.einsum`. A matrix operand of shape (m, k) or (k, n) is shared by the "
        "batch. Goals: ratio ≤ 1.1, pullback/forward ≤ 2.5 (2 is the flop ratio).",
        "On XLA:CPU the pullback's GEMMs with a transposed operand, and the long batch "
        "contraction of a shared matrix's cotangent, run up to 2× slower per flop than the "
        "forward's plain GEMM; JAX's own pullback is as slow or slower (see the ratio column).",
    ]
    return table


def tables(quick: bool) -> list[Table]:
    return [_attention_table(quick), _tensor_table(quick)]
