"""Explicit derivative rules for linear algebra and structure-preserving layers in JAX.

Every rule has a forward, an explicit pushforward and an explicit pullback
(:class:`rules.internal.Rule`): ``jax.jvp``/``jax.jacfwd``/``jax.linearize`` run the pushforward,
``jax.grad``/``jax.vjp`` the pullback, and every composition of transformations works.
"""
from . import internal as internal
from . import testing as testing
from ._core.rrule import frule as frule
from ._core.rrule import register_frule as register_frule
from ._core.rrule import rrule as rrule
from ._layers.attention import volume_preserving_attention as volume_preserving_attention
from ._layers.feedforward import volume_preserving_feedforward as volume_preserving_feedforward
from ._linalg.cholesky import cho_solve as cho_solve
from ._linalg.cholesky import cholesky as cholesky
from ._linalg.dense import det as det
from ._linalg.dense import inv as inv
from ._linalg.dense import slogdet as slogdet
from ._linalg.dense import solve as solve
from ._linalg.eig import eig as eig
from ._linalg.eig import eigvals as eigvals
from ._linalg.hermitian import hermitian_function as hermitian_function
from ._linalg.hermitian import logmh as logmh
from ._linalg.hermitian import powmh as powmh
from ._linalg.hermitian import sqrtmh as sqrtmh
from ._linalg.matfun import expm_frechet as expm_frechet
from ._linalg.polar import polar as polar
from ._linalg.sqrtm_logm import logm as logm
from ._linalg.sqrtm_logm import sqrtm as sqrtm
from ._linalg.sylvester import solve_continuous_lyapunov as solve_continuous_lyapunov
from ._linalg.sylvester import solve_sylvester as solve_sylvester
from ._linalg.matfun import cayley as cayley
from ._linalg.matfun import expm as expm
from ._linalg.qr import LQResult as LQResult
from ._linalg.qr import lq as lq
from ._linalg.qr import qr as qr
from ._linalg.spectral import eigh as eigh
from ._linalg.spectral import svd as svd
from ._tensor.products import mat_tensor_mul as mat_tensor_mul
from ._tensor.products import tensor_mat_mul as tensor_mat_mul
from ._tensor.products import tensor_tensor_mul as tensor_tensor_mul
from ._tensor.products import tensor_transpose as tensor_transpose
from ._tensor.products import tensor_transpose_mat_mul as tensor_transpose_mat_mul
from ._tensor.products import tensor_transpose_tensor_mul as tensor_transpose_tensor_mul
from ._tensor.structured import SkewSymmetric as SkewSymmetric
from ._tensor.structured import StrictlyLower as StrictlyLower
from ._tensor.structured import StrictlyUpper as StrictlyUpper
from ._tensor.structured import Symmetric as Symmetric
from ._version import __version__ as __version__

__all__ = [
    "LQResult",
    "SkewSymmetric",
    "StrictlyLower",
    "StrictlyUpper",
    "Symmetric",
    "cayley",
    "cho_solve",
    "cholesky",
    "det",
    "eig",
    "eigh",
    "eigvals",
    "expm",
    "expm_frechet",
    "frule",
    "hermitian_function",
    "internal",
    "inv",
    "logm",
    "logmh",
    "lq",
    "mat_tensor_mul",
    "polar",
    "powmh",
    "qr",
    "register_frule",
    "rrule",
    "slogdet",
    "solve",
    "solve_continuous_lyapunov",
    "solve_sylvester",
    "sqrtm",
    "sqrtmh",
    "svd",
    "tensor_mat_mul",
    "tensor_tensor_mul",
    "tensor_transpose",
    "tensor_transpose_mat_mul",
    "tensor_transpose_tensor_mul",
    "testing",
    "volume_preserving_attention",
    "volume_preserving_feedforward",
]
