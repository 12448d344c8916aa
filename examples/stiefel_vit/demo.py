"""Compare Stiefel-constrained and unconstrained training of the digits vision transformer.

Trains the same network (same initial point, same batches, same learning-rate schedule) three
times, with ``manifold_adam``, ``riemannian_adam`` and plain ``adam`` (:mod:`.train`), then plots
the train and test loss, the test accuracy and the projections' distance from orthonormality
against the step (``curves.png``), and prints a table. ``--seeds 0 1 2`` repeats everything over
several seeds and reports the mean and spread of the final test accuracy, which is what a claim
about the optimizers needs: on 450 test images one seed's accuracy moves by ±1% with the seed.

Measured (defaults: 1000 steps of 128 images, peak learning rate 3e-3, float32; seeds 0, 1, 2;
2 shared CPU cores, about 8 minutes): test accuracy ``manifold_adam`` 93.2 ± 0.5%,
``riemannian_adam`` 94.2 ± 0.8%, ``adam`` 93.0 ± 0.1%; test loss 0.217, 0.216, 0.232. The
constrained projections stay orthonormal to float32 rounding (max ‖WᵀW − I‖ ≈ 6e-7) while the
unconstrained ones leave the manifold (≈ 2). The accuracy differences are of the size of the
seed-to-seed spread: on this small task the manifold optimizers train as well as Adam, as drop-in
optax transformations, but the constraint does not measurably improve generalisation.

Usage::

    python -m examples.stiefel_vit.demo                 # 1000 steps each, a few minutes on 2 cores
    python -m examples.stiefel_vit.demo --seeds 0 1 2   # the comparison over seeds
    tensorboard --logdir runs/demo
"""
from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from examples import _training
from examples.stiefel_vit import train

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m examples.stiefel_vit.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000, help="optimizer steps per run (default %(default)s)")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate of every optimizer")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="one run per optimizer and seed")
    parser.add_argument("--out", type=Path, default=Path("runs/demo"), help="parent of the demo's run directory")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("train_flags", nargs=argparse.REMAINDER,
                        help="after `--`: more flags for every run (e.g. -- --depth 1 --eval-every 100)")
    return parser


def _curves(history_by_run: dict[str, list[dict[str, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (("train_loss", "train loss", True), ("test_loss", "test loss", True),
              ("test_accuracy", "test accuracy", False), ("orthonormality_error", "max ‖WᵀW − I‖", True))
    fig, axes = plt.subplots(1, len(panels), figsize=(15, 3.4))
    for ax, (key, title, log) in zip(axes, panels):
        for name, history in history_by_run.items():
            ax.plot([r["step"] for r in history], [max(r[key], 1e-9) if log else r[key] for r in history],
                    linewidth=1.2, label=name)
        ax.set(title=title, xlabel="step", yscale="log" if log else "linear")
        ax.grid(alpha=0.3)
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train with every optimizer (and seed), plot, print and return ``{optimizer: results}``."""
    args = build_parser().parse_args(argv)
    extra = [flag for flag in args.train_flags if flag != "--"]
    out = args.out / time.strftime("stiefel_vit-%Y%m%d-%H%M%S")
    summaries: dict[str, list[dict[str, Any]]] = {name: [] for name in train.OPTIMIZERS}
    histories = {}
    for seed in args.seeds:
        for name in train.OPTIMIZERS:
            run = out / f"{name}-seed{seed}"
            flags = ["--optimizer", name, "--steps", str(args.steps), "--batch-size", str(args.batch_size),
                     "--lr", str(args.lr), "--seed", str(seed), "--log-dir", str(run),
                     "--checkpoint-every", str(args.steps), *extra]
            summaries[name].append(train.main(flags + (["--no-progress"] if args.no_progress else [])))
            histories[f"{name} (seed {seed})" if len(args.seeds) > 1 else name] = [
                json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    _curves(histories, out / "curves.png")
    results = {}
    print(f"\n{'optimizer':<17}{'test accuracy':>22}{'test loss':>12}{'max ‖WᵀW − I‖':>16}{'steps/s':>9}")
    for name, runs in summaries.items():
        accuracy = np.array([r["test_accuracy"] for r in runs])
        results[name] = {"test_accuracy_mean": float(accuracy.mean()), "test_accuracy_std": float(accuracy.std()),
                         "test_loss_mean": float(np.mean([r["test_loss"] for r in runs])),
                         "orthonormality_error_max": float(max(r["orthonormality_error"] for r in runs)),
                         "steps_per_s_mean": float(np.mean([r["steps_per_s"] for r in runs])), "runs": runs}
        r = results[name]
        print(f"{name:<17}{r['test_accuracy_mean']:>14.4f} ± {r['test_accuracy_std']:.4f}{r['test_loss_mean']:>12.4f}"
              f"{r['orthonormality_error_max']:>16.1e}{r['steps_per_s_mean']:>9.0f}")
    _training.write_json(out / "summary.json", results)
    print(f"plot: {out / 'curves.png'}\nsummary: {out / 'summary.json'}\nTensorBoard: tensorboard --logdir {out}")
    return results


if __name__ == "__main__":
    main()
