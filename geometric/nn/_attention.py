r"""Symplectic attention and the linear symplectic transformer (Brantner, de Romemont, Kraus & Meng).

A sequence of ``T`` phase-space points is an array ``Z`` of shape ``(..., T, 2n)``: row ``t`` is
``z_t = (q_t, p_t)``, and ``Q, P`` are the ``T × n`` halves. The attention layers mix the time
steps; they are symplectic *on the product space*: for the flattened ``vec(Z) ∈ ℝ^{2nT}`` (row
after row) the form is ``Ω_T = I_T ⊗ J_{2n}``, and every layer's Jacobian ``M`` satisfies
``Mᵀ Ω_T M = Ω_T`` (``docs/derivations/symplectic-networks.md#attention``). Each is again a shear
``Q ↦ Q + ∇_P F(P)`` (or in ``P``) with a potential ``F``:

* linear symplectic attention: ``F(P) = ½ tr(Pᵀ A P)``, ``A`` a symmetric ``T × T``:
  ``Q ↦ Q + A P``;
* symplectic attention: ``F(P) = log Σ_{s,t} exp(C_{st})``, ``C = P A Pᵀ`` the correlations of
  the time steps: ``Q ↦ Q + σ(C) P Aᵀ + σ(C)ᵀ P A`` with ``σ`` the softmax over all ``T²``
  entries (GeometricMachineLearning.jl's ``MatrixSoftmax``).

References:
  B. Brantner, G. de Romemont, M. Kraus, Z. Li, "Structure-preserving transformers for learning
  parametrized Hamiltonian systems", arXiv:2312.11166; GeometricMachineLearning.jl's
  ``LinearSymplecticAttention``, ``SymplecticAttention`` and ``LinearSymplecticTransformer``.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

import rules
from rules.internal import REAL_DTYPES, check_array

from .._core.checks import check_bool_field, check_int_field, check_real_dtype
from ._sympnet import (
    Activation,
    GSympNet,
    check_phase_point,
    check_symmetric,
    glorot_uniform,
    halves,
)

__all__ = ["LinearSymplecticTransformer", "linear_symplectic_attention_p",
           "linear_symplectic_attention_q", "symplectic_attention_p", "symplectic_attention_q"]


def linear_symplectic_attention_q(z: jax.Array, a: rules.Symmetric) -> jax.Array:
    r"""Linear symplectic attention in q: ``(Q, P) ↦ (Q + A P, P)``, mixing the time steps.

    .. math::
        Q' = Q + A P = Q + \nabla_P F, \qquad F(P) = \tfrac12 \operatorname{tr}(P^T A P),
        \quad A = A^T \in \mathbb{R}^{T\times T},

    GeometricMachineLearning.jl's ``LinearSymplecticAttentionQ`` (there ``Q ↦ Q + P A`` on
    ``n × T`` columns; here the transpose). Symplectic on the product space (module docstring).

    Args:
      z: sequences of phase-space points, shape ``(..., T, 2n)``, float32 or float64.
      a: the symmetric ``T × T`` weight, a :class:`rules.Symmetric` (``T(T+1)/2`` entries).

    Returns:
      ``z'`` of the shape of ``z``.

    Raises:
      TypeError: ``a`` is not a :class:`rules.Symmetric`, or ``z`` is not float32/float64.
      ValueError: the shapes do not match.

    Examples:
      >>> import jax.numpy as jnp, rules, geometric.nn as gnn
      >>> a = rules.Symmetric(jnp.array([0.0, 1.0, 0.0], jnp.float32), 2)  # swaps the steps
      >>> z = jnp.array([[0.0, 1.0], [0.0, 2.0]], jnp.float32)  # T = 2 steps of (q, p)
      >>> gnn.linear_symplectic_attention_q(z, a)
      Array([[2., 1.],
             [1., 2.]], dtype=float32)
    """
    return _linear_attention("linear_symplectic_attention_q", z, a, upper=True)


def linear_symplectic_attention_p(z: jax.Array, a: rules.Symmetric) -> jax.Array:
    r"""Linear symplectic attention in p: ``(Q, P) ↦ (Q, P + A Q)``, ``A = Aᵀ`` of size ``T × T``.

    Arguments, returns and errors as :func:`linear_symplectic_attention_q`.

    Examples:
      >>> import jax.numpy as jnp, rules, geometric.nn as gnn
      >>> a = rules.Symmetric(jnp.array([1.0, 1.0, 1.0], jnp.float32), 2)
      >>> gnn.linear_symplectic_attention_p(jnp.array([[1.0, 0.0], [2.0, 0.0]], jnp.float32), a)
      Array([[1., 3.],
             [2., 3.]], dtype=float32)
    """
    return _linear_attention("linear_symplectic_attention_p", z, a, upper=False)


def _linear_attention(fname: str, z: jax.Array, a: rules.Symmetric, *, upper: bool) -> jax.Array:
    n = check_phase_point(fname, z, ndim=2)
    check_symmetric(fname, "a", a, z.shape[-2])
    q, p = halves(z, n)
    weight = a.dense()
    if upper:
        return jnp.concatenate([q + weight @ p, p], axis=-1)
    return jnp.concatenate([q, p + weight @ q], axis=-1)


def symplectic_attention_q(z: jax.Array, a: rules.Symmetric | jax.Array) -> jax.Array:
    r"""Symplectic attention in q: ``Q ↦ Q + ∇_P log Σ_{s,t} exp((P A Pᵀ)_{st})``.

    .. math::
        C = P A P^T \in \mathbb{R}^{T\times T}, \qquad
        \Sigma = \frac{\exp C}{\sum_{s,t} \exp C_{st}}, \qquad
        Q' = Q + \Sigma P A^T + \Sigma^T P A \ \ (= Q + 2\Sigma P A \text{ for } A = A^T),

    GeometricMachineLearning.jl's ``SymplecticAttentionQ`` with its default ``MatrixSoftmax``
    (transposed to rows of time steps). The update is the gradient of a potential of ``P``, so the
    layer is symplectic on the product space (module docstring) for every ``A``.

    Args:
      z: sequences of phase-space points, shape ``(..., T, 2n)``, float32 or float64.
      a: the ``n × n`` weight: a :class:`rules.Symmetric` (GeometricMachineLearning.jl's
        ``symmetric=true``) or any ``(n, n)`` array (``symmetric=false``).

    Returns:
      ``z'`` of the shape of ``z``.

    Raises:
      TypeError: an array is not float32/float64, or ``a`` is neither an array nor a
        :class:`rules.Symmetric`.
      ValueError: the shapes do not match.

    Examples:
      >>> import jax.numpy as jnp, rules, geometric.nn as gnn
      >>> a = rules.Symmetric(jnp.array([1.0], jnp.float32), 1)
      >>> z = jnp.array([[0.0, 1.0], [0.0, -1.0]], jnp.float32)  # C = [[1, -1], [-1, 1]]
      >>> gnn.symplectic_attention_q(z, a)  # 2 Σ P A = ±(e - 1/e)/(e + 1/e) = ±tanh(1)
      Array([[ 0.7615941,  1.       ],
             [-0.7615941, -1.       ]], dtype=float32)
    """
    return _attention("symplectic_attention_q", z, a, upper=True)


def symplectic_attention_p(z: jax.Array, a: rules.Symmetric | jax.Array) -> jax.Array:
    r"""Symplectic attention in p: ``P ↦ P + ∇_Q log Σ_{s,t} exp((Q A Qᵀ)_{st})``.

    Arguments, returns and errors as :func:`symplectic_attention_q`.

    Examples:
      >>> import jax.numpy as jnp, geometric.nn as gnn
      >>> a = jnp.array([[0.0]], jnp.float32)  # C = 0: Σ uniform, and A = 0 moves nothing
      >>> gnn.symplectic_attention_p(jnp.array([[1.0, 2.0], [3.0, 4.0]], jnp.float32), a)
      Array([[1., 2.],
             [3., 4.]], dtype=float32)
    """
    return _attention("symplectic_attention_p", z, a, upper=False)


def _attention(fname: str, z: jax.Array, a: rules.Symmetric | jax.Array, *,
               upper: bool) -> jax.Array:
    n = check_phase_point(fname, z, ndim=2)
    if isinstance(a, rules.Symmetric):
        check_symmetric(fname, "a", a, n)
        weight, symmetric = a.dense(), True
    else:
        check_array(fname, "a", a, dtypes=REAL_DTYPES)
        if a.shape != (n, n):
            raise ValueError(f"{fname}: `a` must have shape ({n}, {n}) (or be a rules.Symmetric "
                             f"with n = {n}); got {tuple(a.shape)}.")
        weight, symmetric = a, False
    q, p = halves(z, n)
    x = p if upper else q
    xa = x @ weight  # (..., T, n): row t is (A ᵀ x_t)ᵀ
    c = jnp.einsum("...sn,...tn->...st", xa, x)  # C_st = x_s A x_tᵀ
    t = c.shape[-1]
    soft = jax.nn.softmax(c.reshape(*c.shape[:-2], t * t), axis=-1).reshape(c.shape)
    if symmetric:
        step = 2 * soft @ xa
    else:
        step = soft @ (x @ weight.T) + jnp.swapaxes(soft, -1, -2) @ xa
    return jnp.concatenate([q + step, p] if upper else [q, p + step], axis=-1)


@dataclasses.dataclass(frozen=True)
class LinearSymplecticTransformer:
    r"""The linear symplectic transformer (Brantner et al., GeometricMachineLearning.jl).

    ``L`` units, each::

        linear symplectic attention in q,  n_sympnet gradient layers (a GSympNet),
        linear symplectic attention in p,  n_sympnet gradient layers (a GSympNet)

    The gradient layers act on every time step alike (:class:`GSympNet` with
    ``upscaling_dimension``, ``n_layers = n_sympnet``, ``activation``, ``init_upper``); the
    attention layers mix the ``seq_length`` time steps (:func:`linear_symplectic_attention_q`,
    ``_p``). The map ``(..., seq_length, dim) → (..., seq_length, dim)`` is symplectic on the
    product space (``Ω = I_T ⊗ J_dim``).

    Args:
      dim: the phase-space dimension ``2n`` of one time step (even).
      seq_length: the number of time steps ``T``.
      n_sympnet: gradient layers per SympNet block (default 2).
      upscaling_dimension: of the gradient layers (even; None, the default, means ``2 · dim``).
      L: the number of transformer units (default 1).
      activation: the gradient layers' elementwise ``σ`` (default ``jnp.tanh``).
      init_upper: each SympNet block starts with a q-layer (default True).

    Parameters (:meth:`init`): a tuple of ``L`` dicts ``{"attention_q": rules.Symmetric (T × T),
    "sympnet_q": GSympNet params, "attention_p": rules.Symmetric, "sympnet_p": GSympNet params}``
    (``sympnet_q`` follows the q-attention). Initialised as GeometricMachineLearning.jl does:
    the attention weights uniform on ``±√(6/(T(T+1)/2))`` (its ``GlorotUniform`` on the packed
    entries), the gradient layers as :meth:`GSympNet.init`.

    Raises:
      TypeError, ValueError: a field has the wrong type or value (the message names it).

    Examples:
      >>> import jax, jax.numpy as jnp, geometric.nn as gnn
      >>> net = gnn.LinearSymplecticTransformer(4, 3)
      >>> params = net.init(jax.random.PRNGKey(0))
      >>> net(params, jnp.ones((8, 3, 4), jnp.float32)).shape  # 8 sequences of 3 steps
      (8, 3, 4)
    """

    dim: int
    seq_length: int
    _: dataclasses.KW_ONLY
    n_sympnet: int = 2
    upscaling_dimension: int | None = None
    L: int = 1
    activation: Activation = jnp.tanh
    init_upper: bool = True

    def __post_init__(self) -> None:
        owner = "LinearSymplecticTransformer"
        object.__setattr__(self, "seq_length",
                           check_int_field(owner, "seq_length", self.seq_length))
        object.__setattr__(self, "n_sympnet", check_int_field(owner, "n_sympnet", self.n_sympnet))
        object.__setattr__(self, "L", check_int_field(owner, "L", self.L))
        check_bool_field(owner, "init_upper", self.init_upper)
        try:
            sympnet = GSympNet(self.dim, upscaling_dimension=self.upscaling_dimension,
                               n_layers=self.n_sympnet, activation=self.activation,
                               init_upper=self.init_upper)
        except (TypeError, ValueError) as error:
            raise type(error)(str(error).replace("GSympNet", owner)) from None
        object.__setattr__(self, "dim", sympnet.dim)
        object.__setattr__(self, "upscaling_dimension", sympnet.upscaling_dimension)

    @property
    def sympnet(self) -> GSympNet:
        """The :class:`GSympNet` of each SympNet block."""
        return GSympNet(self.dim, upscaling_dimension=self.upscaling_dimension,
                        n_layers=self.n_sympnet, activation=self.activation,
                        init_upper=self.init_upper)

    def init(self, key: jax.Array, dtype: Any = jnp.float32) -> tuple[dict[str, Any], ...]:
        """Random parameters (GeometricMachineLearning.jl's initialisation, see the class).

        Args:
          key: a PRNG key.
          dtype: float32 (default) or float64.

        Returns:
          the parameter pytree described in the class docstring.
        """
        dtype = check_real_dtype("LinearSymplecticTransformer.init", dtype)
        t = self.seq_length
        size = rules.Symmetric.packed_size(t)
        sympnet = self.sympnet
        units = []
        for k in jax.random.split(key, self.L):
            k_aq, k_sq, k_ap, k_sp = jax.random.split(k, 4)
            units.append({"attention_q": rules.Symmetric(glorot_uniform(k_aq, (size,), dtype), t),
                          "sympnet_q": sympnet.init(k_sq, dtype),
                          "attention_p": rules.Symmetric(glorot_uniform(k_ap, (size,), dtype), t),
                          "sympnet_p": sympnet.init(k_sp, dtype)})
        return tuple(units)

    def __call__(self, params: tuple[dict[str, Any], ...], z: jax.Array) -> jax.Array:
        """The network applied to ``z`` of shape ``(..., seq_length, dim)``."""
        fname = "LinearSymplecticTransformer.__call__"
        check_phase_point(fname, z, ndim=2)
        if z.shape[-2:] != (self.seq_length, self.dim):
            raise ValueError(f"{fname}: `z` must have shape (..., {self.seq_length}, {self.dim}); "
                             f"got {tuple(z.shape)}.")
        if len(params) != self.L:
            raise ValueError(f"{fname}: `params` must hold {self.L} units; got {len(params)}.")
        sympnet = self.sympnet
        for unit in params:
            z = sympnet(unit["sympnet_q"], linear_symplectic_attention_q(z, unit["attention_q"]))
            z = sympnet(unit["sympnet_p"], linear_symplectic_attention_p(z, unit["attention_p"]))
        return z
