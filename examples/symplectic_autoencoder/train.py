"""Train symplectic autoencoders on linear-wave snapshots and compare them with PSD at the same reduced dimensions.

The snapshots are the implicit-midpoint solutions of the discretised linear wave equation
(:mod:`examples.symplectic_autoencoder.data`, ``2N = 2·--grid-points``) at ``--train-params``
equally spaced wave speeds ``μ ∈ [5/12, 5/6]``, every time step of ``t ∈ [0, --t-end]``. For each
reduced dimension in ``--reduced-dims`` one :class:`geometric.nn.SymplecticAutoencoder` is trained
on them with the relative reconstruction loss ``‖Z − AE(Z)‖ / ‖Z‖`` over the minibatch and
:func:`geometric.optim.riemannian_adam` (its PSD-like weights on the symplectic Stiefel manifold,
the SympNet weights Euclidean; learning rate decaying exponentially from ``--lr-start`` to
``--lr-end``). Then PSD (:func:`geometric.nn.cotangent_lift` of the same snapshots) and the
autoencoders are evaluated at the test parameters ``--test-mu``, which are not in the training set
(:mod:`examples.symplectic_autoencoder.evaluate`): reconstruction errors, and the reduced
Hamiltonian models integrated from the encoded initial state and decoded. The run directory gets
``results.md``, ``summary.json``, ``errors.png``, ``snapshots.png``, and one subdirectory
``sae_<2n>`` per reduced dimension with its checkpoints, TensorBoard logs and training summary.

Examples::

    python -m examples.symplectic_autoencoder.train                      # 2n = 2, 4, 6; ~2 min on 2 cores
    python -m examples.symplectic_autoencoder.train --resume             # continue after an interruption
    python -m examples.symplectic_autoencoder.train --paper --log-dir runs/sae_paper   # GPU-sized
    tensorboard --logdir runs/symplectic_autoencoder
"""
from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

import geometric.nn as gnn
import geometric.optim
from examples import _training
from examples.symplectic_autoencoder import data, evaluate

__all__ = ["PAPER", "apply_paper", "build_parser", "main", "make_optimizer", "make_train_step", "relative_l2_loss"]

PyTree = Any

PAPER = {"steps": 262_144, "batch_size": 4096, "encoder_blocks": 4, "decoder_blocks": 4, "encoder_layers": 2,
         "decoder_layers": 2}
"""What ``--paper`` sets: the sizes of GeometricMachineLearning.jl's symplectic-autoencoder tutorial
(``n_epochs = 262144``, batch 4096, 4 encoder and decoder blocks of 2 layers); one minibatch is an
epoch of this data set."""


def relative_l2_loss(prediction: jax.Array, target: jax.Array) -> jax.Array:
    """``‖target − prediction‖ / ‖target‖``, Frobenius norms over the whole batch."""
    return jnp.linalg.norm(target - prediction) / jnp.linalg.norm(target)


@functools.lru_cache(maxsize=16)
def make_optimizer(model: gnn.SymplecticAutoencoder, lr_start: float, lr_end: float, steps: int
                   ) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """Riemannian Adam with ``lr(k) = lr_start · (lr_end / lr_start)^(k / steps)``, and that schedule.

    The manifolds come from ``model.manifolds`` (the symplectic Stiefel manifold at the PSD-like
    weights, Euclidean elsewhere). Cached, so that runs with equal flags in one process share one
    compiled training step.
    """
    schedule = optax.exponential_decay(lr_start, transition_steps=max(steps, 1), decay_rate=lr_end / lr_start)
    return geometric.optim.riemannian_adam(schedule, model.manifolds), schedule


@functools.lru_cache(maxsize=16)
def make_train_step(model: gnn.SymplecticAutoencoder, optimizer: optax.GradientTransformation
                    ) -> Callable[[PyTree, PyTree, jax.Array], tuple[PyTree, PyTree, jax.Array]]:
    """The jitted ``train_step(params, opt_state, snapshots) -> (params, opt_state, loss)``."""

    def loss(params: PyTree, batch: jax.Array) -> jax.Array:
        return relative_l2_loss(model(params, batch), batch)

    return _training.make_train_step(loss, optimizer)


def _even_dimension(text: str) -> int:
    value = _training.at_least(2)(text)
    if value % 2:
        raise argparse.ArgumentTypeError(f"expected an even integer ≥ 2 (2n); got {text!r}")
    return value


def _flag_errors(args: argparse.Namespace) -> str | None:
    if max(args.reduced_dims) >= 2 * args.grid_points:
        return (f"argument --reduced-dims: below the full dimension 2·--grid-points = {2 * args.grid_points}; "
                f"got {max(args.reduced_dims)}")
    most = (2 * args.grid_points - max(args.reduced_dims)) // 2 + 1
    for flag in ("encoder_blocks", "decoder_blocks"):
        if getattr(args, flag) > most:
            return (f"argument --{flag.replace('_', '-')}: at most (2N − 2n)/2 + 1 = {most} for --grid-points "
                    f"{args.grid_points} and 2n = {max(args.reduced_dims)}; got {getattr(args, flag)}")
    if len(set(args.reduced_dims)) < len(args.reduced_dims):
        return f"argument --reduced-dims: each dimension once; got {args.reduced_dims}"
    trained = data.training_parameters(args.train_params)
    for mu in args.test_mu:
        if np.any(np.isclose(mu, trained, rtol=0, atol=1e-9)):
            return f"argument --test-mu: {mu} is a training parameter (--train-params {args.train_params}); pick another"
    return None


def build_parser() -> argparse.ArgumentParser:
    parser = _training.ArgumentParser(prog="python -m examples.symplectic_autoencoder.train",
                                      description=__doc__.split("\n\n")[0], checks=[_flag_errors])
    parser.add_argument("--reduced-dims", type=_even_dimension, nargs="+", default=[2, 4, 6],
                        help="reduced dimensions 2n: one autoencoder and one PSD each")
    parser.add_argument("--grid-points", type=_training.at_least(2), default=128,
                        help="interior grid points N (the full-order dimension is 2N)")
    parser.add_argument("--time-steps", type=_training.positive_int, default=100,
                        help="implicit-midpoint steps over [0, --t-end]")
    parser.add_argument("--t-end", type=_training.positive_float, default=1.0, help="final time")
    parser.add_argument("--train-params", type=_training.positive_int, default=10,
                        help="training parameters μ, equally spaced over [5/12, 5/6]")
    parser.add_argument("--test-mu", type=_training.positive_float, nargs="+", default=[0.5, 0.7],
                        help="test parameters μ (not training parameters)")
    parser.add_argument("--substeps", type=_training.positive_int, default=100,
                        help="implicit-midpoint steps of the reduced models per full-order time step")
    _training.add_common_arguments(parser, steps=1000, batch_size=128)
    parser.add_argument("--lr-start", type=_training.positive_float, default=1e-2, help="initial learning rate")
    parser.add_argument("--lr-end", type=_training.positive_float, default=1e-4, help="learning rate at the last step")
    parser.add_argument("--encoder-blocks", type=_training.at_least(2), default=2,
                        help="dimensions the encoder passes through, 2N and 2n included (n_encoder_blocks): "
                             "one PSD-like layer fewer")
    parser.add_argument("--encoder-layers", type=_training.positive_int, default=4,
                        help="SympNet layers per encoder block (n_encoder_layers)")
    parser.add_argument("--decoder-blocks", type=_training.at_least(2), default=3,
                        help="dimensions the decoder passes through, 2n and 2N included (n_decoder_blocks): "
                             "one PSD-like layer fewer")
    parser.add_argument("--decoder-layers", type=_training.positive_int, default=1,
                        help="SympNet layers per decoder block (n_decoder_layers)")
    parser.add_argument("--sympnet-upscale", type=_training.positive_int, default=5,
                        help="width factor of the SympNet gradient layers (sympnet_upscale)")
    parser.add_argument("--paper", action="store_true",
                        help="the sizes of GeometricMachineLearning.jl's tutorial: " +
                             ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in PAPER.items()) +
                             " (overrides those flags; a GPU run)")
    return parser


def apply_paper(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with :data:`PAPER`'s sizes if ``--paper`` was given."""
    if args.paper:
        for key, value in PAPER.items():
            setattr(args, key, value)
    return args


def _train_one(parser: argparse.ArgumentParser, args: argparse.Namespace, run_dir: Path, dim: int,
               snapshots: np.ndarray, dtype: jnp.dtype) -> tuple[gnn.SymplecticAutoencoder, PyTree, dict[str, Any]]:
    """Train (or resume, or read back) the autoencoder at ``2n = dim``; its parameters and training summary."""
    sub = evaluate.subrun(run_dir, dim)
    model = evaluate.make_model(vars(args), dim)
    optimizer, schedule = make_optimizer(model, args.lr_start, args.lr_end, args.steps)
    params = evaluate.init_params(model, args.seed, dtype)
    count = sum(leaf.size for leaf in jax.tree_util.tree_leaves(params))
    state = _training.start_state(parser, args, sub, params, optimizer)
    if (done := _training.finished_summary(sub, state, args.steps)) is not None:
        print(f"2n = {dim}: already trained")
        return model, state.params, done

    def next_batch(step: int) -> jax.Array:
        return jnp.asarray(snapshots[_training.batch_indices(args.seed, step, len(snapshots), args.batch_size)])

    with _training.summary_writer(sub, state.step if args.resume else None) as writer:
        result = _training.train_with_flags(sub, make_train_step(model, optimizer), state, next_batch, args, writer,
                                            learning_rate=schedule)
        summary = _training.summarize(sub, writer, args, state, result,
                                      hparams=("steps", "batch_size", "lr_start", "lr_end", "seed", "dtype"),
                                      fields={"reduced_dim": dim, "parameters": count}, metrics=("final_loss",),
                                      diverged_at=_training.training_divergence(result))
    print(f"2n = {dim}: {count} parameters, final loss {_training.format_value(summary['final_loss'], '.3e')}, "
          f"{summary['train_time_s']:.1f} s ({_training.format_value(summary['steps_per_s'], '.0f')} steps/s)")
    if summary["diverged"]:
        print(f"2n = {dim}: {_training.describe_divergence(summary['diverged_at'])}")
    return model, result.state.params, summary


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train every autoencoder, evaluate them against PSD, write the run directory; return the summary."""
    parser = build_parser()
    args = apply_paper(parser.parse_args(argv))
    start = time.perf_counter()
    dtype = _training.configure_dtype(args.dtype)
    run_dir = args.log_dir if args.log_dir is not None else Path("runs/symplectic_autoencoder")
    # Each autoencoder's directory keeps its checkpoints and a copy of the flags: a fresh run there,
    # or a resumption with other flags, is refused as for any training run.
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in sorted(vars(args).items()) if k != "log_dir"}
    for dim in args.reduced_dims:
        sub = _training.make_directory(parser, evaluate.subrun(run_dir, dim), "--log-dir")
        try:
            _training.check_resumable(sub, config, args.resume)
        except ValueError as error:
            parser.error(str(error))
    run_dir = _training.open_run(parser, args, run_dir)

    train = evaluate.training_solutions(vars(args))
    test = evaluate.reference_solutions(vars(args))
    snapshots = train.states.reshape(-1, train.states.shape[-1]).astype(dtype)
    print(f"linear wave equation: 2N = {snapshots.shape[-1]}, {len(snapshots)} snapshots "
          f"({args.train_params} parameters × {args.time_steps + 1} times), test μ = {args.test_mu}")
    autoencoders, trained = {}, {}
    for dim in args.reduced_dims:
        model, params, summary = _train_one(parser, args, run_dir, dim, snapshots, dtype)
        autoencoders[dim], trained[str(dim)] = (model, params), summary
    result = evaluate.evaluate(autoencoders, train, test, args.substeps)
    config["log_dir"] = str(run_dir)
    return evaluate.report(result, test, run_dir, {"config": config, "training": trained,
                                                   "total_time_s": time.perf_counter() - start})


if __name__ == "__main__":
    _training.command_line(main)
