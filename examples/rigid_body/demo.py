"""Demo: train the three rigid-body models on a small budget, roll them out, plot (``make demo``).

Trains the volume-preserving transformer (``vpt``, 162 parameters), the volume-preserving
feed-forward network (``vpff``, 135) and a standard transformer (``transformer``, 153) with the
paper's loss and learning-rate schedule (Adam, 1e-2 decaying exponentially to 1e-6) for
``--steps`` minibatches each, then rolls every model out for 500 steps from the two validation
initial conditions and writes the plots and ``summary.json``; the table, the plots and
``summary.json`` say when a model diverged (training step or rollout time). The default budget
(6000 steps of 256 windows per model) takes 1.5–2.5 minutes on 2 CPU cores in all, data
generation and compilation included. Every run goes into a new directory under ``--out``;
nothing is overwritten.

What to expect at this budget (about 0.3% of the paper's steps, at 1/64 of its batch): every model
fits the training windows to a relative error of about 1%, and that error compounds over the 166
model applications of a rollout. With the default seed the volume-preserving transformer stays
near the sphere (‖z‖ drift ≈ 0.15 up to t = 100) while its phase slips against the reference
(mean error ≈ 0.7), the volume-preserving feed-forward network drifts off the sphere (≈ 0.8), and
the standard transformer's rollout diverges from one of the two initial conditions. Over seeds 0,
1, 2 (``python -m examples.sweep rigid_body --grid model=vpt,vpff,transformer --grid seed=0,1,2``):
the two volume-preserving models stayed bounded every time (‖z‖ drift: VPT 0.15, 0.55, 0.27; VPFF
0.80, 1.3, 0.18; mean error 0.6–0.9 for both), the transformer diverged for seeds 0 and 2 and not
for seed 1 (drift 0.52, error 1.1). So at this budget the demo shows the transformer's instability,
not yet a clear VPT-over-VPFF advantage. Volume preservation alone does not keep a map on the
sphere: only the exact flow and the implicit midpoint rule conserve ‖z‖.

The paper's setting (Brantner et al., arXiv:2312.11166, §rigid body): batch 16,384, 5·10⁵ epochs
(≈ 2.1·10⁶ steps of 16,384 windows, about 6 h for the VPT on one GPU), float32, the same schedule::

    for m in vpt vpff transformer; do
        python -m examples.rigid_body.train --model $m --steps 2100000 --batch-size 16384 \\
            --checkpoint-every 20000 --log-every 1000 --no-progress --log-dir runs/rigid_body/paper/$m
    done
    python -m examples.rigid_body.evaluate runs/rigid_body/paper/{vpt,vpff,transformer} \\
        --out runs/rigid_body/paper/eval

(``--resume`` continues any of them after an interruption.) The paper reports that, from both
validation initial conditions over 500 steps, the volume-preserving transformer stays close to the
implicit-midpoint trajectory and on the sphere, the volume-preserving feed-forward network drifts
slowly, and the standard transformer drifts away; expect the same ordering in ``error.png`` and
``norm.png``.
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from examples import _training
from examples.rigid_body import data, evaluate, models, train

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = _training.ArgumentParser(prog="python -m examples.rigid_body.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=_training.positive_int, default=6000, help="optimizer steps per model")
    parser.add_argument("--batch-size", type=_training.positive_int, default=256, help="minibatch size")
    parser.add_argument("--seed", type=_training.nonnegative_int, default=0,
                        help="seed of every model's initialisation and batch order")
    parser.add_argument("--out", type=_training.directory, default=Path("runs/demo"),
                        help="parent of the demo's run directory")
    parser.add_argument("--cache-dir", type=_training.directory, default=None,
                        help="data cache directory (None: $PULLBACKS_CACHE or ~/.cache/pullbacks)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train, evaluate and report; return the evaluation summary."""
    args = build_parser().parse_args(argv)
    start = time.perf_counter()
    out = _training.demo_directory(args.out, "rigid_body")
    print("models: " + ", ".join(f"{name} {models.parameter_count(cls().init(np.random.default_rng(0), np.float32))} "
                                 "parameters" for name, cls in models.MODELS.items()))
    dataset = data.load_dataset(args.cache_dir)
    print(f"data: {dataset.trajectories.shape[0]} trajectories, {len(dataset.inputs)} windows "
          f"(inertia {tuple(round(i, 4) for i in dataset.inertia)}, h = {dataset.step})")
    for name in models.MODELS:
        flags = ["--model", name, "--steps", str(args.steps), "--batch-size", str(args.batch_size),
                 "--seed", str(args.seed), "--log-dir", str(out / name), "--checkpoint-every", str(args.steps)]
        if args.cache_dir is not None:
            flags += ["--cache-dir", str(args.cache_dir)]
        train.main(flags + (["--no-progress"] if args.no_progress else []))
    # The trainers have said which model diverged, and the evaluation names the plots: each once.
    summary = evaluate.main([str(out / name) for name in models.MODELS] + ["--out", str(out / "eval")],
                            describe_divergences=False)
    _training.print_demo_end(start, out)
    return summary


if __name__ == "__main__":
    _training.command_line(main)
