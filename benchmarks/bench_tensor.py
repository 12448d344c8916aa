"""Gradients of rules/_tensor and rules/_layers against JAX's autodiff of plain jnp code."""
from __future__ import annotations

import os

import jax
import jax.numpy as jnp

from . import _cases
from ._harness import Table, compile_program, fmt_ratio, fmt_time, interleaved, temp_memory


def _fmt_bytes(n: int | None) -> str:
    if n is None:
        return "n/a"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def check_agreement(case: _cases.Case) -> None:
    """A benchmark of a wrong gradient is worthless: ours and JAX's must agree (in float64)."""
    def f64(tree):
        return jax.tree_util.tree_map(lambda x: x.astype(jnp.float64), tree)

    args = f64(case.grad_args())
    got, want = (jax.jit(case.grad(f))(*args) for f in (case.ours, case.theirs))
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        err = float(jnp.max(jnp.abs(g - w)) / jnp.maximum(jnp.max(jnp.abs(w)), 1e-30))
        if not err < 1e-6:
            raise AssertionError(f"{case.family} {case.label}: ours and JAX's gradients differ "
                                 f"(relative {err:.2g}).")


def _timed(case: _cases.Case, budget: float, memory: bool = False):
    ours, theirs = case.grad(case.ours), case.grad(case.theirs)
    args = case.grad_args()
    (c_ours, p_ours), (c_jax, p_jax) = compile_program(ours, *args), compile_program(theirs, *args)
    forward = jax.jit(case.ours)
    (t_ours, t_jax, t_fwd), ratio = interleaved(
        [jax.jit(ours), jax.jit(theirs), lambda w, *a: forward(*a)], args, budget=budget)
    return dict(ours=fmt_time(t_ours), jax=fmt_time(t_jax), forward=fmt_time(t_fwd),
                ratio=fmt_ratio(ratio, p_ours == p_jax), compile=f"{c_ours:.2f} s / {c_jax:.2f} s",
                memory=memory and (_fmt_bytes(temp_memory(ours, *args)),
                                   _fmt_bytes(temp_memory(theirs, *args))))


SAME = ("A ratio marked (=) compares two identical XLA programs (JAX compiles our rule and the "
        "plain function to the same thing): the ratio is 1 and its spread is the measurement's "
        "noise.")


def _attention_table(quick: bool, budget: float) -> Table:
    table = Table("Volume-preserving attention gradient (float32)",
                  ["weighting", "(batch, T, d)", "our gradient", "JAX gradient", "ratio ours/JAX",
                   "temp memory ours", "temp memory JAX", "compile ours / JAX"])
    for case in _cases.attention_cases(quick):
        check_agreement(case)
        r = _timed(case, budget, memory=True)
        table.add([case.family.split()[1], case.label, r["ours"], r["jax"], r["ratio"],
                           *r["memory"], r["compile"]])
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


def _feedforward_table(quick: bool, budget: float) -> Table:
    table = Table("Volume-preserving feed-forward gradient (float32)",
                  ["(batch, T, d)", "forward", "our gradient", "JAX gradient", "ratio ours/JAX",
                   "compile ours / JAX"])
    for case in _cases.feedforward_cases(quick):
        check_agreement(case)
        r = _timed(case, budget)
        table.add([case.label, r["forward"], r["ours"], r["jax"], r["ratio"],
                           r["compile"]])
    table.notes += [
        "Gradient of `Σ Ȳ ⊙ z` for a block of the paper's network, a lower layer `y = x + "
        "tanh(x Lᵀ + a)` then an upper one `z = y + tanh(y Uᵀ + b)`, with respect to `x`, the "
        "packed strictly triangular `L`, `U` and `a`, `b`; JAX's column scatters the packed "
        "weights into dense matrices with `.at[]`. A block, not one layer: one layer's jvp is a "
        "program of 8 thunks, which XLA:CPU runs sequentially, and JAX's scatter adds 3, enough "
        "for its concurrent executor (`docs/rules.md#small-programs`).",
        "Goal: ratio ≤ 1.0, ≤ 0.5 at (16384, 3, 3). " + SAME,
    ]
    return table


def _products_table(quick: bool, budget: float) -> Table:
    table = Table("Batched tensor products (float32)",
                  ["op", "(batch, m, k, n)", "forward", "our gradient", "JAX gradient",
                   "ratio ours/JAX", "compile ours / JAX"])
    for case in _cases.product_cases(quick):
        check_agreement(case)
        r = _timed(case, budget)
        table.add([case.family, case.label, r["forward"], r["ours"], r["jax"], r["ratio"],
                           r["compile"]])
    table.notes += [
        "Gradient of `Σ C̄ ⊙ op(A, B)` with respect to every operand; JAX's column differentiates "
        "`jnp.matmul`/`jnp.einsum`. A matrix operand of shape (m, k) or (k, n) is shared by the "
        "batch.",
        "Goal: ratio ≤ 1.0 on every row. " + SAME,
        "XLA:CPU runs a product through YNNPACK only when its left operand is contracted over its "
        "last axis, else through Eigen, slice by slice for batches (2-4× slower per flop). JAX's "
        "pullback of `A B` needs `Aᵀ C̄`, which no layout avoids without an explicit transpose "
        "that costs more than it saves (measured); there both sides run the same program.",
    ]
    return table


def tables(quick: bool) -> list[Table]:
    budget = 0.3 if quick else 1.5
    return [_attention_table(quick, budget), _feedforward_table(quick, budget),
            _products_table(quick, budget)]
