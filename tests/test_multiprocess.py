"""Training over two real processes (JAX's multi-controller runtime, gloo collectives on loopback).

``examples/multihost.py`` runs the rigid-body trainer's data-parallel step and a manifold
optimizer; two processes, each with one CPU device, must give the single-process results.
"""
import json
import socket
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import cpu_subprocess_env

# float32; the sharded programs reduce in another order.
TOLERANCE = 1e-6


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(tmp_path, processes: int) -> dict:
    env = cpu_subprocess_env(1, OPENBLAS_NUM_THREADS="1")
    out = tmp_path / f"{processes}.json"
    port = _free_port()
    command = [sys.executable, "-m", "examples.multihost", "--steps", "8"]
    procs = []
    for pid in range(processes):
        extra = ["--out", str(out)] if pid == 0 else []
        if processes > 1:
            extra += ["--coordinator", f"127.0.0.1:{port}", "--num-processes", str(processes),
                      "--process-id", str(pid)]
        procs.append(subprocess.Popen(command + extra, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    for p in procs:
        output, _ = p.communicate(timeout=120)
        assert p.returncode == 0, output[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("multihost")
    return _run(tmp, 1), _run(tmp, 2)


def _rel(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(a))), 1e-30))


def test_two_processes_see_both_devices(results):
    one, two = results
    assert (one["processes"], one["devices"]) == (1, 1)
    assert (two["processes"], two["devices"]) == (2, 2)


@pytest.mark.parametrize("job,key", [("rigid_body", "losses"), ("rigid_body", "params"),
                                     ("stiefel", "losses"), ("stiefel", "heads")])
def test_two_processes_equal_one(results, job, key):
    one, two = results
    assert _rel(one[job][key], two[job][key]) <= TOLERANCE


def test_constraint_and_progress(results):
    _, two = results
    assert two["stiefel"]["manifold_error"] < 1e-5
    assert two["rigid_body"]["losses"][-1] < two["rigid_body"]["losses"][0]
    assert two["stiefel"]["losses"][-1] < two["stiefel"]["losses"][0]


@pytest.mark.parametrize("argv,message", [
    (["--num-processes", "2", "--process-id", "2", "--coordinator", "h:1"],
     "--process-id must be below --num-processes (2); got 2"),
    (["--num-processes", "2"], "--coordinator HOST:PORT is needed with more than one process"),
    (["--steps", "0"], "argument --steps"),
])
def test_bad_flags_are_one_line_errors(argv, message, capsys):
    from examples import multihost

    with pytest.raises(SystemExit) as exit_info:
        multihost.build_parser().parse_args(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
