"""Benchmarks of :mod:`geometric.solvers` against Pymanopt 2.2.1 (its JAX backend).

The problems are those of ``examples/solvers`` (Pymanopt's examples), at Pymanopt's sizes and at
ten times every size. Both sides minimise the same cost (``examples/solvers/costs.py``, which the
Pymanopt worker loads by path) on the same data from the same start, with the same solver family,
to the same gradient-norm tolerance and iteration cap. Pymanopt runs in the peers' environment
(``make peers``) in its own process, ``benchmarks/_pymanopt_worker.py``, driven as
``benchmarks/_peer_worker.py`` is; each row alternates the two sides. Both run on one core: the
tables are measured in a process pinned to one core (``benchmarks/_solvers_worker.py``, which
says why).
"""
from __future__ import annotations

import functools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from examples.solvers import NAMES, _common, load

from ._harness import Table, fmt_time
from ._peers import PEERS_PYTHON, ROOT, Peers

# Our solver families and Pymanopt's; Pymanopt 2.2.1 has no L-BFGS.
FAMILIES = ("steepest_descent", "conjugate_gradient", "trust_region", "lbfgs")
PYMANOPT_HAS = {"steepest_descent", "conjugate_gradient", "trust_region"}
BETA_RULES = {"hestenes_stiefel": "HestenesStiefel", "polak_ribiere": "PolakRibiere",
              "fletcher_reeves": "FletcherReeves", "hager_zhang": "HagerZhang"}
# Pymanopt 2.2.1's PoincareBall has no vector transport, which its conjugate gradients need.
PYMANOPT_CANNOT = {
    ("karcher_mean_poincare", "conjugate_gradient"): "no transport on its PoincareBall"}
RTOL = 1e-6  # the gradient tolerance, relative to the gradient norm at the start
MAX_ITERATIONS = 1000  # Pymanopt's default cap, on both sides
BATCH = 256
SHORT = {"steepest_descent": "SD", "conjugate_gradient": "CG", "trust_region": "TR",
         "lbfgs": "L-BFGS"}


class Pymanopt(Peers):
    """``benchmarks/_pymanopt_worker.py`` in the peers' environment, or None when it is missing."""

    @classmethod
    def start_pymanopt(cls) -> Pymanopt | None:
        if not PEERS_PYTHON.exists():
            return None
        probe = subprocess.run([str(PEERS_PYTHON), "-c", "import pymanopt, jax"],
                               capture_output=True, check=False)
        if probe.returncode != 0:
            return None
        worker = ROOT / "benchmarks" / "_pymanopt_worker.py"
        proc = subprocess.Popen([str(PEERS_PYTHON), str(worker)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        return cls(proc)

    def case(self, name: str, path: Path, solver: str, options: dict[str, Any],
             time_limit: float, batched: bool = False) -> int:
        """A Pymanopt problem (or a batch) with the solver and options of ours, warmed up; a
        solve stops after ``time_limit`` seconds (Pymanopt's ``max_time``)."""
        optimizer = {"min_gradient_norm": options["gradient_tolerance"],
                     "max_iterations": options["max_iterations"],
                     "max_cost_evaluations": 10**9, "max_time": time_limit}
        if "beta" in options:
            optimizer["beta_rule"] = BETA_RULES[options["beta"]]
        run = {"Delta_bar": options["max_radius"]} if "max_radius" in options else {}
        return self._ask({"cmd": "setup", "problem": name, "data": str(path), "solver": solver,
                          "options": optimizer, "run_options": run, "batched": batched})["id"]

    def solve(self, case: int, count: int) -> dict[str, Any]:
        """Solve the first ``count`` problems of a batch in a loop: the time, the outcomes."""
        return self._ask({"cmd": "solve", "id": case, "count": count})

    def time_solve(self, case: int, budget: float, point: Path | None = None) -> dict[str, Any]:
        """The median time of solving problem 0 (about ``budget`` seconds of solves, at least
        one), the last solve's outcome; its final point saved to ``point``."""
        msg: dict[str, Any] = {"cmd": "time", "id": case, "budget": budget}
        if point is not None:
            msg["point"] = str(point)
        return self._ask(msg)


def _options(example: _common.Example, solver: str, data: dict[str, jax.Array]) -> dict[str, Any]:
    """The example's options for ``solver``, with the shared tolerance and cap: ``RTOL`` times
    the Riemannian gradient norm at the start."""
    return {**example.options(solver, data), "max_iterations": MAX_ITERATIONS,
            "gradient_tolerance": RTOL * _common.gradient_norm(example, data, data["x0"])}


def _ours(example: _common.Example, solver: str, options: dict[str, Any], data: Any,
          batched: str | None = None) -> tuple[Any, float, Any]:
    """Our jitted solve, for a batch ``batched="vmap"`` (one batched loop) or ``"map"``
    (``lax.map``: the problems' loops one after another in one program), compiled: the
    executable, its compile time and its first result."""
    solve = functools.partial(_common.solve, example, solver=solver, **options)
    if batched == "vmap":
        solve = jax.vmap(solve)
    elif batched == "map":
        solve = functools.partial(jax.lax.map, solve)
    jitted = jax.jit(solve)
    start = time.perf_counter()
    compiled = jitted.lower(data).compile()
    compile_s = time.perf_counter() - start
    return compiled, compile_s, jax.block_until_ready(compiled(data))


def _median_time(fn: Any, data: Any, budget: float, warm_up: bool = False) -> float:
    """The median time of ``fn(data)`` over about ``budget`` seconds of calls (at least one),
    after one call to warm it up if asked (a solve from :func:`_ours` has run once already)."""
    if warm_up:
        jax.block_until_ready(fn(data))
    times: list[float] = []
    while not times or sum(times) < budget:
        start = time.perf_counter()
        jax.block_until_ready(fn(data))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _save(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """The arrays of a problem, for the Pymanopt worker."""
    archive: dict[str, Any] = arrays
    np.savez(path, **archive)


def _size_label(example: _common.Example, scale: int) -> str:
    sizes = _common.scaled_sizes(example, scale)
    return f"{example.name} ({', '.join(f'{k} {v}' for k, v in sizes.items())})"


def _flag(converged: bool) -> str:
    return "yes" if converged else "no"


def _error(error: float) -> str:
    return "n/a" if np.isnan(error) else f"{error:.1e}"


def _time_limit(quick: bool) -> float:
    """Seconds after which a Pymanopt solve stops (its ``max_time``)."""
    return 20.0 if quick else 60.0


def _comparison_table(peer: Pymanopt | None, scale: int, quick: bool, workdir: Path) -> Table:
    what = "Pymanopt's sizes" if scale == 1 else f"{scale} × Pymanopt's sizes"
    table = Table(f"Solvers against Pymanopt 2.2.1 (JAX backend), float64, {what}",
                  ["problem", "solver", "ours", "ours: compile", "Pymanopt", "ratio",
                   "iterations (ours / Pymanopt)", "converged (ours / Pymanopt)",
                   "optimum error (ours / Pymanopt)"])
    rounds = 1 if quick else (3 if scale == 1 else 2)
    budget = 0.1 if quick else 0.3
    time_limit = _time_limit(quick)
    for name in NAMES:
        example = load(name).EXAMPLE
        data, raw = _common.make_data(example, _common.scaled_sizes(example, scale), 0)
        path = workdir / f"{name}-{scale}.npz"
        _save(path, raw)
        for solver in FAMILIES:
            options = _options(example, solver, data)
            compiled, compile_s, result = _ours(example, solver, options, data)
            error = example.error(np.asarray(result.point, np.float64), raw)
            ours = f"{int(result.iterations)}"
            cells = [_size_label(example, scale), SHORT[solver]]
            if peer is None or solver not in PYMANOPT_HAS or (name, solver) in PYMANOPT_CANNOT:
                median = _median_time(compiled, data, budget)
                why = ("no L-BFGS in Pymanopt 2.2.1" if solver not in PYMANOPT_HAS else
                       PYMANOPT_CANNOT.get((name, solver), "peers environment missing"))
                table.add(cells + [fmt_time(median), f"{compile_s:.1f} s", f"— ({why})", "—",
                                   f"{ours} / —", f"{_flag(bool(result.converged))} / —",
                                   f"{_error(error)} / —"])
                continue
            case = peer.case(name, path, solver, options, time_limit)
            mine, theirs, timed_out = [], [], False
            for r in range(rounds):
                for side in (("ours", "theirs") if r % 2 == 0 else ("theirs", "ours")):
                    if side == "ours":
                        mine.append(_median_time(compiled, data, budget))
                    elif not timed_out:  # one solve that ran into the time limit is enough
                        reply = peer.time_solve(case, budget, point=workdir / "point.npy")
                        theirs.append(reply["median"])
                        timed_out = reply["result"]["timed_out"]
            theirs_result = reply["result"]
            their_error = example.error(np.load(workdir / "point.npy"), raw)
            median_ours = statistics.median(mine)
            pymanopt_cell = fmt_time(statistics.median(theirs))
            if timed_out:
                # Pymanopt stopped at its time limit: the ratio is ours for as many iterations.
                k = theirs_result["iterations"]
                capped, _, _ = _ours(example, solver, {**options, "max_iterations": k}, data)
                mine = [_median_time(capped, data, budget)]
                pymanopt_cell += (f" (time limit; ours {fmt_time(mine[0])} for the same {k} "
                                  "iterations)")
            ratio = statistics.median(a / b for a, b in zip(mine, theirs))
            table.add(cells + [
                fmt_time(median_ours), f"{compile_s:.1f} s", pymanopt_cell, f"{ratio:.4f}",
                f"{ours} / {theirs_result['iterations']}",
                f"{_flag(bool(result.converged))} / {_flag(theirs_result['converged'])}",
                f"{_error(error)} / {_error(their_error)}"])
    table.notes += [
        "Time from the start to the stop, one solve: ours `jax.jit`-compiled "
        "(`examples/solvers`, `_common.solve`; compile time apart), Pymanopt's `optimizer.run` "
        "with its JAX backend (`pymanopt.function.jax`: JAX's autodiff, run op by op, NumPy "
        "arrays between the steps) in its own process, after a warm-up of three iterations; "
        f"the sides alternate ({rounds} round{'s' if rounds > 1 else ''}), ratio = ours / "
        "Pymanopt, the median of the per-round ratios (goal ≤ 0.1). A Pymanopt solve stops "
        f"after {time_limit:.0f} s (its `max_time`); the ratio of such a row compares the "
        "same number of iterations: ours is timed again, stopped after as many as Pymanopt "
        "took.",
        "The same cost (`examples/solvers/costs.py`), data, start (seed 0) and solver family, "
        "with the defaults each library documents for the rest (the same ones: Manopt's); both "
        f"stop at a gradient norm ≤ {RTOL:g} × the start's, or after {MAX_ITERATIONS} "
        "iterations, or when their own step-size criterion gives up (\"converged: no\"). "
        "Pymanopt's examples' options are passed to both: the trust-region radius bound 8√p "
        "(invariant subspace), Fletcher–Reeves CG (unit-norm columns). Packing on the sphere "
        "runs on the oblique manifold on both sides (Pymanopt's example uses its elliptope).",
        "Optimum error: each example's distance to its optimum computed without the solvers "
        "(`python -m examples.solvers.<problem> --help`; for the packing, the largest inner "
        "product over the best packing known, n/a where none is tabulated). Iterations: "
        "trust-region counts include rejected steps, on both sides.",
    ]
    return table


def _solve_each(solve: Any, problems: list[Any], _: Any) -> list[Any]:
    """``solve`` applied to each problem in turn: a user's loop over a compiled solve."""
    return [solve(data) for data in problems]


def _batch_table(peer: Pymanopt | None, quick: bool, workdir: Path) -> Table:
    subset = 2 if quick else 8
    table = Table(f"A batch of {BATCH} problems: one `jax.vmap` solve against Pymanopt in a loop "
                  "(float64, Pymanopt's sizes)",
                  ["problem", "solver", "ours: vmap", "ours: vmap compile", "ours: lax.map",
                   "ours: jitted solve in a loop", f"Pymanopt (from {subset})",
                   "ratio: vmap / Pymanopt", "ratio: lax.map / Pymanopt", "ratio: loop / Pymanopt",
                   "iterations: ours mean, max / Pymanopt mean",
                   f"converged: ours / Pymanopt of {subset}"])
    for name in NAMES:
        example = load(name).EXAMPLE
        solver = example.solver if example.solver in PYMANOPT_HAS else "trust_region"
        problems = [_common.make_data(example, _common.scaled_sizes(example, 1), seed)
                    for seed in range(BATCH)]
        singles = [d for d, _ in problems]
        data = jax.tree.map(lambda *a: jnp.stack(a), *singles)
        options = _options(example, solver, singles[0])
        compiled, compile_s, result = _ours(example, solver, options, data, batched="vmap")
        mapped, _, _ = _ours(example, solver, options, data, batched="map")
        one, _, _ = _ours(example, solver, options, singles[0])
        iterations = np.asarray(result.iterations)
        loop = functools.partial(_solve_each, one, singles)
        cells = [f"{BATCH} × {_size_label(example, 1)}", SHORT[solver]]
        mine: list[float] = []
        in_map: list[float] = []
        looped: list[float] = []
        theirs: list[float] = []
        if peer is not None:
            path = workdir / f"{name}-batch.npz"
            _save(path, {k: np.stack([raw[k] for _, raw in problems[:subset]])
                         for k in problems[0][1]})
            case = peer.case(name, path, solver, options, _time_limit(quick), batched=True)
        for r in range(1 if quick else 2):
            sides = ("ours", "theirs") if r % 2 == 0 else ("theirs", "ours")
            for side in sides:
                if side == "ours":
                    mine.append(_median_time(compiled, data, 0.3))
                    in_map.append(_median_time(mapped, data, 0.3))
                    looped.append(_median_time(loop, None, 0.3, warm_up=True))
                elif peer is not None:
                    reply = peer.solve(case, subset)
                    # Pymanopt's time for the batch: its time for the first `subset`, scaled by
                    # the iterations the whole batch takes over those the subset takes (ours).
                    scale = iterations.sum() / iterations[:subset].sum()
                    theirs.append(reply["seconds"] * scale)
        ours_cells = [fmt_time(statistics.median(mine)), f"{compile_s:.1f} s",
                      fmt_time(statistics.median(in_map)), fmt_time(statistics.median(looped))]
        if peer is None:
            table.add(cells + ours_cells + ["—", "—", "—", "—",
                                            f"{iterations.mean():.1f}, {iterations.max()} / —",
                                            f"{int(np.sum(result.converged))}/{BATCH} / —"])
            continue
        their_iterations = np.mean([r["iterations"] for r in reply["results"]])
        their_converged = sum(r["converged"] for r in reply["results"])
        table.add(cells + ours_cells + [
            fmt_time(statistics.median(theirs)),
            f"{statistics.median(a / b for a, b in zip(mine, theirs)):.4f}",
            f"{statistics.median(a / b for a, b in zip(in_map, theirs)):.4f}",
            f"{statistics.median(a / b for a, b in zip(looped, theirs)):.4f}",
            f"{iterations.mean():.1f}, {iterations.max()} / {their_iterations:.1f} "
            f"(ours {iterations[:subset].mean():.1f} on those)",
            f"{int(np.sum(result.converged))}/{BATCH} / {their_converged}/{subset}"])
    table.notes += [
        f"{BATCH} independent problems (data and start from seeds 0–{BATCH - 1}), each with the "
        "solver of its Pymanopt example (trust regions for the Karcher means). Ours: one jitted "
        "`jax.vmap` of the solve, each problem stopping on its own criterion: the batched loop "
        "runs until the last problem stops, the finished ones frozen but still computed, so a "
        "batch costs as many iterations per problem as its slowest problem takes (at most "
        f"{MAX_ITERATIONS}). `lax.map` of the solve: one program too, the problems' loops one "
        "after another, each running only its own iterations. For comparison, our jitted "
        f"single-problem solve called in a Python loop over the {BATCH}.",
        f"Pymanopt solves the first {subset} problems one after another; its time for the "
        f"{BATCH} is extrapolated linearly in iterations: × (our iterations over the {BATCH}) / "
        f"(our iterations over those {subset}); the two libraries' iteration counts agree "
        "(the comparison tables). Goal: ratio ≤ 0.01.",
        f"Tolerance: {RTOL:g} × the gradient norm at seed 0's start, the same for every problem "
        f"and both sides; at most {MAX_ITERATIONS} iterations.",
    ]
    return table


def tables(quick: bool) -> list[Table]:
    """The family's tables, computed by ``benchmarks/_solvers_worker.py`` on one core."""
    done = subprocess.run([sys.executable, "-m", "benchmarks._solvers_worker",
                           *(["--quick"] if quick else [])], cwd=ROOT, stdout=subprocess.PIPE,
                          text=True, check=True)
    return [Table(**table) for table in json.loads(done.stdout)]


def tables_on_this_process(quick: bool) -> list[Table]:
    """The comparison tables and the batch table, measured in this process."""
    peer = Pymanopt.start_pymanopt()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            out = [_comparison_table(peer, 1, quick, workdir)]
            if not quick:
                out.append(_comparison_table(peer, 10, quick, workdir))
            out.append(_batch_table(peer, quick, workdir))
        for table in out:
            table.notes.append(
                "Both sides on one core: this family runs in a process pinned to one core "
                "(`benchmarks/_solvers_worker.py`), and the Pymanopt worker it starts inherits "
                "it; XLA:CPU then runs one thread. On two threads, jaxlib 0.10.2's batched LAPACK "
                "kernels can deadlock when two run at once (each blocks a pool thread while it "
                "waits for its chunks): the stack of 100 rotations of 30 × 30 hung there.")
        if peer is not None:
            for table in out:
                table.notes.append(f"Pymanopt {peer.versions['pymanopt']} with jax "
                                   f"{peer.versions['jax']} (`make peers`); ours jax "
                                   f"{jax.__version__}.")
        else:
            for table in out:
                table.notes.append("The peers environment with Pymanopt is missing (`make "
                                   "peers`): ours alone.")
        return out
    finally:
        if peer is not None:
            peer.close()
