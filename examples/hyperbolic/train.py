"""Train Poincaré and Euclidean embeddings of a generated hierarchy and compare their reconstruction.

For each dimension in ``--dims`` (default 2 and 10) the same tree's transitive closure is embedded
twice, in the Poincaré ball (:class:`geometric.PoincareBall`, ``riemannian_adam``) and in Euclidean
space (``optax.adam``), with the same loss (Nickel & Kiela's softmax over distances with negative
sampling), initialisation, batches and learning-rate schedule (:mod:`examples.hyperbolic.model`).
Each embedding is scored by the mean rank and the mean average precision (MAP) of the related
pairs. The run directory (``--out``) receives ``summary.json`` (every metric, the flags, the tree's
size, the times), ``results.md`` (the table) and ``disk.png``, the 2-D embeddings side by side with
the tree's edges (needs matplotlib, the ``examples`` extra; ``--no-plot`` skips it).

Examples::

    python -m examples.hyperbolic.train                       # 1365-node balanced tree, ~2 min on 2 cores
    python -m examples.hyperbolic.train --quick               # a 40-node tree in seconds
    python -m examples.hyperbolic.train --tree random --nodes 1000 --dims 2 5 10
"""
from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from examples import _training
from examples.hyperbolic import data, model

__all__ = ["build_parser", "main", "plot_disk"]

QUICK = {"tree": "balanced", "branching": 3, "depth": 3, "epochs": 60, "batch_size": 32, "negatives": 10}


def build_parser() -> argparse.ArgumentParser:
    parser = _training.ArgumentParser(prog="python -m examples.hyperbolic.train",
                                      description=__doc__.split("\n\n")[0])
    parser.add_argument("--dims", type=_training.positive_int, nargs="+", default=[2, 10],
                        help="embedding dimensions (one Poincaré and one Euclidean run each)")
    parser.add_argument("--tree", choices=("balanced", "random"), default="balanced",
                        help="balanced: --branching children per node down to --depth; random: "
                             "--nodes nodes by preferential attachment (WordNet-like)")
    parser.add_argument("--branching", type=_training.at_least(2), default=4, help="children per node (balanced)")
    parser.add_argument("--depth", type=_training.positive_int, default=5, help="depth of the balanced tree")
    parser.add_argument("--nodes", type=_training.at_least(2), default=1000, help="nodes of the random tree")
    parser.add_argument("--epochs", type=_training.positive_int, default=300, help="passes over the closure")
    parser.add_argument("--burn-in", type=_training.nonnegative_int, default=10,
                        help="first epochs at a tenth of the learning rate")
    parser.add_argument("--batch-size", type=_training.positive_int, default=512, help="edges per step")
    parser.add_argument("--negatives", type=_training.positive_int, default=20, help="negative nodes per edge")
    parser.add_argument("--lr", type=_training.positive_float, default=0.01, help="learning rate of both optimizers")
    parser.add_argument("--seed", type=_training.nonnegative_int, default=0, help="seed of the tree, init and batches")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="embedding dtype")
    parser.add_argument("--out", type=_training.directory, default=Path("runs/hyperbolic"), help="run directory")
    parser.add_argument("--quick", action="store_true",
                        help="a 40-node tree, 60 epochs: seconds (overrides the tree and training flags)")
    parser.add_argument("--no-plot", action="store_true", help="do not draw disk.png")
    return parser


def make_hierarchy(args: argparse.Namespace) -> data.Hierarchy:
    if args.tree == "balanced":
        return data.balanced_tree(args.branching, args.depth)
    return data.random_tree(args.nodes, seed=args.seed)


def train_embedding(geometry: str, dim: int, hierarchy: data.Hierarchy, args: argparse.Namespace,
                    dtype) -> tuple[np.ndarray, dict[str, Any]]:
    """Train one embedding; return the table and its metrics (losses, mean rank, MAP, time)."""
    rng = np.random.default_rng(args.seed)
    steps_per_epoch = model.epoch_batches(rng, hierarchy, args.batch_size, args.negatives).shape[0]
    optimizer = model.make_optimizer(geometry, dim, args.lr, args.burn_in, steps_per_epoch)
    epoch = model.make_epoch(geometry, dim, optimizer)
    table = model.init_table(jax.random.PRNGKey(args.seed), hierarchy.size, dim, dtype)
    opt_state = optimizer.init(table)
    related = jax.numpy.asarray(hierarchy.related)
    rng = np.random.default_rng(args.seed)  # the same batches for both geometries
    start, losses = time.perf_counter(), []
    for _ in range(args.epochs):
        table, opt_state, loss = epoch(table, opt_state, model.epoch_batches(rng, hierarchy, args.batch_size,
                                                                             args.negatives), related)
        losses.append(float(loss))
    seconds = time.perf_counter() - start
    metrics = model.reconstruction(model.pairwise_distances(geometry, table), hierarchy.related)
    metrics |= {"final_loss": losses[-1], "train_time_s": seconds,
                "max_norm": float(np.max(np.linalg.norm(np.asarray(table), axis=1)))}
    return np.asarray(table), metrics


def plot_disk(path: Path, tables: dict[str, np.ndarray], hierarchy: data.Hierarchy,
              metrics: dict[str, dict[str, Any]]) -> bool:
    """Draw the 2-D embeddings (the Poincaré disk and the Euclidean plane) with the tree's edges.

    Returns False (and draws nothing) when matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, len(tables), figsize=(6 * len(tables), 6))
    axes = np.atleast_1d(axes)
    child = np.arange(1, hierarchy.size)
    for ax, (geometry, table) in zip(axes, tables.items()):
        if geometry == "poincare":
            ax.add_patch(plt.Circle((0, 0), 1, fill=False, color="0.3"))
        for v in child:
            p = table[[hierarchy.parent[v], v]]
            ax.plot(p[:, 0], p[:, 1], color="0.75", linewidth=0.4, zorder=1)
        dots = ax.scatter(table[:, 0], table[:, 1], c=hierarchy.depth, cmap="viridis", s=6, zorder=2)
        m = metrics[geometry]
        ax.set_title(f"{geometry}, 2-D: mean rank {m['mean_rank']:.1f}, MAP {m['map']:.3f}")
        ax.set_aspect("equal")
        if geometry == "poincare":
            ax.set_xlim(-1.05, 1.05)
            ax.set_ylim(-1.05, 1.05)
    fig.colorbar(dots, ax=axes, label="depth in the tree", shrink=0.8)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def results_table(runs: list[dict[str, Any]]) -> str:
    lines = ["| dim | geometry | mean rank | MAP | final loss | train time |", "|---|---|---|---|---|---|"]
    for r in runs:
        f = _training.format_value
        lines.append(f"| {r['dim']} | {r['geometry']} | {f(r['mean_rank'], '.2f')} | {f(r['map'], '.3f')} | "
                     f"{f(r['final_loss'], '.3f')} | {r['train_time_s']:.1f} s |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train every (dimension, geometry), write the run directory, and return the summary."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    dtype = _training.configure_dtype(args.dtype)
    _training.make_directory(parser, args.out, "--out")
    hierarchy = make_hierarchy(args)
    print(f"{args.tree} tree: {hierarchy.size} nodes, depth {hierarchy.depth.max()}, "
          f"{len(hierarchy.edges)} closure edges")
    runs, two_d = [], {}
    for dim in args.dims:
        for geometry in model.GEOMETRIES:
            table, metrics = train_embedding(geometry, dim, hierarchy, args, dtype)
            runs.append({"dim": dim, "geometry": geometry} | metrics)
            print(f"dim {dim:3d} {geometry:9s}: mean rank {metrics['mean_rank']:8.2f}, MAP {metrics['map']:.3f}, "
                  f"loss {metrics['final_loss']:.3f} ({metrics['train_time_s']:.1f} s)")
            if dim == 2:
                two_d[geometry] = (table, metrics)
    table_md = results_table(runs)
    (args.out / "results.md").write_text(table_md)
    plotted = False
    if two_d and not args.no_plot:
        plotted = plot_disk(args.out / "disk.png", {g: t for g, (t, _) in two_d.items()}, hierarchy,
                            {g: m for g, (_, m) in two_d.items()})
        if not plotted:
            print("matplotlib is not installed (the `examples` extra): no disk.png")
    summary = {"config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
               "tree": {"nodes": hierarchy.size, "depth": int(hierarchy.depth.max()),
                        "closure_edges": len(hierarchy.edges)},
               "runs": runs, "disk_png": plotted}
    _training.write_json(args.out / "summary.json", summary)
    print(table_md + f"written to {args.out}")
    return json.loads(_training.dumps(summary))


if __name__ == "__main__":
    _training.command_line(main)
