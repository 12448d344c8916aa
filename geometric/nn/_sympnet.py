r"""SympNets (Jin, Zhang, Zhu, Tang & Karniadakis 2020): symplectic shears in ``q`` and ``p``.

Every layer changes one half of ``z = (q, p)`` by a function of the other half:

.. math::
    \text{q-layer:}\ (q, p) \mapsto (q + f(p), p), \qquad
    \text{p-layer:}\ (q, p) \mapsto (q, p + f(q)),

with ``∂f`` symmetric: ``f = ∇V`` for a potential ``V``. The Jacobian ``[[I, ∂f], [0, I]]`` then
satisfies ``Mᵀ J M = J`` (``docs/derivations/symplectic-networks.md#shears``), whatever the
parameters. Three kinds of ``f`` (the paper's modules, GeometricMachineLearning.jl's layers):

* linear: ``f(p) = S p``, ``S`` a :class:`rules.Symmetric` (``V = ½ pᵀ S p``);
* activation: ``f(p) = a ⊙ σ(p)`` (``V = Σ_i a_i Σ(p_i)``, ``Σ' = σ``);
* gradient: ``f(p) = Wᵀ(a ⊙ σ(W p + b))`` (``V = Σ_i a_i Σ((W p + b)_i)``).

:class:`LASympNet` composes linear and activation layers, :class:`GSympNet` gradient layers, as
GeometricMachineLearning.jl's ``LASympNet`` and ``GSympNet`` architectures do.

References:
  P. Jin, Z. Zhang, A. Zhu, Y. Tang, G. E. Karniadakis, "SympNets: intrinsic structure-preserving
  symplectic networks for identifying Hamiltonian systems", Neural Networks 132 (2020),
  arXiv:2001.03750.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

import rules
from rules.internal import REAL_DTYPES, check_array

from .._core.checks import check_bool_field, check_int_field, check_real_dtype

__all__ = ["Activation", "GSympNet", "LASympNet", "activation_p", "activation_q", "as_row",
           "check_activation", "check_phase_point", "check_symmetric", "check_vector",
           "glorot_uniform", "gradient_p", "gradient_q", "linear_p", "linear_q"]

Activation = Callable[[jax.Array], jax.Array]


# ----------------------------------------------------------------------------------------------
# Checks and initialisation shared with the attention layers


def check_phase_point(fname: str, z: Any, *, argname: str = "z", ndim: int = 1) -> int:
    """Check a phase-space array ``(..., 2n)`` (``ndim`` = 2: ``(..., T, 2n)``); return ``n``."""
    check_array(fname, argname, z, dtypes=REAL_DTYPES)
    expected = "(..., 2n)" if ndim == 1 else "(..., T, 2n)"
    if z.ndim < ndim or z.shape[-1] % 2 or z.shape[-1] == 0:
        raise ValueError(f"{fname}: `{argname}` must have shape {expected} with an even, nonzero "
                         f"last axis (positions q, then momenta p); got {tuple(z.shape)}.")
    return z.shape[-1] // 2


def check_symmetric(fname: str, argname: str, s: Any, n: int) -> None:
    """Check that ``s`` is an unbatched :class:`rules.Symmetric` of size ``n``."""
    if not isinstance(s, rules.Symmetric):
        raise TypeError(f"{fname}: `{argname}` must be a rules.Symmetric (its {n * (n + 1) // 2} "
                        f"packed entries; rules.Symmetric.from_dense packs a dense matrix) so the "
                        f"layer is symplectic for every value; got {type(s).__name__}.")
    check_array(fname, f"{argname}.packed", s.packed, dtypes=REAL_DTYPES)
    if s.n != n or s.packed.ndim != 1:
        raise ValueError(f"{fname}: `{argname}` must be a rules.Symmetric with n = {n} and packed "
                         f"shape ({n * (n + 1) // 2},) (vmap over parameters for a batch of "
                         f"layers); got n = {s.n}, packed shape {tuple(s.packed.shape)}.")


def check_vector(fname: str, argname: str, x: Any, size: int) -> None:
    check_array(fname, argname, x, dtypes=REAL_DTYPES)
    if x.shape != (size,):
        raise ValueError(f"{fname}: `{argname}` must have shape ({size},); got {tuple(x.shape)}.")


def check_activation(owner: str, activation: object) -> None:
    if not callable(activation):
        raise TypeError(f"{owner}: `activation` must be a callable (elementwise, e.g. jnp.tanh); "
                        f"got {activation!r}.")


def glorot_uniform(key: jax.Array, shape: tuple[int, ...], dtype: Any) -> jax.Array:
    r"""GeometricMachineLearning.jl's default initialiser: uniform on ``[-a, a]``,
    ``a = \sqrt{6 / \sum_i \text{shape}_i}`` (for a vector of length m, ``\sqrt{6/m}``)."""
    limit = math.sqrt(6 / sum(shape))
    return jax.random.uniform(key, shape, dtype, -limit, limit)


def halves(z: jax.Array, n: int) -> tuple[jax.Array, jax.Array]:
    """``(q, p)`` of phase-space points ``z = (q, p)`` with ``n`` degrees of freedom."""
    return z[..., :n], z[..., n:]


def as_row(x: jax.Array, ndim: int) -> jax.Array:
    """A parameter vector with ``ndim - 1`` leading unit axes, to broadcast against a batch (the
    suite raises on implicit rank promotion)."""
    return x.reshape((1,) * (ndim - 1) + x.shape)


# ----------------------------------------------------------------------------------------------
# Layers


def linear_q(z: jax.Array, s: rules.Symmetric, bias: jax.Array | None = None) -> jax.Array:
    r"""Linear q-layer ``(q, p) ↦ (q + S p, p) + b``: the SympNet's unit upper triangular factor.

    .. math::
        z' = \begin{pmatrix} I & S \\ 0 & I \end{pmatrix} z + b, \qquad S = S^T,

    the time-1 flow of ``H(p) = ½ pᵀ S p`` followed by the translation ``b`` (both symplectic).

    Args:
      z: phase-space points ``(q, p)``, shape ``(..., 2n)``, float32 or float64.
      s: the symmetric ``n × n`` weight, a :class:`rules.Symmetric` (``n(n+1)/2`` packed entries).
      bias: a translation of ``z``, shape ``(2n,)``, or None. An LA-SympNet's linear module ends in
        one (GeometricMachineLearning.jl's ``BiasLayer``): pass it to the last linear layer.

    Returns:
      ``z'`` of the shape of ``z``.

    Raises:
      TypeError: ``s`` is not a :class:`rules.Symmetric` (a dense matrix need not be symmetric), or
        an array has a dtype other than float32/float64.
      ValueError: the shapes do not match.

    Examples:
      >>> import jax.numpy as jnp, rules, geometric.nn as gnn
      >>> s = rules.Symmetric(jnp.array([2.0], jnp.float32), 1)
      >>> gnn.linear_q(jnp.array([1.0, 3.0], jnp.float32), s)
      Array([7., 3.], dtype=float32)
    """
    return _linear("linear_q", z, s, bias, upper=True)


def linear_p(z: jax.Array, s: rules.Symmetric, bias: jax.Array | None = None) -> jax.Array:
    r"""Linear p-layer ``(q, p) ↦ (q, p + S q) + b``: the SympNet's unit lower triangular factor.

    .. math::
        z' = \begin{pmatrix} I & 0 \\ S & I \end{pmatrix} z + b, \qquad S = S^T.

    Arguments, returns and errors as :func:`linear_q`.

    Examples:
      >>> import jax.numpy as jnp, rules, geometric.nn as gnn
      >>> s = rules.Symmetric(jnp.array([2.0], jnp.float32), 1)
      >>> gnn.linear_p(jnp.array([1.0, 3.0], jnp.float32), s, jnp.array([0.0, 1.0], jnp.float32))
      Array([1., 6.], dtype=float32)
    """
    return _linear("linear_p", z, s, bias, upper=False)


def _linear(fname: str, z: jax.Array, s: rules.Symmetric, bias: jax.Array | None, *,
            upper: bool) -> jax.Array:
    n = check_phase_point(fname, z)
    check_symmetric(fname, "s", s, n)
    if bias is not None:
        check_vector(fname, "bias", bias, 2 * n)
    return _shear(z, s.dense(), bias, upper=upper)


def _shear(z: jax.Array, weight: jax.Array, bias: jax.Array | None, *, upper: bool) -> jax.Array:
    """``z ↦ [[I, S], [0, I]] z + b`` (or the lower shear) for a dense symmetric ``S``."""
    q, p = halves(z, weight.shape[-1])
    # p S = (S p)ᵀ row-wise: S is symmetric.
    out = jnp.concatenate([q + p @ weight, p] if upper else [q, p + q @ weight], axis=-1)
    return out if bias is None else out + as_row(bias, out.ndim)


def activation_q(z: jax.Array, scale: jax.Array, *, activation: Activation = jnp.tanh
                 ) -> jax.Array:
    r"""Activation q-layer ``(q, p) ↦ (q + a ⊙ σ(p), p)``.

    The Jacobian block ``diag(a ⊙ σ'(p))`` is diagonal, hence symmetric: the layer is the time-1
    flow of ``H(p) = Σ_i a_i Σ(p_i)`` with ``Σ' = σ``, and symplectic.

    Args:
      z: phase-space points ``(q, p)``, shape ``(..., 2n)``, float32 or float64.
      scale: ``a``, shape ``(n,)``.
      activation: the elementwise ``σ`` (default ``jnp.tanh``).

    Returns:
      ``z'`` of the shape of ``z``.

    Raises:
      TypeError: an array has a dtype other than float32/float64.
      ValueError: the shapes do not match.

    Examples:
      >>> import jax.numpy as jnp, geometric.nn as gnn
      >>> gnn.activation_q(jnp.array([1.0, 0.0], jnp.float32), jnp.array([2.0], jnp.float32))
      Array([1., 0.], dtype=float32)
    """
    return _activation("activation_q", z, scale, activation, upper=True)


def activation_p(z: jax.Array, scale: jax.Array, *, activation: Activation = jnp.tanh
                 ) -> jax.Array:
    r"""Activation p-layer ``(q, p) ↦ (q, p + a ⊙ σ(q))``.

    Arguments, returns and errors as :func:`activation_q`.

    Examples:
      >>> import jax.numpy as jnp, geometric.nn as gnn
      >>> z = jnp.array([0.0, 1.0], jnp.float32)
      >>> gnn.activation_p(z, jnp.array([2.0], jnp.float32), activation=lambda x: x + 1)
      Array([0., 3.], dtype=float32)
    """
    return _activation("activation_p", z, scale, activation, upper=False)


def _activation(fname: str, z: jax.Array, scale: jax.Array, activation: Activation, *,
                upper: bool) -> jax.Array:
    n = check_phase_point(fname, z)
    check_vector(fname, "scale", scale, n)
    q, p = halves(z, n)
    scale = as_row(scale, z.ndim)
    if upper:
        return jnp.concatenate([q + scale * activation(p), p], axis=-1)
    return jnp.concatenate([q, p + scale * activation(q)], axis=-1)


def gradient_q(z: jax.Array, weight: jax.Array, scale: jax.Array, bias: jax.Array, *,
               activation: Activation = jnp.tanh) -> jax.Array:
    r"""Gradient q-layer ``(q, p) ↦ (q + Wᵀ(a ⊙ σ(W p + b)), p)``.

    .. math::
        q' = q + \nabla V(p), \qquad V(p) = \sum_{i=1}^h a_i\, \Sigma\big((W p + b)_i\big),
        \quad \Sigma' = \sigma,

    a one-hidden-layer network's gradient: the Jacobian block ``Wᵀ diag(a ⊙ σ'(·)) W`` is
    symmetric, so the layer is symplectic (the time-1 flow of the Hamiltonian ``V(p)``).

    Args:
      z: phase-space points ``(q, p)``, shape ``(..., 2n)``, float32 or float64.
      weight: ``W``, shape ``(h, n)``; ``h`` is half GeometricMachineLearning.jl's
        ``upscaling_dimension``.
      scale: ``a``, shape ``(h,)``.
      bias: ``b``, shape ``(h,)``.
      activation: the elementwise ``σ`` (default ``jnp.tanh``).

    Returns:
      ``z'`` of the shape of ``z``.

    Raises:
      TypeError: an array has a dtype other than float32/float64.
      ValueError: the shapes do not match.

    Examples:
      >>> import jax.numpy as jnp, geometric.nn as gnn
      >>> w = jnp.array([[1.0], [2.0]], jnp.float32)
      >>> ones, zeros = jnp.ones(2, jnp.float32), jnp.zeros(2, jnp.float32)
      >>> gnn.gradient_q(jnp.array([0.0, 1.0], jnp.float32), w, ones, zeros, activation=lambda x: x)
      Array([5., 1.], dtype=float32)
    """
    return _gradient("gradient_q", z, weight, scale, bias, activation, upper=True)


def gradient_p(z: jax.Array, weight: jax.Array, scale: jax.Array, bias: jax.Array, *,
               activation: Activation = jnp.tanh) -> jax.Array:
    r"""Gradient p-layer ``(q, p) ↦ (q, p + Wᵀ(a ⊙ σ(W q + b)))``.

    Arguments, returns and errors as :func:`gradient_q`.

    Examples:
      >>> import jax.numpy as jnp, geometric.nn as gnn
      >>> w = jnp.array([[1.0], [2.0]], jnp.float32)
      >>> ones, zeros = jnp.ones(2, jnp.float32), jnp.zeros(2, jnp.float32)
      >>> gnn.gradient_p(jnp.array([1.0, 0.0], jnp.float32), w, ones, zeros, activation=lambda x: x)
      Array([1., 5.], dtype=float32)
    """
    return _gradient("gradient_p", z, weight, scale, bias, activation, upper=False)


def _gradient(fname: str, z: jax.Array, weight: jax.Array, scale: jax.Array, bias: jax.Array,
              activation: Activation, *, upper: bool) -> jax.Array:
    n = check_phase_point(fname, z)
    check_array(fname, "weight", weight, dtypes=REAL_DTYPES)
    if weight.ndim != 2 or weight.shape[1] != n:
        raise ValueError(f"{fname}: `weight` must have shape (h, {n}) for z of shape "
                         f"{tuple(z.shape)}; got {tuple(weight.shape)}.")
    h = weight.shape[0]
    check_vector(fname, "scale", scale, h)
    check_vector(fname, "bias", bias, h)
    q, p = halves(z, n)
    x = p if upper else q
    hidden = activation(x @ weight.T + as_row(bias, z.ndim))
    step = (as_row(scale, z.ndim) * hidden) @ weight
    return jnp.concatenate([q + step, p] if upper else [q, p + step], axis=-1)


# ----------------------------------------------------------------------------------------------
# Networks


def _check_network_input(owner: str, z: Any, dim: int) -> None:
    check_phase_point(f"{owner}.__call__", z)
    if z.shape[-1] != dim:
        raise ValueError(f"{owner}.__call__: `z` must have shape (..., {dim}); "
                         f"got {tuple(z.shape)}.")


def _check_dim(owner: str, dim: object) -> int:
    dim = check_int_field(owner, "dim", dim, minimum=2)
    if dim % 2:
        raise ValueError(f"{owner}: `dim` (the phase-space dimension 2n) must be even; got {dim}.")
    return dim


@dataclasses.dataclass(frozen=True)
class LASympNet:
    r"""LA-SympNet: linear modules and activation layers alternating (Jin et al. 2020, §3.1).

    The layers, in GeometricMachineLearning.jl's order (``init_upper_linear``,
    ``init_upper_activation`` True)::

        nhidden × [ depth linear layers q, p, q, … + bias, activation q, activation p ],
        then       depth linear layers q, p, q, … + bias

    with the linear layers' order reversed (p first) when ``init_upper_linear`` is False and the
    two activation layers' when ``init_upper_activation`` is False. A linear module
    ``z ↦ (Π_k L_k) z + b`` of 5 alternating unit triangular factors represents every linear
    symplectic map (Jin, Lin & Xiao 2022, "Optimal unit triangular factorization of symplectic
    matrices"), so ``depth ≤ 5``.

    Args:
      dim: the phase-space dimension ``2n`` (even).
      depth: the number of linear layers of each linear module, 1 to 5 (default 5).
      nhidden: the number of activation blocks (GeometricMachineLearning.jl's ``nhidden``,
        default 1); the network has ``nhidden + 1`` linear modules.
      activation: the elementwise ``σ`` (default ``jnp.tanh``).
      init_upper_linear: each linear module starts with a q-layer (default True).
      init_upper_activation: each activation block starts with a q-layer (default True).

    Parameters (:meth:`init`): a dict with ``"linear"``, a tuple of ``nhidden + 1``
    :class:`rules.Symmetric`, each a stack of the ``depth`` weights ``(n × n)`` of one linear
    module (packed shape ``(depth, n(n+1)/2)``; ``linear[i].packed[j]`` is layer ``j``'s);
    ``"bias"``, a tuple of ``nhidden + 1`` arrays ``(2n,)``; ``"activation"``, a tuple of
    ``nhidden`` pairs of scales ``(n,)`` (in the order they are applied). Initialised as
    GeometricMachineLearning.jl does: every weight uniform on ``±√(6/size)`` (its
    ``GlorotUniform``; a packed weight counts its ``n(n+1)/2`` entries). One stack per module is
    one pytree node: a jitted training step flattens each node in Python on every call.

    Raises:
      TypeError, ValueError: a field has the wrong type or value (the message names it).

    Examples:
      >>> import jax, jax.numpy as jnp, geometric.nn as gnn
      >>> net = gnn.LASympNet(4, depth=3)
      >>> params = net.init(jax.random.PRNGKey(0))
      >>> net(params, jnp.ones((10, 4), jnp.float32)).shape
      (10, 4)
      >>> params["linear"][0].packed.shape  # 3 layers, n = 2: 3 packed entries each
      (3, 3)
      >>> sum(x.size for x in jax.tree.leaves(params))  # 2 modules × (3·3 + 4) + 1 × 2·2
      30
    """

    dim: int
    _: dataclasses.KW_ONLY
    depth: int = 5
    nhidden: int = 1
    activation: Activation = jnp.tanh
    init_upper_linear: bool = True
    init_upper_activation: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "dim", _check_dim("LASympNet", self.dim))
        depth = check_int_field("LASympNet", "depth", self.depth)
        if depth > 5:
            raise ValueError("LASympNet: `depth` must be at most 5 (five unit triangular factors "
                             f"give every linear symplectic map); got {depth}.")
        object.__setattr__(self, "depth", depth)
        object.__setattr__(self, "nhidden",
                           check_int_field("LASympNet", "nhidden", self.nhidden, minimum=0))
        check_activation("LASympNet", self.activation)
        check_bool_field("LASympNet", "init_upper_linear", self.init_upper_linear)
        check_bool_field("LASympNet", "init_upper_activation", self.init_upper_activation)

    def init(self, key: jax.Array, dtype: Any = jnp.float32) -> dict[str, Any]:
        """Random parameters (GeometricMachineLearning.jl's initialisation, see the class).

        Args:
          key: a PRNG key.
          dtype: float32 (default) or float64.

        Returns:
          the parameter pytree described in the class docstring.
        """
        dtype = check_real_dtype("LASympNet.init", dtype)
        n = self.dim // 2
        size = rules.Symmetric.packed_size(n)
        k_lin, k_bias, k_act = jax.random.split(key, 3)
        modules = self.nhidden + 1
        limit = (6.0 / size) ** 0.5  # per layer: GML draws each packed vector on its own
        return {
            "linear": tuple(rules.Symmetric(jax.random.uniform(k, (self.depth, size), dtype,
                                                               -limit, limit), n)
                            for k in jax.random.split(k_lin, modules)),
            "bias": tuple(glorot_uniform(k, (self.dim,), dtype)
                          for k in jax.random.split(k_bias, modules)),
            "activation": tuple((glorot_uniform(k[0], (n,), dtype),
                                 glorot_uniform(k[1], (n,), dtype))
                                for k in jax.random.split(k_act, (self.nhidden, 2))),
        }

    def __call__(self, params: dict[str, Any], z: jax.Array) -> jax.Array:
        """The network applied to ``z`` of shape ``(..., dim)`` (leading axes are batch axes)."""
        _check_network_input("LASympNet", z, self.dim)
        first, second = ((activation_q, activation_p) if self.init_upper_activation
                         else (activation_p, activation_q))
        n = self.dim // 2
        for i, (stack, bias) in enumerate(zip(params["linear"], params["bias"], strict=True)):
            if not isinstance(stack, rules.Symmetric) or stack.shape != (self.depth, n, n):
                raise ValueError(f"LASympNet.__call__: `params['linear'][{i}]` must be a "
                                 f"rules.Symmetric stack of shape ({self.depth}, {n}, {n}); got "
                                 f"{getattr(stack, 'shape', type(stack).__name__)}.")
            check_vector("LASympNet.__call__", f"params['bias'][{i}]", bias, self.dim)
            weights = stack.dense()  # one unpacking for the module
            for j in range(self.depth):
                z = _shear(z, weights[j], bias if j == self.depth - 1 else None,
                           upper=(j % 2 == 0) == self.init_upper_linear)
            if i < self.nhidden:
                scale_first, scale_second = params["activation"][i]
                z = first(z, scale_first, activation=self.activation)
                z = second(z, scale_second, activation=self.activation)
        return z


@dataclasses.dataclass(frozen=True)
class GSympNet:
    r"""G-SympNet: gradient layers alternating in q and p (Jin et al. 2020, §3.1).

    ``n_layers`` gradient layers, q, p, q, … (p first when ``init_upper`` is False), each
    ``(q, p) ↦ (q + Wᵀ(a ⊙ σ(W p + b)), p)`` or its p-counterpart with ``W`` of shape
    ``(upscaling_dimension/2, n)`` (:func:`gradient_q`, :func:`gradient_p`), as
    GeometricMachineLearning.jl's ``GSympNet``.

    Args:
      dim: the phase-space dimension ``2n`` (even).
      upscaling_dimension: GeometricMachineLearning.jl's upscaling dimension (even): each layer's
        hidden width is ``upscaling_dimension // 2``; None (default) means ``2 · dim``.
      n_layers: the number of gradient layers (default 2).
      activation: the elementwise ``σ`` (default ``jnp.tanh``).
      init_upper: the first layer is a q-layer (default True).

    Parameters (:meth:`init`): a tuple of ``n_layers`` dicts ``{"weight": (h, n), "scale": (h,),
    "bias": (h,)}``, initialised as GeometricMachineLearning.jl does: ``weight`` and ``scale``
    uniform on ``±√(6/Σ shape)`` (its ``GlorotUniform``), ``bias`` zero.

    Raises:
      TypeError, ValueError: a field has the wrong type or value (the message names it).

    Examples:
      >>> import jax, jax.numpy as jnp, geometric.nn as gnn
      >>> net = gnn.GSympNet(2, n_layers=4)
      >>> params = net.init(jax.random.PRNGKey(0))
      >>> params[0]["weight"].shape  # upscaling_dimension 4: h = 2
      (2, 1)
      >>> net(params, jnp.zeros((5, 2), jnp.float32)).shape
      (5, 2)
    """

    dim: int
    _: dataclasses.KW_ONLY
    upscaling_dimension: int | None = None
    n_layers: int = 2
    activation: Activation = jnp.tanh
    init_upper: bool = True

    def __post_init__(self) -> None:
        dim = _check_dim("GSympNet", self.dim)
        object.__setattr__(self, "dim", dim)
        upscaling = 2 * dim if self.upscaling_dimension is None else self.upscaling_dimension
        upscaling = check_int_field("GSympNet", "upscaling_dimension", upscaling, minimum=2)
        if upscaling % 2:
            raise ValueError("GSympNet: `upscaling_dimension` must be even (the hidden width is "
                             f"half of it); got {upscaling}.")
        object.__setattr__(self, "upscaling_dimension", upscaling)
        object.__setattr__(self, "n_layers",
                           check_int_field("GSympNet", "n_layers", self.n_layers))
        check_activation("GSympNet", self.activation)
        check_bool_field("GSympNet", "init_upper", self.init_upper)

    def init(self, key: jax.Array, dtype: Any = jnp.float32) -> tuple[dict[str, jax.Array], ...]:
        """Random parameters (GeometricMachineLearning.jl's initialisation, see the class).

        Args:
          key: a PRNG key.
          dtype: float32 (default) or float64.

        Returns:
          the parameter pytree described in the class docstring.
        """
        dtype = check_real_dtype("GSympNet.init", dtype)
        assert self.upscaling_dimension is not None  # set by __post_init__
        h, n = self.upscaling_dimension // 2, self.dim // 2
        layers = []
        for k in jax.random.split(key, self.n_layers):
            k_weight, k_scale = jax.random.split(k)
            layers.append({"weight": glorot_uniform(k_weight, (h, n), dtype),
                           "scale": glorot_uniform(k_scale, (h,), dtype),
                           "bias": jnp.zeros((h,), dtype)})
        return tuple(layers)

    def __call__(self, params: tuple[dict[str, jax.Array], ...], z: jax.Array) -> jax.Array:
        """The network applied to ``z`` of shape ``(..., dim)`` (leading axes are batch axes)."""
        _check_network_input("GSympNet", z, self.dim)
        if len(params) != self.n_layers:
            raise ValueError(f"GSympNet.__call__: `params` must hold {self.n_layers} layers; "
                             f"got {len(params)}.")
        for i, layer in enumerate(params):
            shear = gradient_q if (i % 2 == 0) == self.init_upper else gradient_p
            z = shear(z, layer["weight"], layer["scale"], layer["bias"],
                      activation=self.activation)
        return z
