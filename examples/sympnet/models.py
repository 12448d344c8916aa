"""The three flow-map models: LA-SympNet, G-SympNet and an unconstrained MLP of the G-SympNet's size.

Every model maps a state ``z = (q, p)`` of shape ``(..., 2n)`` to the next one, ``z_k ↦ z_{k+1}``.
A model is a frozen dataclass (hashable, so it can be a static ``jit`` argument) with
``init(key, dtype) -> params`` and the pure ``apply(params, z) -> z``.

- ``la``: :class:`geometric.nn.LASympNet`, compositions of linear shears ``q ← q + S p``,
  ``p ← p + S q`` (``S`` symmetric, stored packed as :class:`rules.Symmetric`) and activation
  shears ``q ← q + a ⊙ σ(p)``, ``p ← p + a ⊙ σ(q)``. The paper's sizes (Jin et al.,
  arXiv:2001.03750, and its code): pendulum 3 layers of 2 linear sublayers, double pendulum 8
  layers of 5 sublayers, i.e. that many linear modules of ``depth`` = sublayers shears, with
  ``nhidden`` = layers − 1 activation blocks between them. A block of
  GeometricMachineLearning.jl (and :mod:`geometric.nn`) shears both ``q`` and ``p``; the paper's
  activation module shears one of them, alternately.
- ``g``: :class:`geometric.nn.GSympNet`, compositions of gradient shears
  ``q ← q + Wᵀ(a ⊙ σ(W p + b))``, ``p ← p + Wᵀ(a ⊙ σ(W q + b))``. Paper: pendulum 5 layers of
  width 30, double pendulum 8 layers of width 50 (``upscaling_dimension`` = 2 · width).
- ``mlp``: ``z ↦ z + W₃ σ(W₂ σ(W₁ z + b₁) + b₂) + b₃``, two hidden layers of the width that brings
  its parameter count closest to the G-SympNet's (the residual form starts near the identity map,
  as the SympNets do; the paper's baseline was a plain fully connected network). It is not
  symplectic.

The activation is the paper's sigmoid for all three. The SympNets are symplectic for every
parameter value: ``(∂z'/∂z)ᵀ J (∂z'/∂z) = J``.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

import jax
import jax.numpy as jnp

import geometric.nn

__all__ = ["ACTIVATIONS", "INITS", "MLP", "MODELS", "PAPER_SIZES", "Model", "SympNet", "make_model", "mlp_width", "parameter_count"]

PyTree = Any
ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {"sigmoid": jax.nn.sigmoid, "tanh": jnp.tanh}

# The paper's sizes by system: (LA layers, LA sublayers), (G layers, G width).
PAPER_SIZES = {"pendulum": ((3, 2), (5, 30)), "double_pendulum": ((8, 5), (8, 50))}


class Model(Protocol):
    """A model: a hashable description with two pure functions."""

    name: ClassVar[str]

    def init(self, key: jax.Array, dtype: jnp.dtype) -> PyTree:
        """Random parameters."""

    def apply(self, params: PyTree, z: jax.Array) -> jax.Array:
        """The next state ``(..., dim)`` after ``z`` of shape ``(..., dim)``."""


def parameter_count(params: PyTree) -> int:
    """Number of trainable numbers: the sizes of the parameter pytree's leaves (packed matrices count packed)."""
    return sum(leaf.size for leaf in jax.tree_util.tree_leaves(params))


INITS = ("paper", "gml")
"""The SympNets' initialisations: the paper's code's (near the identity) or GeometricMachineLearning.jl's."""


@dataclasses.dataclass(frozen=True)
class SympNet:
    """A :class:`geometric.nn.LASympNet` or :class:`geometric.nn.GSympNet` as a :class:`Model`.

    ``init="paper"`` draws every weight from N(0, 0.01²) and sets the biases to zero, as the
    paper's code does: the network starts next to the identity map. ``init="gml"`` keeps
    :mod:`geometric.nn`'s initialisation (GeometricMachineLearning.jl's Glorot-uniform), whose
    weights of size ``±√(6/size)`` are large for the pendulum's ``n = 1`` (``±2.4``): there the
    LA-SympNet starts far from the flow map and does not train in a short run.
    """

    net: geometric.nn.LASympNet | geometric.nn.GSympNet
    kind: str  # "la" or "g"
    initialisation: str = "paper"

    @property
    def name(self) -> str:
        return self.kind

    def init(self, key: jax.Array, dtype: jnp.dtype) -> PyTree:
        params = self.net.init(key, dtype)
        if self.initialisation == "gml":
            return params
        leaves, treedef = jax.tree_util.tree_flatten_with_path(params)
        keys = jax.random.split(jax.random.fold_in(key, 1), len(leaves))
        drawn = [jnp.zeros_like(leaf) if any(getattr(k, "key", None) == "bias" for k in path)
                 else 0.01 * jax.random.normal(k, leaf.shape, leaf.dtype)
                 for k, (path, leaf) in zip(keys, leaves, strict=True)]
        return jax.tree_util.tree_unflatten(treedef, drawn)

    def apply(self, params: PyTree, z: jax.Array) -> jax.Array:
        return self.net(params, z)


def mlp_width(dim: int, target: int) -> int:
    """The hidden width ``w`` whose two-hidden-layer MLP count ``w² + (2 dim + 2) w + dim`` is nearest ``target``."""
    b = 2 * dim + 2
    w = (-b + math.sqrt(b * b + 4 * (target - dim))) / 2
    return min((max(1, math.floor(w)), math.ceil(w)), key=lambda v: abs(v * v + b * v + dim - target))


@dataclasses.dataclass(frozen=True)
class MLP:
    """``z + W₃ σ(W₂ σ(W₁ z + b₁) + b₂) + b₃``: unconstrained, residual, two hidden layers of ``width``."""

    name: ClassVar[str] = "mlp"
    dim: int
    width: int
    activation: Callable[[jax.Array], jax.Array] = jax.nn.sigmoid

    def init(self, key: jax.Array, dtype: jnp.dtype) -> PyTree:
        k1, k2, k3 = jax.random.split(key, 3)
        sizes = ((k1, self.dim, self.width), (k2, self.width, self.width), (k3, self.width, self.dim))
        # Glorot-normal hidden layers; the output layer small, so that the map starts near the identity.
        layers = []
        for i, (k, n_in, n_out) in enumerate(sizes):
            scale = math.sqrt(2.0 / (n_in + n_out)) * (0.01 if i == 2 else 1.0)
            layers.append({"w": scale * jax.random.normal(k, (n_in, n_out), dtype), "b": jnp.zeros(n_out, dtype)})
        return tuple(layers)

    def apply(self, params: PyTree, z: jax.Array) -> jax.Array:
        first, second, out = params
        hidden = self.activation(_affine(z, first))
        hidden = self.activation(_affine(hidden, second))
        return z + _affine(hidden, out)


def _affine(x: jax.Array, layer: dict[str, jax.Array]) -> jax.Array:
    y = x @ layer["w"]
    return y + jnp.broadcast_to(layer["b"], y.shape)  # explicit: the tests forbid implicit rank promotion


MODELS = ("la", "g", "mlp")
"""The models by command-line name."""


def make_model(name: str, system: str, dim: int, activation: str = "sigmoid", init: str = "paper") -> Model:
    """The model ``name`` (one of :data:`MODELS`) at the paper's size for ``system``.

    Raises:
        ValueError: an unknown model, system or activation.
    """
    if name not in MODELS:
        raise ValueError(f"make_model: `name` must be one of {list(MODELS)}; got {name!r}.")
    if system not in PAPER_SIZES:
        raise ValueError(f"make_model: `system` must be one of {sorted(PAPER_SIZES)}; got {system!r}.")
    if init not in INITS:
        raise ValueError(f"make_model: `init` must be one of {list(INITS)}; got {init!r}.")
    sigma = ACTIVATIONS[activation]
    (la_layers, la_sublayers), (g_layers, g_width) = PAPER_SIZES[system]
    if name == "la":
        return SympNet(geometric.nn.LASympNet(dim, depth=la_sublayers, nhidden=la_layers - 1, activation=sigma), "la",
                       init)
    # GeometricMachineLearning.jl's upscaling dimension is twice the hidden width.
    g = geometric.nn.GSympNet(dim, upscaling_dimension=2 * g_width, n_layers=g_layers, activation=sigma)
    if name == "g":
        return SympNet(g, "g", init)
    target = parameter_count(jax.eval_shape(functools.partial(g.init, dtype=jnp.float32), jax.random.key(0)))
    return MLP(dim, mlp_width(dim, target), sigma)
