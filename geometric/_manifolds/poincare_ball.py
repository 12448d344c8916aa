r"""The Poincaré ball: hyperbolic space of curvature ``−c`` as the open ball of radius ``1/√c``."""
from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import jax
import jax.numpy as jnp

from .._core import hyperbolic as hyp

__all__ = ["PoincareBall"]


@dataclasses.dataclass(frozen=True)
class PoincareBall(hyp.AbstractHyperbolicManifold):
    r"""The Poincaré ball ``𝔹ⁿ_c``: vectors of shape ``(n,)`` with ``‖x‖ < 1/√c``, curvature ``−c``.

    .. math::
        g_x = \lambda_x^2\, g^E, \qquad \lambda_x = \frac{2}{1 - c\|x\|^2}, \qquad
        T_x = \mathbb{R}^n, \qquad \operatorname{grad} f(x) = \frac{(1 - c\|x\|^2)^2}{4}\,\nabla f(x)

    The metric is conformal: :meth:`inner` is ``λ_x² uᵀv``, the Riemannian gradient the Euclidean
    one rescaled by ``1/λ_x²``, and :meth:`project` the identity. The Riemannian Hessian adds the
    Christoffel terms of the conformal factor (``docs/derivations/riemannian-hessians.md``):

    .. math::
        \operatorname{Hess} f(x)[v] = \frac{\nabla^2 f(x)[v]}{\lambda_x^2}
            + \frac{c}{\lambda_x}\big((x^T g)\,v - (x^Tv)\,g - (v^Tg)\,x\big),
            \qquad g = \nabla f(x).

    The retraction is the exponential map, and :meth:`transport` is parallel transport along the
    geodesic, a gyration rescaled by the ratio of conformal factors. With ``⊕`` Möbius addition
    (:func:`geometric.hyperbolic.mobius_add`):

    .. math::
        \exp_x(v) &= x \oplus \tanh\!\Big(\frac{\sqrt c\,\lambda_x\|v\|}{2}\Big)
            \frac{v}{\sqrt c\,\|v\|}, \qquad
        \log_x(y) = \frac{2}{\sqrt c\,\lambda_x}\operatorname{artanh}(\sqrt c\,\|u\|)
            \frac{u}{\|u\|}, \quad u = (-x) \oplus y, \\
        d(x, y) &= \frac{1}{\sqrt c}\operatorname{arcosh}\Big(1 + \frac{2c\|x - y\|^2}
            {(1 - c\|x\|^2)(1 - c\|y\|^2)}\Big), \qquad
        P_{x\to y}(v) = \frac{\lambda_x}{\lambda_y}\operatorname{gyr}[y, -x]\,v .

    **Domain and accuracy.** The manifold as represented is the safe ball ``√c‖x‖ ≤ 1 − ε``,
    ``ε = 5e-4`` in float32 and ``1e-8`` in float64: hyperbolic distance up to ``8.3/√c``
    (float32) and ``19.1/√c`` (float64) from the origin, as far as coordinates locate a point to
    the accuracy promised. There Möbius addition, :meth:`exp`, :meth:`log` and :meth:`dist` are
    accurate to about ``1e-4`` (float32) and ``1e-8`` (float64) of the distances involved
    (tested against 50-digit references; Möbius sums are formed from ``x + y``, long ``exp``
    steps from ``1 − tanh``, so nothing cancels near the boundary). Points further out than
    ``1 − ε/2`` (outside the ball, or beyond its safe part by more than rounding) give nan, as
    ``jnp.log(-1.0)`` does; :meth:`project_point` brings any point into the safe ball. :meth:`retract`, :meth:`exp` and
    :meth:`project_point` return points inside it (a long step saturates ``tanh`` and is clipped
    onto its boundary), and :meth:`manifold_error` measures how far a point lies beyond it. For
    points in the safe ball every method is finite and has finite derivatives (tested on its
    boundary, in float32); points beyond it by rounding are treated as lying on its boundary. The distance uses ``arcosh(1 + δ) = log1p(δ + √(δ(δ + 2)))``,
    accurate both for near points (where ``2 artanh‖(−x) ⊕ y‖`` cancels) and far ones; ``log``
    forms ``(−x) ⊕ y`` from ``y − x``. The derivative of :meth:`dist` at ``y = x`` is 0 (a
    subgradient), so ``dist²`` is smooth there. Derivations: docs/derivations/hyperbolic.md.

    Optimizers: :func:`~geometric.optim.riemannian_sgd`, :func:`~geometric.optim.riemannian_adam`
    and :func:`~geometric.optim.riemannian`. ``manifold_adam`` needs orthonormal frames and
    rejects this manifold.

    Args:
      n: dimension, ``n ≥ 1``.
      curvature: ``c > 0``; the sectional curvature is ``−c`` and the ball has radius ``1/√c``.

    Raises:
      TypeError: ``n`` is not an int, or ``curvature`` not a real number.
      ValueError: ``n < 1``, or ``curvature`` is not positive and finite.

    References:
      M. Nickel, D. Kiela, "Poincaré embeddings for learning hierarchical representations",
      NeurIPS 2017. O.-E. Ganea, G. Bécigneul, T. Hofmann, "Hyperbolic neural networks",
      NeurIPS 2018. A. A. Ungar, "A gyrovector space approach to hyperbolic geometry" (2008).

    Examples:
      >>> import jax.numpy as jnp, geometric
      >>> ball = geometric.PoincareBall(2)
      >>> x, y = jnp.array([0.0, 0.0]), jnp.array([0.5, 0.0])
      >>> print(f"{ball.dist(x, y):.4f}")  # 2 artanh(0.5) = log 3
      1.0986
      >>> print(ball.exp(x, ball.log(x, y)))
      [0.5 0. ]
    """

    capabilities: ClassVar[frozenset[str]] = frozenset({"exp", "log", "dist"})
    _error_formula: ClassVar[str] = "max(0, √c‖x‖ − (1 − ε))"

    @property
    def shape(self) -> tuple[int]:
        return (self.n,)

    @property
    def dim(self) -> int:
        return self.n

    def _random_point(self, key: jax.Array, dtype: jnp.dtype) -> jax.Array:
        # A Gaussian of covariance I/n in an orthonormal frame at the origin (λ₀ = 2), mapped by
        # exp₀: a point at hyperbolic distance ≈ 1 from the origin, in a uniform direction.
        xi = jax.random.normal(key, (self.n,), dtype) / math.sqrt(self.n)
        return hyp.expmap0(xi / 2, self.curvature)

    def _project(self, x: jax.Array, v: jax.Array) -> jax.Array:
        return v

    def _project_point(self, x: jax.Array) -> jax.Array:
        return hyp.clip_ball(x, self.curvature)

    def _egrad_to_rgrad(self, x: jax.Array, g: jax.Array) -> jax.Array:
        half_gap = 0.5 * hyp.gap(hyp.dot(x, x), self.curvature)  # 1/λ_x
        return (half_gap * half_gap)[..., None] * g

    def _ehess_to_rhess(self, x: jax.Array, egrad: jax.Array, ehess: jax.Array, v: jax.Array
                        ) -> jax.Array:
        c = self.curvature
        inv_lam = 0.5 * hyp.gap(hyp.dot(x, x), c)  # 1/λ_x
        xg, xv, vg = (hyp.dot(*pair)[..., None] for pair in ((x, egrad), (x, v), (v, egrad)))
        christoffel = xg * v - xv * egrad - vg * x
        return (inv_lam * inv_lam)[..., None] * ehess + (c * inv_lam)[..., None] * christoffel

    def _inner(self, x: jax.Array, u: jax.Array, v: jax.Array) -> jax.Array:
        lam = 2 / hyp.gap(hyp.dot(x, x), self.curvature)
        return lam * lam * hyp.dot(u, v)

    def _retract(self, x: jax.Array, v: jax.Array) -> jax.Array:
        return self._exp(x, v)

    def _transport(self, x: jax.Array, y: jax.Array, v: jax.Array) -> jax.Array:
        # (λ_x/λ_y) gyr[y, −x] v, with Ungar's closed form of the gyration rewritten in e = y − x:
        # gyr[y, −x] v = v + (2/d)(a e + b x), where b vanishes and d = g² at e = 0, so the
        # transport to x itself is exactly v and nothing cancels for near points (see
        # docs/derivations/hyperbolic.md#transport).
        c = self.curvature
        e = y - x
        x2, xe, e2, xv, ev = (hyp.dot(*pair) for pair in ((x, x), (x, e), (e, e), (x, v), (e, v)))
        g = hyp.gap(x2, c)
        d = hyp.difference_denominator(g, x2, xe, e2, c)
        a = c * (c * (2 * xe * xv - x2 * ev) - g * xv)
        b = c * (g * ev - c * e2 * xv)
        gyrated = v + ((2 * a / d)[..., None] * e + (2 * b / d)[..., None] * x)
        return (hyp.gap(hyp.dot(y, y), c) / g)[..., None] * gyrated

    def _outside(self, x: jax.Array) -> jax.Array:
        return hyp.outside_ball(x, self.curvature)

    def _manifold_error(self, x: jax.Array) -> jax.Array:
        radius = math.sqrt(self.curvature) * jnp.linalg.norm(x, axis=-1)
        return jnp.maximum(radius - (1 - hyp.ball_margin(x.dtype)), 0)

    def _exp(self, x: jax.Array, v: jax.Array) -> jax.Array:
        c = self.curvature
        # A point beyond the safe ball starts from its boundary: the Möbius denominator of a
        # point near the unit sphere and a saturated step towards its antipode would underflow.
        x = hyp.clip_ball(x, c)
        return hyp.clip_ball(hyp.gyro_sum(x, hyp.exp_sum(x, v, c), c), c)

    def _log(self, x: jax.Array, y: jax.Array) -> jax.Array:
        # (2/(√c λ_x)) artanh(√c‖u‖) u/‖u‖ = (1 − c‖x‖²)·(t/tanh t)·u with t = √c d/2, because
        # √c‖u‖ = tanh(√c d/2): the distance comes from the accurate formula of _squared_dist,
        # and t/tanh t is analytic in t² (1 at y = x, where u = 0 exactly).
        c = self.curvature
        u = hyp.mobius_difference(x, y, c)
        t2 = 0.25 * c * self._squared_dist(x, y)
        return (hyp.gap(hyp.dot(x, x), c) * hyp.t_over_tanh(t2))[..., None] * u

    def _squared_dist(self, x: jax.Array, y: jax.Array) -> jax.Array:
        c = self.curvature
        e = y - x
        delta = 2 * c * hyp.dot(e, e) / (hyp.gap(hyp.dot(x, x), c) * hyp.gap(hyp.dot(y, y), c))
        return hyp.arcosh1p_squared(delta) / c
