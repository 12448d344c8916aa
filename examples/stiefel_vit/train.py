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
``summary.json`` holds the final values.

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m examples.stiefel_vit.train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default="manifold_adam", help="default manifold_adam")
    _training.add_common_arguments(parser, steps=1000, batch_size=128)
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (cosine decay to 0)")
    parser.add_argument("--eval-every", type=int, default=50, help="evaluate on the train and test sets every N steps")
    parser.add_argument("--train-size", type=int, default=None, help="use only the first N training images")
    parser.add_argument("--width", type=int, default=32, help="token width d (default %(default)s)")
    parser.add_argument("--heads", type=int, default=4, help="attention heads, each of width d/heads")
    parser.add_argument("--depth", type=int, default=2, help="transformer blocks")
    return parser


def _read_history(path: Path, up_to: int) -> list[dict[str, float]]:
    if not path.exists():
        return []
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["step"] <= up_to]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train, write ``metrics.jsonl`` and ``summary.json`` into the run directory; return the summary."""
    args = build_parser().parse_args(argv)
    dtype = _training.configure_dtype(args.dtype)
    run_dir = args.log_dir if args.log_dir is not None else Path("runs/stiefel_vit") / args.optimizer
    args.log_dir = run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    _training.check_resumable(run_dir, {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                              args.resume)

    digits = data.load_digits()
    train_x, train_y = digits.train_x[:args.train_size].astype(dtype), digits.train_y[:args.train_size]
    test_x, test_y = digits.test_x.astype(dtype), digits.test_y
    config = model.ViTConfig(tokens=train_x.shape[1], patch_dim=train_x.shape[2], width=args.width,
                             heads=args.heads, depth=args.depth, mlp_width=2 * args.width)
    params = model.init(np.random.default_rng(args.seed), config, dtype)
    optimizer, schedule = make_optimizer(args.optimizer, config, dtype, args.lr, args.steps)
    state = _training.TrainState(0, params, _training.init_optimizer(optimizer, params), args.seed)
    n_params = sum(x.size for x in jax.tree_util.tree_leaves(params))
    print(f"vit ({args.optimizer}): {n_params} parameters, {len(train_x)} train / {len(test_x)} test images")
    checkpoint = _training.latest_checkpoint(run_dir) if args.resume else None
    if checkpoint is not None:
        state = _training.load_checkpoint(checkpoint, state)
        print(f"resuming {run_dir} from step {state.step}")

    # A resumed run forgets the evaluations after its checkpoint: they are about to be redone.
    history_path = run_dir / "metrics.jsonl"
    history = _read_history(history_path, state.step)
    history_path.write_text("".join(json.dumps(r) + "\n" for r in history))

    def evaluate(params: PyTree, step: int) -> dict[str, float]:
        train_loss, train_accuracy = _metrics(params, train_x, train_y)
        test_loss, test_accuracy = _metrics(params, test_x, test_y)
        record = {"train_loss": float(train_loss), "train_accuracy": float(train_accuracy),
                  "test_loss": float(test_loss), "test_accuracy": float(test_accuracy),
                  "orthonormality_error": float(_orthonormality_error(params))}
        history.append({"step": step} | record)
        with history_path.open("a") as f:
            f.write(json.dumps(history[-1]) + "\n")
        return record

    def next_batch(step: int) -> Batch:
        index = _training.batch_indices(args.seed, step, len(train_x), args.batch_size)
        return train_x[index], train_y[index]

    from tensorboardX import SummaryWriter

    with SummaryWriter(logdir=str(run_dir), purge_step=state.step if checkpoint is not None else None) as writer:
        result = _training.train_loop(run_dir, make_train_step(optimizer), state, next_batch, steps=args.steps,
                                      checkpoint_every=args.checkpoint_every, log_every=args.log_every,
                                      writer=writer, progress=not args.no_progress, learning_rate=schedule,
                                      evaluate=evaluate, eval_every=args.eval_every)
        final = {k: v for k, v in history[-1].items() if k != "step"}
        summary = {"optimizer": args.optimizer, "parameters": n_params, "steps": args.steps,
                   "batch_size": args.batch_size, "lr": args.lr, "seed": args.seed, "dtype": args.dtype,
                   "resumed_from": state.step, "final_loss": result.final_loss,
                   "train_time_s": result.train_time, "steps_per_s": result.steps_per_second} | final
        writer.add_hparams({k: summary[k] for k in ("optimizer", "steps", "batch_size", "lr", "seed", "dtype")},
                           {f"hparam/{k}": summary[k] for k in ("test_accuracy", "test_loss", "orthonormality_error")},
                           name="hparams")
    _training.write_json(run_dir / "summary.json", summary)
    print(f"vit ({args.optimizer}): test accuracy {summary['test_accuracy']:.4f}, test loss "
          f"{summary['test_loss']:.4f}, ‖WᵀW − I‖ {summary['orthonormality_error']:.1e}, "
          f"{summary['train_time_s']:.1f} s ({summary['steps_per_s']:.0f} steps/s); logs in {run_dir}")
    return summary


if __name__ == "__main__":
    main()
