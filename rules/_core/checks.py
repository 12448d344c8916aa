"""Input checks. They run once, at trace time, in the public function, and name the function, the
argument, what was expected and what was given; and the handling of a solve's operands."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike

__all__ = ["HALF_DTYPES", "INEXACT_DTYPES", "REAL_DTYPES", "UnsupportedDtypeError",
           "as_inexact_matrix", "check_array", "check_matrix", "is_half", "promote_matrices", "promote_operands",
           "refuse_half", "solve_broadcast"]

REAL_DTYPES: tuple[DTypeLike, ...] = (jnp.float32, jnp.float64)
INEXACT_DTYPES: tuple[DTypeLike, ...] = (jnp.float32, jnp.float64, jnp.complex64, jnp.complex128)


def check_array(fname: str, argname: str, x: Any, *,
                dtypes: Sequence[DTypeLike] = INEXACT_DTYPES) -> None:
    """Raise ``TypeError`` unless ``x`` is an array of one of ``dtypes``."""
    if not isinstance(x, (jax.Array, np.ndarray)):
        raise TypeError(f"{fname}: `{argname}` must be a JAX or NumPy array; got {type(x).__name__}.")
    if not any(x.dtype == jnp.dtype(d) for d in dtypes):
        names = ", ".join(jnp.dtype(d).name for d in dtypes)
        raise TypeError(f"{fname}: `{argname}` must have dtype {names}; got {x.dtype}.")


def check_matrix(fname: str, argname: str, x: Any, *, square: bool = False,
                 dtypes: Sequence[DTypeLike] = INEXACT_DTYPES) -> None:
    """Check that ``x`` is a (batch of) matrices ``(..., m, n)``, square if asked."""
    check_array(fname, argname, x, dtypes=dtypes)
    expected = "(..., n, n)" if square else "(..., m, n)"
    if x.ndim < 2:
        raise ValueError(f"{fname}: `{argname}` must have shape {expected}; got {tuple(x.shape)}.")
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{fname}: `{argname}` must have shape {expected} (square); "
                         f"got {tuple(x.shape)}.")


# The drop-in rules (inv, qr, ...) take what jax.numpy.linalg takes: integer and boolean arrays are
# promoted as jnp.linalg promotes them (to float32, or float64 from 64-bit integers). Half
# precision has no factorisation in LAPACK (CPU) or cuSOLVER/hipSOLVER (GPU), where JAX fails at
# lowering with a KeyError naming neither function nor argument: refused at trace time there,
# handed to JAX's own forward on TPU, whose XLA factorisations decide.
HALF_DTYPES: tuple[DTypeLike, ...] = (jnp.float16, jnp.bfloat16)


def as_inexact_matrix(fname: str, argname: str, x: Any, *, square: bool = False,
                      half: bool = False) -> jax.Array:
    """``x`` as a (batch of) float or complex matrices, promoted as ``jax.numpy.linalg`` does.

    Raises ``TypeError`` for non-arrays and non-numeric dtypes, and for half precision where it
    would be factorised (:func:`refuse_half`) unless ``half``; ``ValueError`` for wrong shapes.
    """
    if not isinstance(x, (jax.Array, np.ndarray)):
        raise TypeError(f"{fname}: `{argname}` must be a JAX or NumPy array; got {type(x).__name__}.")
    if x.dtype == np.bool_ or jnp.issubdtype(x.dtype, jnp.integer):
        x = jnp.asarray(x, jax.dtypes.canonicalize_dtype(
            jnp.float64 if x.dtype.itemsize == 8 else jnp.float32))
    check_matrix(fname, argname, x, square=square, dtypes=INEXACT_DTYPES + HALF_DTYPES)
    if not half:
        refuse_half(fname, argname, x)
    return x


class UnsupportedDtypeError(NotImplementedError, TypeError):
    """A half-precision operand to a factorisation: JAX's ``NotImplementedError("Unsupported
    dtype …")`` on the CPU, so code that catches JAX's error catches ours, and a ``TypeError``,
    which is what it is."""


def refuse_half(fname: str, argname: str, x: jax.Array) -> None:
    """Raise :class:`UnsupportedDtypeError` for a half-precision ``x`` that would be factorised on
    CPU or GPU."""
    if is_half(x) and jax.default_backend() != "tpu":
        raise UnsupportedDtypeError(
            f"{fname}: `{argname}` has dtype {x.dtype}. Unsupported dtype {x.dtype}: the "
            f"{jax.default_backend()} backend's factorisations (LAPACK, cuSOLVER) take float32, "
            f"float64, complex64 and complex128. Cast it, e.g. `{argname}.astype(jnp.float32)`, "
            "and the result back.")


def is_half(x: jax.Array) -> bool:
    return any(x.dtype == jnp.dtype(d) for d in HALF_DTYPES)


# ----------------------------------------------------------------------------------------------
# The operands of a solve (rules.solve, rules.cho_solve)


def promote_operands(fname: str, argname: str, a: Any, b: Any) -> tuple[jax.Array, jax.Array]:
    """``a`` (square) and ``b`` checked, then promoted together as ``jax.numpy.linalg`` does."""
    a_in, b_in = a, b
    a = as_inexact_matrix(fname, argname, a, square=True)
    b = _as_inexact_rhs(fname, b)
    dtype = _common_inexact_dtype(a_in, b_in)
    return a.astype(dtype), b.astype(dtype)


def promote_matrices(fname: str, named: dict[str, tuple[Any, bool]]) -> list[jax.Array]:
    """Matrices ``{argname: (x, square)}`` checked, then promoted to one inexact dtype as
    ``jax.numpy.linalg`` promotes the operands of a solve."""
    arrays = [as_inexact_matrix(fname, name, x, square=square) for name, (x, square) in named.items()]
    dtype = _common_inexact_dtype(*(x for x, _ in named.values()))
    return [x.astype(dtype) for x in arrays]


def _common_inexact_dtype(*xs: Any) -> Any:
    """The dtype of the promoted operands: an integer operand takes the others' dtype; integers
    alone become float32 or float64 (by their width) as in ``jnp.linalg``."""
    dtype = jnp.result_type(*(x.dtype for x in xs))
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = jax.dtypes.canonicalize_dtype(jnp.float64 if jnp.dtype(dtype).itemsize == 8
                                              else jnp.float32)
    return dtype


def _as_inexact_rhs(fname: str, x: Any) -> jax.Array:
    """``b`` of a solve as an array of rank ≥ 1, integers promoted as ``jax.numpy.linalg`` does."""
    if not isinstance(x, (jax.Array, np.ndarray)):
        raise TypeError(f"{fname}: `b` must be a JAX or NumPy array; got {type(x).__name__}.")
    if x.dtype == np.bool_ or jnp.issubdtype(x.dtype, jnp.integer):
        x = jnp.asarray(x, jax.dtypes.canonicalize_dtype(
            jnp.float64 if x.dtype.itemsize == 8 else jnp.float32))
    check_array(fname, "b", x, dtypes=INEXACT_DTYPES + HALF_DTYPES)
    if x.ndim < 1:
        raise ValueError(f"{fname}: `b` must have shape (n,) or (..., n, k); got ().")
    return x


def solve_broadcast(fname: str, argname: str, a: jax.Array, b: jax.Array,
                    solver: Callable[[jax.Array, jax.Array], jax.Array]) -> jax.Array:
    """``solver(A, B)`` for ``b`` of shape ``(n,)`` or ``(..., n, k)``, batch shapes broadcast.

    Checks the shapes (at trace time) and brings them to ``solver``'s: ``A`` of shape
    ``(..., n, n)`` and ``B`` of shape ``(..., n, k)`` with equal batch shapes. One matrix with a
    batch of right-hand sides is factorised once: the batch becomes columns.
    """
    n = a.shape[-1]
    vector = b.ndim == 1
    if (b.shape[0] if vector else b.shape[-2]) != n:
        raise ValueError(f"{fname}: `b` must have shape (n,) or (..., n, k) with n = {n} "
                         f"(`{argname}` has shape {tuple(a.shape)}); got {tuple(b.shape)}.")
    b_mat = b[:, None] if vector else b
    try:
        batch = jnp.broadcast_shapes(a.shape[:-2], b_mat.shape[:-2])
    except ValueError:
        raise ValueError(f"{fname}: the batch shapes of `{argname}` {tuple(a.shape)} and `b` "
                         f"{tuple(b.shape)} do not broadcast.") from None
    k = b_mat.shape[-1]
    if a.ndim == 2 and batch:
        cols = jnp.moveaxis(b_mat, -2, 0).reshape(n, -1)
        x = jnp.moveaxis(solver(a, cols).reshape(n, *batch, k), 0, -2)
    else:
        x = solver(jnp.broadcast_to(a, (*batch, n, n)), jnp.broadcast_to(b_mat, (*batch, n, k)))
    return x[..., 0] if vector else x
