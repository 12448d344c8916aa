"""Gradient and compile times of two revisions of ``rules``, measured in the same process.

Usage: ``python -m benchmarks.revisions OLD_CHECKOUT [--runs N] [--quick] [--out FILE]``
(``make bench-revisions REV=<commit>`` exports the commit and runs this). Each run is one
process of ``benchmarks/_revision_worker.py``, which loads this checkout's ``rules`` and the old
one's side by side and, row by row, compiles both gradients and times them call by call in
alternating order. The table gives, per row, the median over the runs of the per-row times and
of the ratio new/old (itself the median of the per-round ratios).

Why one process: in separate processes, rows over arrays of 100 MB and more measured up to 1.45
for two identical programs (where the allocator places them decides more than the code does);
timed in turn in one process, both sides share that placement.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the workers' setting, stated in the notes

from ._harness import Table, fmt_time, load_average, machine_info

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _run(old: pathlib.Path, quick: bool) -> dict[str, list]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, str(ROOT / "benchmarks" / "_revision_worker.py"), str(old)]
    out = subprocess.run(cmd + (["--quick"] if quick else []), env=env, check=True,
                         stdout=subprocess.PIPE, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("old", type=pathlib.Path, help="checkout of the old revision")
    parser.add_argument("--runs", type=int, default=3, help="processes, each measuring both")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=pathlib.Path, help="also write the table there")
    args = parser.parse_args()
    load_start = load_average()
    runs = []
    for r in range(args.runs):
        runs.append(_run(args.old.resolve(), args.quick))
        print(f"run {r + 1}/{args.runs} done", file=sys.stderr, flush=True)

    def median(row, i):
        return statistics.median(run[row][i] for run in runs)

    table = Table(f"Old ({args.old}) against new rules, in one process: jitted gradients",
                  ["row", "gradient old", "gradient new", "new/old", "compile old (CPU)",
                   "compile new", "new/old"])
    for row, first in runs[0].items():
        same = " (=)" if first[5] else ""
        table.rows.append([row, fmt_time(median(row, 2)), fmt_time(median(row, 3)),
                           f"{median(row, 4):.2f}{same}", f"{median(row, 0):.2f} s",
                           f"{median(row, 1):.2f} s", f"{median(row, 1) / median(row, 0):.2f}"])
    table.notes += [
        f"{args.runs} processes; in each, both revisions' gradients of a row are compiled and "
        "timed call by call in turn; new/old is the median of the per-round ratios, and the table "
        "gives the medians over the processes. Compile: `jax.jit(grad).lower(...).compile()` in "
        "CPU seconds of the process (on a shared machine, waiting for a core is not compiling), "
        "the second compilation of each side (the first of either also traces JAX's helpers that "
        "both share). Load average (`uptime`) {load_start} at the "
        "start, {load_end} at the end.".format(load_start=load_start, load_end=load_average()),
        f"Machine: {machine_info()}",
        ("Goals: gradient new/old ≤ 1.0 (no row slower than before), compile new/old ≤ 1.2. "
         "(=): both revisions compile that gradient to the same XLA program (up to names and "
         "metadata), so its time ratio is 1 and the spread is the measurement's noise."),
    ]
    text = table.markdown()
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
