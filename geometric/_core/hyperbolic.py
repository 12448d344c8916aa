r"""Hyperbolic space of curvature ``-c``: the kernels the two models and :mod:`geometric.hyperbolic` share.

Unchecked functions on batch-leading arrays ``(..., n)`` (the last axis is the vector), with ``c``
a positive Python float. Formulas, conventions and references: docs/derivations/hyperbolic.md.

**Safe region.** The Poincaré ball is kept to ``√c‖x‖ ≤ 1 − ε`` with ``ε`` = :func:`ball_margin`
(``5e-4`` in float32, ``1e-8`` in float64): points there are at hyperbolic distance at most
:func:`max_distance` from the origin (``8.3/√c`` in float32, ``19.1/√c`` in float64). That is as
far as the coordinates locate a point to the accuracy promised — about ``1e-4`` (float32) and
``1e-8`` (float64) of the distances involved, for Möbius addition, ``exp``, ``log`` and ``dist``
against 50-digit references — since rounding a coordinate moves a point near the boundary by
``ε_mach·e^{√c d}/2``. Every function is finite, with finite derivatives, for points there; a point
beyond it by rounding (up to ``1 − ε/2``) is treated as lying on its boundary (:func:`gap`,
:func:`clip_ball`), and a point further out is not a point of the manifold as represented: the
public functions give nan for it (:func:`outside_ball`). The hyperboloid is kept within the same
distance of its origin (:func:`outside_hyperboloid`).

**Removable singularities.** ``tanh(t)/t``, ``t/tanh(t)``, ``sinh(t)/t``, ``t/sinh(t)``,
``cosh(t)`` and ``artanh(z)/z`` are functions of ``t²`` (of ``‖v‖²``, never of the norm ``‖v‖``,
which has no second derivative at 0), evaluated as Taylor polynomials below a small cutoff and
directly above it (:func:`geometric._core.arrays.analytic_at_zero`), so they and their derivatives
of every order are exact to rounding at and near 0; ``arcosh(1 + δ)²`` likewise
(:func:`arcosh1p_squared`), and a distance ``arcosh(1 + δ)`` is its square root, with derivative 0
(a subgradient) and a nan second derivative at ``δ = 0``.
"""
from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable, Sequence
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from .checks import check_int_field
from .arrays import analytic_at_zero, norm_from_square, safe_sqrt
from .manifold import AbstractManifold

__all__ = ["AbstractHyperbolicManifold", "arcosh1p", "arcosh1p_squared", "artanhc", "ball_margin", "check_curvature",
           "clip_ball", "cosh_root", "difference_denominator", "dot", "exp_sum", "expmap0",
           "gap", "gyro_sum", "logmap0", "lorentz_to_poincare", "max_distance", "minkowski",
           "mobius_add", "mobius_difference", "mobius_matvec", "mobius_scalar_mul",
           "nan_outside", "nonnegative", "outside_ball", "outside_hyperboloid",
           "poincare_to_lorentz", "sinhc", "t_over_sinh", "t_over_tanh", "tanhc"]

_MARGINS = {np.dtype(np.float32): 5e-4, np.dtype(np.float64): 1e-8}


def check_curvature(owner: str, value: object) -> float:
    """``value`` as a positive finite ``float``; raises naming ``owner`` (a class or function)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{owner}: `curvature` must be a positive float (the ball has sectional "
                        f"curvature -curvature); got {type(value).__name__}.")
    c = float(operator.index(value) if isinstance(value, (int, np.integer)) else value)
    if not (math.isfinite(c) and c > 0):
        raise ValueError(f"{owner}: `curvature` must be a positive finite float; got {value!r}.")
    return c


def ball_margin(dtype: jnp.dtype) -> float:
    """``ε`` of the safe ball ``√c‖x‖ ≤ 1 − ε`` in ``dtype`` (float32: 5e-4, float64: 1e-8)."""
    return _MARGINS[np.dtype(dtype)]


def outside_ball(x: jax.Array, c: float) -> jax.Array:
    """Where ``x`` is not a point of the safe ball (batch shape): beyond it by more than rounding
    (``√c‖x‖ > 1 − ε/2``), outside the ball itself, or not finite. The ball's methods give nan
    there: the safe ball is the manifold as represented, and a point beyond it has no
    representation accurate to what the methods promise."""
    limit = (1 - ball_margin(x.dtype) / 2) / math.sqrt(c)
    return ~(dot(x, x) <= limit * limit)


def outside_hyperboloid(x: jax.Array, c: float) -> jax.Array:
    """Where ``x`` ``(..., n + 1)`` is not a point of the hyperboloid's safe part (batch shape):
    not on the upper sheet (``x₀ ≤ 0``, or not timelike), or beyond the image of the ball's
    (:func:`outside_ball`) under :func:`poincare_to_lorentz`, ``‖x_s‖ = 2ρ/(√c(1 − ρ²))``."""
    rho = 1 - ball_margin(x.dtype) / 2
    limit = 2 * rho / (math.sqrt(c) * (1 - rho * rho))
    inside = (x[..., 0] > 0) & (minkowski(x, x) < 0) & (dot(x[..., 1:], x[..., 1:]) <= limit ** 2)
    return ~inside


def nan_outside(out: jax.Array, outside: jax.Array) -> jax.Array:
    """``out`` (batch axes first) with nan where ``outside`` (batch shape) holds."""
    outside = jax.lax.stop_gradient(outside)
    return jnp.where(outside.reshape(outside.shape + (1,) * (out.ndim - outside.ndim)), jnp.nan,
                     out)


def max_distance(dtype: jnp.dtype, c: float) -> float:
    """The hyperbolic distance from the origin of the safe sphere: ``2 artanh(1 − ε)/√c``."""
    eps = ball_margin(dtype)
    return math.log((2 - eps) / eps) / math.sqrt(c)


def dot(u: jax.Array, v: jax.Array) -> jax.Array:
    """``Σ u ⊙ v`` over the last axis (broadcasting the others)."""
    return jnp.sum(u * v, axis=-1)


def nonnegative(q: jax.Array) -> jax.Array:
    """``q`` where ``q ≥ 0``, else 0: for a quantity nonnegative but for rounding. At ``q = 0``,
    where such a quantity has its minimum, the derivatives are ``q``'s (``jnp.maximum(q, 0)``
    would halve them there, a wrong second derivative at a quadratic minimum)."""
    return jnp.where(q < 0, 0, q)


def minkowski(u: jax.Array, v: jax.Array) -> jax.Array:
    """The Minkowski product ``−u₀v₀ + Σᵢ uᵢvᵢ`` over the last axis."""
    return dot(u, v) - 2 * u[..., 0] * v[..., 0]


def gap(x2: jax.Array, c: float) -> jax.Array:
    """``1 − c‖x‖²`` from ``x2 = ‖x‖²`` (``= 2/λ_x``), held at its value on the safe sphere beyond it."""
    eps = ball_margin(x2.dtype)
    return jnp.maximum(1 - c * x2, eps * (2 - eps))


def clip_ball(x: jax.Array, c: float) -> jax.Array:
    """``x`` scaled onto the safe sphere ``√c‖x‖ = 1 − ε`` where it lies beyond it."""
    radius = (1 - ball_margin(x.dtype)) / math.sqrt(c)
    norm = safe_sqrt(dot(x, x))
    outside = norm > radius
    scale = jnp.where(outside, radius / jnp.where(outside, norm, 1), 1)
    return x * scale[..., None]


def tanhc(t2: jax.Array) -> jax.Array:
    """``tanh(t)/t`` as a function of ``t2 = t² ≥ 0`` (1 at 0)."""
    return analytic_at_zero(t2, lambda s: jnp.tanh(jnp.sqrt(s)) / jnp.sqrt(s),
                            (1, -1 / 3, 2 / 15, -17 / 315, 62 / 2835, -1382 / 155925))


def t_over_tanh(t2: jax.Array) -> jax.Array:
    """``t/tanh(t)`` as a function of ``t2 = t² ≥ 0`` (1 at 0)."""
    return analytic_at_zero(t2, lambda s: jnp.sqrt(s) / jnp.tanh(jnp.sqrt(s)),
                            (1, 1 / 3, -1 / 45, 2 / 945, -1 / 4725, 2 / 93555))


def sinhc(t2: jax.Array) -> jax.Array:
    """``sinh(t)/t`` as a function of ``t2 = t² ≥ 0`` (1 at 0)."""
    return analytic_at_zero(t2, lambda s: jnp.sinh(jnp.sqrt(s)) / jnp.sqrt(s),
                            (1, 1 / 6, 1 / 120, 1 / 5040, 1 / 362880, 1 / 39916800))


def t_over_sinh(t2: jax.Array) -> jax.Array:
    """``t/sinh(t)`` as a function of ``t2 = t² ≥ 0`` (1 at 0)."""
    return analytic_at_zero(t2, lambda s: jnp.sqrt(s) / jnp.sinh(jnp.sqrt(s)),
                            (1, -1 / 6, 7 / 360, -31 / 15120, 127 / 604800, -73 / 3421440))


def cosh_root(t2: jax.Array) -> jax.Array:
    """``cosh(t)`` as a function of ``t2 = t² ≥ 0``."""
    return analytic_at_zero(t2, lambda s: jnp.cosh(jnp.sqrt(s)),
                            (1, 1 / 2, 1 / 24, 1 / 720, 1 / 40320, 1 / 3628800))


def artanhc(z2: jax.Array) -> jax.Array:
    """``artanh(z)/z`` as a function of ``z2 = z² ≥ 0``, with ``z`` clamped to ``1 − ε`` (the
    safe ball)."""
    top = 1 - ball_margin(z2.dtype)
    z2 = jnp.minimum(z2, top * top)
    return analytic_at_zero(z2, lambda s: jnp.arctanh(jnp.sqrt(s)) / jnp.sqrt(s),
                            (1, 1 / 3, 1 / 5, 1 / 7, 1 / 9, 1 / 11))


def arcosh1p(delta: jax.Array) -> jax.Array:
    """``arcosh(1 + δ)`` for ``δ ≥ 0``: the square root of :func:`arcosh1p_squared` (derivative 0,
    a subgradient, at ``δ = 0``; the second derivative there is nan)."""
    return norm_from_square(arcosh1p_squared(delta))


def arcosh1p_squared(delta: jax.Array) -> jax.Array:
    """``arcosh(1 + δ)²`` for ``δ ≥ 0``, analytic at 0: ``δ(2 − δ/3 + 4δ²/45 − …)`` below the
    cutoff, ``log1p(δ + √(δ(δ + 2)))²`` above it (accurate for small and large δ).

    A squared distance ``arcosh(1 + δ)²`` with ``δ ∝ ‖x − y‖²`` is then smooth at ``x = y``, with
    every derivative exact there (the distance itself has none beyond the first).
    """
    series = analytic_at_zero(delta, lambda d: jnp.log1p(d + jnp.sqrt(d * (d + 2))) ** 2 / d,
                              (2, -1 / 3, 4 / 45, -1 / 35, 16 / 1575, -8 / 2079))
    return delta * series


def _floor(den: jax.Array) -> jax.Array:
    """A denominator that is positive in the ball, held at the smallest normal number."""
    return jnp.maximum(den, float(np.finfo(den.dtype).tiny))


# ----------------------------------------------------------------------------------------------
# The gyrovector operations of the Poincaré ball (Ungar; Ganea, Bécigneul & Hofmann 2018)


def mobius_add(x: jax.Array, y: jax.Array, c: float) -> jax.Array:
    r"""Möbius addition ``x ⊕_c y``, formed by :func:`gyro_sum` from ``e = x + y``.

    .. math::
        x \oplus_c y = \frac{(1 + 2c\langle x, y\rangle + c\|y\|^2)\,x + (1 - c\|x\|^2)\,y}
                            {1 + 2c\langle x, y\rangle + c^2\|x\|^2\|y\|^2}

    The textbook numerator subtracts numbers of size ``1 − c‖x‖²`` to get one far smaller when
    ``y`` is near ``−x`` far from the origin (every digit lost at distance 20 in float64);
    written in ``e`` nothing cancels.
    """
    return gyro_sum(x, x + y, c)


def mobius_difference(x: jax.Array, y: jax.Array, c: float) -> jax.Array:
    """``(−x) ⊕_c y``, formed by :func:`gyro_sum` from ``e = y − x``: exactly 0 at ``y = x``."""
    return gyro_sum(-x, y - x, c)


def gyro_sum(x: jax.Array, e: jax.Array, c: float) -> jax.Array:
    r"""``x ⊕_c y`` from ``x`` and ``e = x + y``, with no cancellation for ``y`` near ``−x``.

    .. math::
        x \oplus_c y = \frac{g\,e + c\|e\|^2 x}
            {(g + c\langle x, e\rangle)^2 + c^2(\|x\|^2\|e\|^2 - \langle x, e\rangle^2)},
        \qquad g = 1 - c\|x\|^2

    (substitute ``y = e − x`` in the textbook form). The numerator is ``g e`` plus a multiple of
    ``x`` that is second order in ``e``, and the denominator a sum of two nonnegative terms, the
    first ``(1 + c⟨x, y⟩)²``: where the sum is small or near ``x``'s antipode, each is formed
    from ``e`` to its own relative precision. See docs/derivations/hyperbolic.md#mobius-addition.
    """
    x2, xe, e2 = dot(x, x), dot(x, e), dot(e, e)
    g = gap(x2, c)
    num = g[..., None] * e + (c * e2)[..., None] * x
    return num / difference_denominator(g, x2, -xe, e2, c)[..., None]


def difference_denominator(g: jax.Array, x2: jax.Array, xe: jax.Array, e2: jax.Array,
                           c: float) -> jax.Array:
    """``1 − 2c⟨x, y⟩ + c²‖x‖²‖y‖²`` with ``y = x + e`` and ``g = 1 − c‖x‖²``, as a sum of squares.

    It equals ``(g − c⟨x, e⟩)² + c²(‖x‖²‖e‖² − ⟨x, e⟩²)``, both terms nonnegative: ``g²`` at
    ``e = 0`` with no cancellation (the direct form subtracts numbers near 1 to get ``g² ≈ 4e-10``
    on the float32 boundary). Floored at the smallest normal number.
    """
    return _floor(jnp.square(g - c * xe) + c * c * nonnegative(x2 * e2 - xe * xe))


def exp_sum(x: jax.Array, v: jax.Array, c: float) -> jax.Array:
    r"""``e = x + y`` for the end point ``x ⊕ y`` of :math:`\exp_x(v)`, ``y = tanh(t) v/(√c‖v‖)``,
    ``t = √c λ_x‖v‖/2``.

    A long step (``t ≥ 1``) is formed as ``(x + û/√c) − σ û/√c`` with ``û = v/‖v‖`` and
    ``σ = 1 − tanh t = 2q/(1 + q)``, ``q = e^{−2t}``: ``tanh t`` itself rounds to 1 once
    ``t`` exceeds 19 (float64) or 9 (float32), and ``y`` would be the ideal point in the
    direction ``û``, losing where along the geodesic ``exp`` ends. A short step is
    ``tanhc(t) λ_x v/2``, smooth at ``v = 0``.
    """
    g = gap(dot(x, x), c)  # 2/λ_x
    v2 = dot(v, v)
    norm = safe_sqrt(v2)
    t = math.sqrt(c) * norm / g
    long = t >= 1
    short = x + (tanhc(jnp.where(long, 0, c * v2 / (g * g))) / g)[..., None] * v
    unit = v / jnp.where(long, norm, 1)[..., None]
    q = jnp.exp(-2 * jnp.where(long, t, 1))
    sigma = 2 * q / (1 + q)
    far = (x + unit / math.sqrt(c)) - (sigma / math.sqrt(c))[..., None] * unit
    return jnp.where(long[..., None], far, short)


def expmap0(v: jax.Array, c: float) -> jax.Array:
    """``exp₀(v) = tanh(√c‖v‖) v/(√c‖v‖)``, on the safe ball (tanh saturates to the boundary)."""
    return clip_ball(tanhc(c * dot(v, v))[..., None] * v, c)


def logmap0(y: jax.Array, c: float) -> jax.Array:
    """``log₀(y) = artanh(√c‖y‖) y/(√c‖y‖)``, the inverse of :func:`expmap0`."""
    return artanhc(c * dot(y, y))[..., None] * y


def mobius_scalar_mul(r: jax.Array, x: jax.Array, c: float) -> jax.Array:
    """``r ⊗_c x = exp₀(r log₀(x))``; ``r`` broadcasts against the batch axes of ``x``."""
    return expmap0(r[..., None] * logmap0(x, c), c)


def mobius_matvec(m: jax.Array, x: jax.Array, c: float) -> jax.Array:
    """``M ⊗_c x = exp₀(M log₀(x))`` for one matrix ``m`` ``(p, n)`` and ``x`` ``(..., n)``, or
    ``m`` ``(..., p, n)`` and ``x`` ``(..., n)`` with equal batch axes."""
    y = logmap0(x, c)
    return expmap0(y @ m.T if m.ndim == 2 else jnp.einsum("...ij,...j->...i", m, y), c)


# ----------------------------------------------------------------------------------------------
# Between the models: the isometries of the stereographic projection from (−1/√c, 0, …, 0)


def poincare_to_lorentz(x: jax.Array, c: float) -> jax.Array:
    """``(1 + c‖x‖², 2√c x) / (√c (1 − c‖x‖²))``: ball ``(..., n)`` to hyperboloid ``(..., n + 1)``."""
    x = clip_ball(x, c)
    x2 = dot(x, x)
    g = gap(x2, c)
    time = (1 + c * x2) / (math.sqrt(c) * g)
    return jnp.concatenate([time[..., None], (2 / g)[..., None] * x], axis=-1)


def lorentz_to_poincare(x: jax.Array, c: float) -> jax.Array:
    """``x_s/(1 + √c x₀)``: hyperboloid ``(..., n + 1)`` to ball ``(..., n)``, on the safe ball."""
    # 1 + √c x₀ ≥ 2 on the upper sheet; the floor keeps other inputs finite.
    return clip_ball(x[..., 1:] / jnp.maximum(1 + math.sqrt(c) * x[..., :1], 1), c)


@dataclasses.dataclass(frozen=True)
class AbstractHyperbolicManifold(AbstractManifold):
    """What both models of hyperbolic space share: the dimension ``n``, the curvature ``−c``
    (``curvature = c > 0``), their checks, and retractions that correct themselves."""

    n: int
    curvature: float = 1.0

    self_correcting: ClassVar[bool] = True

    def __post_init__(self) -> None:
        owner = type(self).__name__
        object.__setattr__(self, "n", check_int_field(owner, "n", self.n))
        object.__setattr__(self, "curvature", check_curvature(owner, self.curvature))
