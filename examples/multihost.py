"""Data-parallel training over several processes (hosts) with JAX's multi-controller runtime.

One process per host, each with the same command and its own ``--process-id``; the first host's
address serves as the coordinator::

    host 0:  python -m examples.multihost --coordinator host0:1234 --num-processes 2 --process-id 0
    host 1:  python -m examples.multihost --coordinator host0:1234 --num-processes 2 --process-id 1

(On Slurm or Cloud TPU ``jax.distributed.initialize()`` finds these values itself.) After
``jax.distributed.initialize`` every process sees every host's devices in ``jax.devices()``: one
mesh spans them all, each process feeds the same host arrays to ``jax.device_put`` with a global
sharding (it keeps its own share), and XLA inserts the cross-host all-reduce of the gradients —
over gloo on CPUs, NCCL on GPUs. Nothing else in the training code changes.

Two jobs run, both on synthetic data so that the result is reproducible anywhere:

* the rigid-body volume-preserving transformer with the trainer's own data-parallel step
  (:func:`examples.rigid_body.train.make_train_step` and
  :func:`examples.rigid_body.train.data_parallel`: the batch sharded, the state replicated);
* eight Stiefel attention heads trained with :func:`geometric.optim.riemannian_adam`, the stack
  sharded over the devices (each device updates its own heads).

Process 0 prints the losses and, with ``--out``, writes them and the final parameters as JSON;
``tests/test_multiprocess.py`` runs two processes on loopback and compares them with one.
"""
from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from examples import _training

HEADS, N, P_COLS = 8, 12, 3  # the Stiefel job: HEADS points of St(N, P_COLS)
BATCH = 64  # the rigid-body job's global batch, divisible by the device count


def build_parser() -> argparse.ArgumentParser:
    parser = _training.ArgumentParser(prog="python -m examples.multihost",
                                      description=__doc__.split("\n\n")[0],
                                      checks=[_process_error])
    parser.add_argument("--coordinator", type=coordinator_address, default=None,
                        help="HOST:PORT of process 0 (omit to run as a single process)")
    parser.add_argument("--num-processes", type=_training.at_least(1), default=1,
                        help="number of processes (hosts)")
    parser.add_argument("--process-id", type=_training.at_least(0), default=0,
                        help="this process's index, 0 … num-processes − 1")
    parser.add_argument("--steps", type=_training.at_least(1), default=10,
                        help="optimizer steps of each job")
    parser.add_argument("--out", type=_training.output_file, default=None, help="JSON file for process 0's results")
    return parser


def coordinator_address(text: str) -> str:
    """An ``argparse`` type: ``HOST:PORT``, the port an integer 1–65535 (``[::1]:1234`` for an IPv6 host).

    Checked with the flags because ``jax.distributed.initialize`` fails on a malformed address
    with an ``IndexError`` from deep inside it.
    """
    host, colon, port = text.rpartition(":")
    if not (colon and host and port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise argparse.ArgumentTypeError(f"expected HOST:PORT with PORT an integer 1–65535; got {text!r}")
    return text


def _process_error(args: argparse.Namespace) -> str | None:
    if args.process_id >= args.num_processes:
        return f"--process-id must be below --num-processes ({args.num_processes}); got {args.process_id}."
    if args.num_processes > 1 and args.coordinator is None:
        return "--coordinator HOST:PORT is needed with more than one process."
    return None


def _local(tree: Any) -> Any:
    """Host copies of replicated global arrays (every process holds the whole value)."""
    import jax

    return jax.tree.map(lambda x: np.asarray(x.addressable_data(0)), tree)


def rigid_body_job(steps: int) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp

    from examples.rigid_body import models, train

    model = models.make_model("vpt")
    params = model.init(np.random.default_rng(0), jnp.float32)
    optimizer, _ = train.make_optimizer(1e-2, 1e-4, steps)
    step = train.make_train_step(model, optimizer)
    place_state, place_batch = train.data_parallel(len(jax.devices()), BATCH)
    params, state = place_state((params, optimizer.init(params)))
    rng = np.random.default_rng(1)  # the same host data on every process
    losses = []
    for _ in range(steps):
        x = rng.standard_normal((BATCH, 3, 3)).astype(np.float32)
        batch = place_batch((x, x + 0.1 * rng.standard_normal(x.shape).astype(np.float32)))
        params, state, loss = step(params, state, batch)
        losses.append(float(_local(loss)))
    flat = np.concatenate([np.ravel(x) for x in jax.tree.leaves(_local(params))])
    return {"losses": losses, "params": flat.tolist()}


def stiefel_job(steps: int) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    import optax
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    import geometric

    stiefel = geometric.Stiefel(N, P_COLS)
    heads = jnp.stack([stiefel.random_point(jax.random.PRNGKey(i)) for i in range(HEADS)])
    target = jnp.asarray(np.random.default_rng(2).standard_normal((HEADS, N, P_COLS)), jnp.float32)
    optimizer = geometric.optim.riemannian_adam(1e-2, stiefel)

    @jax.jit
    def step(w, state):
        loss, grad = jax.value_and_grad(lambda w: jnp.sum((w - target) ** 2))(w)
        updates, state = optimizer.update(grad, state, w)
        return optax.apply_updates(w, updates), state, loss

    mesh = Mesh(np.array(jax.devices()), ("batch",))
    w = jax.device_put(heads, NamedSharding(mesh, P("batch")))
    state = optimizer.init(w)
    losses = []
    for _ in range(steps):
        w, state, loss = step(w, state)
        losses.append(float(_local(loss)))
    gathered = jax.experimental.multihost_utils.process_allgather(w, tiled=True)
    return {"losses": losses, "heads": np.asarray(gathered).ravel().tolist(),
            "manifold_error": float(jnp.max(stiefel.manifold_error(jnp.asarray(gathered))))}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.out is not None:  # before the jobs: a directory that cannot be made stops the program at once
        _training.make_directory(parser, args.out.parent, "--out")
    import jax

    if args.num_processes > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU hosts; GPUs use NCCL
        jax.distributed.initialize(coordinator_address=args.coordinator,
                                   num_processes=args.num_processes, process_id=args.process_id)
    import jax.experimental.multihost_utils  # noqa: F401  (process_allgather)

    results = {"processes": jax.process_count(), "devices": len(jax.devices()),
               "rigid_body": rigid_body_job(args.steps), "stiefel": stiefel_job(args.steps)}
    if jax.process_index() == 0:
        print(f"{results['processes']} processes, {results['devices']} devices: rigid-body loss "
              f"{results['rigid_body']['losses'][0]:.4f} → {results['rigid_body']['losses'][-1]:.4f}, "
              f"Stiefel loss {results['stiefel']['losses'][0]:.3f} → "
              f"{results['stiefel']['losses'][-1]:.3f} (‖WᵀW − I‖ ≤ "
              f"{results['stiefel']['manifold_error']:.1e})")
        if args.out is not None:
            args.out.write_text(json.dumps(results))
    return results


if __name__ == "__main__":
    _training.command_line(main)
