"""Input checks. They run once, at trace time, in the public function, and name the function, the
argument, what was expected and what was given."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike

__all__ = ["HALF_DTYPES", "INEXACT_DTYPES", "REAL_DTYPES", "as_inexact_matrix", "check_array",
           "check_matrix", "is_half"]

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
# promoted as jnp.linalg promotes them (to float32, or float64 from 64-bit integers), and half
# precision is handed to JAX's own forward, which decides (on CPU it raises NotImplementedError).
HALF_DTYPES: tuple[DTypeLike, ...] = (jnp.float16, jnp.bfloat16)


def as_inexact_matrix(fname: str, argname: str, x: Any, *, square: bool = False) -> jax.Array:
    """``x`` as a (batch of) float or complex matrices, promoted as ``jax.numpy.linalg`` does.

    Raises ``TypeError`` for non-arrays and non-numeric dtypes, ``ValueError`` for wrong shapes.
    """
    if not isinstance(x, (jax.Array, np.ndarray)):
        raise TypeError(f"{fname}: `{argname}` must be a JAX or NumPy array; got {type(x).__name__}.")
    if x.dtype == np.bool_ or jnp.issubdtype(x.dtype, jnp.integer):
        x = jnp.asarray(x, jax.dtypes.canonicalize_dtype(
            jnp.float64 if x.dtype.itemsize == 8 else jnp.float32))
    check_matrix(fname, argname, x, square=square, dtypes=INEXACT_DTYPES + HALF_DTYPES)
    return x


def is_half(x: jax.Array) -> bool:
    return any(x.dtype == jnp.dtype(d) for d in HALF_DTYPES)
