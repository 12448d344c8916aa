"""Tree-shaped hierarchies generated at run time, and the transitive closure that is embedded.

Nickel & Kiela (2017) embed the transitive closure of WordNet's noun hierarchy: every pair
(ancestor, descendant) is an edge. Here the hierarchy is generated, so nothing is downloaded: a
balanced tree (every inner node has ``branching`` children), or a random "WordNet-like" tree grown
by preferential attachment (a few nodes get many children, most get few or none, depths vary).
"""
from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["Hierarchy", "balanced_tree", "from_parents", "random_tree"]


@dataclasses.dataclass(frozen=True)
class Hierarchy:
    """A rooted tree on nodes ``0 … n−1`` (node 0 is the root) and its transitive closure."""

    parent: np.ndarray     # (n,) int: the parent of each node, −1 for the root
    depth: np.ndarray      # (n,) int: the root has depth 0
    edges: np.ndarray      # (E, 2) int: every (ancestor, descendant) pair, E = Σ depth
    related: np.ndarray    # (n, n) bool: u is an ancestor or a descendant of v (u ≠ v)

    @property
    def size(self) -> int:
        return len(self.parent)


def from_parents(parent: np.ndarray) -> Hierarchy:
    """The hierarchy of a parent array (parents come before their children)."""
    parent = np.asarray(parent, np.int64)
    n = len(parent)
    if n < 2 or parent[0] != -1 or np.any(parent[1:] < 0) or np.any(parent[1:] >= np.arange(1, n)):
        raise ValueError("parent must list −1 for node 0 and, for every later node, an earlier node")
    depth = np.zeros(n, np.int64)
    ancestors = np.zeros((n, n), bool)  # ancestors[v, u]: u is an ancestor of v
    for v in range(1, n):
        p = parent[v]
        depth[v] = depth[p] + 1
        ancestors[v] = ancestors[p]
        ancestors[v, p] = True
    descendant, ancestor = np.nonzero(ancestors)
    return Hierarchy(parent, depth, np.stack([ancestor, descendant], axis=1),
                     ancestors | ancestors.T)


def balanced_tree(branching: int, depth: int) -> Hierarchy:
    """Every node above depth ``depth`` has ``branching`` children: Σₖ branchingᵏ nodes."""
    if branching < 1 or depth < 1:
        raise ValueError(f"branching and depth must be ≥ 1; got {branching}, {depth}")
    parent, level = [-1], [0]
    for _ in range(depth):
        next_level = []
        for p in level:
            for _ in range(branching):
                parent.append(p)
                next_level.append(len(parent) - 1)
        level = next_level
    return from_parents(np.asarray(parent))


def random_tree(nodes: int, seed: int = 0, max_depth: int = 8) -> Hierarchy:
    """A tree grown node by node; each new node picks its parent with probability ∝ 1 + its number
    of children, among the nodes above ``max_depth`` (preferential attachment): heavy-tailed
    branching, like WordNet's hyponym counts."""
    if nodes < 2:
        raise ValueError(f"nodes must be ≥ 2; got {nodes}")
    rng = np.random.default_rng(seed)
    parent, depth, children = [-1], [0], [0]
    for v in range(1, nodes):
        weight = (1.0 + np.asarray(children)) * (np.asarray(depth) < max_depth)
        p = int(rng.choice(v, p=weight / weight.sum()))
        parent.append(p)
        depth.append(depth[p] + 1)
        children[p] += 1
        children.append(0)
    return from_parents(np.asarray(parent))
