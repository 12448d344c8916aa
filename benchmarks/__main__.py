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

from ._harness import load_average, machine_info

FAMILIES = ["noise", "linalg", "decompositions", "matfun", "eager", "tensor", "forward",
            "geometric", "hyperbolic", "training", "solvers", "symplectic"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats (smoke run)")
    parser.add_argument("--only", nargs="*", choices=FAMILIES, help="run only these families")
    parser.add_argument("--out", default=str(pathlib.Path(__file__).with_name("RESULTS.md")))
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)  # the benchmark process only; rows state dtypes

    start, load_start = time.perf_counter(), load_average()
    # JAX's one-time start-up costs (backend, caches) belong to no row's compile time.
    jax.jit(jax.grad(lambda x: jax.numpy.sum(jax.numpy.sin(x) @ x))).lower(
        jax.numpy.ones((3, 3))).compile()
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

    minutes = (time.perf_counter() - start) / 60
    header = ["# Benchmark results", "",
              f"Measured {time.strftime('%Y-%m-%d %H:%M')} with `python -m benchmarks"
              f"{' --quick' if args.quick else ''}` in one process ({minutes:.0f} min).", "",
              f"Load average (1, 5, 15 min; `uptime`): {load_start} at the start, "
              f"{load_average()} at the end. Figures from a machine whose load average exceeds "
              "0.5 are not reliable: other processes take the cores these timings share.", "",
              f"Machine: {machine_info()}", "",
              "Times are medians after warm-up, under `jax.jit` with `block_until_ready`; the two "
              "sides of every comparison are timed in turn (A B A B …) and a ratio is the median "
              "of the per-round ratios. \"JAX\" columns are JAX's own autodiff of the same "
              "function (the plain `jnp` code); ratios are ours / theirs, so < 1 means ours is "
              "faster. The first table is this run's noise floor, JAX's own programs timed "
              "against themselves: a ratio inside its band is parity, and meets a \"≤ 1.0\" "
              "goal. The history of these figures is in CHANGELOG.md.", ""]
    pathlib.Path(args.out).write_text("\n".join(header) + "\n" + "\n".join(sections))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
