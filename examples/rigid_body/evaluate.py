"""Roll trained rigid-body models out from the validation initial conditions, plot and summarise.

Each model starts from the first three implicit-midpoint states of the two validation initial
conditions ``(sin 1.1, 0, cos 1.1)`` and ``(0, sin 1.1, cos 1.1)`` and is applied to its own
predictions, three states at a time, until 500 steps of ``h = 0.2`` (``t = 100``). The reference is
the implicit midpoint rule from the same initial conditions. A rollout has *diverged* at the first
state that is not finite or has ``‖z‖ > 10`` (:data:`DIVERGED_NORM`; the exact flow keeps
``‖z‖ = 1``). Written to ``--out``:

- ``trajectories.png``: the 3-D trajectories on the sphere, every model against the reference;
- ``norm.png``: ``‖z(t)‖`` (1 for the exact flow, which conserves it);
- ``error.png``: ``‖z(t) − z_ref(t)‖``;
- ``overview.png``: a one-row figure of all three for a README;
- ``summary.json``: each run's training summary with the rollout metrics, and ``"diverged"`` with
  ``"diverged_at"``: ``{"where": "rollout", "t": …, "rollout_step": …, "initial_condition": …}``,
  or ``{"where": "training", "step": …}`` for a run whose training loss stopped being finite, or
  ``null``. A metric that is not finite is ``null``.

In the plots each panel marks only the divergences in it, those from its initial condition: a
legend in the panel names the model and the time, each time panel draws a dotted vertical line
there, and a cross marks the last point drawn of the trajectory before it. A training divergence
(every rollout not finite) is said in the figure's legend.

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

from examples import _plots, _training
from examples.rigid_body import data, models

__all__ = ["DIVERGED_NORM", "INERTIAS", "INITIAL_CONDITIONS", "ROLLOUT_METRICS", "describe_divergence",
           "divergence_index", "figures", "format_metric", "format_table", "main", "plot", "reference", "restore_run",
           "rollout", "rollout_divergence", "rollout_metrics", "validate"]

N_STEPS = 500
INERTIAS = {"paper": data.PAPER_INERTIA, "code": data.CODE_INERTIA}
"""The ``--inertia`` choices (docs/examples/rigid-body.md#inertia)."""
DIVERGED_NORM = 10.0
"""A rollout state with ``‖z‖`` above this (or not finite) has diverged."""
INITIAL_CONDITIONS = ("(sin 1.1, 0, cos 1.1)", "(0, sin 1.1, cos 1.1)")
"""The validation initial conditions, as :func:`data.validation_initial_conditions` orders them."""
ROLLOUT_METRICS = ("rollout_error", "final_error", "norm_drift")
"""The keys of :func:`rollout_metrics`; printed as ``n/a`` for a model that diverged (:func:`format_metric`)."""

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


def divergence_index(predicted: np.ndarray) -> np.ndarray:
    """``(n,)``: the index of each trajectory's first diverged state, -1 where none diverged."""
    norm = np.linalg.norm(np.asarray(predicted, dtype=np.float64), axis=-1)
    diverged = ~(norm <= DIVERGED_NORM)  # NaN compares False
    return np.where(diverged.any(axis=-1), np.argmax(diverged, axis=-1), -1)


def rollout_divergence(predicted: np.ndarray, step: float = data.STEP) -> dict[str, Any] | None:
    """The first divergence of rollouts ``(2, n_states, 3)`` from the validation ICs, or None.

    Returns:
        ``{"where": "rollout", "t": t, "rollout_step": k, "initial_condition": "(…)"}`` for the
        earliest diverged state over both trajectories (``t = k·step``).
    """
    index = divergence_index(predicted)
    diverged = [i for i in range(len(index)) if index[i] >= 0]
    if not diverged:
        return None
    first = min(diverged, key=lambda i: index[i])
    return {"where": "rollout", "t": round(float(index[first] * step), 9), "rollout_step": int(index[first]),
            "initial_condition": INITIAL_CONDITIONS[first]}


def describe_divergence(diverged_at: dict[str, Any]) -> str:
    """A sentence on where a model diverged (``diverged_at`` of a summary)."""
    if diverged_at["where"] != "rollout":
        return _training.describe_divergence(diverged_at)
    return (f"rollout from z₀ = {diverged_at['initial_condition']} diverged at t = {diverged_at['t']:g} "
            f"(step {diverged_at['rollout_step']}: ‖z‖ > {DIVERGED_NORM:g} or not finite)")


@functools.partial(jax.jit, static_argnames=("model", "n_states"))
def _rollout(model: models.Model, params: PyTree, window: jax.Array, n_states: int) -> jax.Array:
    return rollout(model.apply, params, window, n_states)


def restore_run(run_dir: Path) -> tuple[dict[str, Any], models.Model, PyTree]:
    """The flags, model and parameters of a training run directory's newest readable checkpoint.

    A newer checkpoint that does not read is named in a warning (:func:`_training.load_latest`).

    Raises:
        FileNotFoundError: no checkpoint in ``run_dir``.
        ValueError: checkpoints, none of which reads.
    """
    config = json.loads((run_dir / "config.json").read_text())
    model = models.make_model(config["model"])
    dtype = _training.configure_dtype(config["dtype"])
    template = model.init(np.random.default_rng(0), dtype)
    found = _training.load_latest(run_dir, lambda path: _training.load_params(path, template))
    if found is None:
        raise FileNotFoundError(f"restore_run: no checkpoint in {run_dir}.")
    return config, model, found[1]


# -- plots ---------------------------------------------------------------------------------------

_RADIUS = 1.5  # trajectory points farther out are not drawn
_NORM_LIMITS = (0.0, 2.0)
_ERROR_LIMITS = (1e-4, 1e1)
_REFERENCE = {"color": "black", "linestyle": "--", "linewidth": 1.2}
_REFERENCE_LABEL = "implicit midpoint (‖z‖ = 1)"


def _sphere(ax) -> None:
    u, v = np.meshgrid(np.linspace(0, 2 * np.pi, 25), np.linspace(0, np.pi, 13))
    ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v), color="0.85", linewidth=0.4)


def _panel_divergences(ax, colors: dict[str, str], stop_times: dict[str, float | None]) -> None:
    """A legend in the panel naming the models whose rollout diverged in it, and when; none if none did."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colors[name], linestyle=":", marker="X", linewidth=1.5,
                      label=f"{name} diverged at t = {when:g}")
               for name, when in stop_times.items() if when is not None]
    if handles:
        ax.legend(handles=handles, loc="upper left", fontsize=8, framealpha=0.9,
                  title=f"‖z‖ > {DIVERGED_NORM:g} or not finite", title_fontsize=8)


def _trajectory_axes(ax, rollouts: dict[str, np.ndarray], ref: np.ndarray, i: int, colors: dict[str, str],
                     stops: dict[str, np.ndarray], stop_times: dict[str, float | None]) -> None:
    _sphere(ax)
    for name, predicted in rollouts.items():
        z = predicted[i]
        # Points far off the sphere are left out (the line breaks there) so that a diverging
        # rollout does not hide the others; a cross marks its last drawn point before it diverged.
        inside = np.linalg.norm(z, axis=-1) < _RADIUS
        ax.plot(*np.where(inside[:, None], z, np.nan).T, color=colors[name], linewidth=1)
        drawn = np.flatnonzero(inside[:stops[name][i]]) if stops[name][i] >= 0 else []
        if len(drawn):
            ax.plot(*z[drawn[-1], :, None], color=colors[name], marker="X", markersize=9, linestyle="none")
    ax.plot(*ref[i].T, **_REFERENCE)
    ax.set(xlim=(-1.2, 1.2), ylim=(-1.2, 1.2), zlim=(-1.2, 1.2), xlabel="z₁", ylabel="z₂", zlabel="z₃")
    _panel_divergences(ax, colors, stop_times)


def _time_axes(ax, curves: dict[str, np.ndarray], t: np.ndarray, ylabel: str, ylim: tuple[float, float],
               log: bool, colors: dict[str, str], stop_times: dict[str, float | None], exact: bool) -> None:
    if exact:
        ax.axhline(1.0, **_REFERENCE)
    for name, curve in curves.items():
        ax.plot(t, curve, color=colors[name], linewidth=1)
        if (when := stop_times[name]) is not None:
            ax.axvline(when, color=colors[name], linestyle=":", linewidth=1.5)
            # At the bottom: above, the curve itself runs out of the axes towards the divergence.
            ax.annotate(f"t = {when:g}", xy=(when, 0), xycoords=("data", "axes fraction"), xytext=(-3, 4),
                        textcoords="offset points", rotation=90, ha="right", va="bottom", fontsize=8,
                        color=colors[name])
    if log:
        ax.set_yscale("log")
    ax.set(xlabel="t", ylabel=ylabel, ylim=ylim, xlim=(t[0], t[-1]))
    ax.grid(alpha=0.3)
    _panel_divergences(ax, colors, stop_times)


def _label(name: str, diverged_at: dict[str, Any] | None) -> str:
    """A model's entry in a figure's legend: a training divergence holds for every panel; a rollout's does not."""
    if diverged_at is not None and diverged_at["where"] == "training":
        return f"{name} (training diverged at step {diverged_at['step']})"
    return name


def _legend(fig, labels: dict[str, str], colors: dict[str, str], reference: bool) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colors[name], linewidth=1.5, label=label) for name, label in labels.items()]
    if reference:
        handles.append(Line2D([], [], label=_REFERENCE_LABEL, **_REFERENCE))
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=9, frameon=False)


def figures(rollouts: dict[str, np.ndarray], ref: np.ndarray, step: float,
            diverged_at: dict[str, dict[str, Any] | None] | None = None) -> dict[str, Any]:
    """The trajectory, norm, error and overview figures (``matplotlib`` figures, by file stem).

    Args:
        rollouts: each model's predicted trajectories ``(2, n_states, 3)``, by name.
        ref: the reference ``(2, n_states, 3)``.
        step: the time step ``h``.
        diverged_at: each model's ``diverged_at`` (summary), for a training divergence's label.

    Each panel names the models that diverged in it (:func:`divergence_index` of its initial
    condition) in a legend of its own; the figure's legend names every model, and says a training
    divergence. The error is drawn from the first predicted state on (the first ``T`` states are
    given).
    """
    plt = _plots.pyplot()
    diverged_at = diverged_at or {}
    n = ref.shape[0]
    t = step * np.arange(ref.shape[1])
    predicted = slice(data.N_IN, None)
    colors = {name: f"C{k}" for k, name in enumerate(rollouts)}
    stops = {name: divergence_index(p) for name, p in rollouts.items()}
    # stop_times[i][name]: when the rollout of `name` from initial condition i diverged, None if it did not.
    stop_times = [{name: float(t[index[i]]) if index[i] >= 0 else None for name, index in stops.items()}
                  for i in range(n)]
    labels = {name: _label(name, diverged_at.get(name)) for name in rollouts}
    norms = {name: np.linalg.norm(p, axis=-1) for name, p in rollouts.items()}
    errors = {name: np.linalg.norm(p - ref, axis=-1)[:, predicted] for name, p in rollouts.items()}
    panels = {"norm": (norms, t, "‖z(t)‖", _NORM_LIMITS, False, True),
              "error": (errors, t[predicted], "‖z(t) − z_ref(t)‖", _ERROR_LIMITS, True, False)}
    titles = {"norm": "‖z(t)‖ along the rollouts (the exact flow keeps ‖z‖ = 1)",
              "error": "Distance from the implicit-midpoint reference"}
    out = {}

    fig = plt.figure(figsize=(11, 5.6), layout="constrained")
    for i in range(n):
        ax = fig.add_subplot(1, n, i + 1, projection="3d")
        _trajectory_axes(ax, rollouts, ref, i, colors, stops, stop_times[i])
        ax.set_title(f"z₀ = {INITIAL_CONDITIONS[i]}", fontsize=10)
    fig.suptitle(f"Rollouts on the unit sphere, {ref.shape[1] - 1} steps of h = {step}")
    _legend(fig, labels, colors, reference=True)
    out["trajectories"] = fig

    for name, (curves, times, ylabel, ylim, log, exact) in panels.items():
        fig, axes = plt.subplots(1, n, figsize=(11, 4.2), sharey=True, layout="constrained")
        for i, ax in enumerate(axes):
            _time_axes(ax, {k: v[i] for k, v in curves.items()}, times, ylabel, ylim, log, colors, stop_times[i],
                       exact)
            ax.set_title(f"z₀ = {INITIAL_CONDITIONS[i]}", fontsize=10)
        fig.suptitle(titles[name])
        _legend(fig, labels, colors, reference=exact)
        out[name] = fig

    fig = plt.figure(figsize=(12, 4.4), layout="constrained")
    ax = fig.add_subplot(1, 3, 1, projection="3d")
    _trajectory_axes(ax, rollouts, ref, 0, colors, stops, stop_times[0])
    ax.set(title="trajectory", zlabel="")  # the z label would run into the next panel's ticks
    for position, (name, (curves, times, ylabel, ylim, log, exact)) in zip((3, 2), panels.items()):
        ax = fig.add_subplot(1, 3, position)
        _time_axes(ax, {k: v[0] for k, v in curves.items()}, times, ylabel, ylim, log, colors, stop_times[0],
                   exact)
        ax.set(ylabel="", title={"norm": "norm ‖z(t)‖", "error": "error ‖z(t) − z_ref(t)‖"}[name])  # room for the 3-D axes
    fig.suptitle(f"Rigid body from z₀ = {INITIAL_CONDITIONS[0]}: {ref.shape[1] - 1} steps of h = {step}")
    _legend(fig, labels, colors, reference=True)
    out["overview"] = fig
    return out


def plot(rollouts: dict[str, np.ndarray], ref: np.ndarray, step: float, out: Path,
         diverged_at: dict[str, dict[str, Any] | None] | None = None) -> list[Path]:
    """Write :func:`figures` as ``<name>.png`` into ``out``; return their paths."""
    return _plots.save_figures(figures(rollouts, ref, step, diverged_at), out, dpi=110, dpis={"overview": 90})


# -- command line --------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = _training.ArgumentParser(prog="python -m examples.rigid_body.evaluate",
                                      description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=_training.run_directory, nargs="+",
                        help="training run directories (their --log-dir)")
    parser.add_argument("--out", type=_training.directory, default=Path("runs/rigid_body/eval"),
                        help="where plots and summary go")
    parser.add_argument("--n-steps", type=_training.at_least(data.N_IN), default=N_STEPS,
                        help=f"rollout length in steps of h (the first {data.N_IN} states are given)")
    return parser


def main(argv: Sequence[str] | None = None, *, describe_divergences: bool = True) -> dict[str, Any]:
    """Evaluate the runs, write the plots and ``summary.json``; return the summary.

    ``describe_divergences=False`` leaves out the line on each diverged model after the table: the
    demo's trainers have printed it (the table's last column still says where).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    rollouts, summaries, inertia = {}, {}, None
    for run_dir in args.runs:
        try:
            config, model, params = restore_run(run_dir)
        except (FileNotFoundError, ValueError) as error:
            parser.error(f"argument runs: {error}")
        if inertia not in (None, INERTIAS[config["inertia"]]):
            parser.error(f"argument runs: every run must use the same --inertia; {run_dir} differs.")
        inertia = INERTIAS[config["inertia"]]
        label = model.name if model.name not in rollouts else str(run_dir)
        predicted, ref, metrics = validate(model, params, jnp.dtype(config["dtype"]),
                                           inertia=inertia, n_steps=args.n_steps)
        rollouts[label] = predicted
        # A training divergence stands; the rollout's is redone for this --n-steps.
        summaries[label] = _training.evaluated_summary(run_dir, metrics, rollout_divergence(predicted))
    _training.make_directory(parser, args.out, "--out")
    paths = plot(rollouts, ref, data.STEP, args.out, {k: s["diverged_at"] for k, s in summaries.items()})
    summary = _training.json_safe({"n_steps": args.n_steps, "step": data.STEP, "inertia": inertia,
                                   "models": summaries})
    _training.report_evaluation(args.out, summary, format_table(summary["models"]), paths,
                                describe_divergence if describe_divergences else None)
    return summary


_COLUMNS = (("parameters", "params", "d"), ("steps", "steps", "d"), ("final_loss", "final loss", ".3e"),
            ("rollout_error", "rollout err", ".3e"), ("final_error", "err t=end", ".3e"),
            ("norm_drift", "‖z‖ drift", ".3e"), ("train_time_s", "train s", ".1f"), ("steps_per_s", "steps/s", ".0f"))


def _diverged_cell(diverged_at: dict[str, Any] | None) -> str:
    if diverged_at is None:
        return "no"
    return f"step {diverged_at['step']}" if diverged_at["where"] == "training" else f"t = {diverged_at['t']:g}"


def format_metric(summary: dict[str, Any], key: str, spec: str) -> str:
    """``summary[key]`` formatted with ``spec``, or ``n/a`` for a number the model does not have.

    That is one that is not finite, and every rollout metric (:data:`ROLLOUT_METRICS`) of a model
    that diverged: its errors and drift measure the blow-up, not the model, and may still be finite
    (a rollout past ``‖z‖ > 10`` that is stopped before it overflows). The trainer, the demo and
    the evaluation print them alike.
    """
    if key in ROLLOUT_METRICS and summary.get("diverged_at") is not None:
        return "n/a"
    return _training.format_value(summary[key], spec)


def format_table(summaries: dict[str, dict[str, Any]]) -> str:
    """A fixed-width table of the models' summaries; ``n/a`` for a metric a model lacks (:func:`format_metric`)."""
    header = f"{'model':<12}" + "".join(f"{title:>13}" for _, title, _ in _COLUMNS) + f"{'diverged':>13}"
    rows = [header]
    for name, s in summaries.items():
        cells = [format_metric(s, key, fmt) if key in s else "-" for key, _, fmt in _COLUMNS]
        cells.append(_diverged_cell(s.get("diverged_at")))
        rows.append(f"{name:<12}" + "".join(f"{c:>13}" for c in cells))
    return "\n".join(rows)


if __name__ == "__main__":
    _training.command_line(main)
