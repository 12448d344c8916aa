r"""The oblique manifold OB(n, p) of n×p matrices with unit-norm columns."""
from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp

from .._core.checks import check_int_field
from .._core.manifold import AbstractManifold
from .sphere import Sphere

__all__ = ["Oblique"]


@dataclasses.dataclass(frozen=True)
class Oblique(AbstractManifold):
    r"""n×p matrices whose p columns have unit norm: the product of p spheres S^{n-1}.

    .. math::
        \mathrm{OB}(n, p) = \{X \in \mathbb{R}^{n\times p} : \operatorname{diag}(X^TX) = 1\},
        \qquad P_X(V) = V - X\operatorname{Diag}(\operatorname{diag}(X^TV))

    Used for normalised dictionaries, factor loadings and correlation matrices ``XᵀX`` of rank
    ``≤ n``. Every operation is :class:`Sphere`'s, column by column: the metric ``tr(UᵀV)``, the
    Riemannian gradient (the projection), the Riemannian Hessian
    ``P_X(∇²f(X)[V]) − V Diag(diag(Xᵀ∇f(X)))``, the retraction that normalises each column of
    ``X + V`` (self-correcting), transport by projection, and the great-circle geodesics

    .. math::
        \exp_X(V)_j = \exp_{x_j}(v_j), \qquad \log_X(Y)_j = \log_{x_j}(y_j), \qquad
        d(X, Y) = \Big(\sum_j \theta_j^2\Big)^{1/2}, \quad
        \theta_j = \operatorname{atan2}(\|P_{x_j}(y_j)\|, x_j^Ty_j)

    (the distance of a Riemannian product). ``log`` needs no column of ``Y`` antipodal to its
    column of ``X``. The distance's derivative at ``Y = X`` is 0 (a subgradient); ``dist²`` has its
    true derivative there. :meth:`manifold_error` is ``‖diag(XᵀX) - 1‖₂``. Random points have
    independent uniform columns.

    ``manifold_adam`` does not take this manifold (its points are not one orthonormal frame):
    store the matrix transposed, shape ``(p, n)``, with a :class:`Sphere` ``(n)`` leaf: a batch of
    ``p`` sphere points, which every optimizer takes.

    Args:
      n: rows (the dimension of each column), ``n ≥ 1``.
      p: columns, ``p ≥ 1``.

    Raises:
      TypeError: ``n`` or ``p`` is not an int.
      ValueError: ``n < 1`` or ``p < 1``.

    References:
      P.-A. Absil, K. A. Gallivan, "Joint diagonalization on the oblique manifold for independent
      component analysis", ICASSP (2006). Derivations: ``docs/derivations/manifolds.md#oblique``.

    Examples:
      >>> import jax, jax.numpy as jnp, geometric
      >>> ob = geometric.Oblique(3, 2)
      >>> x = ob.random_point(jax.random.PRNGKey(0))
      >>> print(jnp.linalg.norm(x, axis=0).round(5))
      [1. 1.]
      >>> print(f"{ob.dist(jnp.eye(3)[:, :2], jnp.eye(3)[:, 1:]):.4f}")  # two right angles: π/√2
      2.2214
    """

    n: int
    p: int

    capabilities: ClassVar[frozenset[str]] = frozenset({"exp", "log", "dist"})
    self_correcting: ClassVar[bool] = True
    _error_formula: ClassVar[str] = "‖diag(xᵀx) − 1‖₂"

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", check_int_field("Oblique", "n", self.n))
        object.__setattr__(self, "p", check_int_field("Oblique", "p", self.p))

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.p)

    @property
    def dim(self) -> int:
        return self.p * (self.n - 1)

    @property
    def _columns(self) -> Sphere:
        """The sphere of each column; it takes points on the last axis, so its methods get ``Xᵀ``."""
        return Sphere(self.n)

    def _random_point(self, key: jax.Array, dtype: jnp.dtype) -> jax.Array:
        return self._project_point(jax.random.normal(key, self.shape, dtype))

    def _project(self, x: jax.Array, v: jax.Array) -> jax.Array:
        return self._columns.project(x.mT, v.mT).mT

    def _project_point(self, x: jax.Array) -> jax.Array:
        return self._columns.project_point(x.mT).mT

    def _retract(self, x: jax.Array, v: jax.Array) -> jax.Array:
        return self._columns.retract(x.mT, v.mT).mT

    def _ehess_to_rhess(self, x: jax.Array, egrad: jax.Array, ehess: jax.Array, v: jax.Array
                        ) -> jax.Array:
        return self._project(x, ehess) - v * jnp.sum(x * egrad, axis=-2, keepdims=True)

    def _manifold_error(self, x: jax.Array) -> jax.Array:
        return jnp.linalg.norm(self._columns.manifold_error(x.mT), axis=-1)

    def _exp(self, x: jax.Array, v: jax.Array) -> jax.Array:
        return self._columns.exp(x.mT, v.mT).mT

    def _log(self, x: jax.Array, y: jax.Array) -> jax.Array:
        return self._columns.log(x.mT, y.mT).mT

    def _squared_dist(self, x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.sum(self._columns.squared_dist(x.mT, y.mT), axis=-1)
