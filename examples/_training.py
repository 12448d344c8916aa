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
read back only by the program (and flags) that wrote it. The framework examples
(``examples/nnx_orthogonal.py``, ``examples/equinox_orthogonal.py``) checkpoint with Orbax instead;
they share the flags and the fallback to the newest readable checkpoint (:func:`load_latest_orbax`).

The programs behave like command-line tools:

- Flags are checked when they are parsed (:class:`ArgumentParser` and the ``argparse`` types
  :func:`at_least`, :func:`positive_float`, :func:`directory`, :func:`output_file`): a mistake is
  one line naming the flag, exit status 2, no traceback. ``--help`` shows every default.
- An output directory is checked with the flags too: a path under a regular file is a flag error
  (:func:`directory`), and a directory that cannot be created is one at the latest when it is
  (:func:`make_directory`).
- ``--resume`` reads the newest checkpoint that reads; a truncated or corrupt one is named in a
  warning and the one before it is used (:func:`load_latest`). In a directory without checkpoints
  ``--resume`` says so and starts at step 0, so that a batch job can always pass it (the first
  launch and every requeue run the same command). A larger ``--steps`` extends a finished or
  stopped run; its learning-rate schedule is then the one of the new ``--steps``, so the result
  is not that of a run started with the larger ``--steps``.
- Ctrl-C or SIGTERM (what batch schedulers send before they kill a job) saves a checkpoint of
  the last finished step and writes the losses not yet logged before the program stops.
- A run whose training loss stops being finite has *diverged*; its summary says where
  (``"diverged": true, "diverged_at": {"where": "training", "step": k}``), and every number that is
  not finite is written as ``null``: the JSON files are strict JSON (:func:`write_json`).
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import re
import signal
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import optax

if TYPE_CHECKING:
    import orbax.checkpoint as ocp

__all__ = [
    "ArgumentParser",
    "CheckpointMismatch",
    "HelpFormatter",
    "TrainState",
    "TrainResult",
    "add_common_arguments",
    "at_least",
    "batch_indices",
    "check_flags",
    "check_resumable",
    "checkpoints",
    "command_line",
    "configure_dtype",
    "demo_directory",
    "describe_divergence",
    "directory",
    "dumps",
    "evaluated_summary",
    "finished_summary",
    "format_value",
    "init_optimizer",
    "initial_state",
    "json_safe",
    "load_checkpoint",
    "load_latest",
    "load_latest_orbax",
    "load_params",
    "make_directory",
    "make_train_step",
    "nonnegative_int",
    "open_run",
    "orbax_manager",
    "output_file",
    "parse_with_preset",
    "positive_float",
    "positive_int",
    "print_demo_end",
    "report_evaluation",
    "run_directory",
    "save_checkpoint",
    "save_orbax",
    "start_state",
    "summarize",
    "summary_writer",
    "train_loop",
    "train_with_flags",
    "training_divergence",
    "write_json",
]

PyTree = Any
TrainStep = Callable[[PyTree, PyTree, PyTree], tuple[PyTree, PyTree, jax.Array]]
T = TypeVar("T")


# -- command line --------------------------------------------------------------------------------


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """``--help`` with every flag's default, and descriptions and epilogs with their line breaks."""


class ArgumentParser(argparse.ArgumentParser):
    """An ``argparse`` parser with :class:`HelpFormatter`, one-line errors and checks of several flags.

    An error is one line on stderr, ``<prog>: error: <message>``, and exit status 2: argparse's
    usage block (fifteen lines for a trainer) is left out; ``--help`` has it.

    Args:
        checks: functions ``(namespace) -> message or None``, run after parsing; a message is
            reported like any flag error.
    """

    def __init__(self, *args, checks: Sequence[Callable[[argparse.Namespace], str | None]] = (), **kwargs):
        super().__init__(*args, formatter_class=HelpFormatter, **kwargs)
        self.checks = list(checks)

    def parse_args(self, args=None, namespace=None):
        parsed = super().parse_args(args, namespace)
        for check in self.checks:
            if (message := check(parsed)) is not None:
                self.error(message)
        return parsed

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message.rstrip('.')}\n")


def at_least(least: int) -> Callable[[str], int]:
    """An ``argparse`` type: an integer ``≥ least``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < least:
            raise argparse.ArgumentTypeError(f"expected an integer ≥ {least}; got {text!r}")
        return value

    return parse


positive_int = at_least(1)
nonnegative_int = at_least(0)


def positive_float(text: str) -> float:
    """An ``argparse`` type: a finite number ``> 0`` (a rate)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0; got {text!r}")
    return value


def _blocking_file(path: Path) -> Path | None:
    """The regular file (or other non-directory) that ``path`` or one of its parents is, if any.

    ``Path.exists`` is False for ``/etc/passwd/x`` (the system says "not a directory"), so the
    parents are looked at one by one: the nearest one that exists decides.
    """
    for candidate in (path, *path.parents):
        if candidate.exists():
            return None if candidate.is_dir() else candidate
    return None


def directory(text: str) -> Path:
    """An ``argparse`` type: a directory to write into; it may not exist yet, but neither it nor a parent is a file.

    ``Path.exists`` alone lets ``/etc/passwd/x`` through, and ``mkdir`` fails on it later.
    """
    path = Path(text)
    if (blocking := _blocking_file(path)) == path:
        raise argparse.ArgumentTypeError(f"{text!r} exists and is not a directory")
    if blocking is not None:
        raise argparse.ArgumentTypeError(f"{text!r} cannot be a directory: {str(blocking)!r} is a file")
    return path


def output_file(text: str) -> Path:
    """An ``argparse`` type: a file to write; it may not exist yet, but it is no directory and no parent is a file."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a directory")
    if (blocking := _blocking_file(path.parent)) is not None:
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: {str(blocking)!r} is a file, not a directory")
    return path


def run_directory(text: str) -> Path:
    """An ``argparse`` type: a training run directory to read, one with a ``config.json`` (an evaluation's input)."""
    path = Path(text)
    if not (path / "config.json").is_file():
        raise argparse.ArgumentTypeError(f"{text!r} is not a training run directory (it has no config.json)")
    return path


def make_directory(parser: argparse.ArgumentParser, path: Path, flag: str) -> Path:
    """Create ``path`` and its parents; a failure (no permission, a read-only file system) is ``parser.error``.

    :func:`directory` has already refused a path under a file when the flags were parsed; this
    also covers a default directory and what only the attempt tells (permissions).
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        parser.error(f"argument {flag}: cannot create the directory {str(path)!r}: {error.strerror or error}")
    return path


class _Rejected(Exception):
    pass


def check_flags(parser: argparse.ArgumentParser, program: argparse.ArgumentParser, flags: Sequence[str],
                what: str) -> None:
    """Parse ``flags`` with ``program`` (another program's parser) and report a mistake through ``parser``.

    For programs that hand flags on (a sweep, a demo): the mistake is reported before any run
    starts, as ``parser.error`` (one line naming ``what`` and the flag, exit status 2).
    """

    def reject(message: str):
        raise _Rejected(message)

    program.error = reject  # instead of printing the other program's usage and exiting
    try:
        program.parse_args(flags)
    except _Rejected as error:
        parser.error(f"{what}: {error}")


def add_common_arguments(parser: argparse.ArgumentParser, *, steps: int, batch_size: int) -> None:
    """The command-line flags every example's ``train`` shares."""
    parser.add_argument("--steps", type=positive_int, default=steps,
                        help="number of optimizer steps (with --resume: may grow, to extend the run)")
    parser.add_argument("--batch-size", type=positive_int, default=batch_size, help="minibatch size")
    parser.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the initialisation and batch order")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                        help="parameter and data dtype (float64 turns on jax_enable_x64)")
    parser.add_argument("--log-dir", type=directory, default=None,
                        help="run directory: TensorBoard logs, checkpoints, summary.json (None: runs/EXAMPLE/NAME)")
    parser.add_argument("--checkpoint-every", type=nonnegative_int, default=1000,
                        help="save a checkpoint every N steps, and at the end (0: only at the end)")
    parser.add_argument("--log-every", type=positive_int, default=10, help="write scalars every N steps")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest readable checkpoint in --log-dir (none: start at step 0)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (batch jobs)")


def parse_with_preset(parser: argparse.ArgumentParser, argv: Sequence[str] | None, flag: str,
                      defaults: Mapping[str, Any]) -> argparse.Namespace:
    """Parse ``argv`` (None: ``sys.argv[1:]``); where it holds ``flag`` (``--paper``), ``defaults`` replace
    the parser's defaults first, so that flags given beside it win."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if flag in argv:
        parser.set_defaults(**defaults)
    return parser.parse_args(argv)


def demo_directory(parent: Path, name: str) -> Path:
    """A demo's new run directory, ``parent/<name>-<YYYYmmdd-HHMMSS>`` (local time)."""
    return parent / time.strftime(f"{name}-%Y%m%d-%H%M%S")


def print_demo_end(start: float, out: Path) -> None:
    """A demo's last lines: its time since ``start`` (``time.perf_counter``) and how to see its logs in ``out``."""
    print(f"demo finished in {time.perf_counter() - start:.0f} s")
    print(f"TensorBoard: tensorboard --logdir {out}")


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
    diverged_at: int | None  # the first step (of this call) whose loss is not finite, None if none


# -- checkpoints ---------------------------------------------------------------------------------

# Only complete names: ``save_checkpoint``'s half-written ``checkpoint_<step>.npz.tmp.npz`` never counts.
_CHECKPOINT_NAME = re.compile(r"checkpoint_(\d+)\.npz")
# What reading a truncated or corrupt archive raises (np.load, zipfile, the .npy header parser),
# and what :func:`_restore_tree` raises for a checkpoint of other flags.
_UNREADABLE = (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile)


class CheckpointMismatch(ValueError):
    """A checkpoint that reads, but holds other arrays than this run's: it was written with other flags.

    Attributes:
        reason: what differs, a phrase without the path (for :func:`load_latest`'s messages).
    """

    def __init__(self, path: Path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.reason = reason


def _checkpoint_path(run_dir: Path, step: int) -> Path:
    return run_dir / f"checkpoint_{step:08d}.npz"


def checkpoints(run_dir: Path) -> list[Path]:
    """The checkpoints in ``run_dir``, in the order of their steps (none if it does not exist)."""
    found = [(int(match[1]), path) for path in Path(run_dir).glob("checkpoint_*.npz")
             if (match := _CHECKPOINT_NAME.fullmatch(path.name))]
    return [path for _, path in sorted(found)]


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
        raise CheckpointMismatch(path, f"it holds {len(stored)} `{name}` arrays, this run has {len(leaves)}: "
                                       "written with other flags?")
    restored = []
    for key, leaf in zip(stored, leaves):
        value = archive[key]
        if value.shape != leaf.shape or value.dtype != leaf.dtype:
            raise CheckpointMismatch(path, f"its `{key}` has shape {value.shape} and dtype {value.dtype}, this "
                                           f"run expects {leaf.shape} and {leaf.dtype}: written with other flags?")
        restored.append(jnp.asarray(value))
    return jax.tree_util.tree_unflatten(treedef, restored)


def load_checkpoint(path: Path, template: TrainState) -> TrainState:
    """Read a checkpoint into the pytree structure of ``template`` (a freshly initialised state).

    Raises:
        CheckpointMismatch: the checkpoint's leaves do not match the template's count, shapes or dtypes.
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


def _unreadable_reason(error: Exception) -> str:
    """Why a checkpoint does not read, in the user's terms rather than the reader's."""
    if isinstance(error, CheckpointMismatch):
        return error.reason
    if isinstance(error, OSError) and error.strerror:  # the system's word: permission denied, an I/O error, ...
        return error.strerror
    return "truncated or corrupt"


def load_latest(run_dir: Path, load: Callable[[Path], T], *, found: Sequence[Path] | None = None,
                unreadable: tuple[type[Exception], ...] = _UNREADABLE) -> tuple[Path, T] | None:
    """``load`` the newest checkpoint of ``run_dir`` that reads; None if there is no checkpoint.

    Each newer checkpoint that does not read is named in a warning on stderr, with why (truncated
    or corrupt, a :class:`CheckpointMismatch`: written with other flags, or the system's reason,
    such as permission denied) and the checkpoint used instead. What the reader raised is not
    repeated: it does not help the user (NumPy, for one, suggests ``allow_pickle`` for a damaged
    archive).

    Args:
        run_dir: the directory, named in the messages.
        load: reads one checkpoint.
        found: the checkpoints, oldest first (default: :func:`checkpoints` of ``run_dir``).
        unreadable: the exceptions of ``load`` that mean "this checkpoint does not read".

    Raises:
        ValueError: ``run_dir`` holds checkpoints and none of them reads; the one-line message
            names each and why.
    """
    failures: list[tuple[Path, str]] = []
    for path in reversed(checkpoints(run_dir) if found is None else found):
        try:
            value = load(path)
        except unreadable as error:
            failures.append((path, _unreadable_reason(error)))
            continue
        for failed, reason in failures:
            print(f"warning: checkpoint {failed} is unreadable ({reason}); using the previous readable "
                  f"checkpoint, {path}", file=sys.stderr)
        return path, value
    if failures:
        names: dict[str, list[str]] = {}  # by reason, so that a reason shared by all is said once
        for path, reason in failures:
            names.setdefault(reason, []).append(path.name)
        raise ValueError(f"no readable checkpoint in {run_dir}: "
                         + "; ".join(f"{', '.join(n)} ({reason})" for reason, n in names.items()))
    return None


# -- Orbax checkpoints (the framework examples) ---------------------------------------------------

# Orbax and TensorStore raise many types for a damaged checkpoint (ValueError, json's
# JSONDecodeError, UnicodeDecodeError, AttributeError, ...): any exception of a restore means the
# checkpoint does not read.
_ORBAX_UNREADABLE = (Exception,)
# The start of Orbax's message for a checkpoint whose tree is not the target's.
_ORBAX_OTHER_TREE = "User-provided restore item and on-disk value metadata tree structures do not match"


@contextlib.contextmanager
def _quiet_orbax_logs() -> Iterator[None]:
    """Keep Orbax's logs of an unreadable checkpoint off stderr: :func:`load_latest_orbax` reports it, in one line.

    Orbax logs a checkpoint whose metadata does not parse as an error (through absl) when a
    ``CheckpointManager`` opens the directory.
    """
    import logging

    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _ignore_closed_loop_leftovers() -> None:
    """Drop the tracebacks of the reads a failed Orbax restore leaves behind, for the rest of the process.

    A restore that fails returns while TensorStore still reads the checkpoint's other arrays; their
    callbacks then find the restore's event loop closed, and Python reports each ``RuntimeError``
    through ``sys.unraisablehook``: dozens of tracebacks, some after the program has moved on. Only
    that error is dropped; everything else reaches the previous hook.
    """
    previous = sys.unraisablehook
    if getattr(previous, "drops_closed_loop_leftovers", False):
        return

    def hook(unraisable) -> None:
        if not (isinstance(unraisable.exc_value, RuntimeError) and str(unraisable.exc_value) == "Event loop is closed"):
            previous(unraisable)

    hook.drops_closed_loop_leftovers = True
    sys.unraisablehook = hook


def orbax_manager(directory: Path, *, max_to_keep: int) -> ocp.CheckpointManager:
    """An ``orbax.checkpoint.CheckpointManager`` of ``directory`` that keeps the last ``max_to_keep`` checkpoints.

    Opened without Orbax's log lines about checkpoints that do not read: :func:`load_latest_orbax`
    names them.
    """
    import orbax.checkpoint as ocp

    with _quiet_orbax_logs():
        return ocp.CheckpointManager(directory, options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep))


def load_latest_orbax(manager: ocp.CheckpointManager, target: PyTree, *,
                      other_flags: str = "other flags") -> tuple[int, PyTree] | None:
    """The step and state of the newest checkpoint of an Orbax ``CheckpointManager`` that reads into ``target``.

    :func:`load_latest` for the framework examples, whose checkpoints are Orbax's step directories:
    a newer checkpoint that does not read (truncated, corrupt, or holding another tree: saved with
    ``other_flags``) is named in a warning and the one before it is used.

    Args:
        manager: an ``orbax.checkpoint.CheckpointManager`` of ``ocp.args.StandardSave`` checkpoints.
        target: the structure to restore into (a fresh run's state).
        other_flags: what a checkpoint with another tree was saved with, for the messages.

    Returns:
        ``(step, restored)``, or None if the manager has no checkpoint.

    Raises:
        ValueError: there are checkpoints and none reads; the one-line message names each and why.
    """
    import orbax.checkpoint as ocp

    directory = Path(manager.directory)

    def restore(path: Path) -> PyTree:
        try:
            return manager.restore(int(path.name), args=ocp.args.StandardRestore(target))
        except _ORBAX_UNREADABLE as error:
            _ignore_closed_loop_leftovers()
            if isinstance(error, ValueError) and str(error).startswith(_ORBAX_OTHER_TREE):
                raise CheckpointMismatch(path, "its arrays are not this run's model and optimizer state: "
                                               f"saved with {other_flags}?") from None
            raise

    with _quiet_orbax_logs():
        found = load_latest(directory, restore, found=[directory / str(step) for step in sorted(manager.all_steps())],
                            unreadable=_ORBAX_UNREADABLE)
    return None if found is None else (int(found[0].name), found[1])


def resume_orbax(manager: ocp.CheckpointManager, target: PyTree, parser: argparse.ArgumentParser
                 ) -> tuple[int, PyTree] | None:
    """:func:`load_latest_orbax` for a program's ``--resume``: none readable is a flag error (exit
    2, one line), no checkpoint at all a note that training starts at step 0."""
    try:
        found = load_latest_orbax(manager, target, other_flags="another --optimizer")
    except ValueError as error:  # none of the checkpoints reads
        parser.error(str(error))
    if found is None:
        print(f"no checkpoint in {manager.directory}: starting at step 0", file=sys.stderr)
    return found


def save_orbax(manager: ocp.CheckpointManager, step: int, state: PyTree) -> None:
    """Save ``state`` as the checkpoint of ``step``; one of that step that an earlier run left unreadable is replaced.

    A run resumes from the newest checkpoint that reads, so a checkpoint of a later step that is
    already there is one that did not read; Orbax refuses to save over it.
    """
    import orbax.checkpoint as ocp

    if step in manager.all_steps():
        manager.delete(step)
    manager.save(step, args=ocp.args.StandardSave(state), force=True)


# -- run directory -------------------------------------------------------------------------------


def json_safe(value: Any) -> Any:
    """``value`` with NaN and infinities as None (strict JSON has no such numbers), NumPy scalars as Python's.

    Mappings and sequences are copied (as dicts and lists); a summary passed through it equals
    what its JSON file reads back as.
    """
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def dumps(data: Any, **kwargs) -> str:
    """Strict JSON of ``data``: NaN and infinities become ``null`` (they are not JSON numbers)."""
    return json.dumps(json_safe(data), allow_nan=False, default=str, **kwargs)


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` as :func:`dumps` does, indented, keys sorted."""
    path.write_text(dumps(data, indent=2, sort_keys=True) + "\n")


def format_value(value: Any, spec: str) -> str:
    """``format(value, spec)``, or ``n/a`` for a number a diverged run does not have (None or not finite)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return format(value, spec)


# Flags that do not change the trained parameters may differ between a run and its resumption.
# Flags that change neither the trained parameters nor the data: a resume may change them (the
# evaluation-only ones, --rollout-steps and --substeps, included).
_RESUME_INSENSITIVE = ("resume", "checkpoint_every", "log_every", "eval_every", "no_progress", "cache_dir", "log_dir",
                       "devices", "rollout_steps", "substeps")


def check_resumable(run_dir: Path, config: Mapping[str, Any], resume: bool) -> None:
    """Write ``config.json``; with ``resume``, first check that the stored one matches ``config``.

    ``steps`` may grow: that extends the run (see the module docstring for its schedule).

    Raises:
        ValueError: resuming with flags that change the result (learning rates, sizes, a smaller
            ``steps``, …), or starting afresh in a directory that already holds checkpoints.
    """
    path = run_dir / "config.json"
    if resume and path.exists() and checkpoints(run_dir):
        stored = json.loads(path.read_text())
        differ = {k: (stored.get(k), v) for k, v in config.items()
                  if k not in _RESUME_INSENSITIVE and stored.get(k) != v}
        old_steps, new_steps = differ.get("steps", (None, None))
        if isinstance(old_steps, int) and isinstance(new_steps, int) and new_steps > old_steps:
            del differ["steps"]
            if not differ:
                print(f"extending {run_dir} from --steps {old_steps} to {new_steps}: the learning-rate "
                      f"schedule of --steps {new_steps} applies from the checkpoint on")
        if differ:
            raise ValueError(f"--resume: flags differ from the stopped run in {run_dir}: "
                             + ", ".join(f"{k} was {a!r}, now {b!r}" for k, (a, b) in differ.items())
                             + " (only --steps may change, and only grow)")
    elif not resume and checkpoints(run_dir):
        raise ValueError(f"{run_dir} already holds checkpoints: pass --resume to continue, "
                         "or choose another --log-dir.")
    write_json(path, config)


def open_run(parser: argparse.ArgumentParser, args: argparse.Namespace, default_dir: Path) -> Path:
    """The run directory (``--log-dir``, else ``default_dir``), created, its ``config.json`` checked and written.

    A directory that cannot be created (:func:`make_directory`) or a conflict with a stored run
    (:func:`check_resumable`) is reported with ``parser.error``.
    """
    if args.log_dir is None:
        args.log_dir = default_dir
    make_directory(parser, args.log_dir, "--log-dir")
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in sorted(vars(args).items())}
    try:
        check_resumable(args.log_dir, config, args.resume)
    except ValueError as error:
        parser.error(str(error))
    return args.log_dir


def initial_state(parser: argparse.ArgumentParser, run_dir: Path, fresh: TrainState, resume: bool) -> TrainState:
    """``fresh``, or with ``resume`` the newest readable checkpoint of ``run_dir`` (:func:`load_latest`).

    Without a checkpoint ``--resume`` says so on stderr and starts from ``fresh``; with checkpoints
    none of which reads, it stops with ``parser.error``.
    """
    if not resume:
        return fresh
    try:
        found = load_latest(run_dir, lambda path: load_checkpoint(path, fresh))
    except ValueError as error:
        parser.error(str(error))
    if found is None:
        print(f"--resume: no checkpoint in {run_dir}; starting a new run at step 0", file=sys.stderr)
        return fresh
    path, state = found
    print(f"resuming {run_dir} from step {state.step} ({path.name})")
    return state


def start_state(parser: argparse.ArgumentParser, args: argparse.Namespace, run_dir: Path, params: PyTree,
                optimizer: optax.GradientTransformation) -> TrainState:
    """:func:`initial_state` of a fresh run from ``params`` (step 0, ``optimizer.init(params)``, ``--seed``), or
    with ``--resume`` of ``run_dir``'s newest readable checkpoint."""
    fresh = TrainState(0, params, init_optimizer(optimizer, params), args.seed)
    return initial_state(parser, run_dir, fresh, args.resume)


def finished_summary(run_dir: Path, state: TrainState, steps: int) -> dict[str, Any] | None:
    """The ``summary.json`` of ``run_dir`` if the run is complete (``state`` is at ``steps`` or beyond), else None."""
    path = run_dir / "summary.json"
    if state.step >= steps and path.exists():
        return json.loads(path.read_text())
    return None


def summary_writer(run_dir: Path, resume_step: int | None):
    """A ``tensorboardX.SummaryWriter`` into ``run_dir``.

    A resumed run (``resume_step``: its first step) drops what was logged after its checkpoint:
    those steps are about to be logged again.
    """
    from tensorboardX import SummaryWriter

    return SummaryWriter(logdir=str(run_dir), purge_step=resume_step)


def training_divergence(result: TrainResult) -> dict[str, Any] | None:
    """The ``diverged_at`` of a summary whose training diverged, else None."""
    return None if result.diverged_at is None else {"where": "training", "step": result.diverged_at}


def describe_divergence(diverged_at: Mapping[str, Any]) -> str:
    """A sentence on a training divergence (:func:`training_divergence`)."""
    return f"training diverged at step {diverged_at['step']} (the loss is not finite)"


def summarize(run_dir: Path, writer, args: argparse.Namespace, start: TrainState, result: TrainResult, *,
              hparams: Sequence[str], fields: Mapping[str, Any], metrics: Sequence[str],
              diverged_at: Mapping[str, Any] | None) -> dict[str, Any]:
    """Write a finished run's ``summary.json`` and TensorBoard hyperparameter table; return the summary.

    Args:
        run_dir: the run directory.
        writer: its ``tensorboardX.SummaryWriter``.
        args: the flags.
        start: the state the run started (or resumed) from.
        result: what :func:`train_loop` returned.
        hparams: the flags (names in ``args``) that the table and the summary show.
        fields: more of the summary (parameter count, evaluation results, …).
        metrics: the names of the fields that the table shows beside ``hparam/diverged`` (1 or 0);
            one that is not finite cannot be shown there and is left out.
        diverged_at: where the run diverged (:func:`training_divergence`, or the example's own), or None.

    Returns:
        The summary as its JSON file reads back (:func:`json_safe`): the ``hparams``, ``resumed_from``,
        ``final_loss``, ``train_time_s``, ``steps_per_s``, the ``fields``, ``diverged`` and ``diverged_at``.
    """
    summary = json_safe({k: getattr(args, k) for k in hparams}
                        | {"resumed_from": start.step, "final_loss": result.final_loss,
                           "train_time_s": result.train_time, "steps_per_s": result.steps_per_second}
                        | dict(fields) | {"diverged": diverged_at is not None, "diverged_at": diverged_at})
    shown = {f"hparam/{k}": summary[k] for k in metrics if summary[k] is not None}
    writer.add_hparams({k: summary[k] for k in hparams}, shown | {"hparam/diverged": float(summary["diverged"])},
                       name="hparams")
    write_json(run_dir / "summary.json", summary)
    return summary


def evaluated_summary(run_dir: Path, metrics: Mapping[str, Any], rollout_diverged_at: Mapping[str, Any] | None
                      ) -> dict[str, Any]:
    """A model's evaluation summary: its run's ``summary.json`` (if any), ``metrics``, where it diverged, ``run_dir``.

    A training divergence stands; otherwise ``rollout_diverged_at``, the divergence of this
    evaluation's rollout (None: none), replaces what the training run's evaluation found.
    """
    path = run_dir / "summary.json"
    trained = json.loads(path.read_text()) if path.exists() else {}
    at = trained.get("diverged_at")
    at = at if at is not None and at["where"] == "training" else rollout_diverged_at
    return trained | dict(metrics) | {"diverged": at is not None, "diverged_at": at, "run_dir": str(run_dir)}


def report_evaluation(out: Path, summary: Mapping[str, Any], table: str, plots: Sequence[Path],
                      describe: Callable[[Any], str] | None) -> None:
    """Write an evaluation's ``summary.json`` into ``out`` and print its ``table``, a line on each diverged model
    (``describe(diverged_at)``; None: no such lines), the ``plots`` and where the summary is."""
    write_json(out / "summary.json", summary)
    print(table)
    for name, s in summary["models"].items():
        if describe is not None and s["diverged_at"] is not None:
            print(f"{name}: {describe(s['diverged_at'])}")
    print("plots: " + ", ".join(str(p) for p in plots))
    print(f"summary: {out / 'summary.json'}")


def command_line(main: Callable[[], Any]) -> None:
    """Run an example's ``main`` as a program: an interrupt exits with status 130, without a traceback.

    :func:`train_loop` has already saved a checkpoint and said so when the interrupt gets here.
    """
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)


# -- the loop ------------------------------------------------------------------------------------


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """Let SIGTERM (what ``kill`` and batch schedulers send) interrupt like Ctrl-C.

    Signal handlers can only be set in the main thread; elsewhere SIGTERM keeps its handler.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


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

    A ``KeyboardInterrupt`` (Ctrl-C, or SIGTERM while the loop runs) saves a checkpoint of the last
    finished step and writes and flushes the losses not yet logged before it propagates.
    """
    from tqdm import tqdm

    step, params, opt_state, seed = state
    losses: list[jax.Array] = []
    pending: list[tuple[int, jax.Array]] = []
    recent: list[float] = []
    diverged_at = None
    saved = None  # the step of this call's newest checkpoint

    def log(tag: str, value: float, s: int) -> None:
        # TensorBoard draws no NaN or infinity, and tensorboardX warns about each one: a diverged
        # run's curves end where it diverged, and the divergence is logged once, as text.
        if math.isfinite(value):
            writer.add_scalar(tag, value, s)

    def log_pending() -> None:
        nonlocal pending, recent, diverged_at
        if not pending:
            return
        recent = [float(value) for _, value in pending]
        for (s, _), value in zip(pending, recent):
            log("train/loss", value, s)
            if diverged_at is None and not math.isfinite(value):
                diverged_at = s
                writer.add_text("train/diverged", f"the training loss is not finite from step {s} on", s)
        pending = []

    bar = tqdm(total=steps, initial=step, disable=not progress, dynamic_ncols=True, mininterval=0.5, unit="step")
    start = time.perf_counter()
    after_first = None
    set_aside = 0.0  # seconds of evaluations and checkpoints, left out of the steps per second
    with _sigterm_interrupts():
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
                    log_pending()
                    if learning_rate is not None:
                        log("train/learning_rate", float(learning_rate(step)), step)
                    bar.set_postfix(loss=f"{np.mean(recent):.3e}", refresh=False)
                aside = time.perf_counter()
                if evaluate is not None and eval_every and step % eval_every == 0 and step != steps:
                    for name, value in evaluate(params, step).items():
                        log(f"eval/{name}", value, step)
                if checkpoint_every and step % checkpoint_every == 0:
                    save_checkpoint(run_dir, TrainState(step, params, opt_state, seed))
                    saved = step
                set_aside += time.perf_counter() - aside
                bar.update(1)
        except KeyboardInterrupt:
            bar.close()
            # ``params`` and ``opt_state`` belong to ``step``: the interrupted step was never assigned.
            path = save_checkpoint(run_dir, TrainState(step, params, opt_state, seed))
            print(f"\ninterrupted at step {step}; saved {path}; continue with --resume", file=sys.stderr)
            raise
        finally:
            bar.close()
            log_pending()
            writer.flush()
    jax.block_until_ready(params)
    end = time.perf_counter()
    final = TrainState(step, params, opt_state, seed)
    if saved != step:  # also replaces an unreadable checkpoint of this step left by an earlier run
        save_checkpoint(run_dir, final)
    if evaluate is not None:
        for name, value in evaluate(params, step).items():
            log(f"eval/{name}", value, step)
    writer.flush()
    run = len(losses)
    rate = (run - 1) / (end - after_first - set_aside) if run > 1 and end > after_first + set_aside else float("nan")
    return TrainResult(final, np.asarray([float(x) for x in losses]),
                       float(np.mean(recent)) if recent else float("nan"), end - start, rate, diverged_at)


def train_with_flags(
    run_dir: Path,
    train_step: TrainStep,
    state: TrainState,
    next_batch: Callable[[int], PyTree],
    args: argparse.Namespace,
    writer,
    *,
    learning_rate: Callable[[int], float] | None = None,
    evaluate: Callable[[PyTree, int], Mapping[str, float]] | None = None,
    eval_every: int = 0,
) -> TrainResult:
    """:func:`train_loop` as the flags of :func:`add_common_arguments` ask: ``--steps``, ``--checkpoint-every``,
    ``--log-every`` and ``--no-progress``; the other arguments are :func:`train_loop`'s."""
    return train_loop(run_dir, train_step, state, next_batch, steps=args.steps, checkpoint_every=args.checkpoint_every,
                      log_every=args.log_every, writer=writer, progress=not args.no_progress,
                      learning_rate=learning_rate, evaluate=evaluate, eval_every=eval_every)
