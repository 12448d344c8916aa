r"""Low-rank rotations of frames: ``cay(Ω)`` and ``exp(Ω)`` applied in O(np²) time.

Every function here costs O(np²) time (or O(p³) on a p×p matrix) and never forms an n×n array.
The rotations of :func:`rotate` use the low-rank factorisation of the canonical horizontal lift
(Edelman, Arias & Smith; Wen & Yin)

.. math::
    \Omega(Y, \Delta) = P Y^T - Y P^T = U V^T, \qquad P = (I - \tfrac12 YY^T)\Delta,
    \quad U = [P, Y], \quad V = [Y, -P] \in \mathbb{R}^{n\times 2p},

which is skew with ``ΩY = Δ`` for tangent ``Δ``. A function ``f(Ω)`` with ``f(0) = I`` acts on an
n×k matrix ``Z`` through the 2p×2p matrix ``X = VᵀU`` only: ``f(Ω)Z = Z + U ψ(X) VᵀZ`` with
``ψ(X) = (I - ½X)⁻¹`` for the Cayley transform ``(I - ½Ω)⁻¹(I + ½Ω)`` (Sherman–Morrison–Woodbury)
and ``ψ(X) = φ(X) = Σ_{k≥1} X^{k-1}/k!`` for ``exp(Ω)``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import rules
from rules.internal import eye_like, mm, mm_h, mm_thin, phi

__all__ = ["rotate", "rotation_coefficients"]


def rotate(y: jax.Array, delta: jax.Array, method: str, z: jax.Array | None = None) -> jax.Array:
    r"""Apply ``Q = cay(Ω)`` or ``exp(Ω)``, ``Ω = Ω(Y, Δ)``, to ``[Y, Z]`` in O(np(p + k)) time.

    .. math::
        Q [Y, Z] = [Y, Z] + U\,\psi(X)\,V^T [Y, Z], \qquad X = V^T U \in \mathbb{R}^{2p\times 2p}

    Args:
      y: a point, shape ``(..., n, p)``.
      delta: shape ``(..., n, p)``; only its tangent part ``Y skew(YᵀΔ) + (I - YYᵀ)Δ`` enters Ω.
      method: ``"cayley"`` (``ψ(X) = (I - ½X)⁻¹``, one 2p×2p solve, by a p×p one:
        :func:`_cayley_blocks`) or ``"exp"`` (``ψ = φ``, :func:`rules.internal.phi`).
      z: optional further columns to rotate, shape ``(..., n, k)``.

    Returns:
      ``Q [y, z]``, shape ``(..., n, p + k)`` (``Q y`` when ``z`` is None). Written as the input
      plus a correction, so the rounding error of a small step is relative to the step.
      ``YᵀY = I`` is taken in the 2p×2p algebra (a point is orthonormal to working precision):
      the rotation then moves by ``O(‖YᵀY - I‖‖Δ‖)``, below the rounding of the correction
      (``docs/derivations/optimizers.md#global-tangent-cost``).
    """
    yt_delta = mm_h(y, delta)
    p_ = delta - 0.5 * mm_thin(y, yt_delta)
    yt_p = 0.5 * yt_delta  # Yᵀ(I - ½YYᵀ)Δ with YᵀY = I
    z_products = None if z is None else (mm_h(y, z), mm_h(p_, z))
    r_p, r_y = rotation_coefficients(yt_p, mm_h(p_, p_), z_products, method)
    columns = y if z is None else jnp.concatenate([y, z], axis=-1)
    return columns + (mm_thin(p_, r_p) + mm_thin(y, r_y))


def rotation_coefficients(yt_p: jax.Array, pt_p: jax.Array,
                          z_products: tuple[jax.Array, jax.Array] | None, method: str
                          ) -> tuple[jax.Array, jax.Array]:
    r"""``(R_P, R_Y)`` with ``Q [Y, Z] = [Y, Z] + P R_P + Y R_Y``, ``Q = cay(Ω)`` or ``exp(Ω)``,
    ``Ω = PYᵀ - YPᵀ``, from products only, for an orthonormal ``Y`` (``YᵀY = I``).

    :func:`rotate` once ``P = (I - ½YYᵀ)Δ`` is formed, for callers that hold the products
    ``YᵀP``, ``PᵀP`` and, for the further columns ``Z`` to rotate, ``z_products = (YᵀZ, PᵀZ)``
    (None: ``Y`` alone): every block of ``X = VᵀU`` and of ``Vᵀ[Y, Z]`` is one of them (or a
    transpose, or ``YᵀY = I``), so what is left is the 2p×2p ``ψ(X)`` here and one product with
    ``U = [P, Y]``, the caller's (``optim.manifold_adam`` applies it to ``P``'s own factors).
    """
    p = yt_p.shape[-1]
    c_y, c_p = eye_like(yt_p), yt_p.mT  # YᵀY and PᵀY
    if z_products is not None:
        c_y = jnp.concatenate([c_y, z_products[0]], axis=-1)
        c_p = jnp.concatenate([c_p, z_products[1]], axis=-1)
    if method == "cayley":
        # Ω = UVᵀ with U = [P, Y], V = [Y, -P]; (I - ½UVᵀ)⁻¹U = U(I - ½X)⁻¹ (push-through), so
        # cay(Ω)Z = Z + U(I - ½X)⁻¹VᵀZ, the 2p×2p solve done by one p×p solve.
        return _cayley_blocks(yt_p, pt_p, c_y, -c_p)
    # Balanced factors Ω = [P, sY][Y, -P/s]ᵀ: with s ≈ ‖P‖_F (a power of two, so scaling is
    # exact) every block of X = VᵀU is of the size of the step, instead of X holding
    # YᵀY = I. That keeps φ's scaling and squaring short for small steps. Q does not
    # depend on s, so no derivative flows through it.
    norm = lax.stop_gradient(jnp.sqrt(jnp.trace(pt_p, axis1=-2, axis2=-1)))[..., None, None]
    s = jnp.where(norm > 0, jnp.exp2(jnp.round(jnp.log2(norm))), 1).astype(yt_p.dtype)
    x = jnp.concatenate([jnp.concatenate([yt_p, s * eye_like(yt_p)], axis=-1),
                         jnp.concatenate([-pt_p / s, -yt_p.mT], axis=-1)], axis=-2)
    # exp(UVᵀ) = I + Uφ(VᵀU)Vᵀ, from (UVᵀ)^k = U X^{k-1} Vᵀ.
    r = mm(phi(x), jnp.concatenate([c_y, -c_p / s], axis=-2))
    return r[..., :p, :], s * r[..., p:, :]


def _cayley_blocks(t: jax.Array, s: jax.Array, c1: jax.Array, c2: jax.Array
                   ) -> tuple[jax.Array, jax.Array]:
    r"""``(r₁, r₂)`` with ``(I - ½X)[r₁; r₂] = [c₁; c₂]``, ``X = [[T, I], [-S, -Tᵀ]]``.

    The first block row gives ``r₂ = 2h - T r₁`` with ``h = r₁ - c₁``; the second then reads

    .. math::
        2(I - Z)\,h = c_2 + (T^T + 2Z)\,c_1, \qquad
        Z = \tfrac12(T - T^T) + \tfrac14(T^TT - S) .

    One p×p solve instead of a 2p×2p one, and every term is of the size of the step (no
    cancellation in ``r₂``). For the Cayley transform of a step, ``T = YᵀP`` and ``S = PᵀP``,
    ``S - TᵀT = Pᵀ(I - YYᵀ)P`` is positive semidefinite: ``I - Z`` is the identity plus a skew
    matrix plus a positive semidefinite one, so ``‖(I - Z)⁻¹‖₂ ≤ 1`` for a step of any size,
    and for a step of moderate size :func:`_neumann_solve` takes its series.
    """
    z = 0.5 * (t - t.mT) + 0.25 * (mm_h(t, t) - s)
    h = _neumann_solve(z, 0.5 * (c2 + mm(t.mT + 2 * z, c1)))
    r1 = c1 + h
    return r1, 2 * h - mm(t, r1)


# (I - Z)⁻¹C = Σ_k Z^k C = Π_{j<m} (I + Z^{2^j}) C up to the terms k ≥ 2^m, Z^{2^m}(I - Z)⁻¹C,
# of norm at most ‖Z^{2^m}‖₁/(1 - θ) for θ = ‖Z‖₁ ≤ 1/2: with ‖Z^{2^m}‖₁ ≤ θ^{2^m}, m = 5 factors
# reach float32's unit roundoff, 6 float64's.
_NEUMANN_THETA = 0.5
_NEUMANN_FACTORS = {jnp.dtype(jnp.float32): 5, jnp.dtype(jnp.float64): 6}


def _neumann_solve(z: jax.Array, c: jax.Array) -> jax.Array:
    """``(I - Z)⁻¹C`` of ``(..., m, m)`` and ``(..., m, k)`` matrices.

    For ``‖Z‖₁ ≤ 1/2`` (the Cayley transform of a step of moderate size) by the Neumann series
    in product form, with as many factors as the batch needs to reach the unit roundoff: the
    factor of ``Z^{2^j}`` is taken while ``‖Z^{2^{j-1}}‖₁²``, from the power last formed (often
    far below ``θ^{2^j}``: the series of a Cayley transform), exceeds ``(1 - θ)u``; skipped
    factors cost nothing (``lax.cond``). Otherwise by LU (:func:`rules.solve`). The series is
    batched matrix products only, on every platform, where an LU is an m-step loop over its
    pivots (and on the CPU a LAPACK call per matrix): on a batch of small matrices (stacked
    attention heads) that loop would be most of a ``manifold_adam`` step. Under ``jax.vmap`` the
    tests are batched and both branches run — pass stacked matrices as leading axes instead.
    """
    u = float(np.finfo(z.dtype).eps) / 2

    def norm(a: jax.Array) -> jax.Array:
        return lax.stop_gradient(jnp.max(jnp.sum(jnp.abs(a), axis=-2)))

    theta = norm(z)
    tol = (1 - theta) * u

    def series(z: jax.Array, c: jax.Array) -> jax.Array:
        r = c + mm(z, c)

        def square(zr: tuple[jax.Array, jax.Array, jax.Array]
                   ) -> tuple[jax.Array, jax.Array, jax.Array]:
            z, r, _ = zr
            z = mm(z, z)
            return z, r + mm(z, r), norm(z)

        state = (z, r, theta)
        for _ in range(1, _NEUMANN_FACTORS[jnp.dtype(z.dtype)]):
            state = lax.cond(state[2] ** 2 > tol, square, lambda zr: zr, state)
        return state[1]

    return lax.cond(theta <= _NEUMANN_THETA, series,
                    lambda z, c: rules.solve(eye_like(z) - z, c), z, c)
