"""Train the digits vision transformer with Stiefel-constrained attention, or unconstrained.

``--optimizer`` picks the training of the attention projections (:mod:`examples.stiefel_vit.model`):

- ``manifold_adam``: :func:`geometric.optim.manifold_adam`, Adam in the global tangent space
  (Brantner), projections on St(d, e);
- ``riemannian_adam``: :func:`geometric.optim.riemannian_adam`, Adam with transported moments and a
  QR retraction, projections on St(d, e);
- ``adam``: ``optax.adam`` on every parameter, projections unconstrained (same initial point).

All three use the same Adam hyperparameters (``β₁ = 0.9, β₂ = 0.999, ε = 1e-8``) and the same
cosine-decayed learning rate; the Euclidean parameters get plain Adam in every case. Every
``--eval-every`` steps the loss and accuracy on the whole train and test sets and the projections'
distance from orthonormality are logged (TensorBoard ``eval/`` and ``metrics.jsonl``);
``summary.json`` holds the final values, ``null`` where they are not finite, and ``"diverged"`` with
``"diverged_at"`` (``{"where": "training", "step": k}``, the first step whose loss is not finite).

Examples::

    python -m examples.stiefel_vit.train --optimizer manifold_adam --log-dir runs/stiefel_vit/manifold_adam
    tensorboard --logdir runs/stiefel_vit
"""
from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

import geometric
from examples import _training
from examples.stiefel_vit import data, model

__all__ = ["OPTIMIZERS", "build_parser", "main", "make_optimizer", "make_train_step"]

PyTree = Any
Batch = tuple[jax.Array, jax.Array]  # (patches (batch, T, P), labels (batch,))
OPTIMIZERS = ("manifold_adam", "riemannian_adam", "adam")
ADAM = {"b1": 0.9, "b2": 0.999, "eps": 1e-8}


@functools.lru_cache(maxsize=16)
def make_optimizer(name: str, config: model.ViTConfig, dtype: jnp.dtype, lr: float, steps: int
                   ) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """The optimizer called ``name`` (one of :data:`OPTIMIZERS`) and its cosine learning-rate schedule.

    Cached, like :func:`make_train_step`, so that runs with equal flags in one process share one
    compiled training step.
    """
    schedule = optax.cosine_decay_schedule(lr, max(steps, 1))
    if name == "adam":
        return optax.adam(schedule, **ADAM), schedule
    factory = {"manifold_adam": geometric.optim.manifold_adam,
               "riemannian_adam": geometric.optim.riemannian_adam}[name]
    return factory(schedule, model.manifolds(model.init(np.random.default_rng(0), config, dtype)), **ADAM), schedule


def cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))


def _loss(params: PyTree, batch: Batch) -> jax.Array:
    patches, labels = batch
    return cross_entropy(model.apply(params, patches), labels)


def make_train_step(optimizer: optax.GradientTransformation
                    ) -> Callable[[PyTree, PyTree, Batch], tuple[PyTree, PyTree, jax.Array]]:
    """The pure jitted ``train_step(params, opt_state, batch) -> (params, opt_state, loss)``."""
    return _training.make_train_step(_loss, optimizer)


@jax.jit
def _metrics(params: PyTree, patches: jax.Array, labels: jax.Array) -> tuple[jax.Array, jax.Array]:
    logits = model.apply(params, patches)
    return cross_entropy(logits, labels), jnp.mean(jnp.argmax(logits, axis=-1) == labels)


_orthonormality_error = jax.jit(model.orthonormality_error)


def _width_error(args: argparse.Namespace) -> str | None:
    if args.width % args.heads:
        return f"--width ({args.width}) must be divisible by --heads ({args.heads})."
    return None


def build_parser() -> argparse.ArgumentParser:
    parser = _training.ArgumentParser(prog="python -m examples.stiefel_vit.train", description=__doc__.split("\n\n")[0],
                                      checks=[_width_error])
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default="manifold_adam", help="how to train the projections")
    _training.add_common_arguments(parser, steps=1000, batch_size=128)
    parser.add_argument("--lr", type=_training.positive_float, default=3e-3, help="peak learning rate (cosine decay to 0)")
    parser.add_argument("--eval-every", type=_training.nonnegative_int, default=50,
                        help="evaluate on the train and test sets every N steps (0: only at the end)")
    parser.add_argument("--train-size", type=_training.positive_int, default=None,
                        help="use only the first N training images (None: all)")
    parser.add_argument("--width", type=_training.positive_int, default=32, help="token width d")
    parser.add_argument("--heads", type=_training.positive_int, default=4, help="attention heads, each of width d/heads")
    parser.add_argument("--depth", type=_training.positive_int, default=2, help="transformer blocks")
    return parser


def _read_history(path: Path, up_to: int) -> list[dict[str, float | None]]:
    if not path.exists():
        return []
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["step"] <= up_to]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train, write ``metrics.jsonl`` and ``summary.json`` into the run directory; return the summary."""
    parser = build_parser()
    args = parser.parse_args(argv)
    digits = data.load_digits()
    if args.train_size is not None and args.train_size > len(digits.train_x):
        parser.error(f"argument --train-size: there are only {len(digits.train_x)} training images; "
                     f"got {args.train_size}")
    dtype = _training.configure_dtype(args.dtype)
    run_dir = _training.open_run(parser, args, Path("runs/stiefel_vit") / args.optimizer)

    train_x, train_y = digits.train_x[:args.train_size].astype(dtype), digits.train_y[:args.train_size]
    test_x, test_y = digits.test_x.astype(dtype), digits.test_y
    config = model.ViTConfig(tokens=train_x.shape[1], patch_dim=train_x.shape[2], width=args.width,
                             heads=args.heads, depth=args.depth, mlp_width=2 * args.width)
    params = model.init(np.random.default_rng(args.seed), config, dtype)
    optimizer, schedule = make_optimizer(args.optimizer, config, dtype, args.lr, args.steps)
    n_params = sum(x.size for x in jax.tree_util.tree_leaves(params))
    print(f"vit ({args.optimizer}): {n_params} parameters, {len(train_x)} train / {len(test_x)} test images")
    state = _training.start_state(parser, args, run_dir, params, optimizer)

    # A resumed run forgets the evaluations after its checkpoint: they are about to be redone.
    history_path = run_dir / "metrics.jsonl"
    history = _read_history(history_path, state.step)
    history_path.write_text("".join(_training.dumps(r) + "\n" for r in history))

    def evaluate(params: PyTree, step: int) -> dict[str, float]:
        train_loss, train_accuracy = _metrics(params, train_x, train_y)
        test_loss, test_accuracy = _metrics(params, test_x, test_y)
        record = {"train_loss": float(train_loss), "train_accuracy": float(train_accuracy),
                  "test_loss": float(test_loss), "test_accuracy": float(test_accuracy),
                  "orthonormality_error": float(_orthonormality_error(params))}
        history.append(_training.json_safe({"step": step} | record))
        with history_path.open("a") as f:
            f.write(_training.dumps(history[-1]) + "\n")
        return record

    def next_batch(step: int) -> Batch:
        index = _training.batch_indices(args.seed, step, len(train_x), args.batch_size)
        return train_x[index], train_y[index]

    with _training.summary_writer(run_dir, state.step if args.resume else None) as writer:
        result = _training.train_with_flags(run_dir, make_train_step(optimizer), state, next_batch, args, writer,
                                            learning_rate=schedule, evaluate=evaluate, eval_every=args.eval_every)
        diverged_at = _training.training_divergence(result)
        summary = _training.summarize(
            run_dir, writer, args, state, result,
            hparams=("optimizer", "steps", "batch_size", "lr", "seed", "dtype"),
            fields={"parameters": n_params} | {k: v for k, v in history[-1].items() if k != "step"},
            metrics=("test_accuracy", "test_loss", "orthonormality_error"), diverged_at=diverged_at)
    f = _training.format_value
    print(f"vit ({args.optimizer}): test accuracy {f(summary['test_accuracy'], '.4f')}, test loss "
          f"{f(summary['test_loss'], '.4f')}, ‖WᵀW − I‖ {f(summary['orthonormality_error'], '.1e')}, "
          f"{summary['train_time_s']:.1f} s ({f(summary['steps_per_s'], '.0f')} steps/s); logs in {run_dir}")
    if diverged_at is not None:
        print(f"vit ({args.optimizer}): {_training.describe_divergence(diverged_at)}")
    return summary


if __name__ == "__main__":
    _training.command_line(main)
