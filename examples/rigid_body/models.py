"""The three rigid-body models: volume-preserving transformer, VP feed-forward network, transformer.

Every model maps a window of ``T = 3`` states, shape ``(..., T, d)`` with ``d = 3``, to the next
``T`` states. A model is a frozen dataclass of its sizes (hashable, so it can be a static ``jit``
argument) with two methods, ``init(rng, dtype) -> params`` (from a NumPy generator) and the pure
``apply(params, x) -> y`` (architectures of docs/derivations/volume-preserving.md#transformer):

- ``vpt``: the volume-preserving transformer, ``L = 3`` repetitions of [volume-preserving attention
  with skew weighting (:func:`rules.volume_preserving_attention`), a volume-preserving feed-forward
  network with 2 blocks], no residual connection around the attention. The skew matrix ``A`` is
  stored packed (:class:`rules.SkewSymmetric`, ``d(d−1)/2 = 3`` numbers), so the count is honest:
  162 parameters.
- ``vpff``: the volume-preserving feed-forward network alone, 6 blocks: 135 parameters. It acts on
  each state of the window separately, so it learns the map ``z(t) ↦ z(t + 3h)``.
- ``transformer``: a standard transformer of about the same size, 3 repetitions of [single-head
  softmax attention with a residual connection, a residual tanh MLP of width ``d``]: 153 parameters.

A volume-preserving feed-forward block is the four layers Lower(id, no bias), Upper(id, bias),
Lower(tanh, bias), Upper(tanh, bias), where Lower/Upper is ``x ↦ x + σ(Wx + b)`` with a strictly
lower/upper triangular ``W`` (:func:`rules.volume_preserving_feedforward`); a network of ``n``
blocks ends with Lower(id, no bias), Upper(id, bias). Each such layer's Jacobian is unit
triangular, and the skew-weighted attention's Jacobian has determinant 1 (docs/derivations/volume-preserving.md#determinant), so ``vpt``
and ``vpff`` are volume-preserving maps of the window; ``transformer`` is not.

Initialisation: weights (packed entries included) are N(0, σ²) with ``σ = 0.5/√d``, biases zero,
drawn with NumPy (no compilation, unlike a jitted or op-by-op ``jax.random`` init of many tiny
arrays). In short runs (a few thousand steps) ``σ = 1/√d`` starts the VPT far off (initial loss
≈ 30) and ends worse, and ``σ = 0.1/√d`` starts it next to the identity map, where training stalls
at the "copy the input" solution (relative loss ≈ 0.17 on this data).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

import jax
import jax.numpy as jnp
import numpy as np

import rules

__all__ = ["MODELS", "Model", "StandardTransformer", "VolumePreservingFeedForward",
           "VolumePreservingTransformer", "make_model", "parameter_count"]

PyTree = Any
DIM = 3


class Model(Protocol):
    """A model: a hashable description (usable as a static ``jit`` argument) with two pure functions."""

    name: ClassVar[str]

    def init(self, rng: np.random.Generator, dtype: jnp.dtype) -> PyTree:
        """Random parameters."""

    def apply(self, params: PyTree, x: jax.Array) -> jax.Array:
        """The next ``T`` states ``(..., T, d)`` after the window ``x`` of shape ``(..., T, d)``."""


def parameter_count(params: PyTree) -> int:
    """Number of trainable numbers: the sizes of the parameter pytree's leaves."""
    return sum(leaf.size for leaf in jax.tree_util.tree_leaves(params))


def identity(x: jax.Array) -> jax.Array:
    return x


# -- volume-preserving feed-forward network ----------------------------------------------------
# A layer is (triangle, activation, has_bias).
_BLOCK = (("lower", identity, False), ("upper", identity, True), ("lower", jnp.tanh, True), ("upper", jnp.tanh, True))
_CLOSING = (("lower", identity, False), ("upper", identity, True))


def _vpff_layers(n_blocks: int) -> tuple[tuple[str, Callable, bool], ...]:
    return _BLOCK * n_blocks + _CLOSING


def _normal(rng: np.random.Generator, shape: int | tuple[int, ...], dtype: jnp.dtype, dim: int) -> jax.Array:
    """Entries drawn from N(0, σ²), σ = 0.5/√dim (module docstring)."""
    return jnp.asarray(rng.standard_normal(shape) * (0.5 / math.sqrt(dim)), dtype)


def _init_vpff(rng: np.random.Generator, dtype: jnp.dtype, n_blocks: int, dim: int) -> tuple[dict, ...]:
    params = []
    for triangle, _, has_bias in _vpff_layers(n_blocks):
        packed = _normal(rng, dim * (dim - 1) // 2, dtype, dim)
        weight = (rules.StrictlyLower if triangle == "lower" else rules.StrictlyUpper)(packed, dim)
        params.append({"weight": weight, "bias": jnp.zeros(dim, dtype)} if has_bias else {"weight": weight})
    return tuple(params)


def _apply_vpff(params: tuple[dict, ...], x: jax.Array, n_blocks: int) -> jax.Array:
    for layer, (_, activation, _) in zip(params, _vpff_layers(n_blocks), strict=True):
        x = rules.volume_preserving_feedforward(x, layer["weight"], layer.get("bias"), activation=activation)
    return x


@dataclasses.dataclass(frozen=True)
class VolumePreservingFeedForward:
    """The volume-preserving feed-forward network: ``n_blocks`` blocks and the closing pair."""

    name: ClassVar[str] = "vpff"
    n_blocks: int = 6
    dim: int = DIM

    def init(self, rng: np.random.Generator, dtype: jnp.dtype) -> tuple[dict, ...]:
        return _init_vpff(rng, dtype, self.n_blocks, self.dim)

    def apply(self, params: tuple[dict, ...], x: jax.Array) -> jax.Array:
        return _apply_vpff(params, x, self.n_blocks)


# -- volume-preserving transformer --------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class VolumePreservingTransformer:
    """``depth`` repetitions of [VP attention (skew weighting), VP feed-forward of ``n_blocks``]."""

    name: ClassVar[str] = "vpt"
    depth: int = 3
    n_blocks: int = 2
    dim: int = DIM

    def init(self, rng: np.random.Generator, dtype: jnp.dtype) -> tuple[dict, ...]:
        params = []
        for _ in range(self.depth):
            packed = _normal(rng, self.dim * (self.dim - 1) // 2, dtype, self.dim)
            params.append({"attention": rules.SkewSymmetric(packed, self.dim),
                           "feedforward": _init_vpff(rng, dtype, self.n_blocks, self.dim)})
        return tuple(params)

    def apply(self, params: tuple[dict, ...], x: jax.Array) -> jax.Array:
        for layer in params:
            x = rules.volume_preserving_attention(x, layer["attention"], weighting="skew")
            x = _apply_vpff(layer["feedforward"], x, self.n_blocks)
        return x


# -- standard transformer -----------------------------------------------------------------------


def _affine(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
    y = x @ w.T
    return y + jnp.broadcast_to(b, y.shape)


@dataclasses.dataclass(frozen=True)
class StandardTransformer:
    """``depth`` repetitions of [softmax attention + residual, tanh MLP of width ``dim`` + residual]."""

    name: ClassVar[str] = "transformer"
    depth: int = 3
    dim: int = DIM

    def init(self, rng: np.random.Generator, dtype: jnp.dtype) -> tuple[dict, ...]:
        params = []
        for _ in range(self.depth):
            block = {name: _normal(rng, (self.dim, self.dim), dtype, self.dim)
                     for name in ("query", "key", "value", "w1", "w2")}
            params.append(block | {"b1": jnp.zeros(self.dim, dtype), "b2": jnp.zeros(self.dim, dtype)})
        return tuple(params)

    def apply(self, params: tuple[dict, ...], x: jax.Array) -> jax.Array:
        scale = 1 / math.sqrt(x.shape[-1])
        for block in params:
            q, k, v = x @ block["query"], x @ block["key"], x @ block["value"]
            weights = jax.nn.softmax(scale * (q @ k.mT), axis=-1)  # (..., T, T), rows sum to 1
            x = x + weights @ v
            x = x + _affine(jnp.tanh(_affine(x, block["w1"], block["b1"])), block["w2"], block["b2"])
        return x


MODELS: dict[str, type] = {cls.name: cls for cls in (VolumePreservingTransformer, VolumePreservingFeedForward,
                                                     StandardTransformer)}
"""The models of the paper's comparison, by command-line name; their defaults are the paper's sizes."""


def make_model(name: str) -> Model:
    """The model called ``name`` (one of :data:`MODELS`) at its default size."""
    if name not in MODELS:
        raise ValueError(f"make_model: `name` must be one of {sorted(MODELS)}; got {name!r}.")
    return MODELS[name]()
