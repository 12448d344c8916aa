r"""The manifold SPD(n) of symmetric positive definite matrices, with three metrics."""
from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

import rules
from rules.internal import log_divided_differences, mm, triangular_solver

from .._core.arrays import frobenius_inner, sym
from .._core.checks import check_choice_field, check_int_field
from .._core.manifold import AbstractManifold

__all__ = ["SPD"]

METRICS = ("affine", "log_euclidean", "bures_wasserstein")


@dataclasses.dataclass(frozen=True)
class SPD(AbstractManifold):
    r"""Symmetric positive definite n×n matrices (covariances, kernels, diffusion tensors).

    .. math::
        \mathrm{SPD}(n) = \{X \in \mathbb{R}^{n\times n} : X = X^T,\ X \succ 0\}, \qquad
        T_X = \mathrm{Sym}(n), \qquad P_X(V) = \operatorname{sym}(V) = \tfrac12(V + V^T)

    An open subset of the symmetric matrices, so every tangent space is ``Sym(n)`` and the
    projection does not depend on ``X``. Metrics (``metric``), with ``G_s = sym(G)`` and, where an
    eigendecomposition ``X = QΛQᵀ`` enters, ``Ũ = QᵀUQ``:

    * ``"affine"`` (affine-invariant, Pennec et al.): ``g(U, V) = tr(X⁻¹UX⁻¹V)``, gradient
      ``X G_s X``. Invariant under ``X → AXAᵀ``; complete, with unique geodesics.
    * ``"log_euclidean"`` (Arsigny et al.): ``g(U, V) = ⟨D log(X)[U], D log(X)[V]⟩_F``, the
      Euclidean metric of ``log X``; ``D log(X)[U] = Q(L ∘ Ũ)Qᵀ`` with the divided differences
      ``L_ij = (log λᵢ - log λⱼ)/(λᵢ - λⱼ)`` (``1/λᵢ`` on the diagonal), gradient
      ``Q(G̃_s / L²)Qᵀ``.
    * ``"bures_wasserstein"`` (Malagò et al.; Bhatia et al.): ``g(U, V) = ½ tr(L_X[U] V)`` with
      ``XL + LX = U`` (``L̃_ij = Ũ_ij/(λᵢ + λⱼ)``), the Wasserstein-2 metric of centred Gaussians;
      gradient ``2(X G_s + G_s X)``.

    Riemannian Hessians (:meth:`ehess_to_rhess`), with ``H_s = sym(∇²f(X)[V])`` and ``G_s`` as
    above (``docs/derivations/riemannian-hessians.md``):

    * affine: ``X H_s X + sym(V G_s X)``;
    * log-Euclidean (``log`` is an isometry onto the flat ``Sym(n)``):
      ``D log(X)⁻²[H_s - D² log(X)[V, K]]``, ``K = D log(X)⁻¹[G_s]``, the second derivative of
      the matrix logarithm by the second-order Daleckii–Krein formula (exact at repeated
      eigenvalues);
    * Bures–Wasserstein (Han et al. 2021): ``4 sym(H_s X) + 2 sym(G_s V)
      + 4 sym(X sym(L_X[V] G_s)) - sym(L_X[V] grad f(X))``.

    Geodesics, with ``X = CCᵀ`` (Cholesky) and matrix functions of symmetric matrices:

    .. math::
        \text{affine: } \exp_X(V) = C\exp(C^{-1}VC^{-T})C^T, \quad
        \log_X(Y) = C\log(C^{-1}YC^{-T})C^T, \quad d = \|\log(C^{-1}YC^{-T})\|_F

    .. math::
        \text{log-Euclidean: } \exp_X(V) = \exp(\log X + D\log(X)[V]), \quad
        \log_X(Y) = D\log(X)^{-1}[\log Y - \log X], \quad d = \|\log Y - \log X\|_F

    .. math::
        \text{Bures–Wasserstein: } \exp_X(V) = X + V + L_X[V]\,X\,L_X[V], \quad
        \log_X(Y) = (XY)^{1/2} + (YX)^{1/2} - 2X, \quad
        d^2 = \operatorname{tr}X + \operatorname{tr}Y - 2\operatorname{tr}(X^{1/2}YX^{1/2})^{1/2}

    (``(XY)^{1/2} = C(CᵀYC)^{1/2}C⁻¹``; the Bures–Wasserstein ``exp`` leaves SPD(n) once
    ``I + L_X[V]`` is singular, beyond the injectivity radius, and the distance is computed as
    ``‖log_X(Y)‖_X``, accurate near ``Y = X`` where the trace formula cancels). Matrix functions
    are the rules :func:`rules.logmh`, :func:`rules.sqrtmh` and :func:`rules.hermitian_function`,
    whose derivative (Daleckii–Krein) exists at repeated eigenvalues, so ``dist`` and ``log`` are
    differentiable at ``Y = X``
    (``log`` is exactly 0 there for the affine metric). The distance's derivative at ``Y = X`` is
    0, a subgradient; ``dist²`` has its true derivative, 0.

    Every metric shares the retraction ``R_X(V) = X + V + ½VX⁻¹V = ½X + ½(X + V)X⁻¹(X + V)``
    (one Cholesky factorisation): positive definite for every ``V``, second order for the affine
    metric (Jeuris et al.) and first order for the others. Results are symmetrised, so the
    retraction corrects asymmetric rounding (``self_correcting``). Vector transport is the
    identity of ``Sym(n)`` (the projection: all tangent spaces coincide).
    :meth:`manifold_error` is ``(‖X - Xᵀ‖_F + max(0, -λ_min(sym X)))/‖X‖_F``, relative, as SPD(n)
    is a cone. :meth:`project_point` returns ``sym(X)`` when it is positive definite, and else
    raises its eigenvalues to ``n·ε·max|λ|`` (the open cone has no nearest point). Random points
    are ``exp(S)`` for a Gaussian symmetric ``S`` scaled to spectrum ≈ [-1, 1] (eigenvectors Haar,
    condition number about e²).

    Args:
      n: size, ``n ≥ 1``.
      metric: ``"affine"``, ``"log_euclidean"`` or ``"bures_wasserstein"``.

    Raises:
      TypeError: ``n`` is not an int.
      ValueError: ``n < 1``, or an unknown ``metric``.

    References:
      X. Pennec, P. Fillard, N. Ayache, "A Riemannian framework for tensor computing", IJCV 66
      (2006). V. Arsigny, P. Fillard, X. Pennec, N. Ayache, "Geometric means in a novel vector
      space structure on symmetric positive-definite matrices", SIAM J. Matrix Anal. Appl. 29
      (2007). L. Malagò, L. Montrucchio, G. Pistone, "Wasserstein Riemannian geometry of
      Gaussian densities", Inf. Geom. 1 (2018). R. Bhatia, T. Jain, Y. Lim, "On the
      Bures–Wasserstein distance between positive definite matrices", Expo. Math. 37 (2019).
      A. Han, B. Mishra, P. Jawanpuria, J. Gao, "On Riemannian optimization over positive
      definite matrices with the Bures–Wasserstein geometry", NeurIPS 2021.
      B. Jeuris, R. Vandebril, B. Vandereycken, "A survey and comparison of contemporary
      algorithms for computing the matrix geometric mean", ETNA 39 (2012). Derivations:
      ``docs/derivations/manifolds.md#spd``.

    Examples:
      >>> import jax, jax.numpy as jnp, geometric
      >>> spd = geometric.SPD(2)
      >>> x, y = jnp.diag(jnp.array([1.0, 2.0])), jnp.diag(jnp.array([2.0, 2.0]))
      >>> print(f"{spd.dist(x, y):.4f}")  # |log 2|: only the first eigenvalue moves
      0.6931
      >>> print(geometric.SPD(2, metric="bures_wasserstein").egrad_to_rgrad(x, jnp.eye(2)))
      [[4. 0.]
       [0. 8.]]
    """

    n: int
    metric: str = "affine"

    capabilities: ClassVar[frozenset[str]] = frozenset({"exp", "log", "dist"})
    self_correcting: ClassVar[bool] = True
    _error_formula: ClassVar[str] = "(‖x − xᵀ‖_F + max(0, −λ_min(x)))/‖x‖_F"

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", check_int_field("SPD", "n", self.n))
        check_choice_field("SPD", "metric", self.metric, METRICS)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    @property
    def dim(self) -> int:
        return self.n * (self.n + 1) // 2

    def _random_point(self, key: jax.Array, dtype: jnp.dtype) -> jax.Array:
        # sym(G) has spectral radius ≈ √(2n); scaled, its exponential is well conditioned.
        s = sym(jax.random.normal(key, self.shape, dtype)) / math.sqrt(2 * self.n)
        return rules.hermitian_function(s, jnp.exp)

    def _project(self, x: jax.Array, v: jax.Array) -> jax.Array:
        return sym(v)

    def _project_point(self, x: jax.Array) -> jax.Array:
        s = sym(x)
        w, q = rules.eigh(s)
        floor = self.n * float(np.finfo(x.dtype).eps) * jnp.max(jnp.abs(w), axis=-1, keepdims=True)
        raised = sym(mm(q * jnp.maximum(w, floor)[..., None, :], q.mT))
        return jnp.where((w[..., :1] > floor)[..., None], s, raised)

    def _manifold_error(self, x: jax.Array) -> jax.Array:
        asym = jnp.linalg.norm(x - x.mT, axis=(-2, -1))
        lowest = rules.eigh(sym(x)).eigenvalues[..., 0]
        scale = jnp.linalg.norm(x, axis=(-2, -1))
        return (asym + jnp.maximum(-lowest, 0)) / jnp.where(scale > 0, scale, jnp.nan)

    def _outside(self, x: jax.Array) -> jax.Array:
        # Not positive definite: its Cholesky factorisation fails (nan), where every metric's
        # formulas (logarithms, inverses, square roots of the spectrum) have no meaning.
        return ~jnp.all(jnp.isfinite(rules.cholesky(x)), axis=(-2, -1))

    def _retract(self, x: jax.Array, v: jax.Array) -> jax.Array:
        w = triangular_solver(rules.cholesky(x))(v, left_side=True)  # C⁻¹V: VX⁻¹V = WᵀW
        return sym(x + v + 0.5 * mm(w.mT, w))

    # ------------------------------------------------------------------------------------------
    # The metrics

    def _egrad_to_rgrad(self, x: jax.Array, g: jax.Array) -> jax.Array:
        g = sym(g)
        if self.metric == "affine":
            return sym(mm(x, mm(g, x)))
        if self.metric == "bures_wasserstein":
            return 4 * sym(mm(x, g))
        w, q = rules.eigh(x)
        return _from_eigenbasis(q, _to_eigenbasis(q, g) / log_divided_differences(w) ** 2)

    def _ehess_to_rhess(self, x: jax.Array, egrad: jax.Array, ehess: jax.Array, v: jax.Array
                        ) -> jax.Array:
        g, h = sym(egrad), sym(ehess)
        if self.metric == "affine":
            return sym(mm(x, mm(h, x))) + sym(mm(v, mm(g, x)))
        w, q = rules.eigh(x)
        if self.metric == "bures_wasserstein":
            lyap = _from_eigenbasis(q, _to_eigenbasis(q, v) / _pair_sums(w))  # L_X[V]
            rgrad = 4 * sym(mm(x, g))
            return (4 * sym(mm(h, x)) + 2 * sym(mm(g, v)) + 4 * sym(mm(x, sym(mm(lyap, g))))
                    - sym(mm(lyap, rgrad)))
        ell = log_divided_differences(w)
        k = _from_eigenbasis(q, _to_eigenbasis(q, g) / ell)  # D log(X)⁻¹[G_s]
        second = jax.jvp(lambda y: jax.jvp(rules.logmh, (y,), (k,))[1], (x,), (v,))[1]
        return _from_eigenbasis(q, _to_eigenbasis(q, h - second) / (ell * ell))

    def _inner(self, x: jax.Array, u: jax.Array, v: jax.Array) -> jax.Array:
        if self.metric == "affine":
            c = rules.cholesky(x)
            return frobenius_inner(_whiten(c, u), _whiten(c, v))
        w, q = rules.eigh(x)
        ut, vt = _to_eigenbasis(q, u), _to_eigenbasis(q, v)
        if self.metric == "log_euclidean":
            return frobenius_inner(log_divided_differences(w) ** 2 * ut, vt)
        return 0.5 * frobenius_inner(ut / _pair_sums(w), vt)

    # ------------------------------------------------------------------------------------------
    # Geodesics

    def _exp(self, x: jax.Array, v: jax.Array) -> jax.Array:
        if self.metric == "affine":
            c = rules.cholesky(x)
            return sym(mm(c, mm(rules.hermitian_function(_whiten(c, v), jnp.exp), c.mT)))
        w, q = rules.eigh(x)
        vt = _to_eigenbasis(q, v)
        if self.metric == "log_euclidean":
            log_x = jnp.log(w)[..., None] * _eye(w)
            moved = rules.hermitian_function(log_x + log_divided_differences(w) * vt, jnp.exp)
            return sym(_from_eigenbasis(q, moved))
        lyap = _from_eigenbasis(q, vt / _pair_sums(w))  # L_X[V]: XL + LX = V
        return sym(x + v + mm(lyap, mm(x, lyap)))

    def _log(self, x: jax.Array, y: jax.Array) -> jax.Array:
        if self.metric == "affine":
            c = rules.cholesky(x)
            return sym(mm(c, mm(_affine_log(c, x, y), c.mT)))
        if self.metric == "log_euclidean":
            w, q = rules.eigh(x)
            step = rules.logmh(y) - _from_eigenbasis(q, jnp.log(w)[..., None] * _eye(w))
            return _from_eigenbasis(q, _to_eigenbasis(q, step) / log_divided_differences(w))
        c = rules.cholesky(x)
        root = rules.sqrtmh(mm(c.mT, mm(y, c)))  # (CᵀYC)^{1/2}
        # (XY)^{1/2} = C·root·C⁻¹, as (C⁻ᵀ(C·root)ᵀ)ᵀ
        t = triangular_solver(c)(mm(c, root).mT, left_side=True, transpose_a=True).mT
        return t + t.mT - 2 * x

    def _squared_dist(self, x: jax.Array, y: jax.Array) -> jax.Array:
        if self.metric == "affine":
            a = _affine_log(rules.cholesky(x), x, y)
            return frobenius_inner(a, a)
        if self.metric == "log_euclidean":
            d = rules.logmh(y) - rules.logmh(x)
            return frobenius_inner(d, d)
        return super()._squared_dist(x, y)


# ----------------------------------------------------------------------------------------------
# Helpers on batch-leading (..., n, n) arrays


def _whiten(c: jax.Array, v: jax.Array) -> jax.Array:
    """``C⁻¹VC⁻ᵀ`` for lower-triangular ``C`` and symmetric ``V`` (symmetrised)."""
    solve = triangular_solver(c)
    return sym(solve(solve(v, left_side=True).mT, left_side=True))


def _affine_log(c: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
    """``log(C⁻¹YC⁻ᵀ)`` as ``log1p(C⁻¹(Y - X)C⁻ᵀ)``: accurate for near points, 0 at ``Y = X``."""
    return rules.hermitian_function(_whiten(c, y - x), jnp.log1p)


def _eye(w: jax.Array) -> jax.Array:
    return jnp.broadcast_to(jnp.eye(w.shape[-1], dtype=w.dtype), (*w.shape, w.shape[-1]))


def _to_eigenbasis(q: jax.Array, u: jax.Array) -> jax.Array:
    return mm(q.mT, mm(u, q))


def _from_eigenbasis(q: jax.Array, u: jax.Array) -> jax.Array:
    return sym(mm(q, mm(u, q.mT)))


def _pair_sums(w: jax.Array) -> jax.Array:
    return w[..., :, None] + w[..., None, :]
