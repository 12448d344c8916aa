"""What every example's training program shares: flags, batch order, checkpoints, the loop, logs.

A run lives in one directory (``--log-dir``): ``config.json`` (the flags), TensorBoard event files
(scalars and hyperparameters, via ``tensorboardX``), checkpoints ``checkpoint_<step>.npz`` and, at
the end, ``summary.json``. The training step is a pure jitted function
``train_step(params, opt_state, batch) -> (params, opt_state, loss)``; the batch order is a function
of the seed and the step only (:func:`batch_indices`), so ``--resume`` continues a stopped run to
bit-for-bit the result of an uninterrupted one.

Checkpoints are ``np.savez`` archives of the flattened parameters (``params_000``, …), the flattened
optimizer state (``opt_state_000``, …), the step and the seed. The seed is the whole random state:
the initialisation draws from it once, and the batch of step ``k`` is a function of ``(seed, k)``.
Checkpoints are restored into the pytree structure of a freshly initialised run, so a checkpoint is
read back only by the program (and flags) that wrote it.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

__all__ = [
    "TrainState",
    "TrainResult",
    "add_common_arguments",
    "batch_indices",
    "check_resumable",
    "configure_dtype",
    "init_optimizer",
    "latest_checkpoint",
    "load_checkpoint",
    "load_params",
    "make_train_step",
    "save_checkpoint",
    "train_loop",
    "write_json",
]

PyTree = Any
TrainStep = Callable[[PyTree, PyTree, PyTree], tuple[PyTree, PyTree, jax.Array]]


def add_common_arguments(parser: argparse.ArgumentParser, *, steps: int, batch_size: int) -> None:
    """The command-line flags every example's ``train`` shares."""
    parser.add_argument("--steps", type=int, default=steps, help="number of optimizer steps (default %(default)s)")
    parser.add_argument("--batch-size", type=int, default=batch_size, help="minibatch size (default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the initialisation and batch order")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                        help="parameter and data dtype (float64 turns on jax_enable_x64)")
    parser.add_argument("--log-dir", type=Path, default=None,
                        help="run directory: TensorBoard logs, checkpoints, summary.json")
    parser.add_argument("--checkpoint-every", type=int, default=1000,
                        help="save a checkpoint every N steps, and at the end (0: only at the end)")
    parser.add_argument("--log-every", type=int, default=10, help="write scalars every N steps")
    parser.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --log-dir")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (batch jobs)")


def configure_dtype(name: str) -> jnp.dtype:
    """The JAX dtype named ``name``; float64 needs (and turns on) ``jax_enable_x64`` for this program."""
    if name == "float64" and not jax.config.jax_enable_x64:
        jax.config.update("jax_enable_x64", True)
    return jnp.dtype(name)


@functools.lru_cache(maxsize=16)
def make_train_step(loss: Callable[[PyTree, PyTree], jax.Array], optimizer: optax.GradientTransformation) -> TrainStep:
    """The jitted ``train_step(params, opt_state, batch) -> (params, opt_state, loss)`` of ``loss(params, batch)``.

    Pure: the batch comes in as an argument, so data parallelism only has to shard it. Cached on
    ``(loss, optimizer)`` (the examples' optimizer factories are cached too), so that runs with
    equal flags in one process (a sweep, the demo, the tests) share one compiled step.
    """

    @jax.jit
    def train_step(params, opt_state, batch):
        value, grads = jax.value_and_grad(loss)(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    return train_step


# Jitted, so that the initialisation is one compilation (cached across runs with equal flags), not
# one dispatch per tiny array.
@functools.partial(jax.jit, static_argnums=0)
def init_optimizer(optimizer: optax.GradientTransformation, params: PyTree) -> PyTree:
    """``optimizer.init(params)``."""
    return optimizer.init(params)


def batch_indices(seed: int, step: int, n: int, batch_size: int) -> np.ndarray:
    """Indices of minibatch ``step``: epoch ``e`` walks a permutation seeded by ``(seed, e)``.

    A pure function of its arguments (the last ``n mod batch_size`` samples of each epoch's order
    are skipped), so a resumed run sees exactly the batches of an uninterrupted one.
    """
    batch_size = min(batch_size, n)
    per_epoch = n // batch_size
    epoch, position = divmod(step, per_epoch)
    return _permutation(seed, epoch, n)[position * batch_size:(position + 1) * batch_size]


_PERMUTATIONS: dict[tuple[int, int, int], np.ndarray] = {}


def _permutation(seed: int, epoch: int, n: int) -> np.ndarray:
    key = (seed, epoch, n)
    if key not in _PERMUTATIONS:
        _PERMUTATIONS.clear()  # one epoch's order at a time
        _PERMUTATIONS[key] = np.random.default_rng((seed, epoch)).permutation(n)
    return _PERMUTATIONS[key]


class TrainState(NamedTuple):
    """Everything a checkpoint holds."""

    step: int  # optimizer steps taken
    params: PyTree
    opt_state: PyTree
    seed: int  # the random state: batch order is a function of (seed, step)


class TrainResult(NamedTuple):
    """What :func:`train_loop` hands back."""

    state: TrainState
    losses: np.ndarray  # (steps run in this call,) the training loss of each step
    final_loss: float  # mean loss of the last ``log_every`` steps
    train_time: float  # seconds in the loop, this call, compilation included
    steps_per_second: float  # after the first (compiling) step, evaluations and checkpoints left out


def _checkpoint_path(run_dir: Path, step: int) -> Path:
    return run_dir / f"checkpoint_{step:08d}.npz"


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint with the highest step in ``run_dir``, or None."""
    paths = sorted(Path(run_dir).glob("checkpoint_*.npz"))
    return paths[-1] if paths else None


def save_checkpoint(run_dir: Path, state: TrainState) -> Path:
    """Write ``checkpoint_<step>.npz`` atomically (a crash never leaves half a checkpoint)."""
    arrays = {"step": np.asarray(state.step), "seed": np.asarray(state.seed)}
    for name in ("params", "opt_state"):
        for i, leaf in enumerate(jax.tree_util.tree_leaves(getattr(state, name))):
            arrays[f"{name}_{i:03d}"] = np.asarray(leaf)
    path = _checkpoint_path(run_dir, state.step)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)
    return path


def _restore_tree(path: Path, archive, name: str, template: PyTree) -> PyTree:
    leaves, treedef = jax.tree_util.tree_flatten(template)
    stored = sorted((k for k in archive.files if k.startswith(name + "_")), key=lambda k: int(k.rpartition("_")[2]))
    if len(stored) != len(leaves):
        raise ValueError(f"load_checkpoint: {path} holds {len(stored)} `{name}` leaves; "
                         f"this run has {len(leaves)}. Was it written with other flags?")
    restored = []
    for key, leaf in zip(stored, leaves):
        value = archive[key]
        if value.shape != leaf.shape or value.dtype != leaf.dtype:
            raise ValueError(f"load_checkpoint: {path}: `{key}` has shape {value.shape} and dtype "
                             f"{value.dtype}; this run expects {leaf.shape}, {leaf.dtype}.")
        restored.append(jnp.asarray(value))
    return jax.tree_util.tree_unflatten(treedef, restored)


def load_checkpoint(path: Path, template: TrainState) -> TrainState:
    """Read a checkpoint into the pytree structure of ``template`` (a freshly initialised state).

    Raises:
        ValueError: if the checkpoint's leaves do not match the template's count, shapes or dtypes.
    """
    with np.load(path) as archive:
        return TrainState(int(archive["step"]),
                          _restore_tree(path, archive, "params", template.params),
                          _restore_tree(path, archive, "opt_state", template.opt_state),
                          int(archive["seed"]))


def load_params(path: Path, template: PyTree) -> PyTree:
    """Read only the parameters of a checkpoint into the structure of ``template`` (for evaluation).

    ``template`` may hold arrays or ``jax.ShapeDtypeStruct`` leaves (``jax.eval_shape`` of the init).
    """
    with np.load(path) as archive:
        return _restore_tree(path, archive, "params", template)


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


# Flags that do not change the trained parameters may differ between a run and its resumption.
_RESUME_INSENSITIVE = ("resume", "checkpoint_every", "log_every", "eval_every", "no_progress", "cache_dir", "log_dir",
                       "devices")


def check_resumable(run_dir: Path, config: Mapping[str, Any], resume: bool) -> None:
    """Write ``config.json``; with ``resume``, first check that the stored one matches ``config``.

    Raises:
        ValueError: resuming with flags that change the result (steps, learning rates, …), or
            starting afresh in a directory that already holds checkpoints.
    """
    path = run_dir / "config.json"
    if resume and path.exists():
        stored = json.loads(path.read_text())
        differ = {k: (stored.get(k), v) for k, v in config.items()
                  if k not in _RESUME_INSENSITIVE and stored.get(k) != v}
        if differ:
            raise ValueError(f"--resume: flags differ from the stopped run in {run_dir}: "
                             + ", ".join(f"{k} was {a!r}, now {b!r}" for k, (a, b) in differ.items()))
    elif not resume and latest_checkpoint(run_dir) is not None:
        raise ValueError(f"{run_dir} already holds checkpoints: pass --resume to continue, "
                         "or choose another --log-dir.")
    write_json(path, config)


def train_loop(
    run_dir: Path,
    train_step: TrainStep,
    state: TrainState,
    next_batch: Callable[[int], PyTree],
    *,
    steps: int,
    checkpoint_every: int,
    log_every: int,
    writer,
    progress: bool = True,
    learning_rate: Callable[[int], float] | None = None,
    evaluate: Callable[[PyTree, int], Mapping[str, float]] | None = None,
    eval_every: int = 0,
) -> TrainResult:
    """Run ``train_step`` from ``state.step`` to ``steps``, logging, checkpointing and timing it.

    Args:
        run_dir: where checkpoints go.
        train_step: the pure jitted step ``(params, opt_state, batch) -> (params, opt_state, loss)``.
        state: where to start (fresh or restored).
        next_batch: the batch of a given step (a function of the step only).
        steps: the step to stop at.
        checkpoint_every: checkpoint interval in steps (0: only at the end).
        log_every: interval of the TensorBoard scalars and the progress bar's running loss.
        writer: a ``tensorboardX.SummaryWriter``.
        progress: show a ``tqdm`` progress bar.
        learning_rate: optional schedule ``step -> learning rate``, logged with the loss.
        evaluate: optional ``(params, step) -> {name: value}``, logged under ``eval/`` every
            ``eval_every`` steps and at the end.
        eval_every: interval of ``evaluate`` (0: only at the end).

    A ``KeyboardInterrupt`` saves a checkpoint of the last finished step before it propagates.
    """
    from tqdm import tqdm

    step, params, opt_state, seed = state
    losses: list[jax.Array] = []
    pending: list[tuple[int, jax.Array]] = []
    recent: list[float] = []
    bar = tqdm(total=steps, initial=step, disable=not progress, dynamic_ncols=True, mininterval=0.5, unit="step")
    start = time.perf_counter()
    after_first = None
    set_aside = 0.0  # seconds of evaluations and checkpoints, left out of the steps per second
    try:
        while step < steps:
            # One assignment, so an interrupt never leaves `step` and `params` out of step.
            (params, opt_state, loss), step = train_step(params, opt_state, next_batch(step)), step + 1
            losses.append(loss)
            pending.append((step, loss))
            if after_first is None:
                loss.block_until_ready()
                after_first = time.perf_counter()
            if step % log_every == 0 or step == steps:
                recent = [float(value) for _, value in pending]
                for s, value in zip((s for s, _ in pending), recent):
                    writer.add_scalar("train/loss", value, s)
                pending = []
                if learning_rate is not None:
                    writer.add_scalar("train/learning_rate", float(learning_rate(step)), step)
                bar.set_postfix(loss=f"{np.mean(recent):.3e}", refresh=False)
            aside = time.perf_counter()
            if evaluate is not None and eval_every and step % eval_every == 0 and step != steps:
                for name, value in evaluate(params, step).items():
                    writer.add_scalar(f"eval/{name}", value, step)
            if checkpoint_every and step % checkpoint_every == 0:
                save_checkpoint(run_dir, TrainState(step, params, opt_state, seed))
            set_aside += time.perf_counter() - aside
            bar.update(1)
    except KeyboardInterrupt:
        bar.close()
        # ``params`` and ``opt_state`` belong to ``step``: the interrupted step was never assigned.
        path = save_checkpoint(run_dir, TrainState(step, params, opt_state, seed))
        print(f"\ninterrupted at step {step}; saved {path}; continue with --resume")
        raise
    bar.close()
    jax.block_until_ready(params)
    end = time.perf_counter()
    final = TrainState(step, params, opt_state, seed)
    if latest_checkpoint(run_dir) != _checkpoint_path(run_dir, step):
        save_checkpoint(run_dir, final)
    if evaluate is not None:
        for name, value in evaluate(params, step).items():
            writer.add_scalar(f"eval/{name}", value, step)
    writer.flush()
    run = len(losses)
    rate = (run - 1) / (end - after_first - set_aside) if run > 1 and end > after_first + set_aside else float("nan")
    return TrainResult(final, np.asarray([float(x) for x in losses]),
                       float(np.mean(recent)) if recent else float("nan"), end - start, rate)
