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

from rules.internal import mm

from ._core.kernels import rotate, skew
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
    """
    y, delta = m.to_frame(x), m.to_frame(m.egrad_to_rgrad(x, g))
    n, p = y.shape[-2:]
    a, b = _split(y, delta)
    # The blocks of g^hor that exist: a horizontal space (Grassmann) has no A, O(n) has no B.
    # Their rounding noise would otherwise be amplified by Adam's normalisation into a real step.
    if m.horizontal:
        a = jnp.zeros_like(a)
    if n == p:
        b = jnp.zeros_like(b)
    mu = b1 * m.to_frame(mu) + (1 - b1) * (mm(y, a) + b)
    nu_a = b2 * nu_a + (1 - b2) * a * a
    nu_b = b2 * nu_b + (1 - b2) * jnp.sum(b * b, axis=-2) / max(n - p, 1)
    mu_a, mu_b = _split(y, mu)
    c1, c2 = 1 - b1**count, 1 - b2**count
    w_a = (mu_a / c1) / (jnp.sqrt(nu_a / c2) + eps)
    w_b = (mu_b / c1) / (jnp.sqrt(nu_b / c2) + eps)[..., None, :]
    w = -learning_rate * (mm(y, w_a) + w_b)
    rotated = rotate(y, w, retraction, z=mu)
    return (m.from_frame(w), m.from_frame(rotated[..., :p]), m.from_frame(rotated[..., p:]), nu_a,
            nu_b)


def retract(m: AbstractManifold, x: jax.Array, w: jax.Array, retraction: str) -> jax.Array:
    """``Q x`` with ``Q = cay(Ω(Y, W))`` or ``exp(Ω(Y, W))``: the frame rotation of a step."""
    return m.from_frame(rotate(m.to_frame(x), m.to_frame(w), retraction))


def _split(y: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(A, Y⊥B) = (skew(Yᵀv), (I - YYᵀ)v)``."""
    yt_v = mm(y.mT, v)
    return skew(yt_v), v - mm(y, yt_v)
