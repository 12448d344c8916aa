"""Times our optimizer steps in a process pinned to one core, for ``benchmarks/_peers.py``.

PyTorch's time in the geoopt table is the faster of 1 and 2 threads; this worker gives our side
the same choice. XLA:CPU sizes its thread pools to the cores the process may run on, so the
affinity is set before JAX starts: on one core every step runs its fused loops and products on
one thread, with no hand-offs between cores. Driven like ``_peer_worker.py``, one
JSON object per line:

* ``{"cmd": "setup", "kind": name, "batch": [...], "n": n, "p": p}`` builds the jitted step of
  the optimizer ``name`` of :data:`benchmarks.bench_geometric.PEER_OPTIMIZERS` on St(n, p) and
  answers ``{"id": k}``;
* ``{"cmd": "time", "id": k, "budget": s}`` answers ``{"median": seconds}`` (other keys ignored).
"""
from __future__ import annotations

import json
import os
import sys


def main() -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import jax

    jax.config.update("jax_enable_x64", True)  # as the benchmark process that starts this one
    import geometric

    from benchmarks._harness import interleaved
    from benchmarks.bench_geometric import PEER_OPTIMIZERS, _peer_step

    cases = []
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["cmd"] == "setup":
            batch, n, p = tuple(msg["batch"]), msg["n"], msg["p"]
            cases.append(_peer_step(PEER_OPTIMIZERS[msg["kind"]], geometric.Stiefel(n, p), batch,
                                    n, p))
            reply = {"id": len(cases) - 1}
        elif msg["cmd"] == "time":
            step, args = cases[msg["id"]]
            reply = {"median": interleaved([step], args, budget=msg["budget"], min_samples=3)[0][0]}
        elif msg["cmd"] == "info":
            reply = {"jax": jax.__version__, "cores": len(os.sched_getaffinity(0))}
        else:
            reply = {"error": f"unknown command {msg['cmd']!r}"}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
