"""Checks of a manifold's constructor fields and of dtype arguments.

They run when a manifold is built (its fields are static Python values) or at trace time, and name
the class or method, the field, what was expected and what was given.
"""
from __future__ import annotations

import operator
from typing import SupportsIndex

import jax.numpy as jnp
from jax.typing import DTypeLike

from rules.internal import REAL_DTYPES

__all__ = ["check_bool_field", "check_choice_field", "check_frame_fields", "check_int_field",
           "check_real_dtype"]


def check_int_field(owner: str, field: str, value: object, minimum: int = 1) -> int:
    """``value`` as an ``int`` ≥ ``minimum``; raises naming the ``owner`` class and the field.

    NumPy integers are accepted (``operator.index``) and converted, so equal manifolds hash equal.
    """
    if isinstance(value, bool):
        raise TypeError(f"{owner}: `{field}` must be an int; got {value!r}.")
    if not isinstance(value, SupportsIndex):
        raise TypeError(f"{owner}: `{field}` must be an int; got {type(value).__name__}.")
    index = operator.index(value)
    if index < minimum:
        raise ValueError(f"{owner}: `{field}` must be ≥ {minimum}; got {index}.")
    return index


def check_bool_field(owner: str, field: str, value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{owner}: `{field}` must be True or False; got {value!r}.")


def check_choice_field(owner: str, field: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{owner}: `{field}` must be one of {options}; got {value!r}.")


def check_real_dtype(fname: str, dtype: DTypeLike) -> jnp.dtype:
    """``dtype`` as a ``jnp.dtype`` if it is float32 or float64; raises ``TypeError`` otherwise."""
    dtype = jnp.dtype(dtype)
    if not any(dtype == jnp.dtype(d) for d in REAL_DTYPES):
        names = " or ".join(jnp.dtype(d).name for d in REAL_DTYPES)
        raise TypeError(f"{fname}: `dtype` must be {names}; got {dtype.name}.")
    return dtype


def check_frame_fields(owner: str, n: object, p: object, rows: object) -> tuple[int, int]:
    """``(n, p)`` of a manifold of n×p orthonormal frames (``p ≤ n``), checked with ``rows``."""
    n, p = check_int_field(owner, "n", n), check_int_field(owner, "p", p)
    check_bool_field(owner, "rows", rows)
    if p > n:
        shape = (p, n) if rows else (n, p)
        kind = "columns" if rows else "rows"
        other = f"{owner}({p}, {n}{'' if rows else ', rows=True'})"
        raise ValueError(f"{owner}: `p` must satisfy p ≤ n = {n}; got p = {p}. A {shape} array "
                         f"with orthonormal {kind} is {other}.")
    return n, p
