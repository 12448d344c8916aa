r"""Structure-preserving networks: SympNets, symplectic attention, symplectic autoencoders.

The models of GeometricMachineLearning.jl, as pure JAX functions with explicit parameters. A phase
space point is one array ``z = (q, p)`` of shape ``(..., 2n)`` (positions first), the symplectic
form ``Ω = J_{2n} = [[0, I], [-I, 0]]``, as in :class:`geometric.SymplecticStiefel`. Every layer
and network here is an exactly symplectic map, ``(∂z'/∂z)ᵀ J (∂z'/∂z) = J``, whatever its
parameters.

* layers: :func:`linear_q`/:func:`linear_p`, :func:`activation_q`/:func:`activation_p`,
  :func:`gradient_q`/:func:`gradient_p` (Jin et al. 2020), and the attention layers
  :func:`linear_symplectic_attention_q`/``_p``, :func:`symplectic_attention_q`/``_p``;
* networks (frozen dataclasses with ``init(key, dtype) -> params`` and
  ``__call__(params, z) -> z``): :class:`LASympNet`, :class:`GSympNet`,
  :class:`LinearSymplecticTransformer`, :class:`SymplecticAutoencoder`;
* model reduction: :func:`cotangent_lift` (proper symplectic decomposition),
  :func:`psd_encode`, :func:`psd_decode`, :func:`reduced_vector_field`;
* data: :func:`trajectory_windows`, :func:`batch`.
"""
from ._attention import LinearSymplecticTransformer as LinearSymplecticTransformer
from ._attention import linear_symplectic_attention_p as linear_symplectic_attention_p
from ._attention import linear_symplectic_attention_q as linear_symplectic_attention_q
from ._attention import symplectic_attention_p as symplectic_attention_p
from ._attention import symplectic_attention_q as symplectic_attention_q
from ._autoencoder import SymplecticAutoencoder as SymplecticAutoencoder
from ._autoencoder import cotangent_lift as cotangent_lift
from ._autoencoder import psd_decode as psd_decode
from ._autoencoder import psd_encode as psd_encode
from ._autoencoder import reduced_vector_field as reduced_vector_field
from ._data import batch as batch
from ._data import trajectory_windows as trajectory_windows
from ._sympnet import GSympNet as GSympNet
from ._sympnet import LASympNet as LASympNet
from ._sympnet import activation_p as activation_p
from ._sympnet import activation_q as activation_q
from ._sympnet import gradient_p as gradient_p
from ._sympnet import gradient_q as gradient_q
from ._sympnet import linear_p as linear_p
from ._sympnet import linear_q as linear_q

__all__ = ["GSympNet", "LASympNet", "LinearSymplecticTransformer", "SymplecticAutoencoder",
           "activation_p", "activation_q", "batch", "cotangent_lift", "gradient_p", "gradient_q",
           "linear_p", "linear_q", "linear_symplectic_attention_p", "linear_symplectic_attention_q",
           "psd_decode", "psd_encode", "reduced_vector_field", "symplectic_attention_p",
           "symplectic_attention_q", "trajectory_windows"]
