"""Benchmark of the hyperbolic manifolds: one training step of Poincaré embeddings against geoopt.

The model of Nickel & Kiela (2017), as in ``examples/hyperbolic``: an embedding table of points of
the Poincaré ball, a batch of (u, v) pairs with negatives, the loss ``logsumexp(−d) + d(u, v)``
over each row's distances, its gradient, and one ``riemannian_adam`` step on the whole table.
geoopt runs the same step (``PoincareBall``, ``ManifoldParameter``, ``RiemannianAdam``) on the
same table and indices, in its own process, alternated with ours (``benchmarks/_peers.py``).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

import geometric
from geometric import optim

from ._harness import Table, fmt_time, interleaved
from ._peers import THREADS, Peers, alternate

NEGATIVES = 10


def _inputs(nodes, dim, batch):
    """Table and indices exactly as ``_poincare_embedding`` of ``_peer_worker.py`` draws them."""
    rng = np.random.default_rng(0)
    table = rng.standard_normal((nodes, dim)) * (0.3 / np.sqrt(dim))
    index = rng.integers(0, nodes, (batch, 2 + NEGATIVES))
    return jnp.asarray(table, jnp.float32), jnp.asarray(index, jnp.int32)


def _training_step(dim):
    ball = geometric.PoincareBall(dim)
    opt = optim.riemannian_adam(1e-3, ball)

    def loss(table, index):
        u, others = index[:, :1], index[:, 1:]
        x = jnp.broadcast_to(table[u], (*others.shape, dim))
        d = ball.dist(x, table[others])                      # (batch, 1 + negatives)
        return jnp.mean(jax.nn.logsumexp(-d, axis=1) + d[:, 0])

    @jax.jit
    def step(table, state, index):
        value, grad = jax.value_and_grad(loss)(table, index)
        updates, state = opt.update(grad, state, table)
        return optax.apply_updates(table, updates), state, value

    return step, opt


def tables(quick: bool) -> list[Table]:
    nodes, dim, batch = (10_000, 10, 1_000) if quick else (100_000, 10, 10_000)
    table_, index = _inputs(nodes, dim, batch)
    step, opt = _training_step(dim)
    args = (table_, opt.init(table_), index)
    title = (f"Poincaré embeddings: one `riemannian_adam` training step, {nodes} × {dim} table, "
             f"batch {batch} × (1 + {NEGATIVES}) (float32, CPU)")
    peers = Peers.start()
    if peers is None:
        (mine,), _ = interleaved([step], args, budget=2.0 if not quick else 0.3)
        out = Table(title, ["side", "time"])
        out.add(["ours", fmt_time(mine)])
        out.notes.append("geoopt's side needs `make peers` (.venv-peers) or PEERS_PYTHON.")
        return [out]
    try:
        case = peers.setup("poincare_embedding", nodes=nodes, dim=dim, batch=batch, negatives=NEGATIVES)
        mine, theirs = alternate(peers, case, step, args, rounds=3 if quick else 6,
                                 budget=0.3 if quick else 1.0)
        out = Table(title, ["side", "time", "ratio ours / geoopt"])
        best = min(theirs.values())
        out.add(["ours: `geometric.PoincareBall` + `riemannian_adam` (jitted)", fmt_time(mine),
                 f"{mine / best:.2f}"])
        for t in THREADS:
            out.add([f"geoopt `PoincareBall` + `RiemannianAdam`, {t} thread{'s' if t > 1 else ''}",
                     fmt_time(theirs[t]), ""])
        out.notes += [
            "The step: gather the rows of the batch, the distances d(u, ·) to the positive and the "
            f"{NEGATIVES} negatives, loss mean(logsumexp(−d) + d(u, v)), its gradient (a dense "
            "gradient of the table, as PyTorch's indexing gives), and one Riemannian Adam update of "
            "the whole table (Riemannian gradient, moments, exponential-map retraction, parallel "
            "transport of the first moment). Ours: `update` + `optax.apply_updates` in one `jax.jit`. "
            f"geoopt {peers.versions['geoopt']}, PyTorch {peers.versions['torch']} (CPU, eager), in "
            "its own process, alternated with ours; the faster of 1 and 2 threads is its time.",
            "Goal: ratio ≤ 1.0.",
        ]
        return [out]
    finally:
        peers.close()
