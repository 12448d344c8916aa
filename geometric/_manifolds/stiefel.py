r"""The Stiefel manifold St(n, p) of orthonormal frames."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import ClassVar

import jax
import jax.numpy as jnp

import rules
from rules.internal import eye_like, mm, mm_h, mm_thin, polar_factor, qr_factor

from .._core.checks import check_choice_field, check_frame_fields
from .._core.arrays import frobenius_inner, sym
from .._core.rotations import rotate
from .._core.frames import AbstractFrameManifold

__all__ = ["Stiefel"]

METRICS = ("euclidean", "canonical")
RETRACTIONS = ("qr", "polar", "cayley", "exp")

_RETRACTIONS: dict[str, Callable[[jax.Array, jax.Array], jax.Array]] = {
    "qr": lambda x, v: qr_factor(x + v),
    "polar": lambda x, v: polar_factor(x + v),
    "cayley": lambda x, v: rotate(x, v, "cayley"),
    "exp": lambda x, v: rotate(x, v, "exp"),
}


@dataclasses.dataclass(frozen=True)
class Stiefel(AbstractFrameManifold):
    r"""The Stiefel manifold of n×p matrices with orthonormal columns (or, with ``rows``, p×n rows).

    .. math::
        \mathrm{St}(n, p) = \{Y \in \mathbb{R}^{n\times p} : Y^TY = I_p\}, \qquad
        P_Y(V) = V - Y\,\mathrm{sym}(Y^TV)

    Metrics (``metric``), with the Riemannian gradient of a Euclidean gradient ``G``:

    * ``"euclidean"``: ``g(Δ₁, Δ₂) = tr(Δ₁ᵀΔ₂)``, gradient ``G - Y sym(YᵀG)`` (the projection);
    * ``"canonical"``: ``g(Δ₁, Δ₂) = tr(Δ₁ᵀ(I - ½YYᵀ)Δ₂)``, gradient ``G - Y GᵀY`` — tangent, but
      not the projection of ``G``.

    Riemannian Hessians (:meth:`ehess_to_rhess`), with ``H = ∇²f(Y)[Δ]``: ``P_Y(H - Δ sym(YᵀG))``
    for the Euclidean metric (Absil, Mahony & Trumpf 2013); for the canonical metric
    ``A - Y AᵀY`` with ``A = H + ½(YΔᵀG + GΔᵀY) - ½(I - YYᵀ)Δ(YᵀG + GᵀY)`` (Edelman et al.,
    §2.4.4; ``docs/derivations/riemannian-hessians.md``).

    Retractions (``retraction``), each O(np²) time with no n×n array:

    * ``"qr"``: ``qf(Y + V)`` with ``diag(R) ≥ 0``, by CholeskyQR of the well-conditioned
      ``Y + V`` (Gram matrix ``I + VᵀV``; Householder QR for very large steps): the same map as
      Householder QR, in two matrix products and a p×p factorisation
      (:func:`rules.internal.qr_factor`, ``docs/derivations/manifolds.md``, "QR");
    * ``"polar"``: ``(Y + V)((Y + V)ᵀ(Y + V))^{-1/2}`` (p×p eigendecomposition);
    * ``"cayley"``: ``(I - ½Ω)⁻¹(I + ½Ω)Y``, ``Ω = Ω(Y, V)`` (Wen & Yin's low-rank form: one 2p×2p
      solve);
    * ``"exp"``: ``exp(Ω)Y``, the geodesic of the canonical metric (``φ`` of a 2p×2p matrix by
      scaling and squaring). With ``metric="euclidean"`` it is still a retraction, not that metric's
      geodesic.

    QR and polar correct themselves: they land on the manifold even from a slightly
    non-orthonormal ``Y``. Cayley and exp are rotations of ``Y`` and keep its rounding errors, so
    long float32 runs re-project now and then (``stabilize_every`` of :mod:`geometric.optim`).
    Vector transport is the projection onto the new tangent space (both metrics share it: the
    normal space ``{Y S : S = Sᵀ}`` is the same).

    :meth:`exp` is the geodesic of the chosen metric, O(np²) (Edelman et al., §2.2.2 and §2.4.2):

    .. math::
        \text{canonical: } \exp_Y(\Delta) = \exp(\Omega(Y, \Delta))\,Y, \qquad
        \text{euclidean: } \exp_Y(\Delta) = [Y, \Delta]\,
            \exp\begin{bmatrix} A & -S \\ I & A\end{bmatrix}
            \begin{bmatrix} I \\ 0\end{bmatrix} \exp(-A),

    ``A = YᵀΔ``, ``S = ΔᵀΔ``. The logarithm has no closed form, so there is no ``log`` or ``dist``.

    Orthonormal rows. Layers that store a weight as ``(out, in)`` (``equinox.nn.Linear``, PyTorch)
    want ``W Wᵀ = I``: ``Stiefel(n, p, rows=True)`` has points of shape ``(p, n)``,

    .. math::
        \{W \in \mathbb{R}^{p\times n} : W W^T = I_p\} = \{Y^T : Y \in \mathrm{St}(n, p)\},

    and every method is the column method applied to ``Wᵀ`` and transposed back (``Pᵂ(V) =
    P_{Wᵀ}(Vᵀ)ᵀ``, ``inner_W(U, V) = inner_{Wᵀ}(Uᵀ, Vᵀ)``, ...); transposition is an isometry, so
    Riemannian gradients, retractions and the optimizers carry over unchanged.

    Args:
      n: rows (with ``rows=True``: columns), ``n ≥ p``.
      p: columns (with ``rows=True``: rows), ``p ≥ 1``.
      metric: ``"euclidean"`` or ``"canonical"``.
      retraction: ``"qr"``, ``"polar"``, ``"cayley"`` or ``"exp"``.
      rows: keyword only; points are ``(p, n)`` with orthonormal rows.

    Raises:
      TypeError: ``n`` or ``p`` is not an int, ``rows`` not a bool.
      ValueError: ``p < 1``, ``p > n``, or an unknown ``metric`` or ``retraction``.

    References:
      A. Edelman, T. Arias, S. Smith, "The geometry of algorithms with orthogonality constraints",
      SIAM J. Matrix Anal. Appl. 20 (1998), https://arxiv.org/abs/physics/9806030.
      P.-A. Absil, R. Mahony, R. Sepulchre, "Optimization Algorithms on Matrix Manifolds" (2008).
      Z. Wen, W. Yin, "A feasible method for optimization with orthogonality constraints",
      Math. Program. 142 (2013).

    Examples:
      >>> import jax, jax.numpy as jnp, geometric
      >>> st = geometric.Stiefel(5, 2, retraction="cayley")
      >>> y = st.random_point(jax.random.PRNGKey(0))
      >>> v = st.random_tangent(jax.random.PRNGKey(1), y)
      >>> bool(st.manifold_error(st.retract(y, 0.1 * v)) < 1e-5)
      True
      >>> w = geometric.Stiefel(8, 4, rows=True).random_point(jax.random.PRNGKey(2))
      >>> w.shape, bool(jnp.abs(w @ w.T - jnp.eye(4)).max() < 1e-5)
      ((4, 8), True)
    """

    n: int
    p: int
    metric: str = "euclidean"
    retraction: str = "qr"
    rows: bool = dataclasses.field(default=False, kw_only=True)

    capabilities: ClassVar[frozenset[str]] = frozenset({"exp", "frame"})

    def __post_init__(self) -> None:
        n, p = check_frame_fields("Stiefel", self.n, self.p, self.rows)
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "p", p)
        check_choice_field("Stiefel", "metric", self.metric, METRICS)
        check_choice_field("Stiefel", "retraction", self.retraction, RETRACTIONS)

    @property
    def _frame_size(self) -> tuple[int, int]:
        return (self.n, self.p)

    @property
    def self_correcting(self) -> bool:
        return self.retraction in ("qr", "polar")

    @property
    def _transposed(self) -> bool:
        return self.rows

    @property
    def dim(self) -> int:
        return self.n * self.p - self.p * (self.p + 1) // 2

    def _project(self, x: jax.Array, v: jax.Array) -> jax.Array:
        return v - mm_thin(x, sym(mm_h(x, v)))

    def _ehess_to_rhess(self, x: jax.Array, egrad: jax.Array, ehess: jax.Array, v: jax.Array
                        ) -> jax.Array:
        if self.metric == "canonical":
            s = mm_h(x, egrad)
            s = s + s.mT  # YᵀG + GᵀY
            a = (ehess + 0.5 * (mm_thin(x, mm_h(v, egrad)) + mm_thin(egrad, mm_h(v, x)))
                 - 0.5 * (mm_thin(v, s) - mm_thin(x, mm(mm_h(x, v), s))))
            return self._egrad_to_rgrad(x, a)  # the canonical Riesz map, A - Y AᵀY
        return self._project(x, ehess - mm_thin(v, sym(mm_h(x, egrad))))

    def _egrad_to_rgrad(self, x: jax.Array, g: jax.Array) -> jax.Array:
        if self.metric == "canonical":
            return g - mm_thin(x, mm_h(g, x))
        return self._project(x, g)

    def _frame_rgrad(self, y: jax.Array, g: jax.Array, yt_g: jax.Array
                     ) -> tuple[jax.Array, jax.Array, jax.Array]:
        return g, yt_g, -(yt_g.mT if self.metric == "canonical" else sym(yt_g))

    def _inner(self, x: jax.Array, u: jax.Array, v: jax.Array) -> jax.Array:
        if self.metric == "canonical":
            # tr(uᵀ(I - ½xxᵀ)v) = tr(uᵀv) - ½ tr((xᵀu)ᵀ(xᵀv)): no n×n matrix.
            return frobenius_inner(u, v) - 0.5 * frobenius_inner(mm_h(x, u), mm_h(x, v))
        return frobenius_inner(u, v)

    def _retract(self, x: jax.Array, v: jax.Array) -> jax.Array:
        return _RETRACTIONS[self.retraction](x, v)

    def _exp(self, x: jax.Array, v: jax.Array) -> jax.Array:
        if self.metric == "canonical":
            return rotate(x, v, "exp")
        a = mm_h(x, v)
        block = jnp.concatenate([jnp.concatenate([a, -mm_h(v, v)], axis=-1),
                                 jnp.concatenate([eye_like(a), a], axis=-1)], axis=-2)
        first_columns = rules.expm(block)[..., :, :self.p]
        return mm(jnp.concatenate([x, v], axis=-1), mm(first_columns, rules.expm(-a)))
