"""What the solver examples share: the problem record, one solve, the flags, the report.

Each example module builds an :class:`Example` (its cost from :mod:`examples.solvers.costs`, its
manifold, its known optimum computed without the solvers, and the distance of a point to it) and
exposes ``solve``, ``build_parser`` and ``main`` through :func:`entry_points`.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import geometric
from examples import _training
from examples.solvers import costs

__all__ = ["SOLVERS", "Example", "at_most", "build_parser", "entry_points", "gradient_norm", "main",
           "make_data", "scaled_sizes", "solve"]

SOLVERS = ("steepest_descent", "conjugate_gradient", "lbfgs", "trust_region")

Data = Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class Example:
    """One problem of the examples.

    Attributes:
      name: the module's name (``python -m examples.solvers.<name>``), and the cost's in
        :data:`costs.COSTS`.
      title: one line, for the reports.
      sizes: the sizes Pymanopt's example uses (Manopt's for the Karcher means), one flag each.
      size_help: the help text of each size flag.
      solver: the solver Pymanopt's example runs, the default of ``--solver``.
      manifold: the manifold (or spec) of the problem, from its data's shapes.
      cost: ``cost(x, data)``, a JAX function of the point.
      optimum: the known optimum from the float64 data, computed without the solvers.
      error: ``error(point, data)``, the distance of a point to the optimum (float64 NumPy).
      error_name: what :attr:`error` measures, for the reports.
      checks: functions ``sizes -> message or None`` that refuse sizes with no problem.
      options: ``options(solver, data)``, the options Pymanopt's example passes to the solver
        (a trust-region radius, a tolerance).
    """

    name: str
    title: str
    sizes: Mapping[str, int]
    size_help: Mapping[str, str]
    solver: str
    manifold: Callable[[Data], Any]
    cost: Callable[[Any, Data], jax.Array]
    optimum: Callable[[Data], Any]
    error: Callable[[Any, Data], float]
    error_name: str
    checks: Sequence[Callable[[Mapping[str, int]], str | None]] = ()
    options: Callable[[str, Data], Mapping[str, Any]] = lambda solver, data: {}


def at_most(small: str, large: str) -> Callable[[Mapping[str, int]], str | None]:
    """A check of :attr:`Example.checks`: size ``small`` is at most size ``large``."""

    def check(sizes: Mapping[str, int]) -> str | None:
        if sizes[small] <= sizes[large]:
            return None
        return f"argument --{small}: expected an integer ≤ --{large} ({sizes[large]}); got {sizes[small]}"

    return check


def scaled_sizes(example: Example, scale: int) -> dict[str, int]:
    """Pymanopt's sizes, each multiplied by ``scale``."""
    return {k: scale * v for k, v in example.sizes.items()}


def make_data(example: Example, sizes: Mapping[str, int], seed: int,
              dtype: jnp.dtype | str = jnp.float64) -> tuple[dict[str, jax.Array], dict[str, np.ndarray]]:
    """The problem's data and start in ``dtype``, and the float64 NumPy data they were cast from."""
    raw = costs.data(example.name, dict(sizes), seed)
    return {k: jnp.asarray(v, dtype) for k, v in raw.items()}, raw


def gradient_norm(example: Example, data: Data, x: Any) -> float:
    """The norm of the Riemannian gradient of the example's cost at ``x``, in its metric."""
    problem = {k: v for k, v in data.items() if k != "x0"}
    egrad = jax.grad(lambda x: example.cost(x, problem))(x)
    manifold = example.manifold(data)
    if manifold is None:
        return float(jnp.linalg.norm(egrad))
    rgrad = manifold.egrad_to_rgrad(x, egrad)
    return float(jnp.sqrt(jnp.sum(manifold.inner(x, rgrad, rgrad))))


def solve(example: Example, data: Data, solver: str | None = None, **options: Any
          ) -> geometric.solvers.SolverResult:
    """Minimise the example's cost from ``data["x0"]`` with ``geometric.solvers.<solver>``.

    A pure function of ``data`` (jit and vmap it); ``options`` go to the solver, after the ones
    Pymanopt's example passes.
    """
    solver = solver or example.solver
    if solver not in SOLVERS:
        raise ValueError(f"solve: `solver` must be one of {SOLVERS}; got {solver!r}")
    problem = {k: v for k, v in data.items() if k != "x0"}
    run = getattr(geometric.solvers, solver)
    return run(lambda x: example.cost(x, problem), example.manifold(data), data["x0"],
               **{**example.options(solver, data), **options})


def build_parser(example: Example) -> argparse.ArgumentParser:
    """The flags of one example: its sizes, the solver, dtype, seed, tolerance and iterations."""

    def check_sizes(args: argparse.Namespace) -> str | None:
        sizes = _sizes(example, args)
        return next((m for m in (c(sizes) for c in example.checks) if m is not None), None)

    parser = _training.ArgumentParser(prog=f"python -m examples.solvers.{example.name}",
                                      description=example.title, checks=[check_sizes])
    for key, value in example.sizes.items():
        parser.add_argument(f"--{key}", type=_training.positive_int, default=None,
                            help=f"{example.size_help[key]} (None: {value} × --scale, Pymanopt's "
                                 f"{value} by default)")
    parser.add_argument("--scale", type=_training.positive_int, default=1,
                        help="multiply every size Pymanopt's example uses by this")
    parser.add_argument("--solver", choices=SOLVERS, default=example.solver,
                        help="the solver (the default is the one Pymanopt's example runs)")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float64",
                        help="dtype of the data and the point (float64 turns on jax_enable_x64)")
    parser.add_argument("--seed", type=_training.nonnegative_int, default=0,
                        help="seed of the data and the start")
    parser.add_argument("--gradient-tolerance", type=_training.positive_float, default=None,
                        help="stop when the Riemannian gradient norm is below this (None: the "
                             "solver's default)")
    parser.add_argument("--max-iterations", type=_training.positive_int, default=None,
                        help="most iterations (None: the solver's default)")
    return parser


def _sizes(example: Example, args: argparse.Namespace) -> dict[str, int]:
    return {k: getattr(args, k) or args.scale * v for k, v in example.sizes.items()}


def main(example: Example, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Solve the example as its flags say, print the outcome against the known optimum, return it."""
    args = build_parser(example).parse_args(argv)
    dtype = _training.configure_dtype(args.dtype)
    sizes = _sizes(example, args)
    data, raw = make_data(example, sizes, args.seed, dtype)
    options = {k: v for k, v in (("gradient_tolerance", args.gradient_tolerance),
                                 ("max_iterations", args.max_iterations)) if v is not None}
    run = jax.jit(functools.partial(solve, example, solver=args.solver, **options))
    start = time.perf_counter()
    result = jax.block_until_ready(run(data))
    elapsed = time.perf_counter() - start
    error = example.error(np.asarray(result.point, np.float64), raw)
    summary = {"problem": example.name, "sizes": sizes, "solver": args.solver, "dtype": args.dtype,
               "seed": args.seed, "iterations": int(result.iterations),
               "converged": bool(result.converged), "cost": float(result.cost),
               "gradient_norm": float(result.gradient_norm), "error": error,
               "seconds": elapsed}
    shown = ", ".join(f"{k} {v}" for k, v in sizes.items())
    print(f"{example.title} ({shown}; {args.dtype}, seed {args.seed})")
    print(f"{args.solver}: {'converged' if summary['converged'] else 'did not converge'} after "
          f"{summary['iterations']} iterations ({elapsed:.2f} s with compilation); cost "
          f"{summary['cost']:.10g}, gradient norm {summary['gradient_norm']:.2e}")
    print(f"{example.error_name}: {error:.2e}")
    return summary


def entry_points(example: Example) -> tuple[Callable[..., Any], Callable[[], argparse.ArgumentParser],
                                            Callable[..., dict[str, Any]]]:
    """An example module's ``solve(data, solver=None, **options)``, ``build_parser()`` and
    ``main(argv=None)``: :func:`solve`, :func:`build_parser` and :func:`main` for ``example``."""
    return (functools.partial(solve, example), functools.partial(build_parser, example),
            functools.partial(main, example))
