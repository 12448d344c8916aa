"""Times the peer libraries (PyTorch autograd, geoopt) for ``benchmarks/_peers.py``.

Runs in the peers' own environment (``make peers``: CPU ``torch`` and ``geoopt``, never a
dependency of ours), driven over stdin/stdout, one JSON object per line:

* ``{"cmd": "setup", "kind": ..., ...}`` builds a case and answers ``{"id": n}``;
* ``{"cmd": "time", "id": n, "threads": t, "budget": s}`` sets ``torch.set_num_threads(t)``, runs
  the case for about ``s`` seconds after a warm-up and answers ``{"median": seconds}``.

The driver alternates these calls with its own timings, so both sides see the same machine.
Inputs are drawn as in ``benchmarks/_cases.py`` (NumPy's default generator, float32).
"""
from __future__ import annotations

import json
import statistics
import sys
import time

import numpy as np
import torch


def _rand(shape, seed):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _grad_case(fn, a, n_out):
    """``A ↦ ∇ Σ_k <W_k, fn(A)_k>`` by autograd: forward and backward, as JAX's ``jax.grad``."""
    a = a.clone().requires_grad_(True)
    with torch.no_grad():
        outs = fn(a)
    outs = outs if isinstance(outs, tuple) else (outs,)
    weights = [_rand(tuple(y.shape), 100 + i) for i, y in enumerate(outs[:n_out])]

    def step():
        a.grad = None
        outs = fn(a)
        outs = outs if isinstance(outs, tuple) else (outs,)
        sum((w * y).sum() for w, y in zip(weights, outs)).backward()
        return a.grad

    return step


def _inv(shape):
    n = shape[-1]
    a = _rand(shape, 0) + 2 * np.sqrt(n) * torch.eye(n)
    return _grad_case(torch.linalg.inv, a, 1)


def _qr(shape):
    return _grad_case(lambda a: tuple(torch.linalg.qr(a)), _rand(shape, 0), 2)


def _optimizer_step(name, batch, n, p):
    """One geoopt step on EuclideanStiefel with a fixed Euclidean gradient (as our table's)."""
    import geoopt

    shape = (*batch, n, p)
    x = torch.linalg.qr(_rand(shape, 0)).Q
    param = geoopt.ManifoldParameter(x, manifold=geoopt.EuclideanStiefel())
    make = {"RiemannianAdam": lambda: geoopt.optim.RiemannianAdam([param], lr=1e-3),
            "RiemannianSGD": lambda: geoopt.optim.RiemannianSGD([param], lr=1e-3)}[name]
    opt = make()
    param.grad = _rand(shape, 1)

    def step():
        opt.step()
        return param

    return step


def _poincare_embedding(nodes, dim, batch, negatives):
    """One geoopt RiemannianAdam step of Poincaré embeddings (Nickel & Kiela's loss), gradient
    included: inputs drawn as in ``benchmarks/bench_hyperbolic.py``."""
    import geoopt

    rng = np.random.default_rng(0)
    table = rng.standard_normal((nodes, dim)) * (0.3 / np.sqrt(dim))
    index = rng.integers(0, nodes, (batch, 2 + negatives))
    ball = geoopt.PoincareBall()
    param = geoopt.ManifoldParameter(torch.from_numpy(table.astype(np.float32)), manifold=ball)
    opt = geoopt.optim.RiemannianAdam([param], lr=1e-3)
    u = torch.from_numpy(index[:, :1])
    others = torch.from_numpy(index[:, 1:])

    def step():
        opt.zero_grad()
        d = ball.dist(param[u], param[others])  # (batch, 1 + negatives)
        loss = (torch.logsumexp(-d, dim=1) + d[:, 0]).mean()
        loss.backward()
        opt.step()
        return loss

    return step


def _time(fn, budget):
    fn()
    fn()
    times, spent = [], 0.0
    while len(times) < 5 or spent < budget:
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        times.append(dt)
        spent += dt
        if len(times) >= 500:
            break
    return statistics.median(times)


def main() -> None:
    cases = []
    for line in sys.stdin:
        msg = json.loads(line)
        if msg["cmd"] == "setup":
            if msg["kind"] == "inv":
                cases.append(_inv(tuple(msg["shape"])))
            elif msg["kind"] == "qr":
                cases.append(_qr(tuple(msg["shape"])))
            elif msg["kind"] == "poincare_embedding":
                cases.append(_poincare_embedding(msg["nodes"], msg["dim"], msg["batch"], msg["negatives"]))
            else:
                cases.append(_optimizer_step(msg["kind"], tuple(msg["batch"]), msg["n"], msg["p"]))
            reply = {"id": len(cases) - 1}
        elif msg["cmd"] == "time":
            torch.set_num_threads(msg["threads"])
            reply = {"median": _time(cases[msg["id"]], msg["budget"])}
        elif msg["cmd"] == "info":
            reply = {"torch": torch.__version__, "geoopt": _geoopt_version()}
        else:
            reply = {"error": f"unknown command {msg['cmd']!r}"}
        print(json.dumps(reply), flush=True)


def _geoopt_version():
    import geoopt

    return geoopt.__version__


if __name__ == "__main__":
    main()
