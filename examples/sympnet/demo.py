"""Demo: LA-SympNet, G-SympNet and an MLP on the pendulum and the double pendulum, rolled out far.

For each system (``--systems``) trains the three models of :mod:`examples.sympnet.models` at the
paper's sizes for ``--steps`` full-batch steps each (:mod:`examples.sympnet.train`), then rolls
them out far beyond the training trajectory and writes each system's plots, ``summary.json`` and
table (:mod:`examples.sympnet.evaluate`) into ``<out>/sympnet-<time>/<system>/eval``. ``--paper``
trains with the paper's budget (50,000 steps at the learning rate 1e-3).

Usage::

    python -m examples.sympnet.demo
    python -m examples.sympnet.demo --paper --systems pendulum
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from examples import _training
from examples.sympnet import data, evaluate, models, train

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = _training.ArgumentParser(prog="python -m examples.sympnet.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--systems", nargs="+", choices=sorted(data.SYSTEMS), default=sorted(data.SYSTEMS),
                        help="the systems to learn")
    parser.add_argument("--steps", type=_training.positive_int, default=None,
                        help=f"optimizer steps per model (None: {train.DEFAULT_STEPS}, with --paper "
                             f"{train.PAPER['steps']})")
    parser.add_argument("--seed", type=_training.nonnegative_int, default=0, help="seed of every model")
    parser.add_argument("--paper", action="store_true", help="the paper's training budget (train.PAPER)")
    parser.add_argument("--out", type=_training.directory, default=Path("runs/demo"),
                        help="parent of the demo's run directory")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train, evaluate and report; return ``{system: evaluation summary}``."""
    args = build_parser().parse_args(argv)
    start = time.perf_counter()
    out = _training.demo_directory(args.out, "sympnet")
    summaries = {}
    for system in args.systems:
        for name in models.MODELS:
            flags = ["--system", system, "--model", name, "--seed", str(args.seed),
                     "--log-dir", str(out / system / name), "--checkpoint-every", "0"]
            flags += ["--paper"] if args.paper else []
            flags += ["--steps", str(args.steps)] if args.steps is not None else []
            train.main(flags + (["--no-progress"] if args.no_progress else []))
        print(f"\n{system}:")
        summaries[system] = evaluate.main([str(out / system / name) for name in models.MODELS]
                                          + ["--out", str(out / system / "eval")], describe_divergences=False)
    _training.print_demo_end(start, out)
    return summaries


if __name__ == "__main__":
    _training.command_line(main)
