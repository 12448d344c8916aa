"""Train one rigid-body model (``vpt``, ``vpff`` or ``transformer``) on the Euler-equation windows.

The loss is the relative L2 error over the minibatch, ``‖target − NN(input)‖ / ‖target‖``
(docs/examples/rigid-body.md#loss); the optimizer is Adam with the learning rate decaying
exponentially from ``--lr-start`` to ``--lr-end`` over ``--steps`` optimizer steps. The step ``train_step(params, opt_state, batch)`` is
pure and jitted. At the end the model is rolled out from the two validation initial conditions
(:mod:`examples.rigid_body.evaluate`) and ``summary.json`` is written with the parameter count, the
final loss, the rollout error, the norm drift, the training time and the steps per second, and
whether and where the model diverged: ``"diverged"`` and ``"diverged_at"``, the first training
step whose loss is not finite, else the first rollout state with ``‖z‖ > 10`` or not finite
(:func:`examples.rigid_body.evaluate.rollout_divergence`); a metric that is not finite is ``null``.

Examples::

    python -m examples.rigid_body.train --model vpt --steps 20000 --log-dir runs/rigid_body/vpt
    python -m examples.rigid_body.train --model vpt --steps 20000 --log-dir runs/rigid_body/vpt --resume
    python -m examples.rigid_body.train --model vpt --steps 40000 --log-dir runs/rigid_body/vpt --resume  # extend
    tensorboard --logdir runs/rigid_body

Data parallelism. ``--devices N`` splits every minibatch over the first ``N`` devices (a
``jax.sharding.Mesh`` with one axis ``"batch"``; the batch is sharded along it, parameters and
optimizer state are replicated) and lets XLA insert the all-reduce of the gradients; the loss
trajectory equals the single-device one up to rounding (``tests/test_sharding.py``). To try it on
a CPU, simulate devices with ``XLA_FLAGS=--xla_force_host_platform_device_count=8``. Several
hosts: :mod:`examples.multihost` runs this data-parallel step over processes with JAX's
multi-controller runtime (``jax.distributed.initialize``), one command per host.
"""
from __future__ import annotations

import argparse
import functools
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
    parser = _training.ArgumentParser(prog="python -m examples.rigid_body.train", description=__doc__.split("\n\n")[0],
                                      checks=[lambda args: _devices_error(args.devices, args.batch_size)])
    parser.add_argument("--model", choices=sorted(models.MODELS), default="vpt", help="which model")
    _training.add_common_arguments(parser, steps=6000, batch_size=256)
    parser.add_argument("--lr-start", type=_training.positive_float, default=1e-2, help="initial learning rate")
    parser.add_argument("--lr-end", type=_training.positive_float, default=1e-6, help="learning rate at the last step")
    parser.add_argument("--inertia", choices=sorted(evaluate.INERTIAS), default="paper",
                        help="moments of inertia: paper text (1, 2, 2/3) or data code (2, 1, 2/3)")
    parser.add_argument("--cache-dir", type=_training.directory, default=None,
                        help="data cache directory (None: $PULLBACKS_CACHE or ~/.cache/pullbacks)")
    parser.add_argument("--devices", type=_training.positive_int, default=1,
                        help="data parallel over the first N devices (the batch size must divide)")
    return parser


def _devices_error(devices: int, batch_size: int) -> str | None:
    # Only more than one device asks JAX for its devices: parsing flags must not start a backend.
    if devices < 1 or (devices > 1 and devices > len(jax.devices())):
        return f"--devices must be between 1 and the {len(jax.devices())} available devices; got {devices}."
    if batch_size % devices:
        return f"--batch-size ({batch_size}) must be divisible by --devices ({devices})."
    return None


def data_parallel(devices: int, batch_size: int):
    """``(place_state, place_batch)``: replicate the state, shard the batch over ``devices`` devices."""
    if (message := _devices_error(devices, batch_size)) is not None:
        raise ValueError(message)
    if devices == 1:
        return (lambda tree: tree), (lambda tree: tree)
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()[:devices]), ("batch",))
    replicated, sharded = NamedSharding(mesh, P()), NamedSharding(mesh, P("batch"))
    return (lambda tree: jax.device_put(tree, replicated)), (lambda tree: jax.device_put(tree, sharded))


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train, evaluate, write ``summary.json`` into the run directory and return the summary."""
    parser = build_parser()
    args = parser.parse_args(argv)
    dtype = _training.configure_dtype(args.dtype)
    run_dir = _training.open_run(parser, args, Path("runs/rigid_body") / args.model)

    place_state, place_batch = data_parallel(args.devices, args.batch_size)
    model = models.make_model(args.model)
    optimizer, schedule = make_optimizer(args.lr_start, args.lr_end, args.steps)
    params = model.init(np.random.default_rng(args.seed), dtype)
    print(f"{args.model}: {models.parameter_count(params)} parameters")
    state = _training.start_state(parser, args, run_dir, params, optimizer)
    if (done := _training.finished_summary(run_dir, state, args.steps)) is not None:
        print("run already complete")
        return done

    inertia = evaluate.INERTIAS[args.inertia]
    dataset = data.load_dataset(args.cache_dir, inertia=inertia)
    inputs, targets = dataset.inputs.astype(dtype), dataset.targets.astype(dtype)

    state = state._replace(params=place_state(state.params), opt_state=place_state(state.opt_state))

    def next_batch(step: int) -> Batch:
        index = _training.batch_indices(args.seed, step, len(inputs), args.batch_size)
        return place_batch((inputs[index], targets[index]))

    with _training.summary_writer(run_dir, state.step if args.resume else None) as writer:
        result = _training.train_with_flags(run_dir, make_train_step(model, optimizer), state, next_batch, args,
                                            writer, learning_rate=schedule)
        predicted, _, metrics = evaluate.validate(model, result.state.params, dtype, inertia=inertia)
        diverged_at = _training.training_divergence(result) or evaluate.rollout_divergence(predicted)
        summary = _training.summarize(
            run_dir, writer, args, state, result,
            hparams=("model", "steps", "batch_size", "lr_start", "lr_end", "seed", "dtype", "inertia"),
            fields={"parameters": models.parameter_count(params)} | metrics,
            metrics=("final_loss", "rollout_error", "norm_drift"), diverged_at=diverged_at)
    f = functools.partial(evaluate.format_metric, summary)
    print(f"{args.model}: final loss {f('final_loss', '.3e')}, rollout error {f('rollout_error', '.3e')}, "
          f"‖z‖ drift {f('norm_drift', '.3e')}, {summary['train_time_s']:.1f} s "
          f"({f('steps_per_s', '.0f')} steps/s); logs in {run_dir}")
    if diverged_at is not None:
        print(f"{args.model}: {evaluate.describe_divergence(diverged_at)}")
    return summary


if __name__ == "__main__":
    _training.command_line(main)
