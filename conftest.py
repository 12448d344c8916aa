"""Strict JAX settings for the test suite and doctests (the library itself never touches jax.config)."""
import os

# JAX's CPU LAPACK calls run on scipy's OpenBLAS; its threads thrash on a small shared machine
# (a jitted QR loop measured 8 ms per iteration instead of 0.25 ms). Must precede importing jax.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# The suite compiles thousands of small programs and runs each a few times: XLA's LLVM backend at
# optimisation level 0 compiles them ~17% faster in CPU time (measured on tests/rules/linalg,
# tests/geometric/test_spd.py and tests/integrations: 125 s → 102 s), which keeps `make test` within
# its budget on 2 cores. XLA:CPU's MLIR fusion emitters take most of what is left of a compile:
# its older elemental emitters compile the suite's programs in about half the time (measured:
# jax's monitoring counts 690 s of backend compilation in 1030 s of tests; the QR, Cayley and
# attention cases of tests/rules/test_transformations.py 58 s → 32 s). Values are the same
# computations (the emitters may round a reduction differently); no test relies on either setting.
os.environ["XLA_FLAGS"] = " ".join(
    [os.environ.get("XLA_FLAGS", ""), "--xla_backend_optimization_level=0",
     "--xla_cpu_use_fusion_emitters=false"]).strip()

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")  # catches accidental broadcasting
jax.config.update("jax_num_cpu_devices", 2)  # sharding is testable on CPU


@pytest.fixture
def cutoffs(monkeypatch):
    """``cutoffs(NAME=value, ...)`` sets size cut-offs of ``rules.internal.routes`` for one test.

    The public rules are jitted and cache what they traced: JAX's caches are cleared when the
    cut-offs are set and when the test ends, so no program traced under other cut-offs is reused.
    """
    from rules.internal import routes

    def set_cutoffs(**values):
        for name, value in values.items():
            monkeypatch.setattr(routes, name, value)
        jax.clear_caches()

    yield set_cutoffs
    jax.clear_caches()
