r"""Brantner's Adam in the global tangent space, in O(Np²) per step (used by ``manifold_adam``).

Brantner (arXiv:2305.16901) lifts a tangent vector ``Δ`` at ``Y ∈ St(N, p)`` to the skew matrix
``Ω(Y, Δ)`` and reads it in a frame ``λ = [Y, Y⊥] ∈ O(N)``:

.. math::
    \lambda^T\,\Omega(Y, \Delta)\,\lambda = \begin{bmatrix} A & -B^T \\ B & 0\end{bmatrix},
    \qquad A = Y^T\Delta, \quad B = Y_\perp^T\Delta .

Adam keeps its moments on ``(A, B)``, the step ``V`` is retracted in the Lie algebra and the frame is
updated ``λ ← λ·cay(V)`` (or ``exp``), so moments are never transported. GeometricMachineLearning.jl
stores ``λ`` as an N×N matrix. Here ``λ`` is never formed:

* ``λ [A; B] = Y A + Y⊥ B = Δ``: a global element is represented by its N×p tangent vector, and
  ``λ·cay(V) = cay(Ω)·λ`` with ``Ω = λVλᵀ = Ω(Y, W)``, ``W = λ V E``. So the frame update is the
  rotation ``Q = cay(Ω(Y, W))`` applied on the left, and a first moment held fixed in global
  coordinates is, in this representation, ``M = λ [A_m; B_m] = Y A_m + M_B`` rotated by the same
  ``Q`` each step: ``A_m`` (p×p) rides along with the frame, ``Q Y A_m = (QY) A_m``, and the
  N×p ``M_B = Y⊥B_m`` is rotated with ``Y`` — O(Np²) by the low-rank form of :func:`rotate`.
  First moment, step and frame update are Brantner's exactly
  (``docs/derivations/optimizers.md#low-rank``).
* The second moment of ``A`` (p×p, coordinates in the frame ``Y`` itself) is Brantner's exactly.
* The elementwise second moment of ``B`` depends on the basis ``Y⊥`` of the complement, which
  GeometricMachineLearning.jl draws at random at initialisation; following it would need the
  N×(N−p) matrix ``Y⊥`` and an O(N²p) update per step. We keep instead, per column of ``B``,
  the mean square over its N−p rows: for the same gradients this is the expectation of
  Brantner's ``B ⊙ B`` over a Haar-random ``Y⊥``, it does not depend on the choice of
  complement basis, and it needs ``(I - YYᵀ)Δ = Y⊥B`` only.

A manifold takes part when its points are orthonormal frames, the capability ``"frame"`` of
:class:`~geometric.AbstractManifold`: ``to_frame`` gives the N×p matrix ``Y`` (a sphere point is an
N×1 frame, orthonormal rows the transpose of one) and ``from_frame`` takes it back; ``horizontal``
says the tangent vectors have no ``A`` block (Grassmann), and ``N = p`` leaves no ``B`` (O(N)).
"""
from __future__ import annotations


import jax
import jax.numpy as jnp

from rules.internal import cpu_route, laid_out, mm, mm_h, mm_thin, routes

from ._core.arrays import skew
from ._core.rotations import rotate, rotation_coefficients
from ._core.manifold import AbstractManifold


def supports(m: AbstractManifold) -> bool:
    """Whether the manifold's points are orthonormal frames (the capability ``"frame"``)."""
    return "frame" in m.capabilities


def init_moments(m: AbstractManifold, x: jax.Array
                 ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Zero ``(mu, mu_a, nu_a, nu_b)``: shapes ``x.shape``, ``(..., p, p)`` twice, ``(..., p)``."""
    y = m.to_frame(x)
    batch, p = y.shape[:-2], y.shape[-1]
    square = jnp.zeros((*batch, p, p), x.dtype)
    return jnp.zeros_like(x), square, square, jnp.zeros((*batch, p), x.dtype)


def step(m: AbstractManifold, x: jax.Array, g: jax.Array, mu: jax.Array, mu_a: jax.Array,
         nu_a: jax.Array, nu_b: jax.Array, *, learning_rate: jax.Array, b1: jax.Array,
         b2: jax.Array, eps: jax.Array, count: jax.Array, retraction: str
         ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
    """One step of ``manifold_adam`` on one leaf; returns ``(w, y, mu, mu_a, nu_a, nu_b)``.

    ``w`` is the tangent step ``W`` at ``x``, ``y = Q x`` the point it leads to (equal to
    :func:`retract` ``(m, x, w)`` up to rounding). The first moment ``M = Y A_m + M_B`` is held as
    its two parts: ``mu_a = A_m`` (p×p, coordinates in the frame, which ``Q`` carries along
    unchanged: ``Q Y A_m = y A_m``) and ``mu = M_B = Y⊥B_m`` (N×p, orthogonal to ``Y``), rotated
    by ``Q`` with ``Y``: ``Q[Y, M_B] = [Y, M_B](I + R)`` for a 2p×2p ``R``. ``count`` is the
    1-based step number.

    Held whole, ``M`` would be dominated by ``Y A_m`` wherever the frame block of the moment
    outweighs the complement's (near convergence), and the step's complement part
    ``(I - YYᵀ)M D`` would come out of a cancellation. With ``M_B`` apart,
    ``P = (I - ½YYᵀ)W = M_B D_η + Y K`` has two nearly orthogonal terms, so ``PᵀP`` and ``PᵀM_B``
    follow from ``M_BᵀM_B`` and products already formed, and ``P`` itself is never formed.
    ``Y`` is orthonormal to working precision (re-projected every ``stabilize_every`` updates),
    and the p×p algebra takes ``YᵀY = I``: that changes ``Q`` by ``O(‖YᵀY - I‖‖W‖)``, below the
    rounding of the update itself. Eight products with an N×p matrix in all (``YᵀG``, ``B̃``,
    ``[Y, M_B]ᵀM_B`` counted twice, ``[Y, M_B] R`` four times), and one more for ``W`` where
    it is used (``docs/derivations/optimizers.md#global-tangent-cost``).
    """
    y, g, mu = m.to_frame(x), m.to_frame(g), m.to_frame(mu)
    n, p = y.shape[-2:]
    y_h = laid_out(y.mT)  # Yᵀ in memory once, for YᵀG and (thin frames) YᵀM_B (rules.internal.mm_h)
    f, yt_f, c_g = m.frame_rgrad(y, g, mm(y_h, g))  # Δ = F + Y C_g
    yt_delta = yt_f + c_g
    # The blocks of g^hor that exist: a horizontal space (Grassmann) has no A, O(n) has no B.
    # Their rounding noise would otherwise be amplified by Adam's normalisation into a real step.
    a = jnp.zeros_like(yt_delta) if m.horizontal else skew(yt_delta)
    b = jnp.zeros_like(f) if n == p else f + mm_thin(y, c_g - yt_delta)  # B̃ = (I - YYᵀ)Δ
    mu = b1 * mu + (1 - b1) * b
    # YᵀM_B as a product rather than a combination of earlier ones: B̃'s frame block is a
    # cancellation, which a product gets to the rounding of M_B, not of the gradient.
    yt_mu, mu_t_mu = _moment_products(y_h, y, mu)
    mu_a = b1 * mu_a + (1 - b1) * a
    nu_a = b2 * nu_a + (1 - b2) * a * a
    nu_b = b2 * nu_b + (1 - b2) * jnp.sum(b * b, axis=-2) / max(n - p, 1)
    c1, c2 = 1 - b1**count, 1 - b2**count
    # A block that does not exist is 0 in M too, but its rounding noise is not: divided by
    # √v̂ + δ = δ it would become a step, so W drops it.
    w_a = jnp.zeros_like(a) if m.horizontal else (mu_a / c1) / (jnp.sqrt(nu_a / c2) + eps)
    d = (1 / c1) / (jnp.sqrt(nu_b / c2) + eps)[..., None, :]
    if n == p:
        d = jnp.zeros_like(d)
    # W = -η(Y W_A + (I - YYᵀ)M_B D) = M_B D_η + Y W_Y with D_η = -ηD: the projection removes
    # the rounding that has leaked into M_B's frame block, YᵀM_B, at the price of a p×p product.
    d_eta = -learning_rate * d
    yt_mu_d = yt_mu * d_eta  # YᵀM_B D_η
    w_y = -learning_rate * w_a - yt_mu_d
    # P = (I - ½YYᵀ)W = M_B D_η + Y K, K = W_Y - ½YᵀW (rotations.rotate), and the products of
    # the rotation.
    k = 0.5 * (w_y - yt_mu_d)
    kt_yt_mu = mm_h(k, yt_mu)
    yt_p = yt_mu_d + k
    pt_mu = d_eta.mT * mu_t_mu + kt_yt_mu
    pt_p = pt_mu * d_eta + d_eta.mT * kt_yt_mu.mT + mm_h(k, k)
    r_p, r_y = rotation_coefficients(yt_p, pt_p, (yt_mu, pt_mu), retraction)
    # P R_P + Y R_Y = [Y, M_B] [K R_P + R_Y; D_η R_P]: Q[Y, M_B] without forming P.
    y_next, mu_next = _rotate_frame(y, mu, mm(k, r_p) + r_y, d_eta.mT * r_p)
    w = mu * d_eta + mm_thin(y, w_y)
    return m.from_frame(w), m.from_frame(y_next), m.from_frame(mu_next), mu_a, nu_a, nu_b


def _moment_products(y_h: jax.Array, y: jax.Array, mu: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(YᵀM_B, M_BᵀM_B)`` as one product ``[Y, M_B]ᵀM_B``, ``y_h = Yᵀ``.

    On the CPU thin frames (``p ≤ routes.THIN_MAX_K``) and small ones
    (``routes.SPLIT_FRAME_MAX_SIZE``) take two products instead (``cpu_route.split_frame``): the
    N × 2p concatenation and its transpose cost more there than a second product, and XLA:CPU
    hands each to its thread pool.
    """
    p = y.shape[-1]

    def split(y_h: jax.Array, y: jax.Array, mu: jax.Array) -> tuple[jax.Array, jax.Array]:
        return mm(y_h, mu), mm_h(mu, mu)

    def joined(y_h: jax.Array, y: jax.Array, mu: jax.Array) -> tuple[jax.Array, jax.Array]:
        products = mm_h(jnp.concatenate([y, mu], axis=-1), mu)
        return products[..., :p, :], products[..., p:, :]

    if p <= routes.THIN_MAX_K or y.size <= routes.SPLIT_FRAME_MAX_SIZE:
        return cpu_route("split_frame", split, joined, y_h, y, mu)
    return joined(y_h, y, mu)


def _rotate_frame(y: jax.Array, mu: jax.Array, c_y: jax.Array, c_mu: jax.Array
                  ) -> tuple[jax.Array, jax.Array]:
    """``[Y, M_B] + [Y, M_B] [c_y; c_mu]``, split into ``Y`` and ``M_B``: one 2p-deep product.

    On the CPU (as :func:`_moment_products`) thin frames take four thin products
    (``cpu_route.thin_frame``, :func:`rules.internal.mm_thin`) and small ones two p-deep products
    (``cpu_route.split_frame``).
    """
    p = y.shape[-1]

    Split = tuple[jax.Array, jax.Array]

    def joined(y: jax.Array, mu: jax.Array, c_y: jax.Array, c_mu: jax.Array) -> Split:
        frame = jnp.concatenate([y, mu], axis=-1)
        rotated = frame + mm(frame, jnp.concatenate([c_y, c_mu], axis=-2))
        return rotated[..., :p], rotated[..., p:]

    def thin(y: jax.Array, mu: jax.Array, c_y: jax.Array, c_mu: jax.Array) -> Split:
        return (y + (mm_thin(y, c_y[..., :p]) + mm_thin(mu, c_mu[..., :p])),
                mu + (mm_thin(y, c_y[..., p:]) + mm_thin(mu, c_mu[..., p:])))

    def split(y: jax.Array, mu: jax.Array, c_y: jax.Array, c_mu: jax.Array) -> Split:
        rotation = mm(y, c_y) + mm(mu, c_mu)
        return y + rotation[..., :p], mu + rotation[..., p:]

    if p <= routes.THIN_MAX_K:
        return cpu_route("thin_frame", thin, joined, y, mu, c_y, c_mu)
    if y.size <= routes.SPLIT_FRAME_MAX_SIZE:
        return cpu_route("split_frame", split, joined, y, mu, c_y, c_mu)
    return joined(y, mu, c_y, c_mu)


def retract(m: AbstractManifold, x: jax.Array, w: jax.Array, retraction: str) -> jax.Array:
    """``Q x`` with ``Q = cay(Ω(Y, W))`` or ``exp(Ω(Y, W))``: the frame rotation of a step."""
    return m.from_frame(rotate(m.to_frame(x), m.to_frame(w), retraction))
