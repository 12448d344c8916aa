r"""The unit sphere S^{n-1} ⊂ ℝⁿ."""
from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from .._core.checks import check_int_field
from .._core.arrays import analytic_at_zero, safe_sqrt
from .._core.manifold import AbstractManifold

__all__ = ["Sphere"]


@dataclasses.dataclass(frozen=True)
class Sphere(AbstractManifold):
    r"""The unit sphere of vectors ``x`` of shape ``(n,)`` with ``‖x‖ = 1`` (St(n, 1) as vectors).

    .. math::
        S^{n-1} = \{x \in \mathbb{R}^n : x^Tx = 1\}, \qquad T_x = \{v : x^Tv = 0\}, \qquad
        P_x(v) = v - x\,(x^Tv)

    The metric is ``vᵀw``, so the Riemannian gradient is the projection of ``g``, and the
    Riemannian Hessian adds the Weingarten term of the sphere to the projected Euclidean one,
    ``Hess f(x)[v] = P_x(∇²f(x)[v]) − (xᵀ∇f(x)) v``. The retraction
    ``(x + v)/‖x + v‖`` corrects itself; vector transport is the projection onto the new tangent
    space; :meth:`manifold_error` is ``|xᵀx - 1|``. Geodesics are great circles:

    .. math::
        \exp_x(v) = \cos(\|v\|)\,x + \frac{\sin\|v\|}{\|v\|}\,v, \qquad
        \log_x(y) = \frac{\theta}{\|u\|}\,u, \quad u = y - (x^Ty)\,x, \qquad
        d(x, y) = \theta = \operatorname{atan2}(\|u\|, x^Ty)

    (``atan2`` rather than ``arccos(xᵀy)``: accurate for near and for far points). ``log`` is
    undefined at the antipode ``y = -x``, the cut locus (nan within rounding of it; ``dist``
    returns π).

    Args:
      n: ambient dimension, ``n ≥ 1``.

    Raises:
      TypeError: ``n`` is not an int.
      ValueError: ``n < 1``.

    References:
      P.-A. Absil, R. Mahony, R. Sepulchre, "Optimization Algorithms on Matrix Manifolds" (2008).

    Examples:
      >>> import jax, jax.numpy as jnp, geometric
      >>> s = geometric.Sphere(3)
      >>> x = jnp.array([1.0, 0.0, 0.0])
      >>> print(s.retract(x, jnp.array([0.0, 1.0, 0.0])).round(4))
      [0.7071 0.7071 0.    ]
      >>> print(f"{s.dist(x, jnp.array([0.0, 0.0, 1.0])):.4f}")  # π/2
      1.5708
    """

    n: int

    capabilities: ClassVar[frozenset[str]] = frozenset({"exp", "log", "dist", "frame"})
    self_correcting: ClassVar[bool] = True
    _error_formula: ClassVar[str] = "|xᵀx − 1|"

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", check_int_field("Sphere", "n", self.n))

    @property
    def shape(self) -> tuple[int]:
        return (self.n,)

    @property
    def dim(self) -> int:
        return self.n - 1

    def _random_point(self, key: jax.Array, dtype: jnp.dtype) -> jax.Array:
        # A normalised Gaussian is uniform on the sphere (the sign-corrected QR of an n×1 matrix).
        return _normalize(jax.random.normal(key, (self.n,), dtype))

    def _project(self, x: jax.Array, v: jax.Array) -> jax.Array:
        return v - x * _dot(x, v)[..., None]

    def _project_point(self, x: jax.Array) -> jax.Array:
        return _normalize(x)

    def _retract(self, x: jax.Array, v: jax.Array) -> jax.Array:
        return _normalize(x + v)

    def _ehess_to_rhess(self, x: jax.Array, egrad: jax.Array, ehess: jax.Array, v: jax.Array
                        ) -> jax.Array:
        return self._project(x, ehess) - _dot(x, egrad)[..., None] * v

    def _manifold_error(self, x: jax.Array) -> jax.Array:
        return jnp.abs(_dot(x, x) - 1)

    def _exp(self, x: jax.Array, v: jax.Array) -> jax.Array:
        # cos t and sin(t)/t as functions of t² = ‖v‖²: every derivative exact at v = 0.
        t2 = _dot(v, v)[..., None]
        return _cos_root(t2) * x + _sinc_root(t2) * v

    def _log(self, x: jax.Array, y: jax.Array) -> jax.Array:
        u, s, c = _chord(x, y)
        log = _angle(s, c)[0][..., None] * u
        # At the antipode (the cut locus: every direction is a shortest geodesic) ‖u‖ is
        # rounding, and u a direction picked by it: nan, not a finite wrong tangent.
        antipode = (s <= (8 * float(np.finfo(x.dtype).eps)) ** 2) & (c < 0)
        return jnp.where(jax.lax.stop_gradient(antipode)[..., None], jnp.nan, log)

    def _squared_dist(self, x: jax.Array, y: jax.Array) -> jax.Array:
        _, s, c = _chord(x, y)
        return _angle(s, c)[1]

    def _to_frame(self, x: jax.Array) -> jax.Array:
        return x[..., None]

    def _from_frame(self, y: jax.Array) -> jax.Array:
        return y[..., 0]

    def _frame_rgrad(self, y: jax.Array, g: jax.Array, yt_g: jax.Array
                     ) -> tuple[jax.Array, jax.Array, jax.Array]:
        return g, yt_g, -yt_g


def _dot(u: jax.Array, v: jax.Array) -> jax.Array:
    return jnp.sum(u * v, axis=-1)


def _chord(x: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``u = P_x(y)``, ``‖u‖²`` and ``xᵀy``, whose angle ``θ = atan2(‖u‖, xᵀy)`` is the distance.

    ``u`` is formed from ``y - x``: equal to ``y - (xᵀy)x`` on the sphere, accurate for close
    points, and exactly 0 at ``y = x``.
    """
    d = y - x
    u = d - x * _dot(x, d)[..., None]
    return u, _dot(u, u), _dot(x, y)


def _angle(s: jax.Array, c: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``θ/‖u‖`` and ``θ²`` for ``θ = atan2(‖u‖, c)``, from ``s = ‖u‖²`` and ``c = xᵀy``.

    Within 60° of ``x`` (``c > 1/2``) both are analytic in ``s``: ``θ/‖u‖ = atanc(s/c²)/c`` with
    ``atanc(z²) = arctan(z)/z``, so the logarithm and the squared distance have every derivative
    at ``y = x`` (a formula through ``‖u‖`` has no second derivative there).
    """
    near = c > 0.5
    c_near = jnp.where(near, c, 1)
    ratio = analytic_at_zero(jnp.where(near, s / (c_near * c_near), 0),
                             lambda z2: jnp.arctan(jnp.sqrt(z2)) / jnp.sqrt(z2),
                             (1, -1 / 3, 1 / 5, -1 / 7, 1 / 9, -1 / 11)) / c_near
    s_far = jnp.where(near | (s <= 0), 1, s)
    theta_far = jnp.arctan2(jnp.where(near, 1, safe_sqrt(s)), c)  # antipode: subgradient 0
    over = jnp.where(near, ratio, theta_far / jnp.sqrt(s_far))
    return over, jnp.where(near, s * ratio * ratio, theta_far * theta_far)


def _cos_root(t2: jax.Array) -> jax.Array:
    """``cos t`` as a function of ``t2 = t²``."""
    return analytic_at_zero(t2, lambda s: jnp.cos(jnp.sqrt(s)),
                            (1, -1 / 2, 1 / 24, -1 / 720, 1 / 40320, -1 / 3628800))


def _sinc_root(t2: jax.Array) -> jax.Array:
    """``sin(t)/t`` as a function of ``t2 = t²``."""
    return analytic_at_zero(t2, lambda s: jnp.sin(jnp.sqrt(s)) / jnp.sqrt(s),
                            (1, -1 / 6, 1 / 120, -1 / 5040, 1 / 362880, -1 / 39916800))


def _normalize(x: jax.Array) -> jax.Array:
    return x / jnp.linalg.norm(x, axis=-1, keepdims=True)
