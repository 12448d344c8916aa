"""A tour of the rules: what a hand-written pullback is, and how to check one.

Run it with ``python examples/tour.py`` (or ``make tour``). Each step prints what it checked:

1. ``rules.inv``: its pullback ``Ā = -Bᵀ B̄ Bᵀ`` against central finite differences.
2. ``rules.qr``: the check of the well-known blog post on QR gradients — the gradients of
   ``sum(Q)`` and ``sum(R)`` for a random 4×4 float32 matrix against finite differences — and
   against JAX's own autodiff of ``jnp.linalg.qr``.
3. A ChainRules-style rule for a callable object with fields: its ``∂self``.
4. A directional derivative: ``jax.jvp`` of ``rules.qr`` runs its explicit pushforward (also
   callable directly as ``rules.frule``), against ``jax.jvp`` of ``jnp.linalg.qr``.
5. For every linear-algebra rule: agreement with finite differences and with JAX's own autodiff,
   and the time of our gradient relative to JAX's.
"""
from __future__ import annotations

import dataclasses
import time

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


def _median_time(fn, *args, repeats=15):
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def step_scoreboard(key):
    def lq_with_jax(a):
        q, r = jnp.linalg.qr(jnp.swapaxes(a, -1, -2))
        return jnp.swapaxes(r, -1, -2), jnp.swapaxes(q, -1, -2)

    cases = [
        ("inv 4096×4×4", rules.inv, jnp.linalg.inv, (4096, 4, 4), True),
        ("inv 128×128", rules.inv, jnp.linalg.inv, (128, 128), True),
        ("qr 256×32", rules.qr, jnp.linalg.qr, (256, 32), False),
        ("qr 1024×8×8", rules.qr, jnp.linalg.qr, (1024, 8, 8), False),
        ("lq 32×256", rules.lq, lq_with_jax, (32, 256), False),
    ]
    print("5. every rule: float64 check_rrule (small case), float32 gradient time vs JAX's autodiff")
    for label, ours, theirs, shape, square in cases:
        small_shape = (2, 3, 3) if square else (4, 3)
        small = jax.random.normal(key, small_shape, jnp.float64)
        if square:
            small = small + 3 * jnp.eye(3, dtype=jnp.float64)
        rules.testing.check_rrule(ours, small)
        a = jax.random.normal(key, shape, jnp.float32)
        if square:
            a = a + 2 * np.sqrt(shape[-1]) * jnp.eye(shape[-1], dtype=jnp.float32)

        def loss(fn, a):
            return sum(jnp.sum(jnp.sin(y)) for y in jax.tree_util.tree_leaves(fn(a)))

        g_ours = jax.jit(jax.grad(lambda a: loss(ours, a)))
        g_jax = jax.jit(jax.grad(lambda a: loss(theirs, a)))
        agreement = rel(g_ours(a.astype(jnp.float64)), g_jax(a.astype(jnp.float64)))
        ratio = _median_time(g_ours, a) / _median_time(g_jax, a)
        print(f"   {label:14s} finite differences: passed | vs JAX's gradient {agreement:.1e} | "
              f"time ours/JAX {ratio:.2f}")


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
