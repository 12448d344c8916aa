"""End-to-end: the rigid-body VPT training step with our rules vs the same model in plain ``jnp``.

Also the 1 → 2 → 8 simulated-device scaling of the data-parallel step. On a CPU the simulated
devices share the same cores, so that column shows correctness and overhead, not speed-up.
Run alone with ``python -m benchmarks --only training``; the scaling rows run this module as a
subprocess (``python -m benchmarks.bench_training --devices N``), since the device count is fixed
when JAX starts.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ._harness import Table, compile_time, fmt_time, median_time

BATCH = 16_384


def _dense(packed, n, lower, upper):
    """Packed → dense with JAX's autodiff (the packing of rules/_structured.py: row-major tril)."""
    rows, cols = np.tril_indices(n, -1)
    w = jnp.zeros((n, n), packed.dtype)
    if lower:
        w = w.at[rows, cols].set(lower * packed)
    if upper:
        w = w.at[cols, rows].set(upper * packed)
    return w


def plain_vpt_apply(model, params, x):
    """The VPT of examples/rigid_body/models.py written with plain ``jnp`` ops only."""
    from examples.rigid_body.models import _vpff_layers

    n = x.shape[-1]
    t = x.shape[-2]
    eye = jnp.broadcast_to(jnp.eye(t, dtype=x.dtype), (*x.shape[:-2], t, t))
    for layer in params:
        s = _dense(layer["attention"].packed, n, 1, -1)
        k = (s - s.T) / 2
        c = x @ k @ jnp.swapaxes(x, -1, -2)
        lam = (eye - c) @ jnp.linalg.inv(eye + c)
        x = jnp.swapaxes(lam, -1, -2) @ x
        for ff, (triangle, activation, has_bias) in zip(layer["feedforward"], _vpff_layers(model.n_blocks)):
            w = _dense(ff["weight"].packed, n, *((1, 0) if triangle == "lower" else (0, 1)))
            y = x @ w.T
            if has_bias:
                y = y + jnp.broadcast_to(ff["bias"], y.shape)
            x = x + activation(y)
    return x


def _setup(batch):
    from examples.rigid_body import models, train

    model = models.make_model("vpt")
    params = model.init(np.random.default_rng(0), jnp.float32)
    rng = np.random.default_rng(1)
    inputs = jnp.asarray(rng.standard_normal((batch, 3, 3)), jnp.float32)
    targets = jnp.asarray(inputs + 0.1 * rng.standard_normal((batch, 3, 3)), jnp.float32)
    optimizer = optax.adam(1e-3)

    def make_step(apply):
        def loss_fn(p, x, y):
            return train.relative_l2_loss(apply(p, x), y)

        def step(p, state, x, y):
            loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
            updates, state = optimizer.update(grads, state, p)
            return optax.apply_updates(p, updates), state, loss

        return step

    ours = make_step(model.apply)
    plain = make_step(lambda p, x: plain_vpt_apply(model, p, x))
    return model, params, optimizer.init(params), inputs, targets, ours, plain


def _scaling_subprocess(devices: int, batch: int) -> float:
    """Median step time (s) of the data-parallel step on ``devices`` simulated CPU devices."""
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
               JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-m", "benchmarks.bench_training", "--devices",
                          str(devices), "--batch", str(batch)], env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["step_time"]


def tables(quick: bool) -> list[Table]:
    batch = 2048 if quick else BATCH
    repeats = 3 if quick else 20
    model, params, state, x, y, ours, plain = _setup(batch)
    diff = max(float(jnp.max(jnp.abs(model.apply(params, x[:64]) - plain_vpt_apply(model, params, x[:64])))), 0.0)
    c_ours = compile_time(ours, params, state, x, y)  # first: later compilations hit JAX's cache
    c_plain = compile_time(plain, params, state, x, y)
    t_ours = median_time(jax.jit(ours), params, state, x, y, repeats=repeats)
    t_plain = median_time(jax.jit(plain), params, state, x, y, repeats=repeats)
    table = Table(f"Rigid-body VPT training step (Adam, float32, batch {batch})",
                  ["version", "step time", "steps/s", "compile", "speed-up"])
    table.rows.append(["plain `jnp`, JAX autodiff", fmt_time(t_plain), f"{1 / t_plain:.1f}",
                       f"{c_plain:.2f} s", "1.00×"])
    table.rows.append(["`rules` (our pullbacks)", fmt_time(t_ours), f"{1 / t_ours:.1f}",
                       f"{c_ours:.2f} s", f"{t_plain / t_ours:.2f}×"])
    table.notes.append(f"The two models agree to {diff:.1e} (max |difference| of outputs).")

    scaling = Table(f"Data-parallel VPT step on simulated CPU devices (batch {batch})",
                    ["devices", "step time", "relative to 1 device"])
    base = None
    for devices in (1, 2, 8):
        t = _scaling_subprocess(devices, batch)
        base = base or t
        scaling.rows.append([str(devices), fmt_time(t), f"{t / base:.2f}"])
    scaling.notes.append("Simulated devices share this machine's cores: the column shows the "
                         "overhead of sharding (batch split, gradient all-reduce), not a speed-up.")
    return [table, scaling]


def _scaling_main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--devices", type=int, required=True)
    parser.add_argument("--batch", type=int, default=BATCH)
    args = parser.parse_args()
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    _, params, state, x, y, ours, _ = _setup(args.batch)
    mesh = Mesh(np.array(jax.devices()[: args.devices]), ("batch",))
    params, state = jax.device_put((params, state), NamedSharding(mesh, P()))
    x, y = jax.device_put((x, y), NamedSharding(mesh, P("batch")))
    t = median_time(jax.jit(ours), params, state, x, y, repeats=10)
    print(json.dumps({"devices": args.devices, "step_time": t}))


if __name__ == "__main__":
    _scaling_main()
