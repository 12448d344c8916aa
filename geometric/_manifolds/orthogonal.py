r"""The orthogonal group O(n)."""
from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp

import rules
from rules.internal import arctan_sv, eye_like, mm, mm_h, qr_factor

from .._core.checks import check_int_field
from .._core.arrays import skew, sym
from .._core.frames import AbstractFrameManifold

__all__ = ["Orthogonal"]


@dataclasses.dataclass(frozen=True)
class Orthogonal(AbstractFrameManifold):
    r"""The orthogonal group of n×n matrices ``X`` with ``XᵀX = I`` (both components, det ±1).

    .. math::
        O(n) = \mathrm{St}(n, n), \qquad T_X = \{X\Omega : \Omega^T = -\Omega\}, \qquad
        P_X(V) = X\,\mathrm{skew}(X^TV)

    The metric is ``tr(Δ₁ᵀΔ₂)`` (bi-invariant), so the Riemannian gradient is the projection
    ``X skew(XᵀG)`` and the Riemannian Hessian ``P_X(∇²f(X)[V] - V sym(Xᵀ∇f(X)))`` (as on
    St(n, n)). The retraction is ``qf(X + V)`` with ``diag(R) ≥ 0`` (self-correcting, and it
    stays in the component of ``X`` for steps that do not reach a singular ``X + V``); vector
    transport is the projection onto the new tangent space.

    Geodesics are one-parameter subgroups; the logarithm is the principal matrix logarithm:

    .. math::
        \exp_X(V) = X \exp(X^TV), \qquad \log_X(Y) = X \log(X^TY), \qquad
        d(X, Y) = \|\log(X^TY)\|_F

    ``log(R)`` is computed from ``tan(K/2) = (R - I)(R + I)⁻¹`` as ``K = 2 arctan(tan(K/2))``
    (:func:`arctan_sv`, no eigendecomposition or SVD), so it and ``dist`` are differentiable at
    ``Y = X`` and at repeated rotation angles. Both need ``Y`` in the component of ``X`` with
    every rotation angle of ``XᵀY`` below π (``R + I`` invertible); at angle π the logarithm is
    not unique.

    Args:
      n: size, ``n ≥ 1``.

    Raises:
      TypeError: ``n`` is not an int.
      ValueError: ``n < 1``.

    References:
      P.-A. Absil, R. Mahony, R. Sepulchre, "Optimization Algorithms on Matrix Manifolds" (2008).
      N. J. Higham, "Functions of Matrices: Theory and Computation" (2008), ch. 11.

    Examples:
      >>> import jax, jax.numpy as jnp, geometric
      >>> o = geometric.Orthogonal(3)
      >>> x = o.random_point(jax.random.PRNGKey(0))
      >>> bool(o.manifold_error(x) < 1e-5)
      True
    """

    n: int

    capabilities: ClassVar[frozenset[str]] = frozenset({"exp", "log", "dist", "frame"})
    self_correcting: ClassVar[bool] = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", check_int_field("Orthogonal", "n", self.n))

    @property
    def _frame_size(self) -> tuple[int, int]:
        return (self.n, self.n)

    @property
    def dim(self) -> int:
        return self.n * (self.n - 1) // 2

    def _project(self, x: jax.Array, v: jax.Array) -> jax.Array:
        # V - X sym(XᵀV) as on St(n, n); for square X it equals X skew(XᵀV).
        return v - mm(x, sym(mm_h(x, v)))

    def _ehess_to_rhess(self, x: jax.Array, egrad: jax.Array, ehess: jax.Array, v: jax.Array
                        ) -> jax.Array:
        return self._project(x, ehess - mm(v, sym(mm_h(x, egrad))))

    def _frame_rgrad(self, y: jax.Array, g: jax.Array, yt_g: jax.Array
                     ) -> tuple[jax.Array, jax.Array, jax.Array]:
        return g, yt_g, -sym(yt_g)

    def _retract(self, x: jax.Array, v: jax.Array) -> jax.Array:
        return qr_factor(x + v)

    def _exp(self, x: jax.Array, v: jax.Array) -> jax.Array:
        return mm(x, rules.expm(skew(mm_h(x, v))))

    def _log(self, x: jax.Array, y: jax.Array) -> jax.Array:
        # R - I = Xᵀ(Y - X) on the manifold: accurate for close points, exactly 0 at Y = X.
        d = mm_h(x, y - x)
        half_tan = rules.solve(2 * eye_like(d) + d, d)  # (R + I)⁻¹(R - I); the factors commute
        return mm(x, skew(2 * arctan_sv(half_tan)))
