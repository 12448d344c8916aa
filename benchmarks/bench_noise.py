"""The noise floor of this run: JAX's own programs timed against themselves (A/A).

Each row compiles one of JAX's functions twice (two executables of the same program) and times
the pair with the harness every other table uses, several times over. A ratio ours/JAX inside
this spread measures nothing but the machine; it is what "at parity" means in RESULTS.md.
The programs are those of rows that have read just above 1 in past runs: fused loops over a
batch of 3 × 3 matrices, small LAPACK calls, syevd, and a large inverse.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from ._cases import DTYPE
from ._cases import rand as _rand
from ._harness import Table, fmt_time, interleaved

REPEATS = 3  # each pair is measured this many times, as a row re-measured in a fresh run


def _well_conditioned(shape, seed):
    n = shape[-1]
    return _rand(shape, seed) / math.sqrt(n) + jnp.eye(n, dtype=DTYPE)


def _spd(shape, seed):
    g = _rand(shape, seed)
    return g @ jnp.swapaxes(g, -1, -2) / shape[-1] + jnp.eye(shape[-1], dtype=DTYPE)


def _jvp(fn):
    return lambda a, t: jax.jvp(fn, (a,), (t,))[1]


def _grad(fn, w):
    return jax.grad(lambda a: sum(jnp.sum(jnp.sin(y) * w) for y in jax.tree.leaves(fn(a))))


def _executable(fn):
    """A jitted function of its own (its own compiled program) computing ``fn``."""
    return jax.jit(lambda *a: fn(*a))


def _programs(quick: bool):
    det_shape, n_small, n_eigh, n_inv = ((1024, 3, 3), 32, 64, 256) if quick else (
        (4096, 3, 3), 64, 256, 1024)
    sym = _rand((n_eigh, n_eigh), 3)
    return [
        ("`jnp.linalg.det` jvp", "×".join(map(str, det_shape)), _jvp(jnp.linalg.det),
         (_well_conditioned(det_shape, 0), _rand(det_shape, 1))),
        ("`jnp.linalg.cholesky` jvp", f"{n_small}×{n_small}", _jvp(jnp.linalg.cholesky),
         (_spd((n_small, n_small), 2), _rand((n_small, n_small), 1))),
        ("`jnp.linalg.eigh` gradient", f"{n_eigh}×{n_eigh}",
         _grad(jnp.linalg.eigh, _rand((n_eigh,), 4)[None, :]), ((sym + sym.T) / 2,)),
        ("`jnp.linalg.inv` gradient", f"{n_inv}×{n_inv}",
         _grad(jnp.linalg.inv, _rand((n_inv, n_inv), 5)), (_well_conditioned((n_inv, n_inv), 6),)),
    ]


def tables(quick: bool) -> list[Table]:
    budget = 0.1 if quick else 1.0  # as the decompositions' rows
    table = Table("Noise floor: JAX's programs against themselves (A/A, float32)",
                  ["program", "shape", "time", "ratios A/A", "spread"])
    spread = []
    for name, label, fn, args in _programs(quick):
        # Two jit wrappers: two executables of one program, as ours and JAX's are two.
        pair = [_executable(fn), _executable(fn)]
        runs = [interleaved(pair, args, budget=budget) for _ in range(REPEATS)]
        ratios = [ratio for _, ratio in runs]
        spread += ratios
        table.add([name, label, fmt_time(runs[0][0][0]), ", ".join(f"{r:.2f}" for r in ratios),
                   f"{min(ratios):.2f}–{max(ratios):.2f}"])
    table.notes += [
        f"Each program is compiled twice and the pair timed {REPEATS} times with the harness of "
        "every other table (alternating, median of per-round ratios). Identical work; any "
        f"distance from 1.00 is the machine's. Over all pairs: {min(spread):.2f}–"
        f"{max(spread):.2f}. A ratio ours/JAX inside that band is parity, not a result."]
    return [table]
