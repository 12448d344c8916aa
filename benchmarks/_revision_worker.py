"""Compile and gradient times of every gradient row, for ``benchmarks/revisions.py``.

Run as a script with ``PYTHONPATH`` pointing at the checkout whose ``rules`` is measured:
``python benchmarks/_revision_worker.py [--quick] [--budget S]``. Prints one JSON object,
``{"family label": [compile CPU seconds, gradient seconds, program hash], ...}``. It imports
only ``benchmarks/_cases.py`` (public API of ``rules``) and ``_harness.py`` beside it, so any
revision can be measured.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import _cases  # noqa: E402  (this script's own folder)
from _harness import normalized_program  # noqa: E402


def _median_time(fn, args, budget):
    jax.block_until_ready(fn(*args))
    times, spent = [], 0.0
    while len(times) < 5 or spent < budget:
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
        spent += times[-1]
        if len(times) >= 200:
            break
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--budget", type=float, default=0.5)
    args = parser.parse_args()
    # JAX's own first-compilation costs (backend start, caches) are not any row's.
    jax.jit(jax.grad(lambda x: jnp.sum(jnp.sin(x) @ x))).lower(jnp.ones((3, 3))).compile()
    out = {}
    for case in _cases.gradient_cases(args.quick):
        grad = case.grad(case.ours)
        grad_args = case.grad_args()
        # CPU time of this process: on a shared machine, waiting for a core is not compiling.
        t0 = time.process_time()
        compiled = jax.jit(grad).lower(*grad_args).compile()
        compile_s = time.process_time() - t0
        program = hashlib.sha1(normalized_program(compiled).encode()).hexdigest()
        out[f"{case.family} {case.label}"] = [compile_s, _median_time(compiled, grad_args,
                                                                      args.budget), program]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
