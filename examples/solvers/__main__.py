"""Run every solver example with every solver and print a table against the known optima.

Examples::

    python -m examples.solvers                      # Pymanopt's sizes, float64
    python -m examples.solvers --scale 10           # every size ten times Pymanopt's
    python -m examples.solvers --only pca optimal_rotations --solvers trust_region lbfgs
"""
from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from examples import _training
from examples.solvers import NAMES, _common, load

__all__ = ["build_parser", "main", "run_all", "table"]


def build_parser() -> argparse.ArgumentParser:
    parser = _training.ArgumentParser(prog="python -m examples.solvers",
                                      description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=NAMES, default=list(NAMES), metavar="NAME",
                        help=f"run only these examples, of {', '.join(NAMES)}")
    parser.add_argument("--solvers", nargs="+", choices=_common.SOLVERS,
                        default=list(_common.SOLVERS), help="run only these solvers")
    parser.add_argument("--scale", type=_training.positive_int, default=1,
                        help="multiply every size Pymanopt's examples use by this")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float64",
                        help="dtype of the data and the points (float64 turns on jax_enable_x64)")
    parser.add_argument("--seed", type=_training.nonnegative_int, default=0,
                        help="seed of the data and the starts")
    return parser


def run_all(names: Sequence[str] = NAMES, solvers: Sequence[str] = _common.SOLVERS, *,
            scale: int = 1, dtype: str = "float64", seed: int = 0) -> list[dict[str, Any]]:
    """Solve each example with each solver (its jitted solve compiled first, timed apart)."""
    rows = []
    for name in names:
        example = load(name).EXAMPLE
        data, raw = _common.make_data(example, _common.scaled_sizes(example, scale), seed, dtype)
        for solver in solvers:
            run = jax.jit(functools.partial(_common.solve, example, solver=solver))
            start = time.perf_counter()
            compiled = run.lower(data).compile()
            compile_s = time.perf_counter() - start
            start = time.perf_counter()
            result = jax.block_until_ready(compiled(data))
            rows.append({"problem": name, "solver": solver, "iterations": int(result.iterations),
                         "converged": bool(result.converged),
                         "gradient_norm": float(result.gradient_norm),
                         "error": example.error(np.asarray(result.point, np.float64), raw),
                         "solve_s": time.perf_counter() - start, "compile_s": compile_s})
    return rows


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    lines = ["| problem | solver | iterations | converged | gradient norm | optimum error | "
             "solve | compile |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['problem']} | {r['solver']} | {r['iterations']} | "
              f"{'yes' if r['converged'] else 'no'} | {r['gradient_norm']:.1e} | "
              f"{_training.format_value(r['error'], '.1e')} | {r['solve_s']:.3f} s | "
              f"{r['compile_s']:.1f} s |" for r in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    args = build_parser().parse_args(argv)
    _training.configure_dtype(args.dtype)
    rows = run_all(args.only, args.solvers, scale=args.scale, dtype=args.dtype, seed=args.seed)
    print(table(rows))
    print("optimum error: each example's distance to its optimum computed without the solvers "
          "(python -m examples.solvers.<problem> --help says which)")
    return rows


if __name__ == "__main__":
    _training.command_line(main)
