"""Computes the tables of the "solvers" family in a process pinned to one core.

``benchmarks/bench_solvers.py``'s :func:`~benchmarks.bench_solvers.tables` runs this module and
reads the tables, as JSON, from its standard output (progress goes to standard error). The
affinity is set before JAX starts, so XLA:CPU sizes its thread pool to one thread, and the
Pymanopt worker this process starts inherits the core. On a thread pool of two, jaxlib 0.10.2's
batched LAPACK kernels (a triangular solve or QR of a stack of matrices: ``ParallelBatchMap`` in
``jaxlib/cpu/lapack_kernels.cc``) hand their chunks to the pool and block until they are done;
two of them running at once on the two threads wait for each other forever. On one thread every
kernel runs its whole batch itself.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys


def main() -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import jax

    jax.config.update("jax_enable_x64", True)  # as the benchmark process that starts this one
    # JAX's one-time start-up costs (backend, caches) belong to no row's compile time.
    jax.jit(jax.grad(lambda x: jax.numpy.sum(jax.numpy.sin(x) @ x))).lower(
        jax.numpy.ones((3, 3))).compile()
    from benchmarks.bench_solvers import tables_on_this_process

    quick = sys.argv[1:] == ["--quick"]
    print(json.dumps([dataclasses.asdict(t) for t in tables_on_this_process(quick)]), flush=True)


if __name__ == "__main__":
    main()
