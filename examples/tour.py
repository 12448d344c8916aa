"""A tour of the rules: what a hand-written pullback is, and how to check one.

Run it with ``python examples/tour.py`` (or ``make tour``). Each step prints what it checked:

1. ``rules.inv``: its pullback ``Ā = -Bᵀ B̄ Bᵀ`` against central finite differences.
2. ``rules.qr``: the check of the well-known blog post on QR gradients — the gradients of
   ``sum(Q)`` and ``sum(R)`` for a random 4×4 float32 matrix against finite differences — and
   against JAX's own autodiff of ``jnp.linalg.qr``.
3. A ChainRules-style rule for a callable object with fields: its ``∂self``.
4. A directional derivative: ``jax.jvp`` of ``rules.qr`` runs its explicit pushforward (also
   callable directly as ``rules.frule``), against ``jax.jvp`` of ``jnp.linalg.qr``.
5. ``rules.inv``, ``rules.qr`` and ``rules.lq`` only (the rules of ``CASES``, which the heading
   names; the test suite checks all the rules): ``rules.testing.check_rrule`` on a small float64 case,
   agreement of the float64 gradient with JAX's own autodiff, and the float32 gradient time relative
   to JAX's: the median and range of the ratio over alternated rounds (ours, JAX's, ours, JAX's, …),
   each round timing many calls of the compiled gradients. Speed figures are measured properly in
   ``benchmarks/RESULTS.md`` (``make bench``).
"""
from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

import rules


def central_difference_grad(loss, a, eps=1e-3):
    """Entry-by-entry central differences of a scalar ``loss`` (float64 on the side)."""
    a = np.asarray(a, np.float64)
    g = np.zeros_like(a)
    for idx in np.ndindex(a.shape):
        e = np.zeros_like(a)
        e[idx] = eps
        g[idx] = (loss(a + e) - loss(a - e)) / (2 * eps)
    return g


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def step_inverse(key):
    a = jax.random.normal(key, (4, 4), jnp.float64) + 4 * jnp.eye(4, dtype=jnp.float64)
    w = jax.random.normal(jax.random.fold_in(key, 1), (4, 4), jnp.float64)

    def loss(a):
        return jnp.sum(w * rules.inv(jnp.asarray(a)))

    ours = jax.grad(loss)(a)
    fd = central_difference_grad(lambda x: float(loss(x)), a, eps=1e-5)
    print(f"1. inv: pullback vs finite differences, max relative error {rel(ours, fd):.1e}")


def step_qr_blog_post(key):
    a = jax.random.normal(key, (4, 4), jnp.float32)
    for name, pick in [("sum(Q)", lambda out: out.Q), ("sum(R)", lambda out: out.R)]:
        loss = lambda a, pick=pick: jnp.sum(pick(rules.qr(a)))  # noqa: E731
        ours = jax.grad(loss)(a)
        jax_own = jax.grad(lambda a, pick=pick: jnp.sum(pick(jnp.linalg.qr(a))))(a)
        # finite differences in float64, the same sign branch as the float32 factorisation
        fd = central_difference_grad(lambda x: float(loss(jnp.asarray(x))), a.astype(jnp.float64),
                                     eps=1e-4)
        print(f"2. qr, gradient of {name} (4×4 float32): vs finite differences {rel(ours, fd):.1e}, "
              f"vs JAX's autodiff {rel(ours, jax_own):.1e}")


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Multiplier:
    """``m(y) = m.x * y`` — the callable struct of the ChainRules documentation."""

    x: jax.Array

    @rules.rrule
    def __call__(self, y):
        def multiplier_pullback(z_bar):
            # one cotangent per argument, `self` first: ∂self is a Multiplier itself
            return Multiplier(x=jnp.sum(z_bar * y)), z_bar * self.x

        return self.x * y, multiplier_pullback


def step_dself():
    m, y = Multiplier(jnp.array(3.0, jnp.float64)), jnp.array([1.0, 2.0], jnp.float64)
    m_bar, y_bar = jax.grad(lambda m, y: jnp.sum(m(y) ** 2), argnums=(0, 1))(m, y)
    print(f"3. rrule on a callable struct: ∂self = {m_bar} (expected x = {2 * 3 * (1 + 4):.1f}), "
          f"∂y = {y_bar}")
    rules.testing.check_rrule(lambda m, y: m(y), m, y)
    print("   rules.testing.check_rrule(m, y): passed")


def step_jvp(key):
    a = jax.random.normal(key, (5, 3), jnp.float64)
    direction = jax.random.normal(jax.random.fold_in(key, 1), (5, 3), jnp.float64)
    _, (q_dot, r_dot) = jax.jvp(rules.qr, (a,), (direction,))
    _, (q_ref, r_ref) = jax.jvp(jnp.linalg.qr, (a,), (direction,))
    print(f"4. jax.jvp(rules.qr), the explicit pushforward, vs jax.jvp(jnp.linalg.qr): "
          f"dQ {rel(q_dot, q_ref):.1e}, dR {rel(r_dot, r_ref):.1e}")


@dataclasses.dataclass(frozen=True)
class Case:
    """One row of step 5: ``rules.<rule>`` against ``theirs``, JAX's own function, at ``shape``."""

    label: str
    rule: str
    theirs: Callable
    shape: tuple[int, ...]
    square: bool  # a square matrix argument (shifted to be well conditioned) and a 3×3 small case

    @property
    def ours(self) -> Callable:
        return getattr(rules, self.rule)


def lq_with_jax(a):
    q, r = jnp.linalg.qr(jnp.swapaxes(a, -1, -2))
    return jnp.swapaxes(r, -1, -2), jnp.swapaxes(q, -1, -2)


CASES = (
    Case("inv 4096×4×4", "inv", jnp.linalg.inv, (4096, 4, 4), True),
    Case("inv 128×128", "inv", jnp.linalg.inv, (128, 128), True),
    Case("qr 256×32", "qr", jnp.linalg.qr, (256, 32), False),
    Case("qr 1024×8×8", "qr", jnp.linalg.qr, (1024, 8, 8), False),
    Case("lq 32×256", "lq", lq_with_jax, (32, 256), False),
)
ROUNDS = 7  # rounds of the speed ratio: its median and range are printed


def rules_named(cases) -> list[str]:
    """The rules of ``cases``, in order, each once: what step 5's heading names."""
    return list(dict.fromkeys(case.rule for case in cases))


def scoreboard_heading(cases, rounds: int = ROUNDS) -> str:
    names = [f"rules.{name}" for name in rules_named(cases)]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return (f"5. {listed} only (the test suite checks every rule): check_rrule on a small float64 "
            f"case,\n   the float64 gradient vs JAX's autodiff, the float32 gradient time ours/JAX "
            f"(median and range of {rounds} alternated rounds)")


def _time_calls(fn, args, calls: int, clock) -> float:
    t0 = clock()
    for _ in range(calls):
        jax.block_until_ready(fn(*args))
    return clock() - t0


def time_ratio(ours, theirs, *args, rounds: int = ROUNDS, calls: int | None = None,
               clock=time.perf_counter, round_seconds: float = 0.05):
    """``time(ours) / time(theirs)``: its median, minimum and maximum over ``rounds`` rounds.

    Both functions are called once first (to compile them). Each round times ``calls`` calls of
    ``ours``, then ``calls`` calls of ``theirs``, each call waited for; the rounds alternate, so a
    change of the machine's speed during the measurement reaches both. ``calls=None`` picks enough
    calls for a round of about ``round_seconds`` per function.
    """
    jax.block_until_ready(ours(*args))
    jax.block_until_ready(theirs(*args))
    if calls is None:
        once = max(_time_calls(ours, args, 1, clock), _time_calls(theirs, args, 1, clock))
        calls = max(1, math.ceil(round_seconds / max(once, 1e-9)))
    ratios = []
    for _ in range(rounds):
        t_ours = _time_calls(ours, args, calls, clock)
        t_theirs = _time_calls(theirs, args, calls, clock)
        ratios.append(t_ours / t_theirs)
    return float(np.median(ratios)), float(min(ratios)), float(max(ratios))


def format_ratio(median: float, low: float, high: float, rounds: int = ROUNDS) -> str:
    return f"{median:.2f}× ({low:.2f}–{high:.2f} over {rounds} rounds)"


def _shift_diagonal(a, c):
    """``a + c·I`` on every matrix of the batch, in ``a``'s dtype (a NumPy scalar ``c`` would make
    a float32 ``a`` float64 under x64), without implicit rank promotion."""
    return a + float(c) * jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)


def step_scoreboard(key, cases=CASES, rounds: int = ROUNDS, calls: int | None = None):
    print(scoreboard_heading(cases, rounds))
    for case in cases:
        small = jax.random.normal(key, (2, 3, 3) if case.square else (4, 3), jnp.float64)
        if case.square:
            small = _shift_diagonal(small, 3.0)
        rules.testing.check_rrule(case.ours, small)
        a = jax.random.normal(key, case.shape, jnp.float32)
        if case.square:
            a = _shift_diagonal(a, 2 * np.sqrt(case.shape[-1]))

        def loss(fn, a):
            return sum(jnp.sum(jnp.sin(y)) for y in jax.tree_util.tree_leaves(fn(a)))

        g_ours = jax.jit(jax.grad(lambda a, fn=case.ours: loss(fn, a)))
        g_jax = jax.jit(jax.grad(lambda a, fn=case.theirs: loss(fn, a)))
        agreement = rel(g_ours(a.astype(jnp.float64)), g_jax(a.astype(jnp.float64)))
        ratio = format_ratio(*time_ratio(g_ours, g_jax, a, rounds=rounds, calls=calls), rounds)
        print(f"   {case.label:14s} check_rrule: passed | vs JAX's gradient {agreement:.1e} | "
              f"time ours/JAX {ratio}")


def main() -> None:
    jax.config.update("jax_enable_x64", True)  # this script only: float64 for the checks
    key = jax.random.PRNGKey(0)
    step_inverse(key)
    step_qr_blog_post(jax.random.fold_in(key, 2))
    step_dself()
    step_jvp(jax.random.fold_in(key, 3))
    step_scoreboard(jax.random.fold_in(key, 4))


if __name__ == "__main__":
    main()
