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
  coordinates is, in this representation, the N×p matrix ``M = λ [A_m; B_m]`` rotated by the
  same ``Q`` each step — O(Np²) by the low-rank form of :func:`rotate`. First moment, step and
  frame update are Brantner's exactly.
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

from rules.internal import mm, mm_h

from ._core.kernels import rotate, rotate_by_products, skew
from ._core.manifold import AbstractManifold


def supports(m: AbstractManifold) -> bool:
    """Whether the manifold's points are orthonormal frames (the capability ``"frame"``)."""
    return "frame" in m.capabilities


def init_moments(m: AbstractManifold, x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Zero ``(mu, nu_a, nu_b)``: shapes ``x.shape``, ``(..., p, p)``, ``(..., p)``."""
    y = m.to_frame(x)
    batch, p = y.shape[:-2], y.shape[-1]
    return (jnp.zeros_like(x), jnp.zeros((*batch, p, p), x.dtype), jnp.zeros((*batch, p), x.dtype))


def step(m: AbstractManifold, x: jax.Array, g: jax.Array, mu: jax.Array, nu_a: jax.Array,
         nu_b: jax.Array, *, learning_rate: jax.Array, b1: jax.Array, b2: jax.Array,
         eps: jax.Array, count: jax.Array, retraction: str
         ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
    """One step of ``manifold_adam`` on one leaf; returns ``(w, y, mu, nu_a, nu_b)``.

    ``w`` is the tangent step ``W`` at ``x``, ``y = Q x`` the point it leads to (equal to
    :func:`retract` ``(m, x, w)``), and ``mu`` the first moment, rotated by the same ``Q`` in the
    same low-rank application. ``count`` is the 1-based step number.

    Every N×p matrix of the step is a combination ``F + Y C`` of an N×p matrix ``F`` already at
    hand and a p×p coefficient ``C``, so its product with ``Yᵀ`` is ``YᵀF + (YᵀY) C``: p×p
    algebra on products already formed. The Riemannian gradient is ``Δ = G + Y C_G`` on the frame
    manifolds (``frame_rgrad``), so the step takes ``Yᵀ`` of ``Y``, ``G`` and ``M`` once and
    ``Pᵀ`` of ``P`` and ``F_M``, and the ``Y C`` parts of the new moment are added only inside
    the products with ``Y`` that the step and the rotation make anyway: nine products with an
    N×p matrix (``YᵀY``, ``YᵀG``, ``YᵀM``, ``B``, ``P``, ``PᵀP``, ``PᵀF_M`` and the rotation's
    ``[P, Y]`` times 2p columns, the last two of width 2p), and one more for ``W`` where it is
    used.
    """
    y, g, mu = m.to_frame(x), m.to_frame(g), m.to_frame(mu)
    n, p = y.shape[-2:]
    gram, yt_mu = mm_h(y, y), mm_h(y, mu)  # one copy of Yᵀ with YᵀG (XLA's CSE)
    f, yt_f, c_g = m.frame_rgrad(y, g, mm_h(y, g))  # Δ = F + Y C_g
    yt_delta = yt_f + mm(gram, c_g)
    # The blocks of g^hor that exist: a horizontal space (Grassmann) has no A, O(n) has no B.
    # Their rounding noise would otherwise be amplified by Adam's normalisation into a real step.
    a = jnp.zeros_like(yt_delta) if m.horizontal else skew(yt_delta)
    if n == p:
        b, yt_b = jnp.zeros_like(f), jnp.zeros_like(yt_delta)
    else:
        c_b = c_g - yt_delta  # (I - YYᵀ)Δ = F + Y (C_g - YᵀΔ)
        b, yt_b = f + mm(y, c_b), yt_f + mm(gram, c_b)
    # M ← β₁M + (1 - β₁)(Y A + B) = F_M + Y C_M: Y C_M is folded into the products with Y below.
    f_mu, c_mu = b1 * mu + (1 - b1) * b, (1 - b1) * a
    yt_mu = b1 * yt_mu + (1 - b1) * (mm(gram, a) + yt_b)
    nu_a = b2 * nu_a + (1 - b2) * a * a
    nu_b = b2 * nu_b + (1 - b2) * jnp.sum(b * b, axis=-2) / max(n - p, 1)
    c1, c2 = 1 - b1**count, 1 - b2**count
    # W = -η(Y W_A + (M - Y YᵀM) D) = -η(M D + Y (W_A - YᵀM D)), D = diag(1/(c₁(√v̂_B + δ))).
    # A block that does not exist is 0 in M too, but its rounding noise is not: divided by
    # √v̂ + δ = δ it would become a step, so W drops it.
    w_a = jnp.zeros_like(a) if m.horizontal else (skew(yt_mu) / c1) / (jnp.sqrt(nu_a / c2) + eps)
    d = (1 / c1) / (jnp.sqrt(nu_b / c2) + eps)[..., None, :]
    if n == p:
        d = jnp.zeros_like(d)
    w_coef = -learning_rate * (w_a - yt_mu * d)
    yt_w = -learning_rate * (yt_mu * d) + mm(gram, w_coef)
    # M D = F_M D + Y (C_M D): W and P are -η F_M D plus Y times a coefficient.
    f_w, c_mu_d = -learning_rate * (f_mu * d), -learning_rate * (c_mu * d)
    w = f_w + mm(y, w_coef + c_mu_d)
    # P = (I - ½YYᵀ)W of Ω(Y, W) = PYᵀ - YPᵀ (kernels.rotate), in the same form.
    p_coef = w_coef - 0.5 * yt_w
    p_ = f_w + mm(y, p_coef + c_mu_d)
    yt_p = yt_w - 0.5 * mm(gram, yt_w)
    pt_mu = mm_h(p_, f_mu) + mm(yt_p.mT, c_mu)
    rotated = rotate_by_products(y, p_, [y, f_mu], yt_p, gram, mm_h(p_, p_), [gram, yt_mu],
                                 [yt_p.mT, pt_mu], retraction,
                                 y_coefficient=[jnp.zeros_like(gram), c_mu])
    return (m.from_frame(w), m.from_frame(rotated[0]), m.from_frame(rotated[1]), nu_a, nu_b)


def retract(m: AbstractManifold, x: jax.Array, w: jax.Array, retraction: str) -> jax.Array:
    """``Q x`` with ``Q = cay(Ω(Y, W))`` or ``exp(Ω(Y, W))``: the frame rotation of a step."""
    return m.from_frame(rotate(m.to_frame(x), m.to_frame(w), retraction))
