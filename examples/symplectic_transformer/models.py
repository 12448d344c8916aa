"""The three window models: linear symplectic transformer, volume-preserving transformer, transformer.

Every model maps a window of ``T = 3`` states, shape ``(..., T, d)`` with ``d = 4`` (the double
pendulum's ``(q₁, q₂, p₁, p₂)``), to the next ``T`` states. A model is a frozen dataclass
(hashable: a static ``jit`` argument) with ``init(seed, dtype) -> params`` and the pure
``apply(params, x) -> y``:

- ``lst``: :class:`geometric.nn.LinearSymplecticTransformer` (GeometricMachineLearning.jl's):
  ``L = 2`` units of [linear symplectic attention in ``q`` (the time-mixing shear ``Q ← Q + A P``,
  ``A`` a symmetric ``T × T`` matrix), a G-SympNet of 2 gradient layers of width 8 acting on each
  state, the attention in ``p``, another G-SympNet]: 280 parameters. A symplectic map of the
  window's phase space ``ℝ^{T·d}``.
- ``vpt``: the volume-preserving transformer of :mod:`examples.rigid_body.models` in dimension 4:
  3 × [volume-preserving attention (:func:`rules.volume_preserving_attention`, skew weighting),
  a volume-preserving feed-forward network of 2 blocks (:func:`rules.volume_preserving_feedforward`)].
  It preserves volume, not the symplectic form.
- ``transformer``: the standard transformer of :mod:`examples.rigid_body.models` in dimension 4:
  3 × [softmax attention + residual, tanh MLP of width 4 + residual]. No structure.
"""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

import geometric.nn
from examples.rigid_body import models as rigid_models
from examples.symplectic_transformer import data

__all__ = ["LST_OPTIONS", "MODELS", "LinearSymplecticTransformer", "RigidBodyModel", "make_model", "parameter_count"]

PyTree = Any
parameter_count = rigid_models.parameter_count
LST_OPTIONS = {"n_sympnet": 2, "upscaling_dimension": 16, "L": 2}
"""The linear symplectic transformer's size: parameter counts comparable to the other two."""


@dataclasses.dataclass(frozen=True)
class LinearSymplecticTransformer:
    """:class:`geometric.nn.LinearSymplecticTransformer` with an integer-seeded ``init``."""

    name: ClassVar[str] = "lst"
    net: geometric.nn.LinearSymplecticTransformer

    def init(self, seed: int, dtype: jnp.dtype) -> PyTree:
        return self.net.init(jax.random.key(seed), dtype)

    def apply(self, params: PyTree, x: jax.Array) -> jax.Array:
        return self.net(params, x)


@dataclasses.dataclass(frozen=True)
class RigidBodyModel:
    """A model of :mod:`examples.rigid_body.models` (NumPy-seeded ``init``) with an integer-seeded one."""

    model: rigid_models.VolumePreservingTransformer | rigid_models.StandardTransformer

    @property
    def name(self) -> str:
        return self.model.name

    def init(self, seed: int, dtype: jnp.dtype) -> PyTree:
        return self.model.init(np.random.default_rng(seed), dtype)

    def apply(self, params: PyTree, x: jax.Array) -> jax.Array:
        return self.model.apply(params, x)


MODELS = ("lst", "vpt", "transformer")
"""The models by command-line name."""


def make_model(name: str):
    """The model called ``name`` (one of :data:`MODELS`) for the double pendulum's windows.

    Raises:
        ValueError: an unknown name.
    """
    dim = data.SYSTEM.dim
    if name == "lst":
        return LinearSymplecticTransformer(geometric.nn.LinearSymplecticTransformer(dim, data.SEQ_LENGTH,
                                                                                    **LST_OPTIONS))
    if name == "vpt":
        return RigidBodyModel(rigid_models.VolumePreservingTransformer(dim=dim))
    if name == "transformer":
        return RigidBodyModel(rigid_models.StandardTransformer(dim=dim))
    raise ValueError(f"make_model: `name` must be one of {list(MODELS)}; got {name!r}.")
