"""A small vision transformer whose attention projections can live on the Stiefel manifold.

Patches ``(..., T, P)`` are embedded linearly with learned position embeddings into width ``d``,
pass ``depth`` pre-LayerNorm transformer blocks, are averaged over tokens and classified by a
linear head. Each block's multi-head attention has ``h`` heads of width ``e = d / h``; the query,
key and value projections of all heads are stacked as ``(h, d, e)`` arrays,

.. math::

    \\mathrm{head}_i(x) = \\operatorname{softmax}\\Big(\\frac{x W^Q_i (x W^K_i)^T}{\\sqrt e}\\Big)\\, x W^V_i,
    \\qquad W^Q_i, W^K_i, W^V_i \\in \\mathrm{St}(d, e) = \\{W : W^T W = I_e\\},

and the output projection, MLP, LayerNorms and head are Euclidean. :func:`manifolds` gives the
``manifolds`` pytree of :mod:`geometric.optim` (a :class:`geometric.Stiefel` per projection); the
unconstrained baseline trains the same parameters, initialised at the same orthonormal points, with
``optax.adam``. With orthonormal projections a head's queries, keys and values are isometric
copies of an ``e``-dimensional subspace of the (normalised) token, so the attention logits can
grow only through the LayerNorm gains, not by inflating the projections.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import geometric

__all__ = ["ViTConfig", "apply", "init", "manifolds", "orthonormality_error"]

PyTree = Any
PROJECTIONS = ("query", "key", "value")


class ViTConfig(NamedTuple):
    """Sizes of the vision transformer."""

    tokens: int = 16  # patches per image
    patch_dim: int = 4  # pixels per patch
    width: int = 32  # d
    heads: int = 4  # h; head width e = d / h
    depth: int = 2
    mlp_width: int = 64
    classes: int = 10


def _normal(rng: np.random.Generator, shape: tuple[int, ...], dtype: jnp.dtype, fan_in: int) -> jax.Array:
    return jnp.asarray(rng.standard_normal(shape) / math.sqrt(fan_in), dtype)


def _haar_stiefel(rng: np.random.Generator, shape: tuple[int, ...], dtype: jnp.dtype) -> jax.Array:
    """Points of St(n, p) distributed by the Haar measure, shape ``(..., n, p)``.

    The Q factor of a Gaussian matrix with the signs of ``diag(R)`` moved into it.
    """
    q, r = np.linalg.qr(rng.standard_normal(shape))
    return jnp.asarray(q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :], dtype)


def _layer_norm(dtype: jnp.dtype, d: int) -> dict[str, jax.Array]:
    return {"scale": jnp.ones(d, dtype), "bias": jnp.zeros(d, dtype)}


def init(rng: np.random.Generator, config: ViTConfig, dtype: jnp.dtype) -> dict[str, Any]:
    """Parameters (NumPy draws: no compilation); the attention projections are Haar points of St(d, e)."""
    d, h, m = config.width, config.heads, config.mlp_width
    blocks = []
    for _ in range(config.depth):
        block = {name: _haar_stiefel(rng, (h, d, d // h), dtype) for name in PROJECTIONS}
        block |= {"out": _normal(rng, (d, d), dtype, d), "out_bias": jnp.zeros(d, dtype),
                  "norm1": _layer_norm(dtype, d), "norm2": _layer_norm(dtype, d),
                  "mlp1": _normal(rng, (d, m), dtype, d), "mlp1_bias": jnp.zeros(m, dtype),
                  "mlp2": _normal(rng, (m, d), dtype, m), "mlp2_bias": jnp.zeros(d, dtype)}
        blocks.append(block)
    return {"embed": _normal(rng, (config.patch_dim, d), dtype, config.patch_dim),
            "embed_bias": jnp.zeros(d, dtype),
            "position": _normal(rng, (config.tokens, d), dtype, 2500),  # std 0.02
            "blocks": tuple(blocks), "norm": _layer_norm(dtype, d),
            "head": _normal(rng, (d, config.classes), dtype, d), "head_bias": jnp.zeros(config.classes, dtype)}


def manifolds(params: PyTree) -> PyTree:
    """The ``manifolds`` pytree: ``Stiefel(d, e)`` at every attention projection, None elsewhere."""

    def leaf(path, x):
        if getattr(path[-1], "key", None) in PROJECTIONS:
            return geometric.Stiefel(x.shape[-2], x.shape[-1])
        return None

    return jax.tree_util.tree_map_with_path(leaf, params)


def orthonormality_error(params: PyTree) -> jax.Array:
    """``max ‖WᵀW − I‖_F`` over the attention projections (0 on the manifold)."""
    errors = []
    for block in params["blocks"]:
        for name in PROJECTIONS:
            w = block[name]
            gram = jnp.swapaxes(w, -1, -2) @ w
            eye = jnp.broadcast_to(jnp.eye(w.shape[-1], dtype=w.dtype), gram.shape)
            errors.append(jnp.max(jnp.linalg.norm(gram - eye, axis=(-2, -1))))
    return jnp.max(jnp.stack(errors))


def _add(x: jax.Array, b: jax.Array) -> jax.Array:
    return x + jnp.broadcast_to(b, x.shape)


def _norm(p: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.var(x, axis=-1, keepdims=True)
    y = (x - mean) * jax.lax.rsqrt(var + 1e-5)
    return _add(y * jnp.broadcast_to(p["scale"], y.shape), p["bias"])


def _attention(block: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    b, t, d = x.shape
    h, _, e = block["query"].shape
    # One (d, 3·h·e) matmul for the stacked projections of all heads.
    w = jnp.concatenate([jnp.moveaxis(block[name], 0, 1).reshape(d, h * e) for name in PROJECTIONS], axis=1)
    qkv = (x @ w).reshape(b, t, 3, h, e)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    scores = jnp.einsum("bthe,bshe->bhts", q, k) / math.sqrt(e)
    heads = jnp.einsum("bhts,bshe->bthe", jax.nn.softmax(scores, axis=-1), v)
    return _add(heads.reshape(b, t, d) @ block["out"], block["out_bias"])


def apply(params: PyTree, patches: jax.Array) -> jax.Array:
    """Class logits ``(batch, classes)`` of patch sequences ``(batch, T, P)``."""
    x = _add(patches @ params["embed"], params["embed_bias"])
    x = x + jnp.broadcast_to(params["position"], x.shape)
    for block in params["blocks"]:
        x = x + _attention(block, _norm(block["norm1"], x))
        hidden = jax.nn.gelu(_add(_norm(block["norm2"], x) @ block["mlp1"], block["mlp1_bias"]))
        x = x + _add(hidden @ block["mlp2"], block["mlp2_bias"])
    pooled = _norm(params["norm"], jnp.mean(x, axis=-2))
    return _add(pooled @ params["head"], params["head_bias"])
