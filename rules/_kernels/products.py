"""Matrix products on batch-leading arrays ``(..., m, n)``: unrolled, thin, shared-weight and
triangular, each at full precision (``lax.Precision.HIGHEST``).

The routes (:mod:`.routes`): products of tiny matrices are sums of outer products on every
platform; the rest is a dot, except where XLA:CPU's dot emitter runs a shape far below its speed —
there :func:`~.routes.cpu_route` takes outer-product sums, laid-out transposes, broadcast shared
weights or blocked triangular products on the CPU, and the plain product elsewhere.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax

from .._core.arrays import HIGHEST, mH
from . import routes
from .routes import cpu_route

__all__ = ["batched_product", "laid_out", "laid_out_unless_unrolled", "lower_of_transpose_product",
           "lower_of_upper_adjoint_product", "lower_of_upper_product", "lower_product", "mm",
           "mm_h", "mm_thin", "outer_product_sum", "product_cotangents"]


# ==============================================================================================
# Products of two matrices


def mm(a: jax.Array, b: jax.Array, *, unroll: int | None = None) -> jax.Array:
    """Batched matrix product ``(..., m, k) @ (..., k, n)`` at full precision.

    Batch axes broadcast (a matrix without batch axes is shared); ranks are aligned explicitly so
    this also runs with ``jax_numpy_rank_promotion="raise"``. An empty inner dimension gives
    zeros. A product whose dimensions are all ``≤ routes.UNROLL_MAX`` is a sum of outer products
    (:func:`outer_product_sum`) on every platform; with ``unroll``, one whose dimensions are all
    ``≤ unroll`` is one on the CPU (``cpu_route.unrolled_product``).
    """
    (m, k), n = a.shape[-2:], b.shape[-1]
    largest = max(m, k, n)
    if k == 0 or largest > max(routes.UNROLL_MAX, unroll or 0):
        return _dot(a, b)
    if largest <= routes.UNROLL_MAX:
        return outer_product_sum(a, b)
    return cpu_route("unrolled_product", outer_product_sum, _dot, a, b)


def _dot(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.matmul(a, b, precision=HIGHEST)


def outer_product_sum(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a @ b`` as ``Σ_i a[..., :, i] ⊗ b[..., i, :]``: elementwise, one fused loop for XLA."""
    rank = max(a.ndim, b.ndim)
    a = a.reshape((1,) * (rank - a.ndim) + a.shape)
    b = b.reshape((1,) * (rank - b.ndim) + b.shape)
    out = a[..., :, 0, None] * b[..., None, 0, :]
    for i in range(1, a.shape[-1]):
        out = out + a[..., :, i, None] * b[..., None, i, :]
    return out


def mm_thin(a: jax.Array, b: jax.Array) -> jax.Array:
    """:func:`mm` for a thin contraction: a tall ``(..., m, k)`` times a small ``(..., k, n)``.

    The product of a frame and a p×p matrix, ``Y S``. On the CPU, for ``k ≤ routes.THIN_MAX_K``
    and a result of at least ``routes.THIN_MIN_SIZE`` entries, it is summed as ``k`` outer
    products (``cpu_route.thin_product``): one fused loop of ``k`` multiply-adds per entry that
    also fuses with its consumer, where XLA:CPU's dot runs tall-times-small shapes far below its
    speed on wide ones. Smaller results stay dots (the loop's fixed cost dominates them), and so
    do deeper contractions. ``a`` should be an array already formed, not a chain of products: XLA
    fuses an elementwise producer into the loop and recomputes it for each of the ``k`` terms.
    """
    (m, k), n = a.shape[-2:], b.shape[-1]
    size = math.prod(jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])) * m * n
    if not 0 < k <= routes.THIN_MAX_K or size < routes.THIN_MIN_SIZE:
        return mm(a, b)
    return cpu_route("thin_product", outer_product_sum, mm, a, b)


def mm_h(a: jax.Array, b: jax.Array, *, unroll: int | None = None) -> jax.Array:
    """``aᴴ b`` by :func:`mm`, with ``aᴴ`` laid out in memory first on the CPU (:func:`laid_out`).

    XLA folds a transpose into the dot that consumes it, and XLA:CPU sends a dot to its fast
    kernel (YNNPACK) only when the left operand is contracted over its last axis: the folded
    ``aᴴb`` of two tall matrices would run in the generic dot. The copy of ``aᴴ`` costs one pass.
    """
    return mm(laid_out_unless_unrolled(mH(a), b.shape[-1], unroll=unroll), b, unroll=unroll)


def laid_out(x: jax.Array) -> jax.Array:
    """``x`` as an array of its own on the CPU (``cpu_route.laid_out``): a barrier XLA cannot fold.

    Used on a transpose that would otherwise be folded into the dot consuming it (see
    :func:`mm_h`). GPUs and TPUs transpose inside their matrix units, so there it is ``x``.
    """
    barrier: Callable[[jax.Array], jax.Array] = lax.optimization_barrier  # untyped in jax
    return cpu_route("laid_out", barrier, _identity, x)


def _identity(x: jax.Array) -> jax.Array:
    return x


def laid_out_unless_unrolled(x: jax.Array, *other_dims: int, unroll: int | None = None
                             ) -> jax.Array:
    """:func:`laid_out` ``x``, a transposed operand, unless the product it enters is unrolled.

    :func:`mm` unrolls a product whose dimensions (those of ``x``'s last two axes and
    ``other_dims``) are all small (``unroll`` as there): that elementwise loop fuses with the
    transpose, and the barrier would only add a copy.
    """
    small = max(*x.shape[-2:], *other_dims) <= max(routes.UNROLL_MAX, unroll or 0)
    return x if small else laid_out(x)


# ==============================================================================================
# Tensors and shared matrices: one contraction, C = op(X) op(Y)


def batched_product(x: jax.Array, y: jax.Array, tx: bool, ty: bool, *, sum_batch: bool = False,
                    precision: lax.Precision | None = None) -> jax.Array:
    """``op(X) @ op(Y)`` for tensors or shared matrices, by one ``lax.dot_general``.

    ``x`` and ``y`` have shapes ``(..., r, c)`` or ``(r, c)``; ``tx``/``ty`` transpose their last
    two axes. If both have batch axes (the same ones) and ``sum_batch`` is set, the batch axes are
    contracted too: the result is ``Σ_b op(X_b) op(Y_b)``, shape ``(m, n)``. Tiny matrices are
    unrolled (:func:`mm`); on the CPU a small shared left matrix is broadcast to every slice
    (``cpu_route.shared_left_broadcast``: a batched dot whose left operand is row-major runs as
    one YNNPACK batch, instead of one GEMM with the tensor and the result transposed around it),
    and a shared transposed one is laid out first (:func:`laid_out`).
    """
    nx, ny = x.ndim - 2, y.ndim - 2
    if not sum_batch and max(*x.shape[-2:], *y.shape[-2:]) <= routes.UNROLL_MAX:
        return mm(x.mT if tx else x, y.mT if ty else y)
    shared_left = not nx and ny and not sum_batch
    if shared_left and max(*x.shape, *y.shape[-2:]) <= routes.SHARED_LEFT_BROADCAST_MAX:
        def broadcast(x: jax.Array, y: jax.Array) -> jax.Array:
            x = jnp.broadcast_to(x.mT if tx else x, (*y.shape[:-2], *x.shape[::-1 if tx else 1]))
            return _contraction(x, y, False, ty, False, precision)

        plain = functools.partial(_contraction, tx=tx, ty=ty, sum_batch=False,
                                  precision=precision)
        return cpu_route("shared_left_broadcast", broadcast, plain, x, y)
    if shared_left and tx:
        return _contraction(laid_out(x.mT), y, False, ty, False, precision)
    return _contraction(x, y, tx, ty, sum_batch, precision)


def _contraction(x: jax.Array, y: jax.Array, tx: bool, ty: bool, sum_batch: bool,
                 precision: lax.Precision | None) -> jax.Array:
    """:func:`batched_product` as one ``lax.dot_general``, no route."""
    nx, ny = x.ndim - 2, y.ndim - 2
    cx = x.ndim - 2 if tx else x.ndim - 1
    cy = y.ndim - 1 if ty else y.ndim - 2
    if nx and ny:
        bx, by = tuple(range(nx)), tuple(range(ny))
        if sum_batch:
            return lax.dot_general(x, y, ((bx + (cx,), by + (cy,)), ((), ())), precision=precision)
        return lax.dot_general(x, y, (((cx,), (cy,)), (bx, by)), precision=precision)
    out = lax.dot_general(x, y, (((cx,), (cy,)), ((), ())), precision=precision)
    # A shared left operand puts its free axis first: (m, ..., n) -> (..., m, n).
    return jnp.moveaxis(out, 0, -2) if ny else out


def product_cotangents(x: jax.Array, y: jax.Array, tx: bool, ty: bool, c_bar: jax.Array
                       ) -> tuple[jax.Array, jax.Array]:
    r"""Cotangents ``(X̄, Ȳ)`` of ``C = op(X) op(Y)``, tensors or shared matrices.

    .. math::
        \bar X = \bar C\,\mathrm{op}(Y)^T \text{ or } \mathrm{op}(Y)\,\bar C^T \ (t_x), \qquad
        \bar Y = \mathrm{op}(X)^T \bar C \text{ or } \bar C^T \mathrm{op}(X) \ (t_y)

    The cotangent of a shared matrix contracts the batch axes in the same ``dot_general``. With two
    batched operands (not tiny), the CPU puts ``C̄`` on the left of both products and transposes
    the result where needed (``cpu_route.cotangents_c_bar_left``, the layout XLA:CPU's dot runs
    fastest, as JAX's own transpose of ``dot_general`` does); elsewhere the formulas as written.
    Tiny slices always use the formulas as written: their unrolled products take a transposed
    operand for free, and a transposed result would be a pass of its own.
    """
    tiny = max(*x.shape[-2:], *y.shape[-2:]) <= routes.UNROLL_MAX
    as_written = functools.partial(_cotangents_as_written, tx=tx, ty=ty)
    if x.ndim > 2 and y.ndim > 2 and not tiny:
        c_bar_left = functools.partial(_cotangents_c_bar_left, tx=tx, ty=ty)
        return cpu_route("cotangents_c_bar_left", c_bar_left, as_written, x, y, c_bar)
    return as_written(x, y, c_bar)


def _cotangents_c_bar_left(x, y, c_bar, *, tx, ty):
    x_bar = batched_product(c_bar, y, False, not ty, precision=HIGHEST)
    y_bar = batched_product(c_bar, x, True, tx, precision=HIGHEST)
    return (x_bar.mT if tx else x_bar), (y_bar if ty else y_bar.mT)


def _cotangents_as_written(x, y, c_bar, *, tx, ty):
    sum_x, sum_y = x.ndim < c_bar.ndim, y.ndim < c_bar.ndim
    if tx:
        x_bar = batched_product(y, c_bar, ty, True, sum_batch=sum_x, precision=HIGHEST)
    else:
        x_bar = batched_product(c_bar, y, False, not ty, sum_batch=sum_x, precision=HIGHEST)
    if ty:
        y_bar = batched_product(c_bar, x, True, tx, sum_batch=sum_y, precision=HIGHEST)
    else:
        y_bar = batched_product(x, c_bar, not tx, False, sum_batch=sum_y, precision=HIGHEST)
    return x_bar, y_bar


# ==============================================================================================
# Triangular products: on the CPU from a size on in 2 × 2 blocks that skip the zero blocks (half
# the flops, routes.BLOCKED_TRIANGULAR_MIN_N); elsewhere one product.


def lower_product(l: jax.Array, x: jax.Array) -> jax.Array:
    """``L X`` for lower triangular ``L`` and ``X``: ``[[L₁₁X₁₁, 0], [L₂₁X₁₁ + L₂₂X₂₁, L₂₂X₂₂]]``
    in blocks on the CPU (``cpu_route.blocked_triangular``)."""
    return _blocked_triangular(_blocked_lower_product, l, x)


def _blocked_triangular(blocked, a, b):
    """``blocked(a, b)`` on the CPU from ``routes.BLOCKED_TRIANGULAR_MIN_N``, else ``a @ b``."""
    if a.shape[-1] < routes.BLOCKED_TRIANGULAR_MIN_N:
        return mm(a, b)
    return cpu_route("blocked_triangular", blocked, mm, a, b)


def _blocked_lower_product(l, x):
    if l.shape[-1] < routes.BLOCKED_TRIANGULAR_MIN_N:
        return mm(l, x)
    (l11, _, l21, l22), (x11, _, x21, x22) = _quadrants(l), _quadrants(x)
    return _from_quadrants(_blocked_lower_product(l11, x11), mm(l21, x11) + mm(l22, x21),
                           _blocked_lower_product(l22, x22))


def _quadrants(a):
    """``(A₁₁, A₁₂, A₂₁, A₂₂)`` of a square batch split at ``h = n // 2``."""
    h = a.shape[-1] // 2
    return a[..., :h, :h], a[..., :h, h:], a[..., h:, :h], a[..., h:, h:]


def _from_quadrants(a11, a21, a22):
    """``[[A₁₁, 0], [A₂₁, A₂₂]]``."""
    top = jnp.concatenate([a11, jnp.zeros((*a11.shape[:-1], a22.shape[-1]), a11.dtype)], axis=-1)
    return jnp.concatenate([top, jnp.concatenate([a21, a22], axis=-1)], axis=-2)


def lower_of_upper_product(u: jax.Array, y: jax.Array) -> jax.Array:
    """A matrix whose lower triangle is that of ``U Y`` for upper triangular ``U``; on the CPU
    ``[[U₁₁Y₁₁ + U₁₂Y₂₁, 0], [U₂₂Y₂₁, U₂₂Y₂₂]]`` in blocks (``cpu_route.blocked_triangular``)."""
    return _blocked_triangular(_blocked_lower_of_upper_product, u, y)


def _blocked_lower_of_upper_product(u, y):
    if u.shape[-1] < routes.BLOCKED_TRIANGULAR_MIN_N:
        return mm(u, y)
    (u11, u12, _, u22), (y11, _, y21, y22) = _quadrants(u), _quadrants(y)
    return _from_quadrants(_blocked_lower_of_upper_product(u11, y11) + mm(u12, y21),
                           mm(u22, y21), _blocked_lower_of_upper_product(u22, y22))


def lower_of_transpose_product(l: jax.Array, y: jax.Array) -> jax.Array:
    """A matrix whose lower triangle is that of ``Lᵀ Y`` for lower triangular ``L``, by
    :func:`lower_of_upper_product` with ``Lᵀ`` laid out once: folded into the block products,
    the transpose would send each to XLA:CPU's generic dot."""
    return lower_of_upper_product(laid_out_unless_unrolled(l.mT), y)


def lower_of_upper_adjoint_product(r: jax.Array, r_bar: jax.Array, *, unroll: int | None = None
                                   ) -> jax.Array:
    """A matrix whose lower triangle (diagonal included) is that of ``R R̄ᴴ``, ``R`` upper.

    ``(R R̄ᴴ)_ij = Σ_{k ≥ i} R_ik conj(R̄_jk)`` for ``i ≥ j`` involves only ``R̄``'s upper
    triangle. On the CPU from ``routes.BLOCKED_QR_GRAM_MIN_N`` columns
    (``cpu_route.blocked_qr_gram``), with ``h = n/2``, the rows ``i < h`` are ``R[:h] R̄[:h]ᴴ``
    (columns ``j < h``) and the rows ``i ≥ h`` are ``R₂₂ R̄[:, h:]ᴴ``: half the flops, the block
    above the diagonal and the zeros of ``R`` skipped. Elsewhere one product.
    """
    def whole(r: jax.Array, r_bar: jax.Array) -> jax.Array:
        return mm(r, mH(r_bar), unroll=unroll)

    if r.shape[-1] < routes.BLOCKED_QR_GRAM_MIN_N:
        return whole(r, r_bar)
    return cpu_route("blocked_qr_gram", _blocked_upper_adjoint, whole, r, r_bar)


def _blocked_upper_adjoint(r, r_bar):
    n = r.shape[-1]
    h = n // 2
    top = mm(r[..., :h, :], mH(r_bar[..., :h, :]))
    top = jnp.concatenate([top, jnp.zeros((*top.shape[:-1], n - h), top.dtype)], -1)
    return jnp.concatenate([top, mm(r[..., h:, h:], mH(r_bar[..., :, h:]))], -2)
