r"""The Grassmann manifold Gr(n, p) of p-dimensional subspaces of ℝⁿ."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from rules.internal import mm


def T(x):  # noqa: N802 (replaced by the geometric rework)
    return x.mT

from ._base import AbstractManifold, check_random_dtype, check_size
from ._stiefel import frobenius_sq, gram_error, haar_frame, polar_factor, qr_factor

__all__ = ["Grassmann"]


@dataclasses.dataclass(frozen=True)
class Grassmann(AbstractManifold):
    r"""The Grassmann manifold, a subspace represented by an orthonormal basis ``Y`` (n×p).

    .. math::
        \mathrm{Gr}(n, p) = \mathrm{St}(n, p) / O(p), \qquad
        T_Y = \{\Delta : Y^T\Delta = 0\}, \qquad P_Y(V) = (I - YY^T)V

    Tangent vectors are horizontal representatives; the metric is ``tr(Δ₁ᵀΔ₂)`` and the Riemannian
    gradient of ``G`` is ``(I - YYᵀ)G`` (for a loss invariant under ``Y → YQ`` this is ``G``
    itself). The retraction ``qf(Y + V)`` (``diag(R) ≥ 0``) spans the same subspace as the polar
    and projective retractions at the cheapest cost, O(np²), and corrects itself. Vector transport
    is the projection onto the new horizontal space. A point's representative matters only up to
    ``Y → YQ``; :meth:`manifold_error` measures ``‖YᵀY - I‖_F``.

    Args:
      n: ambient dimension, ``n ≥ p``.
      p: subspace dimension, ``p ≥ 1``.

    Raises:
      TypeError: ``n`` or ``p`` is not an int.
      ValueError: ``p < 1`` or ``p > n``.

    References:
      A. Edelman, T. Arias, S. Smith, "The geometry of algorithms with orthogonality constraints",
      SIAM J. Matrix Anal. Appl. 20 (1998), https://arxiv.org/abs/physics/9806030.
      P.-A. Absil, R. Mahony, R. Sepulchre, "Optimization Algorithms on Matrix Manifolds" (2008).

    Examples:
      >>> import jax, jax.numpy as jnp, geometric
      >>> gr = geometric.Grassmann(5, 2)
      >>> y = gr.random_point(jax.random.PRNGKey(0))
      >>> v = gr.random_tangent(jax.random.PRNGKey(1), y)
      >>> bool(jnp.abs(y.T @ v).max() < 1e-5)
      True
    """

    n: int
    p: int

    def __post_init__(self):
        object.__setattr__(self, "n", check_size("Grassmann", "n", self.n))
        object.__setattr__(self, "p", check_size("Grassmann", "p", self.p))
        if self.p > self.n:
            raise ValueError(f"Grassmann: `p` must satisfy p ≤ n = {self.n}; got p = {self.p}.")

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.p)

    @property
    def self_correcting(self) -> bool:
        return True

    def random_point(self, key, dtype=jnp.float32):
        check_random_dtype(f"{self!r}.random_point", dtype)
        return haar_frame(key, self.n, self.p, dtype)

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
    return v - mm(x, mm(T(x), v))
