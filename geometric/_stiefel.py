r"""The Stiefel manifold St(n, p), and the O(np²) matrix kernels the other manifolds share.

.. math::
    \mathrm{St}(n, p) = \{Y \in \mathbb{R}^{n\times p} : Y^T Y = I_p\}, \qquad
    T_Y = \{\Delta : Y^T\Delta + \Delta^T Y = 0\}, \qquad p \le n.

Every retraction here costs O(np²) time and never forms an n×n array. Cayley and the exponential
use the low-rank factorisation of the canonical horizontal lift (Edelman, Arias & Smith; Wen & Yin)

.. math::
    \Omega(Y, \Delta) = P Y^T - Y P^T = U V^T, \qquad P = (I - \tfrac12 YY^T)\Delta,
    \quad U = [P, Y], \quad V = [Y, -P] \in \mathbb{R}^{n\times 2p},

which is skew with ``ΩY = Δ`` for tangent ``Δ``. A function ``f(Ω)`` with ``f(0) = I`` acts on an
n×k matrix ``Z`` through the 2p×2p matrix ``X = VᵀU`` only: ``f(Ω)Z = Z + U ψ(X) VᵀZ`` with
``ψ(X) = (I - ½X)⁻¹`` for the Cayley transform ``(I - ½Ω)⁻¹(I + ½Ω)`` (Sherman–Morrison–Woodbury)
and ``ψ(X) = φ(X) = Σ_{k≥1} X^{k-1}/k!`` for ``exp(Ω)``.
"""
from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from jax import lax

from rules.internal import mm


def T(x):  # noqa: N802 (replaced by the geometric rework)
    return x.mT

from ._base import AbstractManifold, check_choice, check_random_dtype, check_size

__all__ = ["Stiefel"]

METRICS = ("euclidean", "canonical")
RETRACTIONS = ("qr", "polar", "cayley", "exp")


# ==============================================================================================
# Shared kernels on (..., n, p) arrays.


def sym(a: jax.Array) -> jax.Array:
    return 0.5 * (a + T(a))


def skew(a: jax.Array) -> jax.Array:
    return 0.5 * (a - T(a))


def frobenius_sq(u: jax.Array, v: jax.Array) -> jax.Array:
    """``tr(uᵀv)`` over the last two axes."""
    return jnp.sum(u * v, axis=(-2, -1))


def gram_error(x: jax.Array) -> jax.Array:
    """``‖xᵀx - I‖_F`` over the last two axes."""
    gram = mm(T(x), x)
    return jnp.linalg.norm(gram - _eye_like(gram), axis=(-2, -1))


def _eye_like(a: jax.Array) -> jax.Array:
    """The identity broadcast to the batch shape of the square matrices ``a`` (no rank promotion)."""
    return jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)


def haar_frame(key: jax.Array, n: int, p: int, dtype) -> jax.Array:
    """A Haar-distributed n×p orthonormal frame: sign-corrected QR of a Gaussian matrix.

    Without the sign fix the columns follow LAPACK's gauge and the distribution is not uniform
    (Mezzadri 2007).
    """
    return qr_factor(jax.random.normal(key, (n, p), dtype))


def qr_factor(z: jax.Array) -> jax.Array:
    """``Q`` of the thin QR of ``z`` with ``diag(R) ≥ 0``.

    ``sign(sign(d) + 0.5)`` counts a zero diagonal entry as +1 (geoopt), so the result does not
    depend on LAPACK's sign gauge and is a smooth function of ``z``.
    """
    q, r = jnp.linalg.qr(z)
    d = jnp.diagonal(r, axis1=-2, axis2=-1)
    return q * jnp.sign(jnp.sign(d) + 0.5)[..., None, :]


def polar_factor(z: jax.Array) -> jax.Array:
    """``z (zᵀz)^{-1/2}``, the orthonormal frame nearest to ``z``, in O(np²).

    From the p×p eigendecomposition of ``zᵀz``, then one Newton–Schulz step ``y(3I - yᵀy)/2``:
    float32 eigenvectors are orthonormal only to about ``p·ε`` (‖yᵀy - I‖_F ≈ 1e-5 for p = 64),
    and the step, which converges quadratically to the same polar factor, brings that down to
    the rounding of two products (≈ 2e-6, below a fresh QR's).
    """
    w, q = jnp.linalg.eigh(mm(T(z), z))
    y = mm(z, mm(q / jnp.sqrt(w)[..., None, :], T(q)))
    return 1.5 * y - 0.5 * mm(y, mm(T(y), y))


# φ(X) = Σ_{k≥0} X^k/(k+1)! on the scaled matrix: the Taylor degree that makes the truncation
# error (1/2)^{m+1}/(m+2)! fall below the unit roundoff once ‖X‖₁ ≤ 1/2.
_PHI_THETA = 0.5
_PHI_DEGREE = {jnp.dtype(jnp.float32): 7, jnp.dtype(jnp.float64): 13}
_MAX_SQUARINGS = 16  # as jax.scipy.linalg.expm: ‖X‖₁ up to 2¹⁵


def phi(x: jax.Array) -> jax.Array:
    r"""``φ(X) = Σ_{k≥0} X^k/(k+1)!`` (so ``exp(X) = I + Xφ(X)``) of ``(..., m, m)`` matrices.

    Scaling and squaring: ``Z = X/2^s`` with ``‖Z‖₁ ≤ 1/2``, a Taylor polynomial of ``φ(Z)`` by
    Paterson–Stockmeyer (4 products in float32, 6 in float64), then ``s`` doublings
    ``φ(2Z) = φ(Z)(I + ½Zφ(Z))``. One ``s`` serves the whole batch, so the doublings are skipped
    by ``lax.cond`` rather than computed and masked; the loop is a fixed-length ``scan``, so
    reverse-mode differentiation works.
    """
    degree = _PHI_DEGREE[jnp.dtype(x.dtype)]
    norm = jnp.max(jnp.sum(jnp.abs(x), axis=-2))
    squarings = jnp.clip(jnp.ceil(jnp.log2(norm / _PHI_THETA)), 0, _MAX_SQUARINGS)
    z = x * jnp.exp2(-squarings).astype(x.dtype)
    f = _phi_taylor(z, degree)

    def double(carry):
        f, z = carry
        return f + 0.5 * mm(f, mm(z, f)), 2 * z

    def body(carry, i):
        return lax.cond(i < squarings, double, lambda c: c, carry), None

    (f, _), _ = lax.scan(body, (f, z), jnp.arange(_MAX_SQUARINGS))
    return f


def _phi_taylor(z, degree, block=4):
    """``Σ_{k≤degree} Z^k/(k+1)!`` by Paterson–Stockmeyer: powers up to ``Z^block``, Horner in it."""
    coeffs = [1 / math.factorial(k + 1) for k in range(degree + 1)]
    powers = [_eye_like(z), z]
    while len(powers) <= block:
        powers.append(mm(powers[-1], z))
    chunks = [sum(c * powers[i] for i, c in enumerate(coeffs[j:j + block]))
              for j in range(0, degree + 1, block)]
    f = chunks[-1]
    for chunk in reversed(chunks[:-1]):
        f = chunk + mm(powers[block], f)
    return f


def rotate(y: jax.Array, delta: jax.Array, method: str, z: jax.Array | None = None) -> jax.Array:
    r"""Apply ``Q = cay(Ω)`` or ``exp(Ω)``, ``Ω = Ω(Y, Δ)``, to ``[Y, Z]`` in O(np(p + k)) time.

    .. math::
        Q [Y, Z] = [Y, Z] + U\,\psi(X)\,V^T [Y, Z], \qquad X = V^T U \in \mathbb{R}^{2p\times 2p}

    Args:
      y: a point, shape ``(..., n, p)``.
      delta: shape ``(..., n, p)``; only its tangent part ``Y skew(YᵀΔ) + (I - YYᵀ)Δ`` enters Ω.
      method: ``"cayley"`` (``ψ(X) = (I - ½X)⁻¹``, one 2p×2p solve) or ``"exp"``
        (``ψ = φ``, :func:`phi`).
      z: optional further columns to rotate, shape ``(..., n, k)``.

    Returns:
      ``Q [y, z]``, shape ``(..., n, p + k)`` (``Q y`` when ``z`` is None). Written as the input
      plus a correction, so the rounding error of a small step is relative to the step.
    """
    p = y.shape[-1]
    p_ = delta - 0.5 * mm(y, mm(T(y), delta))
    # Balanced factors Ω = [P, sY][Y, -P/s]ᵀ: with s ≈ ‖P‖_F (a power of two, so scaling is
    # exact) every block of X = VᵀU is of the size of the step, instead of X holding YᵀY = I.
    # That keeps I - ½X well conditioned and φ's scaling and squaring short for small steps.
    # Q does not depend on s, so no derivative flows through it.
    norm = lax.stop_gradient(jnp.linalg.norm(p_, axis=(-2, -1), keepdims=True))
    s = jnp.where(norm > 0, jnp.exp2(jnp.round(jnp.log2(norm))), 1).astype(y.dtype)
    u = jnp.concatenate([p_, s * y], axis=-1)
    v = jnp.concatenate([y, -p_ / s], axis=-1)
    x = mm(T(v), u)
    c = x[..., :, p:] / s  # VᵀY: the last p columns of X = Vᵀ[P, sY], over s
    if z is not None:
        y = jnp.concatenate([y, z], axis=-1)
        c = jnp.concatenate([c, mm(T(v), z)], axis=-1)
    if method == "cayley":
        # (I - ½UVᵀ)⁻¹U = U(I - ½X)⁻¹ (push-through), so cay(Ω)Z = Z + U(I - ½X)⁻¹VᵀZ.
        return y + mm(u, jnp.linalg.solve(_eye_like(x) - 0.5 * x, c))
    # exp(UVᵀ) = I + Uφ(VᵀU)Vᵀ, from (UVᵀ)^k = U X^{k-1} Vᵀ.
    return y + mm(u, mm(phi(x), c))


def qr_retraction(x, v):
    return qr_factor(x + v)


def polar_retraction(x, v):
    return polar_factor(x + v)


def cayley_retraction(x, v):
    return rotate(x, v, "cayley")


def exp_retraction(x, v):
    return rotate(x, v, "exp")


_RETRACTION_FNS = {"qr": qr_retraction, "polar": polar_retraction, "cayley": cayley_retraction,
                   "exp": exp_retraction}


# ==============================================================================================
# The manifold


@dataclasses.dataclass(frozen=True)
class Stiefel(AbstractManifold):
    r"""The Stiefel manifold of n×p matrices with orthonormal columns.

    .. math::
        \mathrm{St}(n, p) = \{Y \in \mathbb{R}^{n\times p} : Y^TY = I_p\}, \qquad
        P_Y(V) = V - Y\,\mathrm{sym}(Y^TV)

    Metrics (``metric``), with the Riemannian gradient of a Euclidean gradient ``G``:

    * ``"euclidean"``: ``g(Δ₁, Δ₂) = tr(Δ₁ᵀΔ₂)``, gradient ``G - Y sym(YᵀG)`` (the projection);
    * ``"canonical"``: ``g(Δ₁, Δ₂) = tr(Δ₁ᵀ(I - ½YYᵀ)Δ₂)``, gradient ``G - Y GᵀY`` — tangent, but
      not the projection of ``G``.

    Retractions (``retraction``), each O(np²) time with no n×n array:

    * ``"qr"``: ``qf(Y + V)`` with ``diag(R) ≥ 0``;
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

    Args:
      n: rows, ``n ≥ p``.
      p: columns, ``p ≥ 1``.
      metric: ``"euclidean"`` or ``"canonical"``.
      retraction: ``"qr"``, ``"polar"``, ``"cayley"`` or ``"exp"``.

    Raises:
      TypeError: ``n`` or ``p`` is not an int.
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
    """

    n: int
    p: int
    metric: str = "euclidean"
    retraction: str = "qr"

    def __post_init__(self):
        object.__setattr__(self, "n", check_size("Stiefel", "n", self.n))
        object.__setattr__(self, "p", check_size("Stiefel", "p", self.p))
        if self.p > self.n:
            raise ValueError(f"Stiefel: `p` must satisfy p ≤ n = {self.n}; got p = {self.p}.")
        check_choice("Stiefel", "metric", self.metric, METRICS)
        check_choice("Stiefel", "retraction", self.retraction, RETRACTIONS)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.p)

    @property
    def self_correcting(self) -> bool:
        return self.retraction in ("qr", "polar")

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
        if self.metric == "canonical":
            return g - mm(x, mm(T(g), x))
        return _project(x, g)

    def inner(self, x, u, v):
        self._check_point("inner", x)
        self._check_like("inner", "u", u, x)
        self._check_like("inner", "v", v, x)
        if self.metric == "canonical":
            # tr(uᵀ(I - ½xxᵀ)v) = tr(uᵀv) - ½ tr((xᵀu)ᵀ(xᵀv)): no n×n matrix.
            return frobenius_sq(u, v) - 0.5 * frobenius_sq(mm(T(x), u), mm(T(x), v))
        return frobenius_sq(u, v)

    def retract(self, x, v):
        self._check_point("retract", x)
        self._check_like("retract", "v", v, x)
        return _RETRACTION_FNS[self.retraction](x, v)

    def transport(self, x, y, v):
        self._check_point("transport", x)
        self._check_like("transport", "y", y, x)
        self._check_like("transport", "v", v, x)
        return _project(y, v)

    def manifold_error(self, x):
        self._check_point("manifold_error", x)
        return gram_error(x)


def _project(x, v):
    return v - mm(x, sym(mm(T(x), v)))
