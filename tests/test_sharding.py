"""Every rule, layer and optimizer on sharded arrays: 8 simulated CPU devices in a subprocess.

The checks live in tests/sharding_checks.py; they run once per session (the subprocess needs
``XLA_FLAGS`` before JAX starts) and report the relative difference from a single-device run.
"""
import json
import pathlib
import subprocess
import sys

import pytest

from tests.helpers import cpu_subprocess_env

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Relative, float32: a rule's output and gradient (issue 6: 1e-6); 20-step optimizer and training
# trajectories accumulate the rounding of a different summation order, so they get 1e-5.
TOLERANCES = {"named sharding": 1e-6, "shard_map": 1e-6, "stiefel heads": 1e-5, "data parallel": 1e-5}


@pytest.fixture(scope="module")
def results():
    env = cpu_subprocess_env(8, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "sharding_checks.py")], env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULTS "))
    return json.loads(line.removeprefix("RESULTS "))


def _group(results, prefix):
    group = {k: v for k, v in results.items() if k.startswith(prefix)}
    assert group, f"no check named {prefix}*"
    return group


@pytest.mark.parametrize("prefix", list(TOLERANCES))
def test_sharded_equals_single_device(results, prefix):
    group = _group(results, prefix)
    worst = {k: v for k, v in group.items() if not v <= TOLERANCES[prefix]}
    assert not worst, f"relative differences above {TOLERANCES[prefix]}: {worst}"
