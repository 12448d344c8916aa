"""Demo: the linear symplectic transformer, the volume-preserving transformer and a transformer on the double pendulum.

Trains the three models of :mod:`examples.symplectic_transformer.models` for ``--steps``
minibatches each, rolls them out for 500 steps from the two validation initial states and writes
the plots, ``summary.json`` and table into ``<out>/symplectic_transformer-<time>/eval``.

Usage::

    python -m examples.symplectic_transformer.demo
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from examples import _training
from examples.symplectic_transformer import evaluate, models, train

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = _training.ArgumentParser(prog="python -m examples.symplectic_transformer.demo",
                                      description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=_training.positive_int, default=train.DEFAULT_STEPS,
                        help="optimizer steps per model")
    parser.add_argument("--batch-size", type=_training.positive_int, default=256, help="minibatch size")
    parser.add_argument("--seed", type=_training.nonnegative_int, default=0, help="seed of every model")
    parser.add_argument("--out", type=_training.directory, default=Path("runs/demo"),
                        help="parent of the demo's run directory")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train, evaluate and report; return the evaluation summary."""
    args = build_parser().parse_args(argv)
    start = time.perf_counter()
    out = _training.demo_directory(args.out, "symplectic_transformer")
    for name in models.MODELS:
        flags = ["--model", name, "--steps", str(args.steps), "--batch-size", str(args.batch_size),
                 "--seed", str(args.seed), "--log-dir", str(out / name), "--checkpoint-every", "0"]
        train.main(flags + (["--no-progress"] if args.no_progress else []))
    summary = evaluate.main([str(out / name) for name in models.MODELS] + ["--out", str(out / "eval")],
                            describe_divergences=False)
    _training.print_demo_end(start, out)
    return summary


if __name__ == "__main__":
    _training.command_line(main)
