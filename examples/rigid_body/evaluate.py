"""Roll trained rigid-body models out from the validation initial conditions, plot and summarise.

Each model starts from the first three implicit-midpoint states of the two validation initial
conditions ``(sin 1.1, 0, cos 1.1)`` and ``(0, sin 1.1, cos 1.1)`` and is applied to its own
predictions, three states at a time, until 500 steps of ``h = 0.2`` (``t = 100``). The reference is
the implicit midpoint rule from the same initial conditions. Written to ``--out``:

- ``trajectories.png``: the 3-D trajectories on the sphere, every model against the reference;
- ``norm.png``: ``‖z(t)‖`` (1 for the exact flow, which conserves it);
- ``error.png``: ``‖z(t) − z_ref(t)‖``;
- ``overview.png``: a one-row figure of all three for a README;
- ``summary.json``: each run's training summary with the rollout metrics.

Usage::

    python -m examples.rigid_body.evaluate runs/rigid_body/vpt runs/rigid_body/vpff \\
        runs/rigid_body/transformer --out runs/rigid_body/eval
"""
from __future__ import annotations

import argparse
import functools
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from examples import _training
from examples.rigid_body import data, models

__all__ = ["INERTIAS", "main", "reference", "restore_run", "rollout", "rollout_metrics", "validate"]

N_STEPS = 500
INERTIAS = {"paper": data.PAPER_INERTIA, "code": data.CODE_INERTIA}
"""The ``--inertia`` choices (math.md §7)."""

PyTree = Any


@functools.lru_cache(maxsize=8)
def reference(n_steps: int = N_STEPS, *, inertia: tuple[float, float, float] = data.PAPER_INERTIA,
              step: float = data.STEP) -> np.ndarray:
    """Implicit-midpoint trajectories ``(2, n_steps + 1, 3)`` (float64, read-only) from the validation ICs."""
    with jax.enable_x64(True):
        z0 = jnp.asarray(data.validation_initial_conditions(), dtype=jnp.float64)
        ref = np.asarray(data.implicit_midpoint(z0, n_steps, step=step, inertia=inertia))
    ref.flags.writeable = False
    return ref


def rollout(apply: Callable[[PyTree, jax.Array], jax.Array], params: PyTree, window: jax.Array,
            n_states: int) -> jax.Array:
    """Apply a model to its own predictions, starting from ``window``.

    Args:
        apply: the model, ``(params, (..., T, d)) -> (..., T, d)``: the next ``T`` states.
        params: its parameters.
        window: ``(n, T, d)`` the first ``T`` states of each trajectory.
        n_states: length of the trajectories to return (at least ``T``).

    Returns:
        ``(n, n_states, d)``: the window followed by the model's predictions.
    """
    t = window.shape[-2]
    n_calls = math.ceil((n_states - t) / t)

    def predict(current, _):
        following = apply(params, current)
        return following, following

    _, predicted = lax.scan(predict, window, None, length=n_calls)  # (n_calls, n, T, d)
    predicted = jnp.moveaxis(predicted, 0, 1).reshape(window.shape[0], n_calls * t, window.shape[-1])
    return jnp.concatenate([window, predicted], axis=1)[:, :n_states]


def rollout_metrics(predicted: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    """Rollout error and norm drift of predicted trajectories ``(n, n_states, 3)`` against ``ref``.

    Returns:
        ``rollout_error``: mean over time and trajectories of ``‖z − z_ref‖``;
        ``final_error``: its mean over trajectories at the last time;
        ``norm_drift``: ``max |‖z(t)‖ − ‖z(0)‖|`` over time and trajectories.
    """
    predicted = np.asarray(predicted, dtype=np.float64)
    error = np.linalg.norm(predicted - ref, axis=-1)
    norm = np.linalg.norm(predicted, axis=-1)
    return {"rollout_error": float(np.mean(error)), "final_error": float(np.mean(error[:, -1])),
            "norm_drift": float(np.max(np.abs(norm - norm[:, :1])))}


def validate(model: models.Model, params: PyTree, dtype: jnp.dtype, *,
             inertia: tuple[float, float, float] = data.PAPER_INERTIA,
             n_steps: int = N_STEPS) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
    """Roll ``model`` out from the validation ICs for ``n_steps`` steps.

    Returns:
        The predicted and reference trajectories ``(2, n_steps + 1, 3)`` and :func:`rollout_metrics`.
    """
    ref = reference(n_steps, inertia=inertia)
    window = jnp.asarray(ref[:, :data.N_IN], dtype=dtype)
    predicted = np.asarray(_rollout(model, params, window, n_steps + 1))
    return predicted, ref, rollout_metrics(predicted, ref)


@functools.partial(jax.jit, static_argnames=("model", "n_states"))
def _rollout(model: models.Model, params: PyTree, window: jax.Array, n_states: int) -> jax.Array:
    return rollout(model.apply, params, window, n_states)


def restore_run(run_dir: Path) -> tuple[dict[str, Any], models.Model, PyTree]:
    """The flags, model and final parameters of a training run directory."""
    config = json.loads((run_dir / "config.json").read_text())
    checkpoint = _training.latest_checkpoint(run_dir)
    if checkpoint is None:
        raise FileNotFoundError(f"restore_run: no checkpoint in {run_dir}.")
    model = models.make_model(config["model"])
    dtype = _training.configure_dtype(config["dtype"])
    template = model.init(np.random.default_rng(0), dtype)
    return config, model, _training.load_params(checkpoint, template)


# -- plots ---------------------------------------------------------------------------------------

_IC_LABELS = ("z₀ = (sin 1.1, 0, cos 1.1)", "z₀ = (0, sin 1.1, cos 1.1)")
_RADIUS = 1.5  # trajectory points farther out are not drawn
_NORM_LIMITS = (0.0, 2.0)
_ERROR_LIMITS = (1e-4, 1e1)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _sphere(ax) -> None:
    u, v = np.meshgrid(np.linspace(0, 2 * np.pi, 25), np.linspace(0, np.pi, 13))
    ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v), color="0.85", linewidth=0.4)


def _trajectory_axes(ax, rollouts: dict[str, np.ndarray], ref: np.ndarray, i: int, legend: bool) -> None:
    _sphere(ax)
    for name, predicted in rollouts.items():
        # Points far off the sphere are left out (the line breaks there) so that a diverging
        # rollout does not hide the others.
        shown = np.where(np.linalg.norm(predicted[i], axis=-1, keepdims=True) < _RADIUS, predicted[i], np.nan)
        ax.plot(*shown.T, linewidth=1, label=name)
    ax.plot(*ref[i].T, color="black", linestyle="--", linewidth=1.5, label="implicit midpoint")
    ax.set(xlim=(-1.2, 1.2), ylim=(-1.2, 1.2), zlim=(-1.2, 1.2), xlabel="z₁", ylabel="z₂", zlabel="z₃")
    ax.set_title(_IC_LABELS[i], fontsize=9)
    if legend:
        ax.legend(fontsize=7, loc="upper left")


def _time_axes(ax, curves: dict[str, np.ndarray], t: np.ndarray, ylabel: str, ylim: tuple[float, float],
               log: bool, exact: float | None = None) -> None:
    if exact is not None:
        ax.axhline(exact, color="black", linestyle="--", linewidth=1, label="exact")
    for name, curve in curves.items():
        ax.plot(t, curve, linewidth=1, label=name)
    if log:
        ax.set_yscale("log")
    ax.set(xlabel="t", ylabel=ylabel, ylim=ylim)
    ax.grid(alpha=0.3)


def plot(rollouts: dict[str, np.ndarray], ref: np.ndarray, step: float, out: Path) -> list[Path]:
    """Write the trajectory, norm, error and overview figures; return their paths.

    The error is drawn from the first predicted state on (the first ``T`` states are given).
    """
    plt = _pyplot()
    t = step * np.arange(ref.shape[1])
    predicted = slice(data.N_IN, None)
    norms = {name: np.linalg.norm(p, axis=-1) for name, p in rollouts.items()}
    errors = {name: np.linalg.norm(p - ref, axis=-1)[:, predicted] for name, p in rollouts.items()}
    panels = {"norm": (norms, t, "‖z(t)‖", _NORM_LIMITS, False, 1.0),
              "error": (errors, t[predicted], "‖z(t) − z_ref(t)‖", _ERROR_LIMITS, True, None)}
    paths = []

    fig = plt.figure(figsize=(11, 5))
    for i in range(ref.shape[0]):
        _trajectory_axes(fig.add_subplot(1, ref.shape[0], i + 1, projection="3d"), rollouts, ref, i, legend=i == 0)
    fig.suptitle(f"Rollouts, {ref.shape[1] - 1} steps of h = {step}")
    paths.append(out / "trajectories.png")
    fig.savefig(paths[-1], dpi=110, bbox_inches="tight")
    plt.close(fig)

    for name, (curves, times, ylabel, ylim, log, exact) in panels.items():
        fig, axes = plt.subplots(1, ref.shape[0], figsize=(11, 3.6), sharey=True)
        for i, ax in enumerate(axes):
            _time_axes(ax, {k: v[i] for k, v in curves.items()}, times, ylabel, ylim, log, exact)
            ax.set_title(_IC_LABELS[i], fontsize=9)
        axes[0].legend(fontsize=8)
        paths.append(out / f"{name}.png")
        fig.savefig(paths[-1], dpi=110, bbox_inches="tight")
        plt.close(fig)

    fig = plt.figure(figsize=(12, 3.4))
    _trajectory_axes(fig.add_subplot(1, 3, 1, projection="3d"), rollouts, ref, 0, legend=False)
    for position, (curves, times, ylabel, ylim, log, exact) in zip((3, 2), panels.values()):
        ax = fig.add_subplot(1, 3, position)
        _time_axes(ax, {k: v[0] for k, v in curves.items()}, times, ylabel, ylim, log, exact)
    ax.legend(fontsize=7)
    fig.tight_layout()
    paths.append(out / "overview.png")
    fig.savefig(paths[-1], dpi=80)
    plt.close(fig)
    return paths


# -- command line --------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m examples.rigid_body.evaluate",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, nargs="+", help="training run directories (their --log-dir)")
    parser.add_argument("--out", type=Path, default=Path("runs/rigid_body/eval"), help="where plots and summary go")
    parser.add_argument("--n-steps", type=int, default=N_STEPS, help="rollout length in steps of h")
    return parser


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Evaluate the runs, write the plots and ``summary.json``; return the summary."""
    args = build_parser().parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rollouts, summaries, inertia = {}, {}, None
    for run_dir in args.runs:
        config, model, params = restore_run(run_dir)
        if inertia not in (None, INERTIAS[config["inertia"]]):
            raise ValueError(f"evaluate: every run must use the same --inertia; {run_dir} differs.")
        inertia = INERTIAS[config["inertia"]]
        label = model.name if model.name not in rollouts else str(run_dir)
        predicted, ref, metrics = validate(model, params, jnp.dtype(config["dtype"]),
                                           inertia=inertia, n_steps=args.n_steps)
        rollouts[label] = predicted
        train_summary = run_dir / "summary.json"
        trained = json.loads(train_summary.read_text()) if train_summary.exists() else {}
        summaries[label] = trained | metrics | {"run_dir": str(run_dir)}
    paths = plot(rollouts, ref, data.STEP, args.out)
    summary = {"n_steps": args.n_steps, "step": data.STEP, "inertia": inertia, "models": summaries}
    _training.write_json(args.out / "summary.json", summary)
    print(format_table(summaries))
    print("plots: " + ", ".join(str(p) for p in paths))
    print(f"summary: {args.out / 'summary.json'}")
    return summary


_COLUMNS = (("parameters", "params", "d"), ("steps", "steps", "d"), ("final_loss", "final loss", ".3e"),
            ("rollout_error", "rollout err", ".3e"), ("final_error", "err t=end", ".3e"),
            ("norm_drift", "‖z‖ drift", ".3e"), ("train_time_s", "train s", ".1f"), ("steps_per_s", "steps/s", ".0f"))


def format_table(summaries: dict[str, dict[str, Any]]) -> str:
    """A fixed-width table of the models' summaries."""
    header = f"{'model':<12}" + "".join(f"{title:>13}" for _, title, _ in _COLUMNS)
    rows = [header]
    for name, s in summaries.items():
        cells = (format(s[key], fmt) if key in s else "-" for key, _, fmt in _COLUMNS)
        rows.append(f"{name:<12}" + "".join(f"{c:>13}" for c in cells))
    return "\n".join(rows)


if __name__ == "__main__":
    main()
