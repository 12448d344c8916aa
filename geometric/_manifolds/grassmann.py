r"""The Grassmann manifold Gr(n, p) of p-dimensional subspaces of ℝⁿ."""
from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp

import rules
from rules.internal import arctan_sv, mm_h, mm_thin, qr_factor

from .._core.checks import check_frame_fields
from .._core.rotations import rotate
from .._core.frames import AbstractFrameManifold

__all__ = ["Grassmann"]


@dataclasses.dataclass(frozen=True)
class Grassmann(AbstractFrameManifold):
    r"""The Grassmann manifold, a subspace represented by an orthonormal basis ``Y`` (n×p).

    .. math::
        \mathrm{Gr}(n, p) = \mathrm{St}(n, p) / O(p), \qquad
        T_Y = \{\Delta : Y^T\Delta = 0\}, \qquad P_Y(V) = (I - YY^T)V

    Tangent vectors are horizontal representatives; the metric is ``tr(Δ₁ᵀΔ₂)`` and the Riemannian
    gradient of ``G`` is ``(I - YYᵀ)G`` (for a loss invariant under ``Y → YQ`` this is ``G``
    itself) and the Riemannian Hessian ``(I - YYᵀ)∇²f(Y)[Δ] - Δ Yᵀ∇f(Y)`` (Absil et al. 2004;
    self-adjoint for such a loss, whose ``Yᵀ∇f(Y)`` is symmetric). The retraction ``qf(Y + V)``
    (``diag(R) ≥ 0``) spans the same subspace as the polar and projective retractions at the
    cheapest cost, O(np²), and corrects itself. Vector transport
    is the projection onto the new horizontal space. A point's representative matters only up to
    ``Y → YQ``; :meth:`manifold_error` measures ``‖YᵀY - I‖_F``.

    Geodesics, in terms of the principal angles ``Θ`` between the subspaces of ``Y`` and ``Z``
    (Edelman et al., Thm. 2.3; Absil et al. 2004):

    .. math::
        \exp_Y(\Delta) = \exp(\Delta Y^T - Y\Delta^T)\,Y, \qquad
        \log_Y(Z) = U \arctan(\Sigma) V^T \text{ for } (I - YY^T)Z(Y^TZ)^{-1} = U\Sigma V^T,
        \qquad d(Y, Z) = \|\Theta\|_2 = \|\log_Y(Z)\|_F

    ``exp`` is the canonical Stiefel geodesic of a horizontal ``Δ`` (:func:`rotate`, O(np²)).
    ``log`` is computed without an SVD (``A f(AᵀA)``), so it and ``dist`` are differentiable at
    repeated principal angles and at ``Z = Y``; ``log`` does not depend on the basis of ``Z``.
    Both need every principal angle below π/2 (``YᵀZ`` invertible): beyond it lies the cut
    locus, where the logarithm is not unique.

    With ``rows=True`` the points are ``(p, n)`` arrays whose orthonormal rows span the subspace
    (the transpose of the column representation, as for :class:`Stiefel`).

    Args:
      n: ambient dimension, ``n ≥ p``.
      p: subspace dimension, ``p ≥ 1``.
      rows: keyword only; points are ``(p, n)`` with orthonormal rows.

    Raises:
      TypeError: ``n`` or ``p`` is not an int, ``rows`` not a bool.
      ValueError: ``p < 1`` or ``p > n``.

    References:
      A. Edelman, T. Arias, S. Smith, "The geometry of algorithms with orthogonality constraints",
      SIAM J. Matrix Anal. Appl. 20 (1998), https://arxiv.org/abs/physics/9806030.
      P.-A. Absil, R. Mahony, R. Sepulchre, "Riemannian geometry of Grassmann manifolds with a
      view on algorithmic computation", Acta Appl. Math. 80 (2004).
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
    rows: bool = dataclasses.field(default=False, kw_only=True)

    capabilities: ClassVar[frozenset[str]] = frozenset({"exp", "log", "dist", "frame"})
    horizontal: ClassVar[bool] = True
    self_correcting: ClassVar[bool] = True

    def __post_init__(self) -> None:
        n, p = check_frame_fields("Grassmann", self.n, self.p, self.rows)
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "p", p)

    @property
    def _frame_size(self) -> tuple[int, int]:
        return (self.n, self.p)

    @property
    def _transposed(self) -> bool:
        return self.rows

    @property
    def dim(self) -> int:
        return self.p * (self.n - self.p)

    def _project(self, x: jax.Array, v: jax.Array) -> jax.Array:
        return v - mm_thin(x, mm_h(x, v))

    def _ehess_to_rhess(self, x: jax.Array, egrad: jax.Array, ehess: jax.Array, v: jax.Array
                        ) -> jax.Array:
        # Δ is horizontal (YᵀΔ = 0), so Δ YᵀG needs no projection.
        return self._project(x, ehess) - mm_thin(v, mm_h(x, egrad))

    def _retract(self, x: jax.Array, v: jax.Array) -> jax.Array:
        return qr_factor(x + v)

    def _frame_rgrad(self, y: jax.Array, g: jax.Array, yt_g: jax.Array
                     ) -> tuple[jax.Array, jax.Array, jax.Array]:
        return g, yt_g, -yt_g

    def _exp(self, x: jax.Array, v: jax.Array) -> jax.Array:
        # For horizontal Δ, (I - ½YYᵀ)Δ = Δ: Ω(Y, Δ) is ΔYᵀ - YΔᵀ.
        return rotate(x, v, "exp")

    def _log(self, x: jax.Array, y: jax.Array) -> jax.Array:
        # (I - YYᵀ)Z formed from Z - Y: the same on the manifold, and exactly 0 at Z = Y.
        d = y - x
        n = d - mm_thin(x, mm_h(x, d))
        a = rules.solve(mm_h(x, y).mT, n.mT).mT  # N (YᵀZ)⁻¹ = U tan(Θ) Vᵀ
        return arctan_sv(a)
