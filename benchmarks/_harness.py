"""Timing helpers shared by every benchmark family.

A family module (``bench_linalg.py``, ...) exposes ``tables(quick: bool) -> list[Table]``;
``python -m benchmarks`` runs every family in one process and writes ``benchmarks/RESULTS.md``.
Times are medians of repeats after warm-up, of ``jax.jit``-compiled functions, with
``block_until_ready``; ratios compare functions measured in the same run.
"""
from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import jax

__all__ = ["Table", "median_time", "compile_time", "temp_memory", "machine_info", "fmt_time"]


@dataclass
class Table:
    """One section of RESULTS.md: a title, column names, rows of cells, and notes under it."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

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


def compile_time(fn: Callable, *args) -> float:
    """Seconds to lower and compile ``jax.jit(fn)`` for these arguments.

    Call it before ``fn`` has run: JAX caches compiled programs in memory, and a second
    compilation of the same program is a cache hit.
    """
    t0 = time.perf_counter()
    jax.jit(fn).lower(*args).compile()
    return time.perf_counter() - t0


def temp_memory(fn: Callable, *args) -> int | None:
    """XLA's compiled temporary memory for ``jax.jit(fn)``, in bytes (None if unavailable)."""
    stats = jax.jit(fn).lower(*args).compile().memory_analysis()
    return None if stats is None else int(stats.temp_size_in_bytes)


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
