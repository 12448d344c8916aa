r"""The hyperboloid (Lorentz) model of hyperbolic space of curvature ``−c``, in ℝⁿ⁺¹."""
from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import jax
import jax.numpy as jnp

from .._core import hyperbolic as hyp
from .._core.arrays import safe_sqrt

__all__ = ["Lorentz"]


@dataclasses.dataclass(frozen=True)
class Lorentz(hyp.AbstractHyperbolicManifold):
    r"""The hyperboloid ``ℍⁿ_c``: vectors of shape ``(n + 1,)`` with ``⟨x, x⟩_L = −1/c``, ``x₀ > 0``.

    .. math::
        \langle u, v\rangle_L = -u_0v_0 + \sum_{i\ge1} u_iv_i, \qquad
        T_x = \{v : \langle x, v\rangle_L = 0\}, \qquad P_x(v) = v + c\,\langle x, v\rangle_L\, x,
        \qquad \operatorname{grad} f(x) = P_x(J\nabla f(x)),\ J = \operatorname{diag}(-1, 1, …, 1)

    The metric is the Minkowski product restricted to the tangent spaces (:meth:`inner`);
    :meth:`project` is the projection orthogonal in that product (not in the Euclidean one), and
    the Riemannian gradient flips the sign of ``g₀`` before projecting. The hyperboloid is a
    pseudo-Riemannian submanifold of the flat Minkowski space, so the Riemannian Hessian is
    ``P_x(J∇²f(x)[v]) + c (xᵀ∇f(x)) v`` (the Weingarten map; ``xᵀ∇f(x)`` is the Euclidean
    product, ``= ⟨x, J∇f(x)⟩_L``). Geodesics, distance and parallel transport:

    .. math::
        \exp_x(v) &= \cosh(\sqrt c\,\|v\|_L)\,x + \frac{\sinh(\sqrt c\,\|v\|_L)}{\sqrt c\,\|v\|_L}\,v,
        \qquad \log_x(y) = \frac{d(x, y)}{\|u\|_L}\,u, \quad u = y + c\langle x, y\rangle_L\,x, \\
        d(x, y) &= \frac{1}{\sqrt c}\operatorname{arcosh}(-c\langle x, y\rangle_L), \qquad
        P_{x\to y}(v) = v + \frac{c\langle y, v\rangle_L}{1 - c\langle x, y\rangle_L}\,(x + y).

    The retraction is the exponential map followed by :meth:`project_point` (``x₀`` recomputed
    from the spatial part ``x_s``), so iterates stay on the hyperboloid to rounding;
    :meth:`manifold_error` is the relative error of ``x₀``. :func:`geometric.hyperbolic.lorentz_to_poincare`
    and :func:`geometric.hyperbolic.poincare_to_lorentz` map to and from :class:`PoincareBall`
    with the same curvature (isometries).

    **Numerical safety.** Coordinates grow like ``e^{√c d}`` with the distance ``d`` from the
    origin ``(1/√c, 0, …, 0)``, and Minkowski products cancel to an absolute error of about
    ``ε_mach·x₀²``: in float32, distances between points far from the origin lose precision
    (the Poincaré ball does not), which is why hyperbolic embeddings are usually trained in the
    ball or in float64. Points are kept within the distance of :class:`PoincareBall`'s safe ball
    from the origin (``8.3/√c`` in float32, ``19.1/√c`` in float64): :meth:`project_point`,
    :meth:`retract` and :meth:`exp` shrink ``x_s`` to it, and ``exp`` shortens steps longer than
    twice that. Within it every method is finite with finite derivatives (tested on its boundary,
    in float32); a point off the upper sheet, or beyond that distance by more than rounding,
    gives nan, as ``jnp.log(-1.0)`` does. The distance is ``arcosh(1 + δ)`` with ``δ = c⟨y − x, y − x⟩_L / 2``, which
    equals ``−c⟨x, y⟩_L − 1`` on the hyperboloid but does not cancel for near points; ``log``
    forms ``u`` as ``P_x(y − x)``, exactly 0 at ``y = x``. The derivative of :meth:`dist` at
    ``y = x`` is 0 (a subgradient), so ``dist²`` is smooth there. Derivations:
    docs/derivations/hyperbolic.md.

    Optimizers: :func:`~geometric.optim.riemannian_sgd`, :func:`~geometric.optim.riemannian_adam`
    and :func:`~geometric.optim.riemannian`. ``manifold_adam`` needs orthonormal frames and
    rejects this manifold.

    Args:
      n: dimension of the hyperbolic space, ``n ≥ 1``; points have ``n + 1`` coordinates.
      curvature: ``c > 0``; the sectional curvature is ``−c``.

    Raises:
      TypeError: ``n`` is not an int, or ``curvature`` not a real number.
      ValueError: ``n < 1``, or ``curvature`` is not positive and finite.

    References:
      M. Nickel, D. Kiela, "Learning continuous hierarchies in the Lorentz model of hyperbolic
      geometry", ICML 2018. J. G. Ratcliffe, "Foundations of hyperbolic manifolds" (2006), ch. 3.

    Examples:
      >>> import jax.numpy as jnp, geometric
      >>> h = geometric.Lorentz(2)
      >>> o = jnp.array([1.0, 0.0, 0.0])
      >>> y = h.exp(o, jnp.array([0.0, 1.5, 0.0]))
      >>> print(f"{h.dist(o, y):.4f}", f"{h.manifold_error(y):.0e}")
      1.5000 0e+00
    """

    capabilities: ClassVar[frozenset[str]] = frozenset({"exp", "log", "dist"})
    _error_formula: ClassVar[str] = "|x₀ − √(1/c + ‖x_s‖²)| / √(1/c + ‖x_s‖²)"

    @property
    def shape(self) -> tuple[int]:
        return (self.n + 1,)

    @property
    def dim(self) -> int:
        return self.n

    def _random_point(self, key: jax.Array, dtype: jnp.dtype) -> jax.Array:
        # exp at the origin of a Gaussian tangent (0, ξ), ξ ~ N(0, I/n): distance ≈ 1, uniform
        # direction (the image of PoincareBall's random point).
        c = self.curvature
        xi = jax.random.normal(key, (self.n,), dtype) / math.sqrt(self.n)
        s2 = c * hyp.dot(xi, xi)
        return self._project_point(jnp.concatenate([(hyp.cosh_root(s2) / math.sqrt(c))[None],
                                                    hyp.sinhc(s2) * xi]))

    def _project(self, x: jax.Array, v: jax.Array) -> jax.Array:
        return v + (self.curvature * hyp.minkowski(x, v))[..., None] * x

    def _project_point(self, x: jax.Array) -> jax.Array:
        c = self.curvature
        radius = math.sinh(math.sqrt(c) * hyp.max_distance(x.dtype, c)) / math.sqrt(c)
        space = x[..., 1:]
        norm = safe_sqrt(hyp.dot(space, space))
        outside = norm > radius
        space = space * jnp.where(outside, radius / jnp.where(outside, norm, 1), 1)[..., None]
        time = jnp.sqrt(1 / c + hyp.dot(space, space))
        return jnp.concatenate([time[..., None], space], axis=-1)

    def _egrad_to_rgrad(self, x: jax.Array, g: jax.Array) -> jax.Array:
        return self._project(x, jnp.concatenate([-g[..., :1], g[..., 1:]], axis=-1))

    def _ehess_to_rhess(self, x: jax.Array, egrad: jax.Array, ehess: jax.Array, v: jax.Array
                        ) -> jax.Array:
        flipped = jnp.concatenate([-ehess[..., :1], ehess[..., 1:]], axis=-1)
        return self._project(x, flipped) + (self.curvature * hyp.dot(x, egrad))[..., None] * v

    def _inner(self, x: jax.Array, u: jax.Array, v: jax.Array) -> jax.Array:
        return hyp.minkowski(u, v)

    def _retract(self, x: jax.Array, v: jax.Array) -> jax.Array:
        return self._exp(x, v)

    def _transport(self, x: jax.Array, y: jax.Array, v: jax.Array) -> jax.Array:
        c = self.curvature
        scale = c * hyp.minkowski(y, v) / (1 - c * hyp.minkowski(x, y))  # denominator ≥ 2
        return v + scale[..., None] * (x + y)

    def _outside(self, x: jax.Array) -> jax.Array:
        return hyp.outside_hyperboloid(x, self.curvature)

    def _manifold_error(self, x: jax.Array) -> jax.Array:
        space = x[..., 1:]
        time = jnp.sqrt(1 / self.curvature + hyp.dot(space, space))
        return jnp.abs(x[..., 0] - time) / time

    def _exp(self, x: jax.Array, v: jax.Array) -> jax.Array:
        c = self.curvature
        # cosh s and sinh(s)/s as functions of s² = c‖v‖²_L: every derivative exact at v = 0.
        s2 = c * hyp.nonnegative(hyp.minkowski(v, v))
        longest = 2 * math.sqrt(c) * hyp.max_distance(x.dtype, c)  # keeps cosh(s)·x finite
        too_long = s2 > longest * longest
        scale = longest / jnp.sqrt(jnp.where(too_long, s2, 1))
        v = v * jnp.where(too_long, scale, 1)[..., None]
        s2 = jnp.minimum(s2, longest * longest)
        y = hyp.cosh_root(s2)[..., None] * x + hyp.sinhc(s2)[..., None] * v
        return self._project_point(y)

    def _log(self, x: jax.Array, y: jax.Array) -> jax.Array:
        # d/‖u‖_L = t/sinh(t) with t = √c d (‖u‖_L = sinh(√c d)/√c): smooth, 1 at y = x.
        c = self.curvature
        e = y - x
        u = e + (c * hyp.minkowski(x, e))[..., None] * x
        return hyp.t_over_sinh(c * self._squared_dist(x, y))[..., None] * u

    def _squared_dist(self, x: jax.Array, y: jax.Array) -> jax.Array:
        c = self.curvature
        e = y - x
        delta = 0.5 * c * hyp.nonnegative(hyp.minkowski(e, e))
        return hyp.arcosh1p_squared(delta) / c
