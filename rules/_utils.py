"""Helpers shared by every rule family: matrix transposes, triangles, input checks.

Everything here works on batch-leading arrays ``(..., m, n)``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

__all__: list[str] = []

# Backward passes ask for full precision so that TF32/bf16 matmuls on accelerators cannot
# quietly spoil a derivative (as jax/_src/lax/linalg.py does in its JVP rules).
HIGHEST = lax.Precision.HIGHEST

REAL_DTYPES = (jnp.float32, jnp.float64)
INEXACT_DTYPES = (jnp.float32, jnp.float64, jnp.complex64, jnp.complex128)
LINALG_DTYPES = INEXACT_DTYPES


# Up to this size a batched matrix product is written as a sum of outer products. XLA's CPU dot
# emitter is pathologically slow for batches of tiny matrices (measured: 4096 products of 4×4 in
# ~8 ms as a dot, ~0.25 ms unrolled); the unrolled form is one fused elementwise loop everywhere.
SMALL_MATMUL = 4


def mm(a: jax.Array, b: jax.Array) -> jax.Array:
    """Batched matrix product ``(..., m, k) @ (..., k, n)`` at full precision.

    Batch axes broadcast (a matrix without batch axes is shared); ranks are aligned explicitly so
    this also runs with ``jax_numpy_rank_promotion="raise"``.
    """
    (m, k), n = a.shape[-2:], b.shape[-1]
    if max(m, k, n) > SMALL_MATMUL:
        return jnp.matmul(a, b, precision=HIGHEST)
    rank = max(a.ndim, b.ndim)
    a = a.reshape((1,) * (rank - a.ndim) + a.shape)
    b = b.reshape((1,) * (rank - b.ndim) + b.shape)
    return sum(a[..., :, i, None] * b[..., None, i, :] for i in range(k))


def T(x: jax.Array) -> jax.Array:
    """Transpose of the last two axes."""
    return jnp.swapaxes(x, -1, -2)


def H(x: jax.Array) -> jax.Array:
    """Conjugate transpose of the last two axes (a plain transpose for real dtypes)."""
    return conj(jnp.swapaxes(x, -1, -2))


def mH(x: jax.Array) -> jax.Array:
    """Conjugate transpose of the last two axes (a plain transpose for real dtypes)."""
    return conj(jnp.swapaxes(x, -1, -2))


def conj(x: jax.Array) -> jax.Array:
    """Complex conjugate that adds no operation for real dtypes."""
    return jnp.conj(x) if jnp.iscomplexobj(x) else x


def tril(x: jax.Array, k: int = 0) -> jax.Array:
    return jnp.tril(x, k)


def triu(x: jax.Array, k: int = 0) -> jax.Array:
    return jnp.triu(x, k)


def real_diag(x: jax.Array) -> jax.Array:
    """``diag(Re x)`` as a matrix of ``x``'s dtype: the diagonal part of ``x``, real part only."""
    d = jnp.diagonal(x, axis1=-2, axis2=-1)
    d = d.real.astype(x.dtype) if jnp.iscomplexobj(x) else d
    return d[..., :, None] * eye_like(x)


def copyltu(m: jax.Array) -> jax.Array:
    """``tril(M, -1) + tril(M, -1)ᴴ + Re diag(M)``: mirror the strict lower triangle upwards.

    The Hermitian matrix whose lower triangle is ``M``'s (real diagonal for complex ``M``).
    """
    low = tril(m, -1)
    return low + H(low) + real_diag(m)


def eye_like(x: jax.Array) -> jax.Array:
    """Identity matrices of the shape and dtype of the square batch ``x``.

    Broadcast explicitly, so that the library also runs with ``jax_numpy_rank_promotion="raise"``.
    """
    return jnp.broadcast_to(jnp.eye(x.shape[-1], dtype=x.dtype), x.shape)


# ----------------------------------------------------------------------------------------------
# Input checks. They run once, at trace time, in the public function, and name the function, the
# argument, what was expected and what was given.


def check_array(fname: str, argname: str, x, *, dtypes=LINALG_DTYPES) -> None:
    """Raise ``TypeError`` unless ``x`` is an array of one of ``dtypes``."""
    if not isinstance(x, (jax.Array, np.ndarray)):
        raise TypeError(f"{fname}: `{argname}` must be a JAX or NumPy array; got {type(x).__name__}.")
    if not any(x.dtype == jnp.dtype(d) for d in dtypes):
        names = ", ".join(jnp.dtype(d).name for d in dtypes)
        raise TypeError(f"{fname}: `{argname}` must have dtype {names}; got {x.dtype}.")


def check_matrix(fname: str, argname: str, x, *, square: bool = False, dtypes=LINALG_DTYPES) -> None:
    """Check that ``x`` is a (batch of) matrices ``(..., m, n)``, square if asked."""
    check_array(fname, argname, x, dtypes=dtypes)
    expected = "(..., n, n)" if square else "(..., m, n)"
    if x.ndim < 2:
        raise ValueError(f"{fname}: `{argname}` must have shape {expected}; got {tuple(x.shape)}.")
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{fname}: `{argname}` must have shape {expected} (square); got {tuple(x.shape)}.")


# ----------------------------------------------------------------------------------------------
# shard_map: a custom_vjp's cotangent must vary over the same mesh axes as its argument. When a
# replicated operand (a shared weight) meets a batch sharded over a mesh axis, cast the operand to
# vary over that axis too before the custom_vjp call: JAX transposes that cast into the psum that
# adds up every device's share of the weight's cotangent.


def _varying_axes(x) -> frozenset:
    aval = jax.typeof(x)
    mat = getattr(aval, "mat", None)
    return frozenset(mat.varying) if mat is not None else frozenset(getattr(aval, "vma", ()))


def match_varying(*args):
    """Return ``args`` with every array leaf varying over the union of their shard_map axes.

    Outside ``shard_map`` (or when all agree) the arguments come back unchanged.
    """
    leaves = [x for x in jax.tree_util.tree_leaves(args) if isinstance(x, jax.Array)]
    axes = frozenset().union(*(_varying_axes(x) for x in leaves))
    if not axes:
        return args

    def cast(x):
        if not isinstance(x, jax.Array):
            return x
        missing = tuple(sorted(axes - _varying_axes(x)))
        return jax.lax.pcast(x, missing, to="varying") if missing else x

    return jax.tree_util.tree_map(cast, args)
