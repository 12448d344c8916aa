"""Both revisions' gradients of every gradient row, timed in turn in one process.

Run as a script by ``benchmarks/revisions.py``:
``python benchmarks/_revision_worker.py OLD_CHECKOUT [--quick] [--budget S]``. The ``rules`` of
this checkout is imported as usual; the old checkout's is loaded beside it under the name
``rules_old`` (the package imports itself only relatively, so its modules stay its own). The
cases of ``benchmarks/_cases.py`` (public API only) are built twice, once on each package, with
the same arrays. Per row, the two gradients are compiled and then timed call by call in
alternating order (``_harness.interleaved``), so a slow phase of the machine or of the process
hits both alike. Prints one JSON object,
``{"family label": [compile old, compile new, time old, time new, new/old, same program], ...}``.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import pathlib
import sys
import time
import types

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import _cases
import jax
from _harness import interleaved, normalized_program


def _load_package(name: str, folder: pathlib.Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _cases_on(package: types.ModuleType) -> types.ModuleType:
    """A second copy of ``_cases`` whose ``import rules`` binds ``package``."""
    new_rules = sys.modules["rules"]
    sys.modules["rules"] = package
    try:
        spec = importlib.util.spec_from_file_location("_cases_old", _cases.__file__)
        module = importlib.util.module_from_spec(spec)
        sys.modules["_cases_old"] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    finally:
        sys.modules["rules"] = new_rules
    return module


def _compile(fn, args) -> tuple[float, object, str]:
    # CPU time of this process: on a shared machine, waiting for a core is not compiling.
    t0 = time.process_time()
    compiled = jax.jit(fn).lower(*args).compile()
    seconds = time.process_time() - t0
    return seconds, compiled, hashlib.sha1(normalized_program(compiled).encode()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("old", type=pathlib.Path)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per side and row")
    args = parser.parse_args()
    old_cases = _cases_on(_load_package("rules_old", args.old.resolve() / "rules"))
    out = {}
    pairs = zip(old_cases.gradient_cases(args.quick), _cases.gradient_cases(args.quick))
    for old, new in pairs:
        grad_args = new.grad_args()
        # Each side compiled twice, and the second compilations timed: the first one of either
        # side also pays for what both share (JAX's backend start, its own jitted helpers),
        # which the other then finds cached. A fresh closure each time, so that jit's own cache
        # never hits.
        for case in (old, new):
            _compile(case.grad(case.ours), grad_args)
        (c_old, f_old, p_old), (c_new, f_new, p_new) = (
            _compile(case.grad(case.ours), grad_args) for case in (old, new))
        (t_new, t_old), ratio = interleaved([f_new, f_old], grad_args, budget=args.budget)
        out[f"{new.family} {new.label}"] = [c_old, c_new, t_old, t_new, ratio, p_old == p_new]
        print(f"{new.family} {new.label}: new/old {ratio:.2f}", file=sys.stderr, flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
