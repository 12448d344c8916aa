"""Riemannian gradients of a whole parameter pytree."""
from __future__ import annotations

from typing import Any

from ._core.tree import ManifoldsTree, resolve

__all__ = ["riemannian_gradient"]


def riemannian_gradient(params: Any, grads: Any, manifolds: ManifoldsTree) -> Any:
    """Riemannian gradients of the manifold leaves of ``params``; other leaves pass through.

    Each leaf ``x`` with manifold ``m`` gets ``m.egrad_to_rgrad(x, g)``: the tangent vector ``r`` at
    ``x`` with ``m.inner(x, r, ξ) = <g, ξ>`` for every tangent ``ξ`` (for the Euclidean metric, the
    projection of ``g``; for ``Stiefel(..., metric="canonical")``, ``G - Y Gᵀ Y``).

    Args:
      params: a pytree of arrays.
      grads: Euclidean gradients (e.g. from ``jax.grad``), same structure as ``params``.
      manifolds: the spec (:mod:`geometric.optim`): a pytree matching ``params`` or a prefix of
        it by key path, whose leaves are manifolds or ``EUCLIDEAN`` / None (the gradient is
        returned unchanged), or a function ``params -> such a pytree``. A manifold leaf may hold
        a stack of points with leading batch axes.

    Returns:
      A pytree like ``grads``.

    Raises:
      ValueError: the structures of ``manifolds``, ``params`` and ``grads`` do not match, or a
        leaf has the wrong shape for its manifold.
      TypeError: a leaf of ``manifolds`` is neither a manifold nor EUCLIDEAN nor None.

    Examples:
      >>> import jax.numpy as jnp, geometric
      >>> params = {"x": jnp.array([1.0, 0.0]), "b": jnp.array(2.0)}
      >>> grads = {"x": jnp.array([3.0, 4.0]), "b": jnp.array(5.0)}
      >>> r = geometric.riemannian_gradient(params, grads, {"x": geometric.Sphere(2), "b": None})
      >>> print(r["x"], r["b"])
      [0. 4.] 5.0
    """
    r = resolve("riemannian_gradient", manifolds, params)
    return r.unflatten([g if m is None else m.egrad_to_rgrad(x, g) for m, x, g in zip(
        r.manifolds, r.flatten("params", params), r.flatten("grads", grads))])
