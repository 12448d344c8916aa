"""Train one window model (``lst``, ``vpt`` or ``transformer``) on the double-pendulum windows.

The loss is the relative L2 error over the minibatch, ``‖target − NN(input)‖ / ‖target‖``, and the
optimizer Adam with the learning rate decaying exponentially from ``--lr-start`` to ``--lr-end``
(both as in :mod:`examples.rigid_body.train`). At the end the model is rolled out from the two
validation initial states for 500 steps (:mod:`examples.symplectic_transformer.evaluate`) and
``summary.json`` is written: parameters, final loss, rollout errors, energy errors, time, and
whether and where the model diverged.

Examples::

    python -m examples.symplectic_transformer.train --model lst --log-dir runs/symplectic_transformer/lst
    python -m examples.symplectic_transformer.train --model lst --log-dir runs/symplectic_transformer/lst --resume
    tensorboard --logdir runs/symplectic_transformer
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
from examples.rigid_body.train import make_optimizer, relative_l2_loss
from examples.symplectic_transformer import data, evaluate, models

__all__ = ["DEFAULT_STEPS", "PAPER_STEPS", "build_parser", "main", "make_train_step"]

PyTree = Any
Batch = tuple[jax.Array, jax.Array]  # (inputs, targets), each (batch, T, d)
DEFAULT_STEPS = 5000
PAPER_STEPS = 100_000
"""``--paper``: the longer budget (the papers train for about 10⁵–10⁶ steps; see the docs page)."""


@functools.lru_cache(maxsize=16)
def make_train_step(model, optimizer: optax.GradientTransformation
                    ) -> Callable[[PyTree, PyTree, Batch], tuple[PyTree, PyTree, jax.Array]]:
    """The jitted ``train_step(params, opt_state, batch) -> (params, opt_state, loss)`` of ``model``."""

    def loss(params: PyTree, batch: Batch) -> jax.Array:
        inputs, targets = batch
        return relative_l2_loss(model.apply(params, inputs), targets)

    return _training.make_train_step(loss, optimizer)


def build_parser() -> argparse.ArgumentParser:
    parser = _training.ArgumentParser(prog="python -m examples.symplectic_transformer.train",
                                      description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=models.MODELS, default="lst", help="which model")
    _training.add_common_arguments(parser, steps=DEFAULT_STEPS, batch_size=256)
    parser.add_argument("--lr-start", type=_training.positive_float, default=1e-2, help="initial learning rate")
    parser.add_argument("--lr-end", type=_training.positive_float, default=1e-5, help="learning rate at the last step")
    parser.add_argument("--paper", action="store_true",
                        help=f"the long budget: --steps {PAPER_STEPS} --batch-size 2048 unless given")
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv``; with ``--paper`` the long budget replaces the defaults (explicit flags win)."""
    return _training.parse_with_preset(parser, argv, "--paper", {"steps": PAPER_STEPS, "batch_size": 2048})


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train, evaluate, write ``summary.json`` into the run directory and return the summary."""
    parser = build_parser()
    args = parse_args(parser, argv)
    dtype = _training.configure_dtype(args.dtype)
    run_dir = _training.open_run(parser, args, Path("runs/symplectic_transformer") / args.model)

    model = models.make_model(args.model)
    optimizer, schedule = make_optimizer(args.lr_start, args.lr_end, args.steps)
    params = model.init(args.seed, dtype)
    n_params = models.parameter_count(params)
    print(f"{args.model}: {n_params} parameters")
    state = _training.start_state(parser, args, run_dir, params, optimizer)
    if (done := _training.finished_summary(run_dir, state, args.steps)) is not None:
        print("run already complete")
        return done

    dataset = data.load_dataset()
    inputs, targets = jnp.asarray(dataset.inputs, dtype), jnp.asarray(dataset.targets, dtype)

    def next_batch(step: int) -> Batch:
        index = _training.batch_indices(args.seed, step, len(inputs), args.batch_size)
        return inputs[index], targets[index]

    with _training.summary_writer(run_dir, state.step if args.resume else None) as writer:
        result = _training.train_with_flags(run_dir, make_train_step(model, optimizer), state, next_batch, args,
                                            writer, learning_rate=schedule)
        predicted, metrics = evaluate.validate(model, result.state.params, dtype)
        diverged_at = _training.training_divergence(result) or evaluate.rollout_divergence(predicted)
        summary = _training.summarize(
            run_dir, writer, args, state, result,
            hparams=("model", "steps", "batch_size", "lr_start", "lr_end", "seed", "dtype"),
            fields={"parameters": n_params} | metrics,
            metrics=("final_loss", "rollout_error", "energy_error_max"), diverged_at=diverged_at)
    f = functools.partial(evaluate.format_metric, summary)
    print(f"{args.model}: final loss {f('final_loss', '.3e')}, rollout error {f('rollout_error', '.3e')}, "
          f"max energy error {f('energy_error_max', '.3e')}, {summary['train_time_s']:.1f} s "
          f"({f('steps_per_s', '.0f')} steps/s); logs in {run_dir}")
    if diverged_at is not None:
        print(f"{args.model}: {evaluate.describe_divergence(diverged_at)}")
    return summary


if __name__ == "__main__":
    _training.command_line(main)
