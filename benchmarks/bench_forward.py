"""Forward mode: ``jax.jvp`` through every rule against ``jax.jvp`` of JAX's own function."""
from __future__ import annotations

import jax

from . import _cases
from ._harness import Table, compile_program, fmt_ratio, fmt_time, interleaved

# The tiny-matrix batches, where the closed forms (adjugate inverse, unrolled products) must win.
TINY = {("inv", "4096×4×4"), ("cayley", "4096×4×4"), ("attention skew", "(16384, 3, 3)"),
        ("attention arbitrary", "(16384, 3, 3)")}


# jax 0.10.2's CPU runtime deadlocks (all threads waiting, no progress) after tens to hundreds of
# calls of a jitted `jax.jvp` of a batched QR, JAX's own `jnp.linalg.qr` as much as ours
# (2026-11-23; not seen the day before on the same versions).
HANGS = {("qr", "1024×8×8"), ("lq", "1024×8×8")}


def tables(quick: bool) -> list[Table]:
    budget = 0.3 if quick else 1.5
    table = Table("Forward mode: `jax.jvp` through each rule (float32)",
                  ["rule", "shape", "our jvp", "JAX jvp", "ratio ours/JAX", "goal",
                   "compile ours / JAX"])
    for case in _cases.gradient_cases(quick):
        if (case.family, case.label) in HANGS:
            table.add([case.family, case.label, "—", "—", "not timed", "≤ 1.0", "—"])
            continue
        ours, theirs = case.jvp(case.ours), case.jvp(case.theirs)
        args = case.jvp_args()
        (c_ours, p_ours), (c_jax, p_jax) = compile_program(ours, *args), compile_program(theirs,
                                                                                         *args)
        (t_ours, t_jax), ratio = interleaved([jax.jit(ours), jax.jit(theirs)], args,
                                             budget=budget)
        goal = "≤ 0.5" if (case.family, case.label) in TINY else "≤ 1.0"
        table.add([case.family, case.label, fmt_time(t_ours), fmt_time(t_jax),
                           fmt_ratio(ratio, p_ours == p_jax), goal,
                           f"{c_ours:.2f} s / {c_jax:.2f} s"])
    table.notes += [
        "`jax.jvp(f, args, tangents)` under `jax.jit`, outputs and tangents together, with a "
        "random tangent for every argument; the JAX column runs `jax.jvp` of the function the "
        "gradient tables compare with (`jnp.linalg.inv`, `jnp.linalg.qr`, the plain-`jnp` layers "
        "and products). Our rules evaluate their explicit pushforward (`rules.internal.Rule`).",
        "Goal: the `goal` column. A ratio marked (=) compares two identical XLA programs: the "
        "ratio is 1 and its spread is the measurement's noise. QR and LQ spend most of their time "
        "in the same LAPACK factorisation as JAX's, so their rows differ from 1 by the "
        "pushforward's share only.",
        "Rows marked \"not timed\": JAX's CPU runtime deadlocks when a jitted `jax.jvp` of a "
        "batched QR is called repeatedly, JAX's own `jnp.linalg.qr` as well as ours; the "
        "transformation tests check these rows' values.",
    ]
    return [table]
