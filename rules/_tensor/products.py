r"""Batched ("parallel") tensor products with explicit pushforwards and pullbacks.

A tensor is an array ``(..., m, n)`` with any number of leading batch axes; a matrix operand
without batch axes is shared by every slice. All five products are one contraction,
``C = op(X) op(Y)`` with ``op`` the identity or the transpose of the last two axes, and so are
their cotangents:

.. math::
    \bar X = \begin{cases} \bar C\, \mathrm{op}(Y)^T & \text{no transpose} \\
                           \mathrm{op}(Y)\, \bar C^T & \text{transposed} \end{cases}, \qquad
    \bar Y = \begin{cases} \mathrm{op}(X)^T \bar C & \text{no transpose} \\
                           \bar C^T \mathrm{op}(X) & \text{transposed} \end{cases}

The cotangent of a shared matrix additionally contracts over the batch axes, in the same single
``dot_general`` (never a per-slice stack that is then summed). Each cotangent costs one product
of the forward's size: the pullback is twice the forward's flops, and so is the pushforward
``Ċ = op(Ẋ) op(Y) + op(X) op(Ẏ)`` (one product when only one operand moves). The products are
bilinear and holomorphic, so complex inputs use plain transposes (JAX's convention). Derivation:
``docs/derivations/tensor-products.md``.

The pushforward's and the pullback's products ask for ``lax.Precision.HIGHEST``, as every rule's
do (``docs/derivations/conventions.md#precision``), where JAX's own jvp of ``jnp.matmul`` keeps
the default: on GPU/TPU the default lets float32 products run in TF32 or bfloat16 passes. On CPU
float32 products run at full precision either way, so the flag changes nothing there. The
contractions, and the layouts chosen for them per platform, are the kernel layer's
(``rules/_kernels/products.py``).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .._core.arrays import HIGHEST
from .._core.checks import check_matrix
from .._core.dispatch import jitted
from .._core.rule import Rule
from .._core.sharding import match_varying
from .._kernels.products import batched_product, product_cotangents
from .structured import AbstractPacked

__all__ = ["tensor_tensor_mul", "tensor_transpose_tensor_mul", "mat_tensor_mul", "tensor_mat_mul",
           "tensor_transpose_mat_mul", "tensor_transpose"]


# ==============================================================================================
# The one contraction


def _product_forward(x, y, *, tx, ty):
    return batched_product(x, y, tx, ty), (x, y)


def _product_pushforward(res, x_dot, y_dot, *, tx, ty):
    """``Ċ = op(Ẋ) op(Y) + op(X) op(Ẏ)``, one term per moving operand."""
    x, y = res
    terms = []
    if x_dot is not None:
        terms.append(batched_product(x_dot, y, tx, ty, precision=HIGHEST))
    if y_dot is not None:
        terms.append(batched_product(x, y_dot, tx, ty, precision=HIGHEST))
    return sum(terms[1:], terms[0])


def _product_pullback(res, c_bar, *, tx, ty):
    """``(X̄, Ȳ)`` (module docstring); a shared matrix's cotangent contracts the batch axes."""
    x, y = res
    return product_cotangents(x, y, tx, ty, c_bar)


product = Rule("batched_product", _product_forward, _product_pushforward, _product_pullback)


# ==============================================================================================
# Input checks shared by the five products

# name: operand names, their expected shapes, whether the first operand is transposed, and the
# position of the shared matrix operand (None: both are tensors with the same batch axes).
_SPECS = {
    "tensor_tensor_mul": (("a", "b"), ("(..., m, k)", "(..., k, n)"), False, None),
    "tensor_transpose_tensor_mul": (("a", "b"), ("(..., k, m)", "(..., k, n)"), True, None),
    "mat_tensor_mul": (("w", "a"), ("(m, k)", "(..., k, n)"), False, 0),
    "tensor_mat_mul": (("a", "w"), ("(..., m, k)", "(k, n)"), False, 1),
    "tensor_transpose_mat_mul": (("a", "w"), ("(..., k, m)", "(k, n)"), True, 1),
}


def _prepare(fname, x, y):
    """Check both operands of ``fname`` at trace time; densify a packed matrix; promote dtypes."""
    names, shapes, tx, shared = _SPECS[fname]
    operands = []
    for i, (name, v) in enumerate(zip(names, (x, y))):
        if i == shared and isinstance(v, AbstractPacked):
            v = v.dense()
        check_matrix(fname, name, v)
        if i == shared and v.ndim != 2:
            raise ValueError(f"{fname}: `{name}` must be a matrix of shape {shapes[i]} without "
                             f"batch axes (it is shared by every slice); got {tuple(v.shape)}.")
        operands.append(v)
    x, y = operands
    kx = x.shape[-2] if tx else x.shape[-1]
    batch_mismatch = shared is None and x.shape[:-2] != y.shape[:-2]
    if kx != y.shape[-2] or batch_mismatch:
        raise ValueError(f"{fname}: `{names[0]}` of shape {tuple(x.shape)} and `{names[1]}` of "
                         f"shape {tuple(y.shape)} do not match; expected {shapes[0]} and "
                         f"{shapes[1]}.")
    dtype = jnp.result_type(x, y)
    return (*match_varying(x.astype(dtype), y.astype(dtype)), tx)  # shard_map: rules/_core/sharding.py


# ==============================================================================================
# The public products


@jitted()
def tensor_tensor_mul(a: jax.Array, b: jax.Array) -> jax.Array:
    r"""Slice-wise product of two tensors, ``C_b = A_b B_b``.

    .. math::
        C_b = A_b B_b, \qquad \dot C_b = \dot A_b B_b + A_b \dot B_b, \qquad
        \bar A_b = \bar C_b B_b^T, \qquad \bar B_b = A_b^T \bar C_b

    Args:
      a: shape ``(..., m, k)``.
      b: shape ``(..., k, n)``, the same batch axes as ``a``.

    Returns:
      ``C`` of shape ``(..., m, n)`` (``jnp.matmul`` of the two, slice by slice, dtype promoted
      alike).

    Raises:
      TypeError: ``a`` or ``b`` is not a float/complex array.
      ValueError: the batch axes differ, or ``a``'s columns are not ``b``'s rows.

    Examples:
      >>> import jax.numpy as jnp, rules
      >>> a = jnp.arange(12, dtype=jnp.float32).reshape(2, 2, 3)
      >>> rules.tensor_tensor_mul(a, jnp.ones((2, 3, 1), jnp.float32))[:, :, 0]
      Array([[ 3., 12.],
             [21., 30.]], dtype=float32)
    """
    x, y, tx = _prepare("tensor_tensor_mul", a, b)
    return product(x, y, tx=tx, ty=False)


@jitted()
def tensor_transpose_tensor_mul(a: jax.Array, b: jax.Array) -> jax.Array:
    r"""Slice-wise product with the first tensor transposed, ``C_b = A_bᵀ B_b``.

    .. math::
        C_b = A_b^T B_b, \qquad \dot C_b = \dot A_b^T B_b + A_b^T \dot B_b, \qquad
        \bar A_b = B_b \bar C_b^T, \qquad \bar B_b = A_b \bar C_b

    Args:
      a: shape ``(..., k, m)``, transposed slice by slice.
      b: shape ``(..., k, n)``, the same batch axes as ``a``.

    Returns:
      ``C`` of shape ``(..., m, n)``: a batch of ``AᵀB`` (Gram matrices when ``a is b``).

    Raises:
      TypeError: ``a`` or ``b`` is not a float/complex array.
      ValueError: the batch axes differ, or ``a`` and ``b`` have different numbers of rows.

    Examples:
      >>> import jax.numpy as jnp, rules
      >>> a = jnp.arange(12.0).reshape(2, 3, 2)
      >>> rules.tensor_transpose_tensor_mul(a, a).shape  # a batch of 2 Gram matrices
      (2, 2, 2)
    """
    x, y, tx = _prepare("tensor_transpose_tensor_mul", a, b)
    return product(x, y, tx=tx, ty=False)


@jitted()
def mat_tensor_mul(w: jax.Array | AbstractPacked, a: jax.Array) -> jax.Array:
    r"""A shared matrix times every slice of a tensor, ``C_b = W A_b``.

    .. math::
        C_b = W A_b, \qquad \dot C_b = \dot W A_b + W \dot A_b, \qquad
        \bar W = \sum_b \bar C_b A_b^T, \qquad \bar A_b = W^T \bar C_b

    Args:
      w: shape ``(m, k)``, an array or a packed matrix (:class:`rules.StrictlyLower`,
        :class:`rules.StrictlyUpper`, :class:`rules.SkewSymmetric`, :class:`rules.Symmetric`), whose
        cotangent is then packed with the exact-derivative convention.
      a: shape ``(..., k, n)``.

    Returns:
      ``C`` of shape ``(..., m, n)``, the same ``W`` applied to every slice (dtype promoted as
      ``jnp.matmul``).

    Raises:
      TypeError: ``w`` or ``a`` is not a float/complex array.
      ValueError: ``w`` has batch axes, or ``w``'s columns are not ``a``'s rows.

    Notes:
      ``W̄`` is one contraction over the batch axes and ``n`` together.

    Examples:
      >>> import jax.numpy as jnp, rules
      >>> w = rules.StrictlyLower(jnp.array([1.0], jnp.float32), 2)  # [[0, 0], [1, 0]]
      >>> rules.mat_tensor_mul(w, jnp.array([[[2.0], [3.0]]], jnp.float32))
      Array([[[0.],
              [2.]]], dtype=float32)
    """
    x, y, tx = _prepare("mat_tensor_mul", w, a)
    return product(x, y, tx=tx, ty=False)


@jitted()
def tensor_mat_mul(a: jax.Array, w: jax.Array | AbstractPacked) -> jax.Array:
    r"""Every slice of a tensor times a shared matrix, ``C_b = A_b W``.

    .. math::
        C_b = A_b W, \qquad \dot C_b = \dot A_b W + A_b \dot W, \qquad
        \bar A_b = \bar C_b W^T, \qquad \bar W = \sum_b A_b^T \bar C_b

    Args:
      a: shape ``(..., m, k)``, e.g. a batch of sequences of ``m`` feature vectors.
      w: shape ``(k, n)``, an array or a packed matrix (see :func:`mat_tensor_mul`).

    Returns:
      ``C`` of shape ``(..., m, n)``: every row of every slice mapped by ``W``.

    Raises:
      TypeError: ``a`` or ``w`` is not a float/complex array.
      ValueError: ``w`` has batch axes, or ``a``'s columns are not ``w``'s rows.

    Notes:
      ``W̄`` is one GEMM: the batch axes and ``m`` are contracted together.

    Examples:
      >>> import jax, jax.numpy as jnp, rules
      >>> a, w = jnp.ones((4, 2, 3), jnp.float32), jnp.eye(3, dtype=jnp.float32)
      >>> jax.grad(lambda w: rules.tensor_mat_mul(a, w).sum())(w)  # Σ_b A_bᵀ 1
      Array([[8., 8., 8.],
             [8., 8., 8.],
             [8., 8., 8.]], dtype=float32)
    """
    x, y, tx = _prepare("tensor_mat_mul", a, w)
    return product(x, y, tx=tx, ty=False)


@jitted()
def tensor_transpose_mat_mul(a: jax.Array, w: jax.Array | AbstractPacked) -> jax.Array:
    r"""Every transposed slice of a tensor times a shared matrix, ``C_b = A_bᵀ W``.

    .. math::
        C_b = A_b^T W, \qquad \dot C_b = \dot A_b^T W + A_b^T \dot W, \qquad
        \bar A_b = W \bar C_b^T, \qquad \bar W = \sum_b A_b \bar C_b

    Args:
      a: shape ``(..., k, m)``, transposed slice by slice.
      w: shape ``(k, n)``, an array or a packed matrix (see :func:`mat_tensor_mul`).

    Returns:
      ``C`` of shape ``(..., m, n)``.

    Raises:
      TypeError: ``a`` or ``w`` is not a float/complex array.
      ValueError: ``w`` has batch axes, or ``a`` and ``w`` have different numbers of rows.

    Examples:
      >>> import jax.numpy as jnp, rules
      >>> rules.tensor_transpose_mat_mul(jnp.ones((5, 3, 2)), jnp.ones((3, 4))).shape
      (5, 2, 4)
    """
    x, y, tx = _prepare("tensor_transpose_mat_mul", a, w)
    return product(x, y, tx=tx, ty=False)


# ==============================================================================================
# Slice-wise transpose


@jitted()
def tensor_transpose(a: jax.Array) -> jax.Array:
    r"""Transpose of every slice, ``C_b = A_bᵀ``.

    .. math:: C_b = A_b^T, \qquad \dot C_b = \dot A_b^T, \qquad \bar A_b = \bar C_b^T

    Args:
      a: shape ``(..., m, n)``.

    Returns:
      ``C`` of shape ``(..., n, m)``.

    Raises:
      TypeError: ``a`` is not a float/complex array.
      ValueError: ``a`` has fewer than two axes.

    Examples:
      >>> import jax.numpy as jnp, rules
      >>> rules.tensor_transpose(jnp.zeros((7, 2, 3))).shape
      (7, 3, 2)
    """
    check_matrix("tensor_transpose", "a", a)
    return _transpose(a)


def _transpose_forward(a):
    return a.mT, ()


def _transpose_pushforward(_, a_dot):
    return a_dot.mT


def _transpose_pullback(_, c_bar):
    return (c_bar.mT,)


_transpose = Rule("tensor_transpose", _transpose_forward, _transpose_pushforward,
                  _transpose_pullback)
