"""The embedding model of Nickel & Kiela (2017): a table of points, the distance loss with
negative sampling, and the reconstruction metrics (mean rank, mean average precision).

Loss. For an edge ``(u, v)`` of the closure and ``K`` nodes ``v'₁ … v'_K`` drawn uniformly (those
related to ``u``, and ``u`` itself, are masked out), the softmax over negative distances

    L(u, v) = −log( e^{−d(u, v)} / (e^{−d(u, v)} + Σₖ e^{−d(u, v'ₖ)}) ),

averaged over the batch. ``d`` is the Poincaré distance for :class:`geometric.PoincareBall`
embeddings and ``‖u − v‖`` for the Euclidean baseline; everything else is the same.

Reconstruction. Every node ``u`` ranks all other nodes by distance. For each related pair the
rank of ``v`` among the nodes unrelated to ``u`` (1 is best) is averaged into the mean rank; the
average precision of ``u``'s related nodes in ``u``'s ranking, averaged over ``u``, is the MAP.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

import geometric

from .data import Hierarchy

__all__ = ["GEOMETRIES", "distance_fn", "init_table", "make_epoch", "make_optimizer", "pairwise_distances",
           "reconstruction"]

GEOMETRIES = ("poincare", "euclidean")


def euclidean_distance(x: jax.Array, y: jax.Array) -> jax.Array:
    """``‖x − y‖`` with derivative 0 at ``x = y`` (a masked negative may be ``u`` itself)."""
    s = jnp.sum((x - y) ** 2, axis=-1)
    positive = s > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, s, 1)), 0)


def distance_fn(geometry: str, dim: int) -> Callable[[jax.Array, jax.Array], jax.Array]:
    if geometry == "poincare":
        return geometric.PoincareBall(dim).dist
    return euclidean_distance


def manifold(geometry: str, dim: int) -> geometric.PoincareBall | None:
    return geometric.PoincareBall(dim) if geometry == "poincare" else None


def init_table(key: jax.Array, nodes: int, dim: int, dtype) -> jax.Array:
    """Uniform in [−10⁻³, 10⁻³]: all points start near the origin (Nickel & Kiela)."""
    return jax.random.uniform(key, (nodes, dim), dtype, -1e-3, 1e-3)


def make_optimizer(geometry: str, dim: int, lr: float, burn_in: int, steps_per_epoch: int
                   ) -> optax.GradientTransformation:
    """Adam (``riemannian_adam`` on the ball), at ``lr/10`` for the first ``burn_in`` epochs: the
    burn-in of Nickel & Kiela, which lets the nodes find their directions before moving out."""
    schedule = optax.join_schedules([optax.constant_schedule(lr / 10), optax.constant_schedule(lr)],
                                    [burn_in * steps_per_epoch])
    m = manifold(geometry, dim)
    return optax.adam(schedule) if m is None else geometric.optim.riemannian_adam(schedule, m)


def loss_fn(table: jax.Array, batch: jax.Array, related: jax.Array,
            distance: Callable[[jax.Array, jax.Array], jax.Array]) -> jax.Array:
    """``batch`` (B, 2 + K): columns u, v, then K negatives; ``related`` the (n, n) closure."""
    u, others = batch[:, 0], batch[:, 1:]
    d = distance(table[u][:, None, :].repeat(others.shape[1], axis=1), table[others])  # (B, 1 + K)
    masked = related[u[:, None], others[:, 1:]] | (others[:, 1:] == u[:, None])
    logits = jnp.concatenate([-d[:, :1], jnp.where(masked, -jnp.inf, -d[:, 1:])], axis=1)
    return jnp.mean(jax.nn.logsumexp(logits, axis=1) + d[:, 0])


@functools.lru_cache(maxsize=8)
def make_epoch(geometry: str, dim: int, optimizer: optax.GradientTransformation):
    """A jitted ``epoch(table, opt_state, batches, related) -> (table, opt_state, mean loss)``:
    one ``lax.scan`` over the epoch's batches (S, B, 2 + K)."""
    distance = distance_fn(geometry, dim)

    @jax.jit
    def epoch(table, opt_state, batches, related):
        def step(carry, batch):
            table, opt_state = carry
            loss, grad = jax.value_and_grad(loss_fn)(table, batch, related, distance)
            updates, opt_state = optimizer.update(grad, opt_state, table)
            return (optax.apply_updates(table, updates), opt_state), loss

        (table, opt_state), losses = jax.lax.scan(step, (table, opt_state), batches)
        return table, opt_state, jnp.mean(losses)

    return epoch


def epoch_batches(rng: np.random.Generator, hierarchy: Hierarchy, batch_size: int, negatives: int) -> np.ndarray:
    """The edges in a random order, cut into full batches, each edge with ``negatives`` uniform nodes."""
    edges = np.concatenate([hierarchy.edges, hierarchy.edges[:, ::-1]])  # both directions: d is symmetric
    edges = edges[rng.permutation(len(edges))]
    steps = max(len(edges) // batch_size, 1)
    edges = edges[:steps * batch_size] if len(edges) >= batch_size else edges[rng.integers(0, len(edges), batch_size)]
    noise = rng.integers(0, hierarchy.size, (len(edges), negatives))
    return np.concatenate([edges, noise], axis=1).reshape(steps, batch_size, 2 + negatives)


def pairwise_distances(geometry: str, table: jax.Array) -> np.ndarray:
    """The (n, n) matrix of distances between the embedded nodes."""
    distance = distance_fn(geometry, table.shape[1])
    return np.asarray(jax.jit(jax.vmap(lambda x: distance(jnp.broadcast_to(x, table.shape), table)))(table))


def reconstruction(distances: np.ndarray, related: np.ndarray) -> dict[str, float]:
    """Mean rank and mean average precision of the related pairs (Nickel & Kiela's reconstruction)."""
    n = len(distances)
    ranks, precisions = [], []
    for u in range(n):
        positive = related[u]
        if not positive.any():
            continue
        others = np.arange(n) != u
        d, label = distances[u, others], positive[others]
        unrelated = np.sort(d[~label])
        # rank of each related node among the unrelated ones: 1 + how many unrelated are closer
        ranks.extend(1 + np.searchsorted(unrelated, d[label], side="left"))
        order = np.argsort(d, kind="stable")
        hits = label[order]
        precision_at_hit = np.cumsum(hits)[hits] / (np.nonzero(hits)[0] + 1)
        precisions.append(precision_at_hit.mean())
    return {"mean_rank": float(np.mean(ranks)), "map": float(np.mean(precisions))}
