"""Elementwise helpers the manifolds share, on batch-leading arrays: symmetric and skew parts,
the Frobenius inner product, square roots with a subgradient at 0, functions analytic at 0."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp

__all__ = ["analytic_at_zero", "frobenius_inner", "norm_from_square", "safe_sqrt", "skew", "sym"]


def sym(a: jax.Array) -> jax.Array:
    """``(a + aᵀ)/2`` over the last two axes."""
    return 0.5 * (a + a.mT)


def skew(a: jax.Array) -> jax.Array:
    """``(a - aᵀ)/2`` over the last two axes."""
    return 0.5 * (a - a.mT)


def frobenius_inner(u: jax.Array, v: jax.Array, ndim: int = 2) -> jax.Array:
    """``Σ u ⊙ v`` over the last ``ndim`` axes (``tr(uᵀv)`` for matrices)."""
    return jnp.sum(u * v, axis=tuple(range(-ndim, 0)))


def safe_sqrt(s: jax.Array) -> jax.Array:
    """``√s`` for ``s ≥ 0`` whose derivative at ``s = 0`` is 0 instead of ``∞·0 = nan``.

    A norm or distance is not differentiable at 0; 0 is a subgradient there, and the square of
    the result keeps its true derivative (0) at 0.
    """
    positive = s > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, s, 1)), 0)


@jax.custom_jvp
def norm_from_square(s: jax.Array) -> jax.Array:
    """``√s`` for ``s ≥ 0`` (a norm or distance from its square): derivative 0 at ``s = 0``, and
    a second derivative there that is nan, not a number.

    A norm is not differentiable at 0: 0 is a subgradient, so ``norm**2`` keeps its true first
    derivative. Its true second derivative there (the metric) is beyond the reach of any
    derivative of the norm — ``d²(‖v‖²) = 2‖dv‖²`` is not the square of a linear map — so the
    second derivative of the norm at 0 is nan, and ``jax.hessian`` of ``norm**2`` there is nan
    rather than a wrong 0. Square norms and distances are smooth: see ``squared_dist``.
    """
    return safe_sqrt(s)


@jax.custom_jvp
def _half_inverse_root(s: jax.Array) -> jax.Array:
    """``1/(2√s)`` for ``s > 0`` and 0 at 0, with a nan derivative at 0."""
    positive = s > 0
    return jnp.where(positive, 0.5 / jnp.sqrt(jnp.where(positive, s, 1)), 0)


@norm_from_square.defjvp
def _norm_from_square_jvp(primals: tuple[jax.Array], tangents: tuple[jax.Array]
                          ) -> tuple[jax.Array, jax.Array]:
    (s,), (s_dot,) = primals, tangents
    return norm_from_square(s), s_dot * _half_inverse_root(s)


@_half_inverse_root.defjvp
def _half_inverse_root_jvp(primals: tuple[jax.Array], tangents: tuple[jax.Array]
                           ) -> tuple[jax.Array, jax.Array]:
    (s,), (s_dot,) = primals, tangents
    positive = s > 0
    safe = jnp.where(positive, s, 1)
    slope = jnp.where(positive, -0.25 / (safe * jnp.sqrt(safe)), jnp.nan)
    return _half_inverse_root(s), s_dot * slope


def analytic_at_zero(s: jax.Array, direct: Callable[[jax.Array], jax.Array],
                     coefficients: Sequence[float]) -> jax.Array:
    """``f(s)`` for ``s ≥ 0``, a function analytic at 0 whose formula ``direct`` is not (a
    removable singularity, or ``f(t²)`` of an even function of ``t``).

    Below the cutoff (0.01 in float32, 9e-4 in float64) the Taylor polynomial
    ``Σₖ coefficients[k] sᵏ`` (six terms: truncation error below 1e-18); above it ``direct(s)``.
    Each branch is evaluated only where it is selected (elsewhere at a harmless argument), so
    neither contributes ``0·∞`` to the derivative of the other, and every derivative is exact at
    0. An even function of a norm ``t = ‖v‖`` is called with ``s = ‖v‖²``: ``t`` itself has no
    second derivative at ``v = 0``, ``s`` has all of them.
    """
    cutoff = 0.01 if s.dtype == jnp.float32 else 9e-4
    small = s < cutoff
    s_small = jnp.where(small, s, 0)  # large s would overflow the masked polynomial
    series = jnp.zeros_like(s)
    for a in reversed(coefficients):
        series = series * s_small + a
    return jnp.where(small, series, direct(jnp.where(small, cutoff, s)))
