"""Runs Pymanopt's solvers (its JAX backend) for ``benchmarks/bench_solvers.py``.

Runs in the peers' own environment (``make peers``: ``pymanopt`` and ``jax``, never a dependency
of ours), driven over stdin/stdout like ``benchmarks/_peer_worker.py``, one JSON object per line:

* ``{"cmd": "info"}`` answers the versions;
* ``{"cmd": "setup", "problem": ..., "data": PATH, "solver": ..., "options": {...},
  "run_options": {...}, "batched": bool}`` reads the problem's data and start (an ``.npz``
  archive the driver wrote: the same arrays as ours; batched, one problem per entry of a leading
  axis), builds the Pymanopt problem(s) and the optimizer (``options``; ``run_options`` go to
  ``optimizer.run``), runs a warm-up of three iterations and answers ``{"id": n}``;
* ``{"cmd": "solve", "id": n, "count": k}`` solves the first ``k`` problems one after another, as
  a user's loop would, and answers the wall time and, per problem, the iterations, gradient norm,
  cost and stopping criterion;
* ``{"cmd": "time", "id": n, "budget": s, "point": PATH}`` solves problem 0 repeatedly for about
  ``s`` seconds (at least once), answers the median time and the last solve's outcome, and saves
  its final point to ``PATH`` (``.npy``) when one is given.

The costs are those of ``examples/solvers/costs.py``, loaded by path (it imports only JAX and
NumPy), so both sides minimise the same functions of the same data from the same starts.
"""
from __future__ import annotations

import importlib.util
import json
import pathlib
import statistics
import sys
import time

import jax
import numpy as np
import pymanopt
from pymanopt import manifolds, optimizers

jax.config.update("jax_enable_x64", True)  # as Pymanopt's JAX backend does on import

_COSTS_PATH = pathlib.Path(__file__).resolve().parent.parent / "examples" / "solvers" / "costs.py"
_spec = importlib.util.spec_from_file_location("solver_costs", _COSTS_PATH)
costs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(costs)

_SOLVERS = {"steepest_descent": optimizers.SteepestDescent,
            "conjugate_gradient": optimizers.ConjugateGradient,
            "trust_region": optimizers.TrustRegions}


def _manifold(problem, x0):
    """Pymanopt's manifold of the problem, for one start ``x0``."""
    if problem == "dominant_eigenvector":
        return manifolds.Sphere(x0.shape[0])
    if problem in ("dominant_invariant_subspace",):
        return manifolds.Grassmann(*x0.shape)
    if problem == "pca":
        return manifolds.Stiefel(*x0.shape)
    if problem in ("closest_unit_norm_column_approximation", "packing_on_the_sphere"):
        return manifolds.Oblique(*x0.shape)
    if problem == "optimal_rotations":
        return manifolds.SpecialOrthogonalGroup(x0.shape[-1], k=x0.shape[0])
    if problem == "multiple_linear_regression":
        return manifolds.Euclidean(x0.shape[0])
    if problem == "karcher_mean_spd":
        return manifolds.SymmetricPositiveDefinite(x0.shape[-1])
    if problem == "karcher_mean_poincare":
        return manifolds.PoincareBall(x0.shape[-1])
    raise ValueError(f"unknown problem {problem!r}")


class _Case:
    """Pymanopt problems with one solver: the data of each and its start."""

    def __init__(self, problem, arrays, batched, solver, options, run_options):
        cost = costs.COSTS[problem]
        count = arrays["x0"].shape[0] if batched else 1
        self.starts, self.problems = [], []
        for i in range(count):
            data = {k: jax.numpy.asarray(v[i] if batched else v) for k, v in arrays.items()
                    if k != "x0"}
            x0 = arrays["x0"][i] if batched else arrays["x0"]
            manifold = _manifold(problem, x0)
            # The backend reads the function's arguments: one positional argument, the point.
            function = pymanopt.function.jax(manifold)(
                lambda x, data=data: cost(x, **data))
            self.problems.append(pymanopt.Problem(manifold, function))
            self.starts.append(x0)
        self.optimizer = _SOLVERS[solver](verbosity=0, log_verbosity=0, **options)
        self.run_options = run_options
        # JAX compiles each operation the first time it meets its shapes; a few iterations on
        # the first problem meet them all, so that no timed solve includes them.
        warm_up = _SOLVERS[solver](verbosity=0, log_verbosity=0,
                                   **{**options, "max_iterations": 3})
        warm_up.run(self.problems[0], initial_point=self.starts[0], **run_options)

    def solve(self, i):
        return self.optimizer.run(self.problems[i], initial_point=self.starts[i],
                                  **self.run_options)


def _summary(result):
    return {"iterations": int(result.iterations), "gradient_norm": float(result.gradient_norm),
            "cost": float(result.cost), "stopping": result.stopping_criterion,
            "converged": "min grad norm" in result.stopping_criterion,
            "timed_out": "max time" in result.stopping_criterion}


def main() -> None:
    cases = []
    for line in sys.stdin:
        msg = json.loads(line)
        try:
            if msg["cmd"] == "setup":
                with np.load(msg["data"]) as archive:
                    arrays = {k: archive[k] for k in archive.files}
                cases.append(_Case(msg["problem"], arrays, msg.get("batched", False),
                                   msg["solver"], msg.get("options", {}),
                                   msg.get("run_options", {})))
                reply = {"id": len(cases) - 1}
            elif msg["cmd"] == "solve":
                case = cases[msg["id"]]
                t0 = time.perf_counter()
                results = [case.solve(i) for i in range(msg["count"])]
                seconds = time.perf_counter() - t0
                reply = {"seconds": seconds, "results": [_summary(r) for r in results]}
            elif msg["cmd"] == "time":
                case, times, spent = cases[msg["id"]], [], 0.0
                while not times or spent < msg["budget"]:
                    t0 = time.perf_counter()
                    result = case.solve(0)
                    times.append(time.perf_counter() - t0)
                    spent += times[-1]
                reply = {"median": statistics.median(times), "result": _summary(result)}
                if msg.get("point"):
                    np.save(msg["point"], np.asarray(result.point))
            elif msg["cmd"] == "info":
                reply = {"pymanopt": pymanopt.__version__, "jax": jax.__version__}
            else:
                reply = {"error": f"unknown command {msg['cmd']!r}"}
        except Exception as error:  # noqa: BLE001 - reported to the driver, which raises it
            reply = {"error": f"{type(error).__name__}: {error}"}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
