"""The public rules are dispatched as ``jax.numpy.linalg``'s functions are: each call goes to one
``jax.jit`` computation per shape, dtype and static argument, traced and compiled once.

Called eagerly, a rule then traces its checks and its forward once per signature instead of on
every call, and a second call with the same shapes compiles nothing. Inside a user's ``jit``,
``grad`` or ``vmap`` the inner ``jit`` is traced into the outer program, as ``jnp.linalg``'s are.
Input checks still run once, at trace time, and raise from the call; an argument that ``jit``
cannot take as an array at all is handed to the rule unjitted, whose checks then name it.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

import jax

__all__ = ["jitted"]

F = TypeVar("F", bound=Callable[..., Any])


def jitted(*static_argnames: str) -> Callable[[F], F]:
    """Decorate a public rule: ``jax.jit`` with ``static_argnames``, signature and docs kept."""
    def decorate(fn: F) -> F:
        compiled = jax.jit(fn, static_argnames=static_argnames)

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return compiled(*args, **kwargs)
            except TypeError as e:
                # An argument jit cannot take as an array (a string array, an object): the rule's
                # own checks name it, run unjitted. Anything else is re-raised as it is.
                if not str(e).startswith("Error interpreting argument"):
                    raise
                fn(*args, **kwargs)
                raise
            except ValueError as e:
                # A static argument jit cannot hash (an array as an exponent, a list as a
                # function): likewise named by the rule's own checks, run unjitted.
                if not str(e).startswith("Non-hashable static arguments"):
                    raise
                fn(*args, **kwargs)
                raise

        return cast(F, call)

    return decorate
