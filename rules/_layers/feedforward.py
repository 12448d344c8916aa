"""The volume-preserving feed-forward layer (Brantner et al.)."""
from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from .._core.checks import REAL_DTYPES, check_array
from .._core.dispatch import jitted
from .._core.sharding import match_varying
from .._tensor.products import product
from .._tensor.structured import StrictlyLower, StrictlyUpper

__all__ = ["volume_preserving_feedforward"]


def volume_preserving_feedforward(x: jax.Array, weight: StrictlyLower | StrictlyUpper,
                                  bias: jax.Array | None = None, *,
                                  activation: Callable[[jax.Array], jax.Array] = jnp.tanh
                                  ) -> jax.Array:
    r"""Volume-preserving feed-forward layer ``x + σ(W x + b)`` applied to every time step.

    .. math::
        y_t = x_t + \sigma(W x_t + b), \qquad \text{i.e.}\ y = x + \sigma(x W^T + b)
        \ \text{for } x \text{ of shape } (\dots, T, d),

    with ``W`` strictly lower (the paper's lower layer) or strictly upper triangular (upper
    layer). ``∂y_t/∂x_t = I + diag(σ'(·)) W`` is unit triangular, so the determinant of the
    Jacobian is 1 for any activation.

    Args:
      x: shape ``(..., d)``, float32 or float64 (a sequence ``(..., T, d)`` or a single vector).
      weight: :class:`rules.StrictlyLower` or :class:`rules.StrictlyUpper` with ``n = d``.
      bias: shape ``(d,)``, or None for no bias.
      activation: an elementwise function (default ``jnp.tanh``; ``lambda z: z`` for the
        paper's linear layers).

    Returns:
      ``y`` of the shape of ``x``, dtype promoted from the inputs.

    Raises:
      TypeError: ``weight`` is not packed strictly triangular, or an array has a wrong dtype.
      ValueError: the shapes do not match.

    Notes:
      A composition of the tensor-product rule (:func:`rules.tensor_mat_mul`) and the unpacking
      rule of ``.dense()``, so both modes run their explicit pushforwards and pullbacks; the packed
      weight's cotangent has the exact-derivative convention
      (``docs/derivations/structured.md#exact-derivative``); the activation is differentiated by
      JAX. Derivation: ``docs/derivations/volume-preserving.md#feedforward``.

    References:
      B. Brantner, G. de Romemont, M. Kraus, Z. Li, arXiv:2312.11166, §"volume-preserving
      feedforward neural networks".

    Examples:
      >>> import jax.numpy as jnp, rules
      >>> w = rules.StrictlyLower(jnp.array([1.0, 0.0, 2.0], jnp.float32), 3)
      >>> rules.volume_preserving_feedforward(jnp.ones(3, jnp.float32), w, activation=lambda z: z)
      Array([1., 2., 3.], dtype=float32)
    """
    if not isinstance(weight, (StrictlyLower, StrictlyUpper)):
        raise TypeError(f"volume_preserving_feedforward: `weight` must be a rules.StrictlyLower or "
                        f"rules.StrictlyUpper; got {type(weight).__name__}.")
    return _feedforward(x, weight, bias, activation=activation)


@jitted("activation")
def _feedforward(x, weight, bias, *, activation):
    x, weight, bias = _check_feedforward(x, weight, bias)
    x2, w = match_varying(jnp.atleast_2d(x), weight.dense())  # shard_map: rules/_core/sharding.py
    z = product(x2, w, tx=False, ty=True).reshape(x.shape)  # x Wᵀ
    return x + activation(z if bias is None else z + jnp.broadcast_to(bias, z.shape))


def _check_feedforward(x, weight, bias):
    fname = "volume_preserving_feedforward"
    check_array(fname, "x", x, dtypes=REAL_DTYPES)
    check_array(fname, "weight.packed", weight.packed, dtypes=REAL_DTYPES)
    if x.ndim < 1 or x.shape[-1] != weight.n or weight.packed.ndim != 1:
        raise ValueError(f"{fname}: `x` of shape {tuple(x.shape)} must be (..., d) with d = "
                         f"weight.n = {weight.n}, and `weight` a single matrix; got weight of "
                         f"shape {weight.shape}.")
    dtypes = [x, weight.packed]
    if bias is not None:
        check_array(fname, "bias", bias, dtypes=REAL_DTYPES)
        if bias.shape != (weight.n,):
            raise ValueError(f"{fname}: `bias` must have shape (d,) = ({weight.n},); got "
                             f"{tuple(bias.shape)}.")
        dtypes.append(bias)
    dtype = jnp.result_type(*dtypes)
    weight = type(weight)(weight.packed.astype(dtype), weight.n)
    return x.astype(dtype), weight, None if bias is None else bias.astype(dtype)
