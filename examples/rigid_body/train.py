"""Train one rigid-body model (``vpt``, ``vpff`` or ``transformer``) on the Euler-equation windows.

The loss is the relative L2 error over the minibatch, ``‖target − NN(input)‖ / ‖target‖`` (math.md §7);
the optimizer is Adam with the learning rate decaying exponentially from ``--lr-start`` to
``--lr-end`` over ``--steps`` optimizer steps. The step ``train_step(params, opt_state, batch)`` is
pure and jitted. At the end the model is rolled out from the two validation initial conditions
(:mod:`examples.rigid_body.evaluate`) and ``summary.json`` is written with the parameter count, the
final loss, the rollout error, the norm drift, the training time and the steps per second.

Examples::

    python -m examples.rigid_body.train --model vpt --steps 20000 --log-dir runs/rigid_body/vpt
    python -m examples.rigid_body.train --model vpt --steps 20000 --log-dir runs/rigid_body/vpt --resume
    tensorboard --logdir runs/rigid_body

Data parallelism. ``--devices N`` splits every minibatch over the first ``N`` devices (a
``jax.sharding.Mesh`` with one axis ``"batch"``; the batch is sharded along it, parameters and
optimizer state are replicated) and lets XLA insert the all-reduce of the gradients; the loss
trajectory equals the single-device one up to rounding (``tests/test_sharding.py``). To try it on
a CPU, simulate devices with ``XLA_FLAGS=--xla_force_host_platform_device_count=8``. On a cluster,
start one process per host with the same command and call
``jax.distributed.initialize(coordinator_address, num_processes, process_id)`` before anything
else touches JAX (on Slurm or Cloud TPU the arguments are detected: ``jax.distributed.initialize()``);
``jax.devices()`` then lists every host's devices, so ``--devices`` counts them all, and each
process must feed its own share of the batch (``jax.make_array_from_process_local_data``).
"""
from __future__ import annotations

import argparse
import functools
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from examples import _training
from examples.rigid_body import data, evaluate, models

__all__ = ["build_parser", "main", "make_optimizer", "make_train_step", "relative_l2_loss"]

PyTree = Any
Batch = tuple[jax.Array, jax.Array]  # (inputs, targets), each (batch, T, d)


def relative_l2_loss(prediction: jax.Array, target: jax.Array) -> jax.Array:
    """``‖target − prediction‖ / ‖target‖``, Frobenius norms over the whole batch."""
    return jnp.linalg.norm(target - prediction) / jnp.linalg.norm(target)


@functools.lru_cache(maxsize=16)
def make_optimizer(lr_start: float, lr_end: float, steps: int) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """Adam with ``lr(k) = lr_start · (lr_end / lr_start)^(k / steps)``, and that schedule.

    Cached, like :func:`make_train_step`, so that runs with equal flags in one process (a sweep,
    the demo, the tests) share one compiled training step.
    """
    schedule = optax.exponential_decay(lr_start, transition_steps=max(steps, 1), decay_rate=lr_end / lr_start)
    return optax.adam(schedule), schedule


@functools.lru_cache(maxsize=16)
def make_train_step(model: models.Model, optimizer: optax.GradientTransformation
                    ) -> Callable[[PyTree, PyTree, Batch], tuple[PyTree, PyTree, jax.Array]]:
    """The jitted ``train_step(params, opt_state, batch) -> (params, opt_state, loss)`` of ``model``.

    Pure: the batch comes in as an argument, so data parallelism only has to shard it.
    """

    def loss(params: PyTree, batch: Batch) -> jax.Array:
        inputs, targets = batch
        return relative_l2_loss(model.apply(params, inputs), targets)

    return _training.make_train_step(loss, optimizer)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m examples.rigid_body.train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(models.MODELS), default="vpt", help="which model (default vpt)")
    _training.add_common_arguments(parser, steps=6000, batch_size=256)
    parser.add_argument("--lr-start", type=float, default=1e-2, help="initial learning rate")
    parser.add_argument("--lr-end", type=float, default=1e-6, help="learning rate at the last step")
    parser.add_argument("--inertia", choices=sorted(evaluate.INERTIAS), default="paper",
                        help="moments of inertia: paper text (1, 2, 2/3) or data code (2, 1, 2/3)")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="data cache directory (default $PULLBACKS_CACHE or ~/.cache/pullbacks)")
    parser.add_argument("--devices", type=int, default=1,
                        help="data parallel over the first N devices (the batch size must divide)")
    return parser


def data_parallel(devices: int, batch_size: int):
    """``(place_state, place_batch)``: replicate the state, shard the batch over ``devices`` devices."""
    available = len(jax.devices())
    if not 1 <= devices <= available:
        raise ValueError(f"--devices must be between 1 and the {available} available devices; got {devices}.")
    if batch_size % devices:
        raise ValueError(f"--batch-size ({batch_size}) must be divisible by --devices ({devices}).")
    if devices == 1:
        return (lambda tree: tree), (lambda tree: tree)
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()[:devices]), ("batch",))
    replicated, sharded = NamedSharding(mesh, P()), NamedSharding(mesh, P("batch"))
    return (lambda tree: jax.device_put(tree, replicated)), (lambda tree: jax.device_put(tree, sharded))


def _config(args: argparse.Namespace) -> dict[str, Any]:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in sorted(vars(args).items())}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train, evaluate, write ``summary.json`` into the run directory and return the summary."""
    args = build_parser().parse_args(argv)
    dtype = _training.configure_dtype(args.dtype)
    run_dir = args.log_dir if args.log_dir is not None else Path("runs/rigid_body") / args.model
    args.log_dir = run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    config = _config(args)
    _training.check_resumable(run_dir, config, args.resume)

    place_state, place_batch = data_parallel(args.devices, args.batch_size)
    model = models.make_model(args.model)
    optimizer, schedule = make_optimizer(args.lr_start, args.lr_end, args.steps)
    params = model.init(np.random.default_rng(args.seed), dtype)
    state = _training.TrainState(0, params, _training.init_optimizer(optimizer, params), args.seed)
    print(f"{args.model}: {models.parameter_count(params)} parameters")
    checkpoint = _training.latest_checkpoint(run_dir) if args.resume else None
    if checkpoint is not None:
        state = _training.load_checkpoint(checkpoint, state)
        print(f"resuming {run_dir} from step {state.step}")
        if state.step >= args.steps and (run_dir / "summary.json").exists():
            print("run already complete")
            return json.loads((run_dir / "summary.json").read_text())

    inertia = evaluate.INERTIAS[args.inertia]
    dataset = data.load_dataset(args.cache_dir, inertia=inertia)
    inputs, targets = dataset.inputs.astype(dtype), dataset.targets.astype(dtype)

    state = state._replace(params=place_state(state.params), opt_state=place_state(state.opt_state))

    def next_batch(step: int) -> Batch:
        index = _training.batch_indices(args.seed, step, len(inputs), args.batch_size)
        return place_batch((inputs[index], targets[index]))

    from tensorboardX import SummaryWriter

    with SummaryWriter(logdir=str(run_dir), purge_step=state.step if checkpoint is not None else None) as writer:
        result = _training.train_loop(run_dir, make_train_step(model, optimizer), state, next_batch,
                                      steps=args.steps, checkpoint_every=args.checkpoint_every,
                                      log_every=args.log_every, writer=writer, progress=not args.no_progress,
                                      learning_rate=schedule)
        _, _, metrics = evaluate.validate(model, result.state.params, dtype, inertia=inertia)
        summary = {"model": args.model, "parameters": models.parameter_count(params), "steps": args.steps,
                   "batch_size": args.batch_size, "lr_start": args.lr_start, "lr_end": args.lr_end,
                   "seed": args.seed, "dtype": args.dtype, "inertia": args.inertia,
                   "resumed_from": state.step, "final_loss": result.final_loss,
                   "train_time_s": result.train_time, "steps_per_s": result.steps_per_second} | metrics
        hparams = {k: v for k, v in summary.items() if k in ("model", "batch_size", "lr_start", "lr_end", "seed", "dtype", "steps")}
        metrics = {f"hparam/{k}": summary[k] for k in ("final_loss", "rollout_error", "norm_drift")
                   if math.isfinite(summary[k])}  # a diverged rollout has no value to plot
        writer.add_hparams(hparams, metrics, name="hparams")
    _training.write_json(run_dir / "summary.json", summary)
    print(f"{args.model}: final loss {summary['final_loss']:.3e}, rollout error {summary['rollout_error']:.3e}, "
          f"‖z‖ drift {summary['norm_drift']:.3e}, {summary['train_time_s']:.1f} s "
          f"({summary['steps_per_s']:.0f} steps/s); logs in {run_dir}")
    return summary


if __name__ == "__main__":
    main()
