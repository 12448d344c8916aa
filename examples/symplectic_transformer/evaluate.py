"""Roll trained window models out from the validation initial states, plot and summarise.

Each model starts from the first ``T = 3`` integrator states of the two validation initial states
(:data:`examples.symplectic_transformer.data.VALIDATION`) and is applied to its own predictions,
three states at a time, until 500 steps of ``h = 0.2`` (``t = 100``, 8 times the training
trajectories' length). The reference is the order-6 implicit midpoint integrator. A rollout has
*diverged* at the first state that is not finite or has ``‖z‖ > 100``. Written to ``--out``:

- ``energy.png``: ``|H(z(t)) − H(z₀)|`` along the rollouts, one panel per initial state;
- ``error.png``: ``‖z(t) − z_ref(t)‖``;
- ``phase.png``: ``(q₁, q₂)`` of the rollouts from the first initial state against the reference;
- ``summary.json``: each run's training summary with the rollout metrics and where a model diverged.

Usage::

    python -m examples.symplectic_transformer.evaluate runs/symplectic_transformer/{lst,vpt,transformer} \\
        --out runs/symplectic_transformer/eval
"""
from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from examples import _plots, _training
from examples.rigid_body.evaluate import rollout
from examples.symplectic_transformer import data, models
from examples.sympnet.evaluate import DIVERGED_NORM, divergence_index

__all__ = ["N_STEPS", "ROLLOUT_METRICS", "describe_divergence", "figures", "format_metric", "format_table", "main",
           "plot", "reference", "restore_run", "rollout_divergence", "rollout_metrics", "validate"]

PyTree = Any
N_STEPS = 500
ROLLOUT_METRICS = ("rollout_error", "final_error", "energy_error_max", "energy_error_first", "energy_error_last")
"""The metrics of a rollout; ``n/a`` for a model that diverged (:func:`format_metric`)."""


@functools.lru_cache(maxsize=4)
def reference(n_steps: int = N_STEPS) -> np.ndarray:
    """Integrator trajectories ``(2, n_steps + 1, 4)`` (float64, read-only) from the validation states."""
    ref = data.trajectories(data.VALIDATION, n_steps)
    ref.flags.writeable = False
    return ref


def rollout_metrics(predicted: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    """Errors of predicted trajectories ``(n, n_states, 4)`` against ``ref``.

    Returns:
        ``rollout_error``: mean of ``‖z − z_ref‖`` over time and trajectories; ``final_error``: its
        mean at the last time; ``energy_error_max``: ``max |H(z) − H(z₀)|``; ``energy_error_first``
        and ``energy_error_last``: its mean over the first and last tenth of the rollouts.
    """
    predicted = np.asarray(predicted, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.linalg.norm(predicted - ref, axis=-1)
        energy = np.abs(data.SYSTEM.energy(predicted) - data.SYSTEM.energy(ref[:, :1]))
        tenth = max(1, energy.shape[1] // 10)
        return {"rollout_error": float(np.mean(error)), "final_error": float(np.mean(error[:, -1])),
                "energy_error_max": float(np.max(energy)), "energy_error_first": float(np.mean(energy[:, :tenth])),
                "energy_error_last": float(np.mean(energy[:, -tenth:]))}


@functools.partial(jax.jit, static_argnames=("model", "n_states"))
def _rollout(model, params: PyTree, window: jax.Array, n_states: int) -> jax.Array:
    return rollout(model.apply, params, window, n_states)


def validate(model, params: PyTree, dtype: jnp.dtype, n_steps: int | None = None
             ) -> tuple[np.ndarray, dict[str, float]]:
    """Roll ``model`` out from the validation states for ``n_steps`` (default :data:`N_STEPS`).

    Returns:
        The predicted trajectories ``(2, n_steps + 1, 4)`` and :func:`rollout_metrics`.
    """
    n_steps = N_STEPS if n_steps is None else n_steps
    ref = reference(n_steps)
    window = jnp.asarray(ref[:, :data.SEQ_LENGTH], dtype)
    predicted = np.asarray(_rollout(model, params, window, n_steps + 1))
    return predicted, rollout_metrics(predicted, ref) | {"rollout_steps": n_steps}


def rollout_divergence(predicted: np.ndarray) -> dict[str, Any] | None:
    """``{"where": "rollout", "t", "rollout_step", "initial_state"}`` of the earliest diverged state, or None."""
    index = [divergence_index(p) for p in predicted]
    diverged = [i for i, k in enumerate(index) if k >= 0]
    if not diverged:
        return None
    first = min(diverged, key=lambda i: index[i])
    return {"where": "rollout", "t": round(index[first] * data.STEP, 9), "rollout_step": index[first],
            "initial_state": first}


def describe_divergence(diverged_at: dict[str, Any]) -> str:
    """A sentence on where a model diverged."""
    if diverged_at["where"] != "rollout":
        return _training.describe_divergence(diverged_at)
    return (f"the rollout from validation state {diverged_at['initial_state']} diverged at t = {diverged_at['t']:g} "
            f"(‖z‖ > {DIVERGED_NORM:g} or not finite)")


def restore_run(run_dir: Path) -> tuple[dict[str, Any], Any, PyTree]:
    """The flags, model and parameters of a run directory's newest readable checkpoint.

    Raises:
        FileNotFoundError: no checkpoint in ``run_dir``.
        ValueError: checkpoints, none of which reads.
    """
    config = json.loads((run_dir / "config.json").read_text())
    model = models.make_model(config["model"])
    dtype = _training.configure_dtype(config["dtype"])
    template = model.init(0, dtype)
    found = _training.load_latest(run_dir, lambda path: _training.load_params(path, template))
    if found is None:
        raise FileNotFoundError(f"restore_run: no checkpoint in {run_dir}.")
    return config, model, found[1]


# -- plots ---------------------------------------------------------------------------------------

_REFERENCE = {"color": "black", "linestyle": "--", "linewidth": 1.0}
_FLOOR = 1e-16


def _finite(z: np.ndarray) -> np.ndarray:
    """``z`` (``(n, 4)``) with the states past :data:`DIVERGED_NORM` (or not finite) as NaN: the line stops."""
    with np.errstate(invalid="ignore", over="ignore"):
        inside = np.linalg.norm(z, axis=-1) <= DIVERGED_NORM
    return np.where(inside[:, None], z, np.nan)


def _state(z: np.ndarray) -> str:
    return "(" + ", ".join(f"{float(v):g}" for v in z) + ")"


def figures(rollouts: dict[str, np.ndarray], ref: np.ndarray) -> dict[str, Any]:
    """The energy, error and phase figures (by file stem) of predicted rollouts ``(2, n, 4)`` by model."""
    plt = _plots.pyplot()
    t = data.STEP * np.arange(ref.shape[1])
    colors = {name: f"C{k}" for k, name in enumerate(rollouts)}
    h0 = data.SYSTEM.energy(ref[:, 0])
    out = {}
    curves = {
        "energy": ("|H(z(t)) − H(z₀)|", lambda z, i: np.abs(data.SYSTEM.energy(z) - h0[i]),
                   lambda i: np.abs(data.SYSTEM.energy(ref[i]) - h0[i])),
        "error": ("‖z(t) − z_ref(t)‖", lambda z, i: np.linalg.norm(z - ref[i], axis=-1), None),
    }
    for stem, (ylabel, curve, exact) in curves.items():
        fig, axes = plt.subplots(1, len(ref), figsize=(11, 4.2), sharey=True, layout="constrained")
        for i, ax in enumerate(axes):
            for name, predicted in rollouts.items():
                with np.errstate(invalid="ignore", over="ignore"):
                    ax.plot(t, np.maximum(curve(_finite(predicted[i]), i), _FLOOR), color=colors[name],
                            linewidth=0.8, label=name)
            if exact is not None:
                ax.plot(t, np.maximum(exact(i), _FLOOR), label="reference integrator", **_REFERENCE)
            ax.set(yscale="log", xlabel="t", xlim=(t[0], t[-1]), title=f"z₀ = {_state(data.VALIDATION[i])}")
            ax.grid(alpha=0.3)
        axes[0].set_ylabel(ylabel)
        axes[0].legend(fontsize=8, loc="lower right")
        fig.suptitle(f"Double pendulum, {ref.shape[1] - 1} steps of h = {data.STEP}: {ylabel}")
        out[stem] = fig

    fig, ax = plt.subplots(figsize=(5.5, 5), layout="constrained")
    for name, predicted in rollouts.items():
        z = _finite(predicted[0])
        ax.plot(z[:, 0], z[:, 1], color=colors[name], linewidth=0.6, label=name)
    ax.plot(ref[0, :, 0], ref[0, :, 1], label="reference", **_REFERENCE)
    span = 1.5 * float(np.max(np.abs(ref[0, :, :2])))
    ax.set(xlabel="q₁", ylabel="q₂", xlim=(-span, span), ylim=(-span, span),
           title=f"angles from z₀ = {_state(data.VALIDATION[0])}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    out["phase"] = fig
    return out


def plot(rollouts: dict[str, np.ndarray], ref: np.ndarray, out: Path) -> list[Path]:
    """Write :func:`figures` as ``<name>.png`` into ``out``; return their paths."""
    return _plots.save_figures(figures(rollouts, ref), out)


# -- command line --------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = _training.ArgumentParser(prog="python -m examples.symplectic_transformer.evaluate",
                                      description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=_training.run_directory, nargs="+",
                        help="training run directories (their --log-dir)")
    parser.add_argument("--out", type=_training.directory, default=Path("runs/symplectic_transformer/eval"),
                        help="where plots and summary go")
    parser.add_argument("--n-steps", type=_training.at_least(data.SEQ_LENGTH), default=N_STEPS,
                        help=f"rollout length in steps of h (the first {data.SEQ_LENGTH} states are given)")
    return parser


def main(argv: Sequence[str] | None = None, *, describe_divergences: bool = True) -> dict[str, Any]:
    """Evaluate the runs, write the plots and ``summary.json``; return the summary."""
    parser = build_parser()
    args = parser.parse_args(argv)
    rollouts, summaries = {}, {}
    for run_dir in args.runs:
        try:
            config, model, params = restore_run(run_dir)
        except (FileNotFoundError, ValueError) as error:
            parser.error(f"argument runs: {error}")
        label = model.name if model.name not in rollouts else str(run_dir)
        rollouts[label], found = validate(model, params, jnp.dtype(config["dtype"]), args.n_steps)
        summaries[label] = _training.evaluated_summary(run_dir, found, rollout_divergence(rollouts[label]))
    _training.make_directory(parser, args.out, "--out")
    paths = plot(rollouts, reference(args.n_steps), args.out)
    summary = _training.json_safe({"n_steps": args.n_steps, "step": data.STEP, "models": summaries})
    _training.report_evaluation(args.out, summary, format_table(summary["models"]), paths,
                                describe_divergence if describe_divergences else None)
    return summary


_COLUMNS = (("parameters", "params", "d"), ("steps", "steps", "d"), ("final_loss", "final loss", ".2e"),
            ("rollout_error", "rollout err", ".2e"), ("final_error", "err t=end", ".2e"),
            ("energy_error_first", "|ΔH| first", ".2e"), ("energy_error_last", "|ΔH| last", ".2e"),
            ("energy_error_max", "|ΔH| max", ".2e"), ("train_time_s", "train s", ".1f"))


def format_metric(summary: dict[str, Any], key: str, spec: str) -> str:
    """``summary[key]`` formatted with ``spec``, or ``n/a``: not finite, or a rollout metric of a diverged model."""
    if key in ROLLOUT_METRICS and summary.get("diverged_at") is not None:
        return "n/a"
    return _training.format_value(summary.get(key), spec)


def format_table(summaries: dict[str, dict[str, Any]]) -> str:
    """A fixed-width table of the models' summaries."""
    header = f"{'model':<12}" + "".join(f"{title:>12}" for _, title, _ in _COLUMNS) + f"{'diverged':>12}"
    rows = [header]
    for name, s in summaries.items():
        at = s.get("diverged_at")
        where = "no" if at is None else (f"step {at['step']}" if at["where"] == "training" else f"t = {at['t']:g}")
        cells = [format_metric(s, key, fmt) if key in s else "-" for key, _, fmt in _COLUMNS]
        rows.append(f"{name:<12}" + "".join(f"{c:>12}" for c in cells) + f"{where:>12}")
    return "\n".join(rows)


if __name__ == "__main__":
    _training.command_line(main)
