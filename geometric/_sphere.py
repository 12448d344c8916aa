r"""The unit sphere S^{n-1} ⊂ ℝⁿ."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from ._base import AbstractManifold, check_random_dtype, check_size

__all__ = ["Sphere"]


@dataclasses.dataclass(frozen=True)
class Sphere(AbstractManifold):
    r"""The unit sphere of vectors ``x`` of shape ``(n,)`` with ``‖x‖ = 1`` (St(n, 1) as vectors).

    .. math::
        S^{n-1} = \{x \in \mathbb{R}^n : x^Tx = 1\}, \qquad T_x = \{v : x^Tv = 0\}, \qquad
        P_x(v) = v - x\,(x^Tv)

    The metric is ``vᵀw``, so the Riemannian gradient is the projection of ``g``. The retraction
    ``(x + v)/‖x + v‖`` corrects itself; vector transport is the projection onto the new tangent
    space; :meth:`manifold_error` is ``|xᵀx - 1|``.

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
    """

    n: int

    def __post_init__(self):
        object.__setattr__(self, "n", check_size("Sphere", "n", self.n))

    @property
    def shape(self) -> tuple[int]:
        return (self.n,)

    @property
    def self_correcting(self) -> bool:
        return True

    def random_point(self, key, dtype=jnp.float32):
        check_random_dtype(f"{self!r}.random_point", dtype)
        # A normalised Gaussian is uniform on the sphere (the sign-corrected QR of an n×1 matrix).
        return _normalize(jax.random.normal(key, (self.n,), dtype))

    def random_tangent(self, key, x):
        self._check_point("random_tangent", x)
        return _project(x, jax.random.normal(key, x.shape, x.dtype))

    def project(self, x, v):
        self._check_point("project", x)
        self._check_like("project", "v", v, x)
        return _project(x, v)

    def project_point(self, x):
        self._check_point("project_point", x)
        return _normalize(x)

    def egrad_to_rgrad(self, x, g):
        self._check_point("egrad_to_rgrad", x)
        self._check_like("egrad_to_rgrad", "g", g, x)
        return _project(x, g)

    def inner(self, x, u, v):
        self._check_point("inner", x)
        self._check_like("inner", "u", u, x)
        self._check_like("inner", "v", v, x)
        return _dot(u, v)

    def retract(self, x, v):
        self._check_point("retract", x)
        self._check_like("retract", "v", v, x)
        return _normalize(x + v)

    def transport(self, x, y, v):
        self._check_point("transport", x)
        self._check_like("transport", "y", y, x)
        self._check_like("transport", "v", v, x)
        return _project(y, v)

    def manifold_error(self, x):
        self._check_point("manifold_error", x)
        return jnp.abs(_dot(x, x) - 1)


def _dot(u, v):
    return jnp.sum(u * v, axis=-1)


def _project(x, v):
    return v - x * _dot(x, v)[..., None]


def _normalize(x):
    return x / jnp.linalg.norm(x, axis=-1, keepdims=True)
