r"""The orthogonal group O(n)."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from rules.internal import mm


def T(x):  # noqa: N802 (replaced by the geometric rework)
    return x.mT

from ._base import AbstractManifold, check_random_dtype, check_size
from ._stiefel import frobenius_sq, gram_error, haar_frame, polar_factor, qr_factor, sym

__all__ = ["Orthogonal"]


@dataclasses.dataclass(frozen=True)
class Orthogonal(AbstractManifold):
    r"""The orthogonal group of n×n matrices ``X`` with ``XᵀX = I`` (both components, det ±1).

    .. math::
        O(n) = \mathrm{St}(n, n), \qquad T_X = \{X\Omega : \Omega^T = -\Omega\}, \qquad
        P_X(V) = X\,\mathrm{skew}(X^TV)

    The metric is ``tr(Δ₁ᵀΔ₂)`` (bi-invariant), so the Riemannian gradient is the projection
    ``X skew(XᵀG)``. The retraction is ``qf(X + V)`` with ``diag(R) ≥ 0`` (self-correcting, and it
    stays in the component of ``X`` for steps that do not reach a singular ``X + V``); vector
    transport is the projection onto the new tangent space.

    Args:
      n: size, ``n ≥ 1``.

    Raises:
      TypeError: ``n`` is not an int.
      ValueError: ``n < 1``.

    References:
      P.-A. Absil, R. Mahony, R. Sepulchre, "Optimization Algorithms on Matrix Manifolds" (2008).

    Examples:
      >>> import jax, jax.numpy as jnp, geometric
      >>> o = geometric.Orthogonal(3)
      >>> x = o.random_point(jax.random.PRNGKey(0))
      >>> bool(o.manifold_error(x) < 1e-5)
      True
    """

    n: int

    def __post_init__(self):
        object.__setattr__(self, "n", check_size("Orthogonal", "n", self.n))

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    @property
    def self_correcting(self) -> bool:
        return True

    def random_point(self, key, dtype=jnp.float32):
        check_random_dtype(f"{self!r}.random_point", dtype)
        return haar_frame(key, self.n, self.n, dtype)

    def random_tangent(self, key, x):
        self._check_point("random_tangent", x)
        return _project(x, jax.random.normal(key, x.shape, x.dtype))

    def project(self, x, v):
        self._check_point("project", x)
        self._check_like("project", "v", v, x)
        return _project(x, v)

    def project_point(self, x):
        self._check_point("project_point", x)
        return polar_factor(x)

    def egrad_to_rgrad(self, x, g):
        self._check_point("egrad_to_rgrad", x)
        self._check_like("egrad_to_rgrad", "g", g, x)
        return _project(x, g)

    def inner(self, x, u, v):
        self._check_point("inner", x)
        self._check_like("inner", "u", u, x)
        self._check_like("inner", "v", v, x)
        return frobenius_sq(u, v)

    def retract(self, x, v):
        self._check_point("retract", x)
        self._check_like("retract", "v", v, x)
        return qr_factor(x + v)

    def transport(self, x, y, v):
        self._check_point("transport", x)
        self._check_like("transport", "y", y, x)
        self._check_like("transport", "v", v, x)
        return _project(y, v)

    def manifold_error(self, x):
        self._check_point("manifold_error", x)
        return gram_error(x)


def _project(x, v):
    # V - X sym(XᵀV) as on St(n, n); for square X it equals X skew(XᵀV).
    return v - mm(x, sym(mm(T(x), v)))
