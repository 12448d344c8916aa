"""Gradients of rules/_linalg: inv, qr, lq, cayley against JAX's autodiff (and PyTorch's)."""
from __future__ import annotations

import jax

from . import _cases
from ._harness import Table, compile_program, fmt_ratio, fmt_time, interleaved
from ._peers import THREADS, Peers, alternate

COLUMNS = ["shape", "forward", "our gradient", "JAX gradient", "ratio ours/JAX",
           "compile ours / JAX"]
PEER_COLUMNS = ["PyTorch gradient (1 / 2 threads)", "ratio ours/PyTorch"]


def gradient_row(case: _cases.Case, budget: float) -> list[str]:
    """Forward, both gradients (alternated), their ratio and compile times of one case."""
    ours, theirs = case.grad(case.ours), case.grad(case.theirs)
    args = case.grad_args()
    # Compile times first: once a function has run, compiling it again hits JAX's cache.
    (c_ours, p_ours), (c_jax, p_jax) = compile_program(ours, *args), compile_program(theirs, *args)
    forward = jax.jit(case.ours)
    (t_ours, t_jax, t_fwd), ratio = interleaved(
        [jax.jit(ours), jax.jit(theirs), lambda w, *a: forward(*a)], args, budget=budget)
    return [case.label, fmt_time(t_fwd), fmt_time(t_ours), fmt_time(t_jax),
            fmt_ratio(ratio, p_ours == p_jax),
            f"{c_ours:.2f} s / {c_jax:.2f} s"]


def _peer_cells(peers: Peers | None, kind: str, case: _cases.Case, budget: float) -> list[str]:
    if peers is None:
        return ["n/a (`make peers`)", ""]
    peer = peers.setup(kind, shape=list(case.args[0].shape))
    t_ours, t_peer = alternate(peers, peer, jax.jit(case.grad(case.ours)), case.grad_args(),
                               budget=budget / 4)
    best = min(t_peer.values())
    return [" / ".join(fmt_time(t_peer[t]) for t in THREADS), f"{t_ours / best:.2f}"]


GOALS = ("Goal: ratio ours/JAX ≤ 1.0 on every row, ≤ 0.5 on the batch of 4×4 matrices; compile time "
         "no more than 1.2× the `custom_vjp` rules' (see `python -m benchmarks.revisions`). A ratio "
         "marked (=) compares two identical XLA programs: JAX compiles both to the same thing, so "
         "the ratio is 1 and its spread is the measurement's noise.")


def tables(quick: bool) -> list[Table]:
    budget = 0.3 if quick else 1.5
    peers = Peers.start()
    try:
        specs = [
            ("Matrix inverse `rules.inv` (float32)", _cases.inv_cases(quick), "inv",
             "Gradient of `Σ W ⊙ inv(A)` (forward included). PyTorch: `torch.linalg.inv`, "
             "autograd, forward and backward."),
            ("QR `rules.qr` (reduced, float32)", _cases.qr_cases(quick), "qr",
             "Gradient of `Σ W₁ ⊙ Q + Σ W₂ ⊙ R`. JAX differentiates QR through its JVP rule, "
             "transposed. PyTorch: `torch.linalg.qr`, autograd."),
            ("LQ `rules.lq` (float32)", _cases.lq_cases(quick), None,
             "JAX has no LQ: its column is autodiff of `qr(Aᵀ)` transposed."),
            ("Cayley transform `rules.cayley` (float32)", _cases.cayley_cases(quick), None,
             "Gradient of `Σ W ⊙ Cay(C)` for skew-symmetric `C`; JAX's column differentiates "
             "`(I - C) @ inv(I + C)`."),
        ]
        out = []
        for title, cases, peer_kind, note in specs:
            columns = COLUMNS + (PEER_COLUMNS if peer_kind else [])
            table = Table(title, columns)
            for case in cases:
                row = gradient_row(case, budget)
                if peer_kind:
                    row += _peer_cells(peers, peer_kind, case, budget)
                table.add(row)
            table.notes += [note, GOALS]
            if peer_kind:
                table.notes.append("PyTorch (CPU, float32) runs in its own process; the ratio "
                                   "ours/PyTorch takes our gradient timed in turn with it (not the "
                                   "column above) and PyTorch's faster thread count.")
            out.append(table)
        return out
    finally:
        if peers is not None:
            peers.close()
