"""Roll trained flow-map models out far beyond their training data, plot and summarise.

Each model is applied to its own predictions from the trajectory's initial state ``z₀`` for
``--rollout-steps`` steps (pendulum 4000 = 100 training horizons, double pendulum 2000 = 10), and
from the first test state for the paper's 100 test steps. The reference is the order-6 symplectic
integrator of :mod:`examples.sympnet.data`. A rollout has *diverged* at the first state that is not
finite or has ``‖z‖ > 100`` (:data:`DIVERGED_NORM`). Written to ``--out``:

- ``phase.png``: the phase portrait, ``p_i`` against ``q_i`` for each degree of freedom, of the long
  rollouts against the reference (and the training states);
- ``energy.png``: the energy error ``|H(z_k) − H(z₀)|`` along the long rollouts: bounded for the
  symplectic networks, drifting for the MLP;
- ``test.png``: ``q_i(t)`` over the test span from the first test state (the paper's figure);
- ``summary.json``: each run's training summary with the metrics of :func:`metrics`, and where a
  model diverged; a metric that is not finite is ``null``.

Usage::

    python -m examples.sympnet.evaluate runs/sympnet/pendulum/{la,g,mlp} --out runs/sympnet/pendulum/eval
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
from jax import lax

from examples import _plots, _training
from examples.sympnet import data, models

__all__ = ["DIVERGED_NORM", "ROLLOUT_METRICS", "ROLLOUT_STEPS", "describe_divergence", "divergence_index", "figures",
           "format_metric", "format_table", "main", "metrics", "plot", "restore_run", "rollout",
           "rollout_divergence", "validate"]

PyTree = Any
ROLLOUT_STEPS = {"pendulum": 4000, "double_pendulum": 2000}
"""Default length of the long rollout per system, in steps of its ``h``."""
DIVERGED_NORM = 100.0
"""A rollout state with ``‖z‖`` above this (or not finite) has diverged."""
ROLLOUT_METRICS = ("test_rollout_error", "rollout_error", "final_error", "energy_error_max", "energy_error_first",
                   "energy_error_last")
"""The metrics of a rollout; ``n/a`` for a model that diverged (:func:`format_metric`)."""


def rollout(apply: Callable[[PyTree, jax.Array], jax.Array], params: PyTree, z0: jax.Array,
            n_steps: int) -> jax.Array:
    """``(…, n_steps + 1, dim)``: ``z0`` (``(…, dim)``) and ``n_steps`` applications of ``apply(params, ·)``."""

    def advance(z, _):
        z = apply(params, z)
        return z, z

    _, states = lax.scan(advance, z0, None, length=n_steps)
    return jnp.concatenate([z0[None], states]).swapaxes(0, -2)


@functools.partial(jax.jit, static_argnames=("model", "n_steps"))
def _rollout(model: models.Model, params: PyTree, z0: jax.Array, n_steps: int) -> jax.Array:
    return rollout(model.apply, params, z0, n_steps)


@functools.lru_cache(maxsize=8)
def reference(system: data.System, n_steps: int) -> np.ndarray:
    """The integrator's trajectory ``(n_steps + 1, dim)`` from ``system.z0`` (float64, read-only)."""
    ref = data.flow(system, np.asarray(system.z0), n_steps)
    ref.flags.writeable = False
    return ref


def metrics(system: data.System, model: models.Model, params: PyTree, dtype: jnp.dtype,
            predicted: np.ndarray, test: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    """The evaluation numbers of a model.

    Returns:
        ``train_mse``, ``test_mse``: the one-step mean squared errors on the paper's pairs;
        ``test_rollout_error``: mean ``‖z_k − z_ref,k‖`` over the test span rolled out from the
        first test state; ``rollout_error``, ``final_error``: its mean over the long rollout from
        ``z₀`` and its value at the end; ``energy_error_max``: ``max_k |H(z_k) − H(z₀)|`` there;
        ``energy_error_first``, ``energy_error_last``: the mean of ``|H(z_k) − H(z₀)|`` over its
        first and last tenth (equal for a bounded error, growing for a drift); ``rollout_steps``.
    """
    dataset = data.load_dataset(system)
    apply = jax.jit(model.apply)

    def one_step_mse(inputs, targets):
        return float(np.mean((np.asarray(apply(params, jnp.asarray(inputs, dtype)), np.float64) - targets) ** 2))

    predicted = np.asarray(predicted, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        energy = np.abs(system.energy(predicted) - system.energy(ref[0]))
        error = np.linalg.norm(predicted - ref, axis=-1)
        tenth = max(1, len(energy) // 10)
        return {"train_mse": one_step_mse(dataset.train_inputs, dataset.train_targets),
                "test_mse": one_step_mse(dataset.test_inputs, dataset.test_targets),
                "test_rollout_error": float(np.mean(np.linalg.norm(np.asarray(test, np.float64)
                                                                   - dataset.trajectory[system.n_train:], axis=-1))),
                "rollout_error": float(np.mean(error)), "final_error": float(error[-1]),
                "energy_error_max": float(np.max(energy)), "energy_error_first": float(np.mean(energy[:tenth])),
                "energy_error_last": float(np.mean(energy[-tenth:])), "rollout_steps": len(energy) - 1}


def validate(model: models.Model, params: PyTree, dtype: jnp.dtype, system: data.System,
             n_steps: int | None = None) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Roll ``model`` out from ``z₀`` for ``n_steps`` (default :data:`ROLLOUT_STEPS`) and over the test span.

    Returns:
        ``{"long": (n_steps + 1, dim), "test": (n_test + 1, dim)}`` predicted trajectories and :func:`metrics`.
    """
    n_steps = ROLLOUT_STEPS[system.name] if n_steps is None else n_steps
    dataset = data.load_dataset(system)
    long = np.asarray(_rollout(model, params, jnp.asarray(system.z0, dtype), n_steps))
    test = np.asarray(_rollout(model, params, jnp.asarray(dataset.test_inputs[0], dtype), system.n_test))
    ref = reference(system, n_steps)
    return {"long": long, "test": test}, metrics(system, model, params, dtype, long, test, ref)


def divergence_index(predicted: np.ndarray) -> int:
    """The index of the first diverged state of a trajectory ``(n, dim)``, -1 if none diverged."""
    norm = np.linalg.norm(np.asarray(predicted, dtype=np.float64), axis=-1)
    diverged = ~(norm <= DIVERGED_NORM)  # NaN compares False
    return int(np.argmax(diverged)) if diverged.any() else -1


def rollout_divergence(rollouts: dict[str, np.ndarray], step: float) -> dict[str, Any] | None:
    """``{"where": "rollout", "t": …, "rollout_step": k}`` for the long rollout's first diverged state, or None."""
    index = divergence_index(rollouts["long"])
    if index < 0:
        return None
    return {"where": "rollout", "t": round(index * step, 9), "rollout_step": index}


def describe_divergence(diverged_at: dict[str, Any]) -> str:
    """A sentence on where a model diverged (``diverged_at`` of a summary)."""
    if diverged_at["where"] != "rollout":
        return _training.describe_divergence(diverged_at)
    return (f"the rollout from z₀ diverged at t = {diverged_at['t']:g} "
            f"(step {diverged_at['rollout_step']}: ‖z‖ > {DIVERGED_NORM:g} or not finite)")


def restore_run(run_dir: Path) -> tuple[dict[str, Any], models.Model, PyTree]:
    """The flags, model and parameters of a training run directory's newest readable checkpoint.

    Raises:
        FileNotFoundError: no checkpoint in ``run_dir``.
        ValueError: checkpoints, none of which reads.
    """
    from examples.sympnet import train

    config = json.loads((run_dir / "config.json").read_text())
    model = train.restore_model(config)
    dtype = _training.configure_dtype(config["dtype"])
    template = jax.eval_shape(functools.partial(model.init, dtype=dtype), jax.random.key(0))
    found = _training.load_latest(run_dir, lambda path: _training.load_params(path, template))
    if found is None:
        raise FileNotFoundError(f"restore_run: no checkpoint in {run_dir}.")
    return config, model, found[1]


# -- plots ---------------------------------------------------------------------------------------

_REFERENCE = {"color": "black", "linestyle": "--", "linewidth": 1.0}
_ENERGY_FLOOR = 1e-16  # |ΔH| below this is drawn at it (log axes)


def _drawn(z: np.ndarray, limit: float) -> np.ndarray:
    """``z`` with the states of a diverging rollout past ``limit`` (or not finite) left out (NaN: the line breaks)."""
    inside = np.all(np.abs(z) < limit, axis=-1)
    return np.where(inside[:, None], z, np.nan)


def figures(system: data.System, rollouts: dict[str, dict[str, np.ndarray]]) -> dict[str, Any]:
    """The phase, energy and test figures (``matplotlib`` figures, by file stem).

    Args:
        system: the system the models learned.
        rollouts: each model's :func:`validate` rollouts, by name.
    """
    plt = _plots.pyplot()
    dataset = data.load_dataset(system)
    n = system.dim // 2
    n_steps = len(next(iter(rollouts.values()))["long"]) - 1
    ref = reference(system, n_steps)
    colors = {name: f"C{k}" for k, name in enumerate(rollouts)}
    limit = 3 * float(np.max(np.abs(ref)))
    out = {}

    fig, axes = plt.subplots(1, n, figsize=(5.2 * n, 4.6), squeeze=False, layout="constrained")
    for i, ax in enumerate(axes[0]):
        for name, r in rollouts.items():
            z = _drawn(r["long"], limit)
            ax.plot(z[:, i], z[:, n + i], color=colors[name], linewidth=0.6, label=name, alpha=0.8)
        ax.plot(ref[:, i], ref[:, n + i], label="reference", **_REFERENCE)
        ax.scatter(dataset.train_inputs[:, i], dataset.train_inputs[:, n + i], s=8, color="black", zorder=3,
                   label="training states")
        # The reference's range, with room: a spiralling rollout leaves the axes instead of filling them.
        q_span, p_span = (1.5 * float(np.max(np.abs(ref[:, j]))) for j in (i, n + i))
        ax.set(xlabel=f"q{i + 1}" if n > 1 else "q", ylabel=f"p{i + 1}" if n > 1 else "p",
               xlim=(-q_span, q_span), ylim=(-p_span, p_span))
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8, loc="upper right")
    fig.suptitle(f"{system.name}: phase portrait of {n_steps} steps of h = {system.step} from z₀")
    out["phase"] = fig

    fig, ax = plt.subplots(figsize=(8, 4.4), layout="constrained")
    t = system.step * np.arange(n_steps + 1)
    h0 = system.energy(ref[0])
    for name, r in rollouts.items():
        with np.errstate(invalid="ignore", over="ignore"):
            error = np.abs(system.energy(_drawn(r["long"], DIVERGED_NORM)) - h0)
        ax.plot(t, np.maximum(error, _ENERGY_FLOOR), color=colors[name], linewidth=0.8, label=name)
    ax.plot(t, np.maximum(np.abs(system.energy(ref) - h0), _ENERGY_FLOOR), label="reference integrator",
            **_REFERENCE)
    ax.axvline(system.n_train * system.step, color="0.5", linestyle=":", linewidth=1)
    ax.annotate("end of training data", xy=(system.n_train * system.step, 1), xycoords=("data", "axes fraction"),
                xytext=(3, -12), textcoords="offset points", fontsize=8, color="0.4")
    ax.set(yscale="log", xlabel="t", ylabel="|H(z(t)) − H(z₀)|", xlim=(t[0], t[-1]))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"{system.name}: energy error along the rollouts")
    out["energy"] = fig

    fig, axes = plt.subplots(1, n, figsize=(5.2 * n, 4.0), squeeze=False, layout="constrained")
    t = system.step * np.arange(system.n_train, system.n_train + system.n_test + 1)
    truth = dataset.trajectory[system.n_train:]
    for i, ax in enumerate(axes[0]):
        ax.plot(t, truth[:, i], label="reference", **_REFERENCE)
        for name, r in rollouts.items():
            ax.plot(t, _drawn(r["test"], limit)[:, i], color=colors[name], marker=".", markersize=3, linewidth=0.6,
                    label=name)
        ax.set(xlabel="t", ylabel=f"q{i + 1}" if n > 1 else "q")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8, loc="upper right")
    fig.suptitle(f"{system.name}: the test span, {system.n_test} steps from the first test state")
    out["test"] = fig
    return out


def plot(system: data.System, rollouts: dict[str, dict[str, np.ndarray]], out: Path) -> list[Path]:
    """Write :func:`figures` as ``<name>.png`` into ``out``; return their paths."""
    return _plots.save_figures(figures(system, rollouts), out)


# -- command line --------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = _training.ArgumentParser(prog="python -m examples.sympnet.evaluate", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=_training.run_directory, nargs="+",
                        help="training run directories of one system")
    parser.add_argument("--out", type=_training.directory, default=Path("runs/sympnet/eval"),
                        help="where plots and summary go")
    parser.add_argument("--rollout-steps", type=_training.positive_int, default=None,
                        help="length of the long rollout in steps of h (None: the system's)")
    return parser


def main(argv: Sequence[str] | None = None, *, describe_divergences: bool = True) -> dict[str, Any]:
    """Evaluate the runs, write the plots and ``summary.json``; return the summary."""
    parser = build_parser()
    args = parser.parse_args(argv)
    rollouts, summaries, system = {}, {}, None
    for run_dir in args.runs:
        try:
            config, model, params = restore_run(run_dir)
        except (FileNotFoundError, ValueError) as error:
            parser.error(f"argument runs: {error}")
        if system not in (None, data.SYSTEMS[config["system"]]):
            parser.error(f"argument runs: every run must be of the same --system; {run_dir} differs.")
        system = data.SYSTEMS[config["system"]]
        label = model.name if model.name not in rollouts else str(run_dir)
        rollouts[label], found = validate(model, params, jnp.dtype(config["dtype"]), system, args.rollout_steps)
        summaries[label] = _training.evaluated_summary(run_dir, found, rollout_divergence(rollouts[label], system.step))
    _training.make_directory(parser, args.out, "--out")
    paths = plot(system, rollouts, args.out)
    summary = _training.json_safe({"system": system.name, "step": system.step, "models": summaries})
    _training.report_evaluation(args.out, summary, format_table(summary["models"]), paths,
                                describe_divergence if describe_divergences else None)
    return summary


_COLUMNS = (("parameters", "params", "d"), ("steps", "steps", "d"), ("train_mse", "train MSE", ".2e"),
            ("test_mse", "test MSE", ".2e"), ("test_rollout_error", "test roll", ".2e"),
            ("rollout_error", "long roll", ".2e"), ("energy_error_first", "|ΔH| first", ".2e"),
            ("energy_error_last", "|ΔH| last", ".2e"), ("energy_error_max", "|ΔH| max", ".2e"),
            ("train_time_s", "train s", ".1f"))


def format_metric(summary: dict[str, Any], key: str, spec: str) -> str:
    """``summary[key]`` formatted with ``spec``, or ``n/a``: not finite, or a rollout metric of a diverged model."""
    if key in ROLLOUT_METRICS and summary.get("diverged_at") is not None:
        return "n/a"
    return _training.format_value(summary.get(key), spec)


def _diverged_cell(diverged_at: dict[str, Any] | None) -> str:
    if diverged_at is None:
        return "no"
    return f"step {diverged_at['step']}" if diverged_at["where"] == "training" else f"t = {diverged_at['t']:g}"


def format_table(summaries: dict[str, dict[str, Any]]) -> str:
    """A fixed-width table of the models' summaries."""
    header = f"{'model':<8}" + "".join(f"{title:>12}" for _, title, _ in _COLUMNS) + f"{'diverged':>12}"
    rows = [header]
    for name, s in summaries.items():
        cells = [format_metric(s, key, fmt) if key in s else "-" for key, _, fmt in _COLUMNS]
        rows.append(f"{name:<8}" + "".join(f"{c:>12}" for c in cells) + f"{_diverged_cell(s.get('diverged_at')):>12}")
    return "\n".join(rows)


if __name__ == "__main__":
    _training.command_line(main)
