"""Run a grid of hyperparameters for an example and collect the runs' summaries into one table.

Every combination of the ``--grid`` values becomes one run of ``python -m examples.<example>.train``
with its own ``--log-dir`` under ``--out``. Three ways to use it:

- run the grid here, one run after the other (in this process, so runs with equal shapes share
  compiled code); a run that already has a ``summary.json`` is skipped and one with checkpoints
  but no summary is resumed, so an interrupted sweep continues where it stopped;
- ``--print-commands``: print one shell command per run and run nothing, for a cluster scheduler
  (e.g. one line per job of a Slurm array, or ``| parallel -j 4``), then collect with ``--collect``;
- ``--collect``: only read the summaries (``summary.json`` of each run) and write the table.

The table goes to ``results.md`` (the grid's flags and the example's main metrics) and
``results.csv`` (every scalar of the summaries) in ``--out``, and to the terminal; a diverged
run's missing metrics are empty cells, and its ``diverged`` column says ``True``.

Every run's flags are checked with the train program's own parser before anything runs: a
misspelled flag or a bad value stops the sweep with one line naming it (exit status 2).

Examples::

    python -m examples.sweep rigid_body --out runs/sweep/lr --set steps=2000 --set no-progress \\
        --grid model=vpt,vpff,transformer --grid lr-start=1e-2,3e-3
    python -m examples.sweep stiefel_vit --out runs/sweep/vit --grid optimizer=manifold_adam,adam \\
        --grid seed=0,1,2 --print-commands > jobs.txt     # then: sbatch/parallel jobs.txt
    python -m examples.sweep stiefel_vit --out runs/sweep/vit --grid optimizer=manifold_adam,adam \\
        --grid seed=0,1,2 --collect
"""
from __future__ import annotations

import argparse
import csv
import importlib
import itertools
import json
import re
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from examples import _training

__all__ = ["EXAMPLES", "collect", "commands", "expand_grid", "main"]

EXAMPLES = {
    "rigid_body": ("final_loss", "rollout_error", "norm_drift", "diverged", "train_time_s", "steps_per_s"),
    "stiefel_vit": ("test_accuracy", "test_loss", "orthonormality_error", "diverged", "train_time_s", "steps_per_s"),
}
"""The examples a sweep can run, with the summary fields shown in ``results.md``."""


def _parse_assignment(text: str) -> tuple[str, list[str]]:
    flag, sep, values = text.partition("=")
    if not flag or (sep and not values):
        raise argparse.ArgumentTypeError(f"expected FLAG=VALUE[,VALUE...] or FLAG; got {text!r}")
    return flag.removeprefix("--"), values.split(",") if sep else []


def expand_grid(grid: Sequence[tuple[str, list[str]]]) -> list[dict[str, str]]:
    """Every combination of the grid's values, in order: ``[("a", ["1", "2"])] → [{"a": "1"}, {"a": "2"}]``."""
    names = [name for name, _ in grid]
    return [dict(zip(names, values)) for values in itertools.product(*(values for _, values in grid))]


def _run_name(point: dict[str, str]) -> str:
    name = "_".join(f"{flag}-{value}" for flag, value in point.items()) or "run"
    return re.sub(r"[^A-Za-z0-9._=-]", "-", name)


def _flags(point: dict[str, str], fixed: Sequence[tuple[str, list[str]]], log_dir: Path) -> list[str]:
    flags = []
    for flag, values in [*fixed, *((k, [v]) for k, v in point.items())]:
        flags += [f"--{flag}", *values]
    return flags + ["--log-dir", str(log_dir)]


def commands(points: list[dict[str, str]], fixed: Sequence[tuple[str, list[str]]], out: Path) -> list[list[str]]:
    """The argument lists of the grid's runs (without the program)."""
    return [_flags(point, fixed, out / _run_name(point)) for point in points]


def collect(points: list[dict[str, str]], out: Path) -> list[dict[str, Any]]:
    """One row per run: the grid point, then every scalar of its ``summary.json`` (missing: ``status``)."""
    rows = []
    for point in points:
        path = out / _run_name(point) / "summary.json"
        summary = json.loads(path.read_text()) if path.exists() else {}
        scalars = {k: v for k, v in summary.items() if isinstance(v, (int, float, str)) and k not in point}
        rows.append(dict(point) | {"status": "done" if summary else "missing"} | scalars)
    return rows


def _format(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _write_tables(example: str, rows: list[dict[str, Any]], grid_flags: list[str], out: Path) -> str:
    fields = list(dict.fromkeys(k for row in rows for k in row))
    with (out / "results.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    columns = [*grid_flags, "status", *EXAMPLES[example]]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_format(row.get(c, "")) for c in columns) + " |" for row in rows]
    table = "\n".join(lines) + "\n"
    (out / "results.md").write_text(table)
    return table


def build_parser() -> argparse.ArgumentParser:
    parser = _training.ArgumentParser(prog="python -m examples.sweep", description=__doc__.split("\n\n")[0],
                                      epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("example", choices=sorted(EXAMPLES), help="which example's train program")
    parser.add_argument("--grid", type=_parse_assignment, action="append", default=[], metavar="FLAG=V1,V2",
                        help="a flag of the train program and its values (repeat for more axes)")
    parser.add_argument("--set", type=_parse_assignment, action="append", default=[], metavar="FLAG[=V]",
                        help="a flag (with its value) given to every run")
    parser.add_argument("--out", type=_training.directory, required=True, default=argparse.SUPPRESS,
                        help="the sweep's directory")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--print-commands", action="store_true", help="print one command per run; run nothing")
    mode.add_argument("--collect", action="store_true", help="only collect the summaries into the table")
    return parser


# The sweep gives every run its own --log-dir and decides on --resume itself.
_RESERVED = ("log-dir", "resume")


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace, train, runs: list[list[str]]) -> None:
    names = [name for name, _ in [*args.grid, *args.set]]
    for name in names:
        if name in _RESERVED:
            parser.error(f"--grid/--set: the sweep sets --{name} itself")
    if repeated := sorted({name for name in names if names.count(name) > 1}):
        parser.error(f"--grid/--set: --{repeated[0]} is given more than once")
    for flags in runs:
        _training.check_flags(parser, train.build_parser(), flags, "--grid/--set")


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Run (or print, or collect) the sweep; return the table's rows."""
    parser = build_parser()
    args = parser.parse_args(argv)
    points = expand_grid(args.grid)
    runs = commands(points, args.set, args.out)
    module = f"examples.{args.example}.train"
    train = importlib.import_module(module)
    _check(parser, args, train, runs)
    if args.print_commands:
        for flags in runs:
            print(shlex.join([sys.executable, "-m", module, *flags]))
        return []
    if not args.collect:
        for i, flags in enumerate(runs, 1):
            run_dir = Path(flags[-1])
            if (run_dir / "summary.json").exists():
                print(f"[{i}/{len(runs)}] {run_dir.name}: done, skipped")
                continue
            resume = bool(_training.checkpoints(run_dir))
            print(f"[{i}/{len(runs)}] {run_dir.name}" + (" (resuming)" if resume else ""))
            train.main(flags + (["--resume"] if resume else []))
    _training.make_directory(parser, args.out, "--out")
    rows = collect(points, args.out)
    print(_write_tables(args.example, rows, [name for name, _ in args.grid], args.out), end="")
    print(f"tables: {args.out / 'results.md'}, {args.out / 'results.csv'}")
    return rows


if __name__ == "__main__":
    _training.command_line(main)
