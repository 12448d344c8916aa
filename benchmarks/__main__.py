"""Run every benchmark family in one process and write ``benchmarks/RESULTS.md``.

Usage: ``python -m benchmarks [--quick] [--only FAMILY ...] [--out PATH]``.
"""
from __future__ import annotations

import argparse
import importlib
import os
import pathlib
import time

# JAX's CPU LAPACK calls run on scipy's OpenBLAS, whose threads thrash on a small shared machine;
# one thread makes timings reproducible. Must precede importing jax; an explicit value wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax  # noqa: E402

from ._harness import machine_info

FAMILIES = ["linalg", "decompositions", "tensor", "geometric", "training"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats (smoke run)")
    parser.add_argument("--only", nargs="*", choices=FAMILIES, help="run only these families")
    parser.add_argument("--out", default=str(pathlib.Path(__file__).with_name("RESULTS.md")))
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)  # the benchmark process only; rows state dtypes

    sections = []
    for family in args.only or FAMILIES:
        try:
            module = importlib.import_module(f"benchmarks.bench_{family}")
        except ModuleNotFoundError as e:
            if e.name != f"benchmarks.bench_{family}":
                raise
            continue
        for table in module.tables(quick=args.quick):
            print(table.markdown(), flush=True)
            sections.append(table.markdown())

    header = ["# Benchmark results", "",
              f"Measured {time.strftime('%Y-%m-%d %H:%M')} with `python -m benchmarks"
              f"{' --quick' if args.quick else ''}` in one process.", "",
              f"Machine: {machine_info()}", "",
              "Times are medians of repeats after warm-up, under `jax.jit` with `block_until_ready`. "
              "\"JAX\" columns are JAX's own autodiff of the same function (`jax.grad` through the "
              "plain `jnp` code); ratios are ours / JAX's, so < 1 means ours is faster.", ""]
    pathlib.Path(args.out).write_text("\n".join(header) + "\n" + "\n".join(sections))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
