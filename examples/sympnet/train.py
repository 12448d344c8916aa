"""Train one flow-map model (``la``, ``g`` or ``mlp``) on one Hamiltonian system's trajectory.

The data are the paper's (:mod:`examples.sympnet.data`): pairs ``(z_k, z_{k+1})`` along one
trajectory, 40 for the pendulum and 200 for the double pendulum. The loss is the mean squared error
``mean ‖NN(z_k) − z_{k+1}‖²/dim`` over the minibatch (by default the whole training set, as in the
paper); the optimizer is Adam with the learning rate decaying exponentially from ``--lr-start`` to
``--lr-end``. ``--paper`` sets the paper's budget, 50,000 full-batch steps at the constant rate
1e-3 (flags given beside it win). At the end the model is rolled out from the trajectory's start
far beyond the training horizon (:mod:`examples.sympnet.evaluate`) and ``summary.json`` is written:
parameters, final loss, training and test MSE, rollout errors, energy errors, time, and whether and
where the model diverged.

Examples::

    python -m examples.sympnet.train --system pendulum --model la --log-dir runs/sympnet/pendulum/la
    python -m examples.sympnet.train --system pendulum --model la --paper --log-dir runs/sympnet/paper/la
    python -m examples.sympnet.train --system pendulum --model la --log-dir runs/sympnet/pendulum/la --resume
    tensorboard --logdir runs/sympnet
"""
from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import optax

from examples import _training
from examples.sympnet import data, evaluate, models

__all__ = ["PAPER", "build_parser", "main", "make_optimizer", "make_train_step", "mse"]

PyTree = Any
Batch = tuple[jax.Array, jax.Array]  # (inputs, targets), each (batch, dim)

PAPER = {"steps": 50_000, "lr_start": 1e-3, "lr_end": 1e-3}
"""The paper's training budget (its code: Adam, learning rate 1e-3, 50,000 full-batch iterations)."""
DEFAULT_STEPS = 10_000
FULL_BATCH = max(system.n_train for system in data.SYSTEMS.values())


def mse(prediction: jax.Array, target: jax.Array) -> jax.Array:
    """Mean squared error over every entry of the batch."""
    return jnp.mean((prediction - target) ** 2)


@functools.lru_cache(maxsize=16)
def make_optimizer(lr_start: float, lr_end: float, steps: int) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """Adam with ``lr(k) = lr_start · (lr_end / lr_start)^(k / steps)``, and that schedule."""
    schedule = optax.exponential_decay(lr_start, transition_steps=max(steps, 1), decay_rate=lr_end / lr_start)
    return optax.adam(schedule), schedule


@functools.lru_cache(maxsize=16)
def make_train_step(model: models.Model, optimizer: optax.GradientTransformation
                    ) -> Callable[[PyTree, PyTree, Batch], tuple[PyTree, PyTree, jax.Array]]:
    """The jitted ``train_step(params, opt_state, batch) -> (params, opt_state, loss)`` of ``model``."""

    def loss(params: PyTree, batch: Batch) -> jax.Array:
        inputs, targets = batch
        return mse(model.apply(params, inputs), targets)

    return _training.make_train_step(loss, optimizer)


def build_parser() -> argparse.ArgumentParser:
    parser = _training.ArgumentParser(prog="python -m examples.sympnet.train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", choices=sorted(data.SYSTEMS), default="pendulum", help="which Hamiltonian system")
    parser.add_argument("--model", choices=models.MODELS, default="la", help="which model")
    _training.add_common_arguments(parser, steps=DEFAULT_STEPS, batch_size=FULL_BATCH)
    parser._option_string_actions["--batch-size"].help = (
        "minibatch size; at least the number of training pairs (the default): the full batch, as in the paper")
    parser.add_argument("--lr-start", type=_training.positive_float, default=1e-2, help="initial learning rate")
    parser.add_argument("--lr-end", type=_training.positive_float, default=1e-4, help="learning rate at the last step")
    parser.add_argument("--activation", choices=sorted(models.ACTIVATIONS), default="sigmoid",
                        help="activation of every model (the paper's: sigmoid)")
    parser.add_argument("--init", choices=models.INITS, default="paper",
                        help="the SympNets' initialisation: the paper's code's (near the identity) or "
                             "GeometricMachineLearning.jl's (Glorot-uniform)")
    parser.add_argument("--rollout-steps", type=_training.positive_int, default=None,
                        help="length of the evaluation rollout in steps of h (None: the system's, "
                             f"{', '.join(f'{k} {v}' for k, v in evaluate.ROLLOUT_STEPS.items())})")
    parser.add_argument("--paper", action="store_true",
                        help=f"the paper's budget: --steps {PAPER['steps']} --lr-start {PAPER['lr_start']:g} "
                             f"--lr-end {PAPER['lr_end']:g} unless given")
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv``; with ``--paper``, :data:`PAPER` replaces the defaults (explicit flags win)."""
    return _training.parse_with_preset(parser, argv, "--paper", PAPER)


def restore_model(config: dict[str, Any]) -> models.Model:
    """The model a run's flags (``config.json``) describe."""
    system = data.SYSTEMS[config["system"]]
    return models.make_model(config["model"], system.name, system.dim, config["activation"], config["init"])


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train, evaluate, write ``summary.json`` into the run directory and return the summary."""
    parser = build_parser()
    args = parse_args(parser, argv)
    dtype = _training.configure_dtype(args.dtype)
    run_dir = _training.open_run(parser, args, Path("runs/sympnet") / args.system / args.model)

    system = data.SYSTEMS[args.system]
    model = restore_model(vars(args))
    optimizer, schedule = make_optimizer(args.lr_start, args.lr_end, args.steps)
    params = model.init(jax.random.key(args.seed), dtype)
    n_params = models.parameter_count(params)
    print(f"{args.system}/{args.model}: {n_params} parameters")
    state = _training.start_state(parser, args, run_dir, params, optimizer)
    if (done := _training.finished_summary(run_dir, state, args.steps)) is not None:
        print("run already complete")
        return done

    dataset = data.load_dataset(system)
    inputs, targets = jnp.asarray(dataset.train_inputs, dtype), jnp.asarray(dataset.train_targets, dtype)
    full = (inputs, targets)

    def next_batch(step: int) -> Batch:
        if args.batch_size >= len(inputs):
            return full  # the paper's full batch: no shuffling, the same arrays every step
        index = _training.batch_indices(args.seed, step, len(inputs), args.batch_size)
        return inputs[index], targets[index]

    with _training.summary_writer(run_dir, state.step if args.resume else None) as writer:
        result = _training.train_with_flags(run_dir, make_train_step(model, optimizer), state, next_batch, args,
                                            writer, learning_rate=schedule)
        rollout, metrics = evaluate.validate(model, result.state.params, dtype, system,
                                             n_steps=args.rollout_steps)
        diverged_at = _training.training_divergence(result) or evaluate.rollout_divergence(rollout, system.step)
        summary = _training.summarize(
            run_dir, writer, args, state, result,
            hparams=("system", "model", "steps", "batch_size", "lr_start", "lr_end", "activation", "init", "seed",
                     "dtype"),
            fields={"parameters": n_params} | metrics,
            metrics=("final_loss", "train_mse", "test_mse", "energy_error_max"), diverged_at=diverged_at)
    f = functools.partial(evaluate.format_metric, summary)
    print(f"{args.system}/{args.model}: final loss {f('final_loss', '.3e')}, test MSE {f('test_mse', '.3e')}, "
          f"max energy error {f('energy_error_max', '.3e')} over {summary['rollout_steps']} steps, "
          f"{summary['train_time_s']:.1f} s ({f('steps_per_s', '.0f')} steps/s); logs in {run_dir}")
    if diverged_at is not None:
        print(f"{args.system}/{args.model}: {evaluate.describe_divergence(diverged_at)}")
    return summary


if __name__ == "__main__":
    _training.command_line(main)
