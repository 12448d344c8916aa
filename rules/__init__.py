"""Hand-written pullbacks for linear algebra and structure-preserving layers in JAX.

Every rule is a ``jax.custom_vjp`` whose backward pass is derived from the math, with an explicit
pushforward available through :func:`rules.frule`.
"""
from . import testing as testing
from ._cayley import cayley as cayley
from ._cayley import volume_preserving_attention as volume_preserving_attention
from ._cayley import volume_preserving_feedforward as volume_preserving_feedforward
from ._linalg import inv as inv
from ._linalg import lq as lq
from ._linalg import qr as qr
from ._rrule import frule as frule
from ._rrule import register_frule as register_frule
from ._rrule import rrule as rrule
from ._structured import SkewSymmetric as SkewSymmetric
from ._structured import StrictlyLower as StrictlyLower
from ._structured import StrictlyUpper as StrictlyUpper
from ._structured import Symmetric as Symmetric
from ._tensor import mat_tensor_mul as mat_tensor_mul
from ._tensor import tensor_mat_mul as tensor_mat_mul
from ._tensor import tensor_tensor_mul as tensor_tensor_mul
from ._tensor import tensor_transpose as tensor_transpose
from ._tensor import tensor_transpose_mat_mul as tensor_transpose_mat_mul
from ._tensor import tensor_transpose_tensor_mul as tensor_transpose_tensor_mul

__all__ = [
    "cayley",
    "frule",
    "inv",
    "lq",
    "mat_tensor_mul",
    "qr",
    "register_frule",
    "rrule",
    "SkewSymmetric",
    "StrictlyLower",
    "StrictlyUpper",
    "Symmetric",
    "tensor_mat_mul",
    "tensor_tensor_mul",
    "tensor_transpose",
    "tensor_transpose_mat_mul",
    "tensor_transpose_tensor_mul",
    "testing",
    "volume_preserving_attention",
    "volume_preserving_feedforward",
]
