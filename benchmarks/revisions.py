"""Gradient and compile times of two revisions of ``rules``, in alternating processes.

Usage: ``python -m benchmarks.revisions OLD_CHECKOUT [--new CHECKOUT] [--runs N] [--quick]``
(``make bench-revisions REV=<commit>`` exports the commit and runs this). Each run starts
``benchmarks/_revision_worker.py`` once per checkout, old and new in turn (the order alternates),
with ``PYTHONPATH`` at that checkout; a process compiles every gradient row once (the first
compilation in that process, as a user's program pays it) and times it. The table gives the
medians over the runs and the ratios new/old.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

from ._harness import Table, fmt_time, load_average, machine_info

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _run(checkout: pathlib.Path, quick: bool) -> dict[str, list[float]]:
    env = dict(os.environ, PYTHONPATH=str(checkout), OPENBLAS_NUM_THREADS="1")
    cmd = [sys.executable, str(ROOT / "benchmarks" / "_revision_worker.py")]
    out = subprocess.run(cmd + (["--quick"] if quick else []), env=env, capture_output=True,
                         text=True, check=True, cwd=checkout)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("old", type=pathlib.Path, help="checkout of the old revision")
    parser.add_argument("--new", type=pathlib.Path, default=ROOT, help="default: this checkout")
    parser.add_argument("--runs", type=int, default=3, help="processes per revision")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=pathlib.Path, help="also write the table there")
    args = parser.parse_args()
    load_start = load_average()
    results: dict[str, list[dict]] = {"old": [], "new": []}
    for r in range(args.runs):
        for side in (("old", "new") if r % 2 == 0 else ("new", "old")):
            results[side].append(_run(getattr(args, side).resolve(), args.quick))
            print(f"run {r + 1}/{args.runs}: {side} done", file=sys.stderr, flush=True)

    def median(side, row, i):
        return statistics.median(run[row][i] for run in results[side])

    table = Table(f"Old ({args.old}) against new ({args.new}) rules: jitted gradients",
                  ["row", "gradient old", "gradient new", "new/old", "compile old (CPU)", "compile new",
                   "new/old"])
    for row in results["new"][0]:
        if row not in results["old"][0]:
            continue
        g_old, g_new = median("old", row, 1), median("new", row, 1)
        c_old, c_new = median("old", row, 0), median("new", row, 0)
        same = results["old"][0][row][2] == results["new"][0][row][2]
        table.rows.append([row, fmt_time(g_old), fmt_time(g_new),
                           f"{g_new / g_old:.2f}" + (" (=)" if same else ""),
                           f"{c_old:.2f} s", f"{c_new:.2f} s", f"{c_new / c_old:.2f}"])
    table.notes += [
        f"Medians over {args.runs} processes per revision, old and new in turn. Compile: "
        "`jax.jit(grad).lower(...).compile()` in CPU seconds of the process (on a shared machine, "
        "waiting for a core is not compiling), the first compilation of that row in its process. Load average (`uptime`) {load_start} at the start, {load_end} at the end."
        .format(load_start=load_start, load_end=load_average()),
        f"Machine: {machine_info()}",
        "Goals: gradient new/old ≤ 1.0 (no row slower than before), compile new/old ≤ 1.2. "
        "(=): both revisions compile that gradient to the same XLA program (up to names and "
        "metadata), so its time ratio is 1 and the spread is the measurement's noise.",
    ]
    text = table.markdown()
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
