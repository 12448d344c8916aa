"""The peer libraries, timed in their own process and alternated with our own timings.

PyTorch and geoopt live in a separate environment (``make peers`` creates ``.venv-peers``: CPU
``torch==2.13.0`` and ``geoopt``), never a dependency of ours. :class:`Peers` starts
``benchmarks/_peer_worker.py`` there and talks to it over a pipe; :func:`alternate` times one of
our functions (:func:`alternate_many` several) and the peer's case in turn, round after round, so
a slow phase of a shared machine hits both sides alike. PyTorch runs at 1 and at 2 threads; the
faster counts as its time.
"""
from __future__ import annotations

import json
import os
import pathlib
import statistics
import subprocess
import sys
from collections.abc import Callable

from ._harness import interleaved

ROOT = pathlib.Path(__file__).resolve().parent.parent
PEERS_PYTHON = pathlib.Path(os.environ.get("PEERS_PYTHON", ROOT / ".venv-peers" / "bin" / "python"))
THREADS = (1, 2)


class Peers:
    """The worker process, or ``None`` from :meth:`start` when the environment is missing."""

    def __init__(self, proc: subprocess.Popen):
        self._proc = proc
        self.versions = self._ask({"cmd": "info"})

    @classmethod
    def start(cls) -> Peers | None:
        if not PEERS_PYTHON.exists():
            return None
        env = dict(os.environ, OMP_NUM_THREADS="2", MKL_NUM_THREADS="2")
        proc = subprocess.Popen([str(PEERS_PYTHON), str(ROOT / "benchmarks" / "_peer_worker.py")],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        return cls(proc)

    @classmethod
    def start_ours_on_one_core(cls) -> Peers:
        """Our own steps in a process pinned to one core (``benchmarks/_pinned_worker.py``)."""
        proc = subprocess.Popen([sys.executable, "-m", "benchmarks._pinned_worker"], cwd=ROOT,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        return cls(proc)

    def _ask(self, msg: dict) -> dict:
        self._proc.stdin.write(json.dumps(msg) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the peer worker ({PEERS_PYTHON}) exited; run `make peers`.")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"peer worker: {reply['error']}")
        return reply

    def setup(self, kind: str, **spec) -> int:
        return self._ask({"cmd": "setup", "kind": kind, **spec})["id"]

    def time(self, case: int, threads: int, budget: float) -> float:
        return self._ask({"cmd": "time", "id": case, "threads": threads, "budget": budget})["median"]

    def close(self) -> None:
        self._proc.stdin.close()
        self._proc.wait()


def alternate(peers: Peers, case: int, ours: Callable, args: tuple, *, rounds: int = 4,
              budget: float = 0.25) -> tuple[float, dict[int, float]]:
    """Our median and the peer's per thread count, measured in turn ``rounds`` times
    (:func:`alternate_many` with one function of ours)."""
    (mine,), theirs, _ = alternate_many(peers, case, [ours], [args], rounds=rounds, budget=budget)
    return mine, theirs


def alternate_many(peers: Peers, case: int, ours: list[Callable], args: list[tuple], *,
                   rounds: int = 4, budget: float = 0.25,
                   pinned: tuple[Peers, list[int]] | None = None
                   ) -> tuple[list[float], dict[int, float], list[float]]:
    """Our medians (one per function, ``args[i]`` for ``ours[i]``), the peer's per thread count
    and those of ``pinned`` (a worker and its case per function of ours, or None), measured in
    turn ``rounds`` times.

    Each round times each of ours (:func:`interleaved`, ``budget`` seconds), the pinned worker's
    cases and the peer at each thread count (``budget`` seconds each), the order reversed every
    other round; the results are the medians over the rounds.
    """
    mine: list[list[float]] = [[] for _ in ours]
    theirs: dict[int, list[float]] = {t: [] for t in THREADS}
    worker, pinned_cases = pinned if pinned is not None else (None, [])
    on_one_core: list[list[float]] = [[] for _ in pinned_cases]
    steps = ([("ours", i) for i in range(len(ours))]
             + [("pinned", i) for i in range(len(pinned_cases))] + [("peer", t) for t in THREADS])
    for r in range(rounds):
        for side, k in (steps if r % 2 == 0 else steps[::-1]):  # k: an index or a thread count
            if side == "ours":
                mine[k].append(interleaved([ours[k]], args[k], budget=budget, min_samples=3)[0][0])
            elif side == "pinned":
                on_one_core[k].append(worker.time(pinned_cases[k], 1, budget))
            else:
                theirs[k].append(peers.time(case, k, budget))
    return ([statistics.median(v) for v in mine],
            {t: statistics.median(v) for t, v in theirs.items()},
            [statistics.median(v) for v in on_one_core])
