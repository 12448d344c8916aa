"""Hand-written pullbacks for linear algebra and structure-preserving layers in JAX.

Every rule is a ``jax.custom_vjp`` whose backward pass is derived from the math, with an explicit
pushforward available through :func:`rules.frule`.
"""
from . import testing as testing
from ._linalg import inv as inv
from ._linalg import lq as lq
from ._linalg import qr as qr
from ._rrule import frule as frule
from ._rrule import register_frule as register_frule
from ._rrule import rrule as rrule

__all__ = ["frule", "inv", "lq", "qr", "register_frule", "rrule", "testing"]
