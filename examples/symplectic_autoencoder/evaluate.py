r"""Reduced models of the linear wave equation, their errors, plots and table; re-evaluate a training run.

For a reduced dimension ``2n`` there are two encoder/decoder pairs:

- PSD, proper symplectic decomposition by the cotangent lift (Peng & Mohseni 2016):
  ``φ = blockdiag(V, V)`` with ``V`` the leading ``n`` left singular vectors of ``[Q, P]``, the
  training snapshots' positions and momenta side by side (:func:`geometric.nn.cotangent_lift`);
  encoder ``ξ = J_{2n}ᵀφᵀJ_{2N}z`` (here ``φᵀz``), decoder ``z = φξ``;
- SAE, the trained :class:`geometric.nn.SymplecticAutoencoder`.

The reduced model of a decoder ``d`` is the Hamiltonian system
``ξ' = J_{2n}∇_ξ(H∘d)(ξ)`` (:func:`geometric.nn.reduced_vector_field`): for PSD the Galerkin
projection ``ξ' = J_{2n}φᵀ∇H(φξ)``, linear; for the SAE a nonlinear system in ``2n`` unknowns. It
starts from the encoded initial state ``ξ₀ = e(z₀)`` and is integrated with the implicit midpoint
rule (symplectic; each step solved by Newton's method in float64, exact for PSD after one
iteration), with the full-order model's time step; the prediction is ``d(ξ(t))``.

Errors, all relative (Frobenius norms over the states considered):

- ``reconstruction_train``/``_test``: ``‖Z − d(e(Z))‖ / ‖Z‖`` over the training snapshots and over
  the full-order solutions at the test parameters (the best the reduced space can do);
- ``prediction``: ``‖Z − d(ξ)‖ / ‖Z‖`` over the test solutions, every time step;
  ``prediction_final`` the same at ``t = T``; ``prediction_over_time`` per test parameter and time
  (``‖z(t) − d(ξ(t))‖ / ‖z(t)‖``, drawn in ``errors.png``);
- ``energy_drift``: ``max_t |H(d(ξ(t))) − H(d(ξ₀))| / H(d(ξ₀))`` of the reduced trajectories (0 up
  to rounding for PSD, whose reduced Hamiltonian is quadratic).

Usage::

    python -m examples.symplectic_autoencoder.evaluate runs/symplectic_autoencoder --out runs/sae_eval
"""
from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import geometric.nn as gnn
from examples import _plots, _training
from examples.symplectic_autoencoder import data

__all__ = ["NEWTON_TOL", "build_parser", "evaluate", "figures", "format_table", "implicit_midpoint", "init_params",
           "json_metrics", "main", "make_model", "plot", "psd_singular_values", "reconstruction_error",
           "reduced_rollout", "reference_solutions", "report", "restore_run", "subrun", "training_solutions"]

NEWTON_TOL = 1e-12
"""Newton's method stops at ``‖residual‖∞ ≤ NEWTON_TOL · (1 + ‖ξ‖∞)``."""
NEWTON_MAX_ITERATIONS = 30

PyTree = Any
Coder = Callable[[PyTree, jax.Array], jax.Array]  # (params, x) -> y: an encoder or a decoder


def implicit_midpoint(f: Callable[[jax.Array], jax.Array], xi0: jax.Array, step: float, n_steps: int) -> jax.Array:
    """Integrate ``ξ' = f(ξ)`` with the implicit midpoint rule ``ξ_{k+1} = ξ_k + h f((ξ_k + ξ_{k+1})/2)``.

    Each step is Newton's method on the midpoint equation, started from the explicit Euler step,
    with the Jacobian ``I − (h/2) ∂f`` (``jax.jacfwd``), until :data:`NEWTON_TOL`.

    Args:
        f: the vector field of one state ``(d,)``.
        xi0: the initial state ``(d,)``.
        step: the time step ``h``.
        n_steps: number of steps.

    Returns:
        ``(n_steps + 1, d)``: the states at ``t = 0, h, …``.
    """
    jacobian = jax.jacfwd(f)
    eye = jnp.eye(xi0.shape[-1], dtype=xi0.dtype)

    def advance(xi, _):
        def residual(w):
            return w - xi - step * f((xi + w) / 2)

        def not_converged(state):
            w, r, iteration = state
            return (jnp.max(jnp.abs(r)) > NEWTON_TOL * (1 + jnp.max(jnp.abs(w)))) & (iteration < NEWTON_MAX_ITERATIONS)

        def newton(state):
            w, r, iteration = state
            w = w - jnp.linalg.solve(eye - step / 2 * jacobian((xi + w) / 2), r)
            return w, residual(w), iteration + 1

        w0 = xi + step * f(xi)
        w, _, _ = lax.while_loop(not_converged, newton, (w0, residual(w0), jnp.asarray(0)))
        return w, w

    _, states = lax.scan(advance, xi0, None, length=n_steps)
    return jnp.concatenate([xi0[None], states])


@functools.partial(jax.jit, static_argnames=("encode", "decode", "n_steps", "substeps"))
def reduced_rollout(encode: Coder, decode: Coder, params: PyTree, z0: jax.Array, mu: jax.Array, step: float,
                    n_steps: int, substeps: int = 1) -> tuple[jax.Array, jax.Array]:
    """The reduced model's prediction from ``z0`` at parameter ``mu``: ``(d(ξ(t)), H(d(ξ(t))))``.

    ``ξ₀ = encode(params, z0)``, then :func:`implicit_midpoint` on
    ``reduced_vector_field(H(·; μ), decode(params, ·))`` with ``substeps`` steps of
    ``step / substeps`` per output step (a learned reduced system can be stiffer than the
    full-order one, whose implicit-midpoint step is exact as a linear solve).

    Returns:
        The decoded states ``(n_steps + 1, 2N)`` and the full-order energy along them ``(n_steps + 1,)``.
    """
    decoder = functools.partial(decode, params)
    f = gnn.reduced_vector_field(lambda z: data.hamiltonian(z, mu), decoder)
    reduced = implicit_midpoint(f, encode(params, z0), step / substeps, n_steps * substeps)[::substeps]
    decoded = decoder(reduced)
    return decoded, data.hamiltonian(decoded, mu)


def _psd_encode(phi: jax.Array, z: jax.Array) -> jax.Array:
    return gnn.psd_encode(z, phi)


def _psd_decode(phi: jax.Array, xi: jax.Array) -> jax.Array:
    return gnn.psd_decode(xi, phi)


def reconstruction_error(encode: Coder, decode: Coder, params: PyTree, states: np.ndarray) -> float:
    """``‖Z − d(e(Z))‖_F / ‖Z‖_F`` over states ``(..., 2N)``."""
    z = jnp.asarray(states)
    return float(jnp.linalg.norm(z - decode(params, encode(params, z))) / jnp.linalg.norm(z))


def psd_singular_values(states: np.ndarray) -> np.ndarray:
    """Singular values of the cotangent-lift matrix ``[Q, P]`` (``N × 2m``) of snapshots ``(..., 2N)``.

    PSD at ``2n`` reconstructs these snapshots with ``‖Z − φφᵀZ‖_F² = Σ_{i>n} σᵢ²``.
    """
    z = np.asarray(states).reshape(-1, states.shape[-1])
    n = z.shape[-1] // 2
    return np.linalg.svd(np.concatenate([z[:, :n], z[:, n:]]).T, compute_uv=False)


def _metrics(encode: Coder, decode: Coder, params: PyTree, train: np.ndarray, test: data.Snapshots,
             substeps: int) -> dict[str, Any]:
    step = float(test.times[1] - test.times[0])
    n_steps = len(test.times) - 1
    predicted, energies = zip(*(reduced_rollout(encode, decode, params, jnp.asarray(z[0]), jnp.asarray(mu), step,
                                                n_steps, substeps) for z, mu in zip(test.states, test.mus)))
    predicted, energies = np.asarray(predicted), np.asarray(energies)
    reference = test.states
    over_time = np.linalg.norm(reference - predicted, axis=-1) / np.linalg.norm(reference, axis=-1)
    return {
        "reconstruction_train": reconstruction_error(encode, decode, params, train),
        "reconstruction_test": reconstruction_error(encode, decode, params, test.states),
        "prediction": float(np.linalg.norm(reference - predicted) / np.linalg.norm(reference)),
        "prediction_final": float(np.linalg.norm(reference[:, -1] - predicted[:, -1])
                                  / np.linalg.norm(reference[:, -1])),
        "energy_drift": float(np.max(np.abs(energies - energies[:, :1]) / np.abs(energies[:, :1]))),
        "prediction_over_time": over_time,
        "predicted": predicted,
    }


def _float64(tree: PyTree) -> PyTree:
    return jax.tree.map(lambda x: jnp.asarray(x, jnp.float64), tree)


def evaluate(autoencoders: Mapping[int, tuple[gnn.SymplecticAutoencoder, PyTree]], train: data.Snapshots,
             test: data.Snapshots, substeps: int = 1) -> dict[str, Any]:
    """PSD and the symplectic autoencoders at each reduced dimension, on the training and test solutions.

    Everything is computed in float64 (the autoencoders' parameters are cast), PSD from the
    training snapshots.

    Args:
        autoencoders: ``{2n: (model, params)}``.
        train: the training solutions.
        test: the full-order solutions at the test parameters.
        substeps: implicit-midpoint steps of the reduced models per time step of ``test``.

    Returns:
        ``{"dims": {2n: {"psd": metrics, "sae": metrics}}, "psd_curve": {"reduced_dim": [...],
        "reconstruction_train": [...], "reconstruction_test": [...]}}`` with the metrics of the
        module docstring; ``prediction_over_time`` and ``predicted`` are arrays (left out of JSON
        by :func:`json_metrics`).
    """
    with jax.enable_x64(True):
        snapshots = train.states.reshape(-1, train.states.shape[-1])
        out: dict[str, Any] = {"dims": {}}
        for dim, (model, params) in sorted(autoencoders.items()):
            phi = jnp.asarray(gnn.cotangent_lift(jnp.asarray(snapshots), dim), jnp.float64)
            out["dims"][dim] = {
                "psd": _metrics(_psd_encode, _psd_decode, phi, snapshots, test, substeps),
                "sae": _metrics(model.encode, model.decode, _float64(params), snapshots, test, substeps),
            }
        # PSD's reconstruction error over a range of dimensions, from the singular values (the
        # Kolmogorov n-width of the snapshot set, as far as a linear space sees it).
        sigma = psd_singular_values(snapshots)
        half = snapshots.shape[-1] // 2
        dims = np.arange(2, 2 * min(half, 20) + 1, 2)
        tail = np.sqrt(np.maximum(np.cumsum((sigma**2)[::-1])[::-1], 0) / np.sum(sigma**2))
        test_errors = []
        for dim in dims:
            v = _leading_vectors(snapshots, dim // 2)
            z = test.states.reshape(-1, test.states.shape[-1])
            projected = np.concatenate([z[:, :half] @ v @ v.T, z[:, half:] @ v @ v.T], axis=-1)
            test_errors.append(float(np.linalg.norm(z - projected) / np.linalg.norm(z)))
        out["psd_curve"] = {"reduced_dim": dims.tolist(),
                            "reconstruction_train": [float(tail[d // 2]) if d // 2 < len(tail) else 0.0 for d in dims],
                            "reconstruction_test": test_errors}
    return out


def _leading_vectors(snapshots: np.ndarray, k: int) -> np.ndarray:
    n = snapshots.shape[-1] // 2
    u, _, _ = np.linalg.svd(np.concatenate([snapshots[:, :n], snapshots[:, n:]]).T, full_matrices=False)
    return u[:, :k]


_SCALARS = ("reconstruction_train", "reconstruction_test", "prediction", "prediction_final", "energy_drift")


def json_metrics(result: Mapping[str, Any]) -> dict[str, Any]:
    """The scalar metrics of :func:`evaluate`, and whether the SAE beats PSD, for ``summary.json``."""
    dims = {}
    for dim, methods in result["dims"].items():
        dims[str(dim)] = {name: {k: m[k] for k in _SCALARS} for name, m in methods.items()}
        dims[str(dim)]["sae_beats_psd"] = {k: methods["sae"][k] < methods["psd"][k]
                                           for k in ("reconstruction_test", "prediction")}
    return {"dims": dims, "psd_curve": result["psd_curve"]}


_COLUMNS = (("reconstruction_train", "recon train"), ("reconstruction_test", "recon test"),
            ("prediction", "prediction"), ("prediction_final", "pred t=T"), ("energy_drift", "H drift"))


def format_table(metrics: Mapping[str, Any]) -> str:
    """A Markdown table of :func:`json_metrics`: one row per reduced dimension and method."""
    rows = ["| 2n | method | " + " | ".join(title for _, title in _COLUMNS) + " |",
            "|---|---|" + "---|" * len(_COLUMNS)]
    for dim, methods in metrics["dims"].items():
        for name in ("psd", "sae"):
            cells = [_training.format_value(methods[name][key], ".3e") for key, _ in _COLUMNS]
            rows.append(f"| {dim} | {name.upper()} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


# -- plots ---------------------------------------------------------------------------------------


_COLORS = {"psd": "C1", "sae": "C2"}
_STYLES = ("-", "--", ":", "-.")


def figures(result: Mapping[str, Any], test: data.Snapshots, n_times: int = 3) -> dict[str, Any]:
    """``errors``: reconstruction error against ``2n`` and prediction error over time;
    ``snapshots``: ``q(ξ)`` of the full-order model and the reduced models at a few times, first test ``μ``."""
    plt = _plots.pyplot()
    out = {}
    dims = sorted(result["dims"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    curve = result["psd_curve"]
    left.semilogy(curve["reduced_dim"], curve["reconstruction_test"], "o-", color=_COLORS["psd"], markersize=3,
                  label="PSD, test parameters")
    left.semilogy(curve["reduced_dim"], curve["reconstruction_train"], "-", color=_COLORS["psd"], alpha=0.4,
                  label="PSD, training snapshots")
    left.semilogy(dims, [result["dims"][d]["sae"]["reconstruction_test"] for d in dims], "s", color=_COLORS["sae"],
                  markersize=7, label="SAE, test parameters")
    left.set(xlabel="reduced dimension 2n", ylabel="relative reconstruction error",
             title="‖Z − d(e(Z))‖ / ‖Z‖")
    left.grid(alpha=0.3, which="both")
    left.legend(fontsize=8)
    for j, dim in enumerate(dims):
        for name in ("psd", "sae"):
            right.semilogy(test.times, result["dims"][dim][name]["prediction_over_time"][0], _STYLES[j % 4],
                           color=_COLORS[name], label=f"{name.upper()}, 2n = {dim}")
    right.set(xlabel="t", ylabel="relative error", title=f"reduced models, μ = {test.mus[0]:g} (not trained on)")
    right.grid(alpha=0.3, which="both")
    right.legend(fontsize=8, ncols=2)
    out["errors"] = fig

    n = test.states.shape[-1] // 2
    xi = data.grid(n)
    times = np.linspace(0, len(test.times) - 1, n_times).round().astype(int)
    fig, axes = plt.subplots(len(dims), n_times, figsize=(3.6 * n_times, 2.4 * len(dims)), sharex=True,
                             sharey=True, layout="constrained", squeeze=False)
    for i, dim in enumerate(dims):
        for j, k in enumerate(times):
            ax = axes[i, j]
            ax.plot(xi, test.states[0, k, :n], color="black", linewidth=1.5, label="full-order model")
            for name in ("psd", "sae"):
                ax.plot(xi, result["dims"][dim][name]["predicted"][0, k, :n], color=_COLORS[name], linewidth=1.2,
                        label=f"{name.upper()} reduced model")
            ax.set_title(f"2n = {dim}, t = {test.times[k]:.2f}", fontsize=9)
            ax.grid(alpha=0.3)
        axes[i, 0].set_ylabel("q(ξ)")
    for ax in axes[-1]:
        ax.set_xlabel("ξ")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(f"Linear wave equation, μ = {test.mus[0]:g}: positions q at three times")
    out["snapshots"] = fig
    return out


def plot(result: Mapping[str, Any], test: data.Snapshots, out: Path) -> list[Path]:
    """Write :func:`figures` as ``<name>.png`` into ``out``; return their paths."""
    return _plots.save_figures(figures(result, test), out)


# -- a training run ------------------------------------------------------------------------------


def make_model(config: Mapping[str, Any], reduced_dim: int) -> gnn.SymplecticAutoencoder:
    """The autoencoder a training run with flags ``config`` trains at ``reduced_dim``."""
    return gnn.SymplecticAutoencoder(2 * config["grid_points"], reduced_dim,
                                     n_encoder_layers=config["encoder_layers"],
                                     n_encoder_blocks=config["encoder_blocks"],
                                     n_decoder_layers=config["decoder_layers"],
                                     n_decoder_blocks=config["decoder_blocks"],
                                     sympnet_upscale=config["sympnet_upscale"])


def subrun(run_dir: Path, reduced_dim: int) -> Path:
    """Where a training run keeps the checkpoints and logs of its autoencoder at ``reduced_dim``."""
    return run_dir / f"sae_{reduced_dim}"


def init_params(model: gnn.SymplecticAutoencoder, seed: int, dtype: jnp.dtype) -> PyTree:
    """The initial parameters of ``model`` for ``seed`` (the same for every reduced dimension's key)."""
    return model.init(jax.random.key(seed), dtype)


def restore_run(run_dir: Path) -> tuple[dict[str, Any], dict[int, tuple[gnn.SymplecticAutoencoder, PyTree]]]:
    """The flags and the ``{2n: (model, params)}`` of a training run's newest readable checkpoints.

    Raises:
        FileNotFoundError: a reduced dimension without a checkpoint.
        ValueError: checkpoints, none of which reads.
    """
    config = json.loads((run_dir / "config.json").read_text())
    dtype = _training.configure_dtype(config["dtype"])
    out = {}
    for dim in config["reduced_dims"]:
        model = make_model(config, dim)
        template = init_params(model, config["seed"], dtype)
        found = _training.load_latest(subrun(run_dir, dim), functools.partial(_load, template=template))
        if found is None:
            raise FileNotFoundError(f"restore_run: no checkpoint in {subrun(run_dir, dim)}.")
        out[dim] = (model, found[1])
    return config, out


def _load(path: Path, template: PyTree) -> PyTree:
    return _training.load_params(path, template)


def reference_solutions(config: Mapping[str, Any], test_mu: Sequence[float] | None = None) -> data.Snapshots:
    """The full-order solutions at the test parameters (``config["test_mu"]`` unless given)."""
    mus = config["test_mu"] if test_mu is None else test_mu
    return data.solve(mus, config["grid_points"], config["time_steps"], config["t_end"])


def training_solutions(config: Mapping[str, Any]) -> data.Snapshots:
    """The full-order solutions the run trains on."""
    return data.solve(data.training_parameters(config["train_params"]), config["grid_points"],
                      config["time_steps"], config["t_end"])


def report(result: Mapping[str, Any], test: data.Snapshots, out: Path, extra: Mapping[str, Any]
           ) -> dict[str, Any]:
    """Write ``results.md``, ``summary.json`` (``extra`` and :func:`json_metrics`) and the plots into ``out``."""
    metrics = json_metrics(result)
    table = format_table(metrics)
    (out / "results.md").write_text(table)
    paths = plot(result, test, out)
    summary = _training.json_safe(dict(extra) | {"test_mu": [float(m) for m in test.mus]} | metrics
                                  | {"plots": [p.name for p in paths]})
    _training.write_json(out / "summary.json", summary)
    print(table, end="")
    print("plots: " + ", ".join(str(p) for p in paths))
    return summary


def build_parser() -> argparse.ArgumentParser:
    parser = _training.ArgumentParser(prog="python -m examples.symplectic_autoencoder.evaluate",
                                      description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=_training.run_directory, help="a training run directory (its --log-dir)")
    parser.add_argument("--out", type=_training.directory, default=None,
                        help="where plots, results.md and summary.json go (None: RUN/eval)")
    parser.add_argument("--test-mu", type=_training.positive_float, nargs="+", default=None,
                        help="test parameters (None: the run's)")
    parser.add_argument("--substeps", type=_training.positive_int, default=None,
                        help="reduced-model steps per full-order time step (None: the run's)")
    return parser


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Re-evaluate a training run's autoencoders against PSD; write the plots, table and summary."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config, autoencoders = restore_run(args.run)
    except (FileNotFoundError, ValueError) as error:
        parser.error(f"argument run: {error}")
    out = _training.make_directory(parser, args.out or args.run / "eval", "--out")
    test = reference_solutions(config, args.test_mu)
    substeps = config["substeps"] if args.substeps is None else args.substeps
    result = evaluate(autoencoders, training_solutions(config), test, substeps)
    return report(result, test, out, {"run_dir": str(args.run), "reduced_dims": config["reduced_dims"],
                                      "substeps": substeps})


if __name__ == "__main__":
    _training.command_line(main)
