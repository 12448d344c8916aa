r"""Operations of the Poincaré ball that hyperbolic layers are built from, and the maps between models.

Ganea, Bécigneul & Hofmann's hyperbolic neural networks write a layer with the gyrovector
operations of the ball ``𝔹ⁿ_c = {‖x‖ < 1/√c}`` (curvature ``−c``): a hyperbolic linear layer is
``mobius_add(mobius_matvec(W, x), b)``, and ``expmap0``/``logmap0`` move between the ball and its
tangent space at the origin (Euclidean features in, hyperbolic features out, and back).
:func:`poincare_to_lorentz` and :func:`lorentz_to_poincare` are the isometries between
:class:`~geometric.PoincareBall` and :class:`~geometric.Lorentz` of the same curvature.

Every function takes leading batch axes (broadcast between arguments), float32 or float64, and a
static ``curvature`` (a Python float; default 1). Results in the ball are kept in its safe part
``√c‖x‖ ≤ 1 − ε`` (``ε = 5e-4`` in float32, ``1e-8`` in float64; see
:class:`~geometric.PoincareBall`), and are finite, in values and derivatives, for points there;
a point outside it (beyond it by more than rounding) gives nan, as ``jnp.log(-1.0)`` does.
Formulas and references: docs/derivations/hyperbolic.md.

Examples:
  A hyperbolic linear layer, ``W ⊗ x ⊕ b``:

  >>> import jax, jax.numpy as jnp
  >>> from geometric import hyperbolic as hyp
  >>> w = 0.5 * jax.random.normal(jax.random.PRNGKey(0), (3, 4))
  >>> b = hyp.expmap0(jnp.array([0.1, 0.0, -0.1]))
  >>> x = hyp.expmap0(jax.random.normal(jax.random.PRNGKey(1), (8, 4)))  # 8 points of 𝔹⁴
  >>> h = hyp.mobius_add(hyp.mobius_matvec(w, x), b)                      # 8 points of 𝔹³
  >>> h.shape, bool(jnp.all(jnp.linalg.norm(h, axis=-1) < 1))
  ((8, 3), True)
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from rules.internal import REAL_DTYPES, check_array

from ._core import hyperbolic as _math

__all__ = ["expmap0", "logmap0", "lorentz_to_poincare", "mobius_add", "mobius_matvec",
           "mobius_scalar_mul", "poincare_to_lorentz"]


def _vectors(fname: str, curvature: object, **arrays: jax.Array) -> float:
    """Check ``arrays`` (float32/float64, one dtype, at least one axis, one vector length) and
    ``curvature``; return the curvature as a float."""
    c = _math.check_curvature(fname, curvature)
    first = None
    for argname, a in arrays.items():
        check_array(fname, argname, a, dtypes=REAL_DTYPES)
        if a.ndim < 1:
            raise ValueError(f"{fname}: `{argname}` must have shape (..., n); got ().")
        if first is None:
            first = (argname, a)
            continue
        name, b = first
        if a.dtype != b.dtype:
            raise TypeError(f"{fname}: `{argname}` must have the dtype of `{name}`, {b.dtype}; "
                            f"got {a.dtype}.")
        if a.shape[-1] != b.shape[-1]:
            raise ValueError(f"{fname}: `{argname}` must have shape (..., {b.shape[-1]}) like "
                             f"`{name}`; got {tuple(a.shape)}.")
    return c


def _broadcast(fname: str, x: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``x`` and ``y`` (vectors of one length) broadcast explicitly to their common batch shape."""
    try:
        batch = jnp.broadcast_shapes(x.shape[:-1], y.shape[:-1])
    except ValueError:
        raise ValueError(f"{fname}: the batch axes of `x` {tuple(x.shape)} and `y` "
                         f"{tuple(y.shape)} do not broadcast.") from None
    shape = (*batch, x.shape[-1])
    return jnp.broadcast_to(x, shape), jnp.broadcast_to(y, shape)


def mobius_add(x: jax.Array, y: jax.Array, *, curvature: float = 1.0) -> jax.Array:
    r"""Möbius addition ``x ⊕_c y`` of points of the ball (the ball's "translation" by ``x``).

    .. math::
        x \oplus_c y = \frac{(1 + 2c\langle x, y\rangle + c\|y\|^2)\,x + (1 - c\|x\|^2)\,y}
                            {1 + 2c\langle x, y\rangle + c^2\|x\|^2\|y\|^2}

    Not commutative nor associative; ``0`` is its identity and ``(−x) ⊕ x = 0``.

    Args:
      x, y: points of shape ``(..., n)``, batch axes broadcast, one dtype.
      curvature: ``c > 0``.

    Returns:
      ``x ⊕_c y``, of the broadcast shape, clipped to the safe ball; nan where ``x`` or ``y`` is
      not in the safe ball.

    Raises:
      TypeError: an argument is not a float32/float64 array, or their dtypes differ; a bad
        ``curvature``.
      ValueError: the vector lengths differ, or the batch axes do not broadcast.
    """
    fname = "geometric.hyperbolic.mobius_add"
    c = _vectors(fname, curvature, x=x, y=y)
    x, y = _broadcast(fname, x, y)
    outside = _math.outside_ball(x, c) | _math.outside_ball(y, c)
    return _math.nan_outside(_math.clip_ball(_math.mobius_add(x, y, c), c), outside)


def mobius_scalar_mul(r: ArrayLike, x: jax.Array, *, curvature: float = 1.0) -> jax.Array:
    r"""Möbius scalar multiplication ``r ⊗_c x = exp₀(r log₀(x))``.

    .. math::
        r \otimes_c x = \frac{1}{\sqrt c}\tanh\!\big(r\operatorname{artanh}(\sqrt c\,\|x\|)\big)
            \frac{x}{\|x\|}

    Args:
      r: a scalar, or an array broadcasting against the batch axes ``x.shape[:-1]``.
      x: points of shape ``(..., n)``.
      curvature: ``c > 0``.

    Raises:
      TypeError: ``x`` is not a float32/float64 array; a bad ``curvature``.
      ValueError: ``r`` does not broadcast against the batch axes of ``x``.
    """
    fname = "geometric.hyperbolic.mobius_scalar_mul"
    c = _vectors(fname, curvature, x=x)
    r = jnp.asarray(r, x.dtype)
    try:
        batch = jnp.broadcast_shapes(r.shape, x.shape[:-1])
    except ValueError:
        raise ValueError(f"{fname}: `r` of shape {tuple(r.shape)} must broadcast against the "
                         f"batch axes {tuple(x.shape[:-1])} of `x`.") from None
    x = jnp.broadcast_to(x, (*batch, x.shape[-1]))
    return _math.nan_outside(_math.mobius_scalar_mul(jnp.broadcast_to(r, batch), x, c),
                             _math.outside_ball(x, c))


def mobius_matvec(m: jax.Array, x: jax.Array, *, curvature: float = 1.0) -> jax.Array:
    r"""The Möbius matrix-vector product ``M ⊗_c x = exp₀(M log₀(x))``.

    .. math::
        M \otimes_c x = \frac{1}{\sqrt c}\tanh\!\Big(\frac{\|Mx\|}{\|x\|}
            \operatorname{artanh}(\sqrt c\,\|x\|)\Big)\frac{Mx}{\|Mx\|}

    (0 where ``Mx = 0``). Evaluated as ``tanhc(√c‖a Mx‖)·a·Mx`` with ``a = artanh(√c‖x‖)/(√c‖x‖)``,
    smooth everywhere, with no special case at ``x = 0`` or ``Mx = 0``.

    Args:
      m: matrices of shape ``(..., p, n)`` (a weight matrix ``(p, n)``, or a batch).
      x: points of shape ``(..., n)``; batch axes broadcast with those of ``m``.
      curvature: ``c > 0``.

    Returns:
      Points of shape ``(..., p)``.

    Raises:
      TypeError: an argument is not a float32/float64 array, or their dtypes differ; a bad
        ``curvature``.
      ValueError: ``m`` is not a matrix ``(..., p, n)`` with ``n`` the length of ``x``, or the
        batch axes do not broadcast.
    """
    fname = "geometric.hyperbolic.mobius_matvec"
    c = _vectors(fname, curvature, x=x)
    check_array(fname, "m", m, dtypes=REAL_DTYPES)
    if m.ndim < 2 or m.shape[-1] != x.shape[-1]:
        raise ValueError(f"{fname}: `m` must have shape (..., p, {x.shape[-1]}) (`x` has "
                         f"{tuple(x.shape)}); got {tuple(m.shape)}.")
    if m.dtype != x.dtype:
        raise TypeError(f"{fname}: `m` must have the dtype of `x`, {x.dtype}; got {m.dtype}.")
    try:
        batch = jnp.broadcast_shapes(m.shape[:-2], x.shape[:-1])
    except ValueError:
        raise ValueError(f"{fname}: the batch axes of `m` {tuple(m.shape)} and `x` "
                         f"{tuple(x.shape)} do not broadcast.") from None
    if m.ndim > 2:  # a batch of matrices; one matrix stays a matrix product
        m = jnp.broadcast_to(m, (*batch, *m.shape[-2:]))
        x = jnp.broadcast_to(x, (*batch, x.shape[-1]))
    return _math.nan_outside(_math.mobius_matvec(m, x, c),
                             jnp.broadcast_to(_math.outside_ball(x, c), batch))


def expmap0(v: jax.Array, *, curvature: float = 1.0) -> jax.Array:
    r"""The exponential map of the ball at the origin: ``exp₀(v) = tanh(√c‖v‖) v/(√c‖v‖)``.

    A tangent vector ``v ∈ ℝⁿ`` at the origin (Euclidean features) to the point of the ball at
    hyperbolic distance ``2‖v‖`` from the origin in the direction of ``v`` (the metric at the
    origin is ``4·I``). Clipped to the safe ball.

    Raises:
      TypeError: ``v`` is not a float32/float64 array; a bad ``curvature``.
      ValueError: ``v`` has no axis.
    """
    c = _vectors("geometric.hyperbolic.expmap0", curvature, v=v)
    return _math.expmap0(v, c)


def logmap0(y: jax.Array, *, curvature: float = 1.0) -> jax.Array:
    r"""The logarithm of the ball at the origin: ``log₀(y) = artanh(√c‖y‖) y/(√c‖y‖)``.

    The inverse of :func:`expmap0`; nan for points that are not in the safe ball.

    Raises:
      TypeError, ValueError: as :func:`expmap0`, for ``y``.
    """
    c = _vectors("geometric.hyperbolic.logmap0", curvature, y=y)
    return _math.nan_outside(_math.logmap0(y, c), _math.outside_ball(y, c))


def poincare_to_lorentz(x: jax.Array, *, curvature: float = 1.0) -> jax.Array:
    r"""The isometry from :class:`~geometric.PoincareBall` ``(..., n)`` to :class:`~geometric.Lorentz` ``(..., n + 1)``.

    .. math::
        x \mapsto \frac{\big(1 + c\|x\|^2,\ 2\sqrt c\,x\big)}{\sqrt c\,(1 - c\|x\|^2)}

    (the inverse of the stereographic projection from ``(−1/√c, 0, …, 0)``); nan for points
    that are not in the safe ball.

    Raises:
      TypeError, ValueError: as :func:`expmap0`, for ``x``.
    """
    c = _vectors("geometric.hyperbolic.poincare_to_lorentz", curvature, x=x)
    return _math.nan_outside(_math.poincare_to_lorentz(x, c), _math.outside_ball(x, c))


def lorentz_to_poincare(x: jax.Array, *, curvature: float = 1.0) -> jax.Array:
    r"""The isometry from :class:`~geometric.Lorentz` ``(..., n + 1)`` to :class:`~geometric.PoincareBall` ``(..., n)``.

    .. math::
        (x_0, x_s) \mapsto \frac{x_s}{1 + \sqrt c\,x_0}

    (the stereographic projection from ``(−1/√c, 0, …, 0)``), clipped to the safe ball; nan for
    points that are not on the hyperboloid's upper sheet within the same distance of its origin.

    Raises:
      TypeError: ``x`` is not a float32/float64 array; a bad ``curvature``.
      ValueError: ``x`` does not have shape ``(..., n + 1)`` with ``n ≥ 1``.
    """
    fname = "geometric.hyperbolic.lorentz_to_poincare"
    c = _vectors(fname, curvature, x=x)
    if x.shape[-1] < 2:
        raise ValueError(f"{fname}: `x` must have shape (..., n + 1) with n ≥ 1; "
                         f"got {tuple(x.shape)}.")
    return _math.nan_outside(_math.lorentz_to_poincare(x, c), _math.outside_hyperboloid(x, c))
