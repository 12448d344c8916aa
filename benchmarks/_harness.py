"""Timing helpers shared by every benchmark family.

A family module (``bench_linalg.py``, ...) exposes ``tables(quick: bool) -> list[Table]``;
``python -m benchmarks`` runs every family in one process and writes ``benchmarks/RESULTS.md``.
Times are medians of repeats after warm-up, of ``jax.jit``-compiled functions, with
``block_until_ready``; ratios compare functions measured in the same run.
"""
from __future__ import annotations

import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import jax

__all__ = ["Table", "median_time", "interleaved", "compile_time", "compile_program",
           "normalized_program", "temp_memory", "machine_info", "load_average", "fmt_time",
           "fmt_ratio"]


@dataclass
class Table:
    """One section of RESULTS.md: a title, column names, rows of cells, and notes under it."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, row: list[str]) -> None:
        """Append a row, and show it on stderr at once (a full run takes minutes)."""
        self.rows.append(row)
        print(f"{self.title}: " + " | ".join(str(c) for c in row), file=sys.stderr, flush=True)

    def markdown(self) -> str:
        lines = [f"## {self.title}", "", "| " + " | ".join(self.columns) + " |",
                 "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in self.rows]
        lines += [""] + [f"- {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def _block(x):
    return jax.block_until_ready(x)


def median_time(fn: Callable, *args, repeats: int = 20, min_time: float = 0.2) -> float:
    """Median wall time (seconds) of ``fn(*args)``: ``fn`` should be jitted; warms up first.

    Repeats at least ``repeats`` times and until ``min_time`` seconds have been spent.
    """
    _block(fn(*args))
    _block(fn(*args))
    times, spent = [], 0.0
    while len(times) < repeats or spent < min_time:
        t0 = time.perf_counter()
        _block(fn(*args))
        dt = time.perf_counter() - t0
        times.append(dt)
        spent += dt
        if len(times) >= 10 * repeats:
            break
    return statistics.median(times)


def interleaved(fns: list[Callable], args: tuple | list[tuple], *, budget: float = 1.0,
                min_samples: int = 7, max_samples: int = 60) -> tuple[list[float], float]:
    """Medians of several jitted functions timed in turn (A B A B …), and the median ratio A/B.

    ``args`` is one tuple for all functions or one per function. Each sample of a function is
    one call, or a loop of calls lasting about 2 ms for very short ones. The order alternates
    every round, so a slow phase of a shared machine hits every function alike; the ratio is the
    median of the per-round ratios of the first two functions, robust to drift between rounds.
    Spends about ``budget`` seconds per function (within ``[min_samples, max_samples]`` rounds).
    """
    per_fn = args if isinstance(args, list) else [args] * len(fns)
    loops, first = [], []
    for fn, a in zip(fns, per_fn):
        _block(fn(*a))
        t0 = time.perf_counter()
        _block(fn(*a))
        dt = time.perf_counter() - t0
        loops.append(max(1, int(2e-3 / max(dt, 1e-7))))
        first.append(dt)
    rounds = int(min(max_samples, max(min_samples, budget / max(max(first), 1e-7))))
    samples: list[list[float]] = [[] for _ in fns]
    order = list(range(len(fns)))
    for r in range(rounds):
        for i in (order if r % 2 == 0 else order[::-1]):
            fn, a, k = fns[i], per_fn[i], loops[i]
            t0 = time.perf_counter()
            for _ in range(k):
                _block(fn(*a))
            samples[i].append((time.perf_counter() - t0) / k)
    ratio = statistics.median(a / b for a, b in zip(samples[0], samples[1])) if len(fns) > 1 else 1.0
    return [statistics.median(s) for s in samples], ratio


def compile_time(fn: Callable, *args) -> float:
    """Seconds to lower and compile ``jax.jit(fn)`` for these arguments.

    Call it before ``fn`` has run: JAX caches compiled programs in memory, and a second
    compilation of the same program is a cache hit.
    """
    return compile_program(fn, *args)[0]


def compile_program(fn: Callable, *args) -> tuple[float, str]:
    """:func:`compile_time` and the optimised program, without names and metadata.

    Two programs that compare equal are the same computation: a measured difference between
    them is noise. Precision flags are dropped: on CPU a float32 product is computed the same way
    at every ``jax.lax.Precision``.
    """
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return time.perf_counter() - t0, normalized_program(compiled)


def normalized_program(compiled) -> str:
    """The text of a compiled program without names, metadata and precision flags."""
    text = compiled.as_text()
    text = text[text.index("\n%") if "\n%" in text else 0:]  # drop the header and file table
    text = re.sub(r",? ?(metadata|operand_precision|frontend_attributes|backend_config)="
                  r"(\{[^{}]*(\{[^{}]*\}[^{}]*)*\}|\"[^\"]*\")", "", text)
    return re.sub(r"%[\w.\-]+", "%", text)


def temp_memory(fn: Callable, *args) -> int | None:
    """XLA's compiled temporary memory for ``jax.jit(fn)``, in bytes (None if unavailable)."""
    stats = jax.jit(fn).lower(*args).compile().memory_analysis()
    return None if stats is None else int(stats.temp_size_in_bytes)


def load_average() -> str:
    """The 1, 5 and 15 minute load averages (``uptime``), for the header of every result."""
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def fmt_ratio(ratio: float, same: bool = False) -> str:
    return f"{ratio:.2f}" + (" (=)" if same else "")


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def machine_info() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"{cpu}; {os.cpu_count()} cores; Python {platform.python_version()}; "
            f"jax {jax.__version__}; backend {jax.default_backend()}; "
            f"devices {len(jax.devices())}; "
            f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
