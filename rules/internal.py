"""The kernel layer and the helpers shared by :mod:`rules` and :mod:`geometric`: semi-public, like
``equinox.internal``.

These are the building blocks the library's own rules and manifolds are written with. They are
documented and tested, and ``geometric`` imports them from here (never from a private module of
``rules``). They are public enough for users who write rules or manifolds of their own, but their
signatures may change between minor versions; the stable API is ``rules`` and ``geometric``.

Everything works on batch-leading arrays ``(..., m, n)``. The machinery:

* :class:`Rule`: the mechanism every rule of the library is defined with (a forward, an explicit
  pushforward and an explicit pullback, for every JAX transformation);
* :func:`check_array`, :func:`check_matrix`: trace-time input checks whose messages name the
  function, the argument, the expected shape or dtype and what was given;
* :func:`match_varying`: make operands vary over the same ``shard_map`` mesh axes;
* :func:`mH`, :func:`eye_like`; ``HIGHEST``, ``REAL_DTYPES``, ``INEXACT_DTYPES``.

The kernels, each choosing its route by size and platform (``rules/_kernels/``, and
``docs/architecture.md#kernel-layer``):

* :mod:`~rules._kernels.routes` (as ``routes``): every size cut-off, with its reason, and
  :func:`cpu_route`, the switch that takes a computation on the CPU only;
* products: :func:`mm` (full precision, unrolled for tiny matrices), :func:`mm_h` (``aᴴb``),
  :func:`mm_thin` (a frame times a small matrix), :func:`laid_out`;
* QR: :func:`qr_factor` (CholeskyQR with a Householder fallback, ``diag(R) ≥ 0``),
  :func:`householder_qr_factor`, :func:`haar_frame`, :func:`gram_error`;
* Cholesky: :func:`triangular_solver`;
* functions of Hermitian matrices: :func:`sym_function` (Daleckii–Krein derivative, exact at
  repeated eigenvalues, as the rules ``rules.hermitian_function``, ``sqrtmh``, ``logmh`` and
  ``powmh``, which share its code), :func:`log_divided_differences` (the matrix of ``D log``),
  :func:`polar_factor`, :func:`arctan_sv`;
* the exponential's companion :func:`phi` (``exp(X) = I + Xφ(X)``).
"""
from ._core.arrays import HIGHEST as HIGHEST
from ._core.arrays import eye_like as eye_like
from ._core.arrays import mH as mH
from ._core.checks import INEXACT_DTYPES as INEXACT_DTYPES
from ._core.checks import REAL_DTYPES as REAL_DTYPES
from ._core.checks import check_array as check_array
from ._core.checks import check_matrix as check_matrix
from ._core.rule import Rule as Rule
from ._core.sharding import match_varying as match_varying
from ._kernels import routes as routes
from ._kernels.cholesky import triangular_solver as triangular_solver
from ._kernels.expm import phi as phi
from ._kernels.products import laid_out as laid_out
from ._kernels.products import mm as mm
from ._kernels.products import mm_h as mm_h
from ._kernels.products import mm_thin as mm_thin
from ._kernels.qr import gram_error as gram_error
from ._kernels.qr import haar_frame as haar_frame
from ._kernels.qr import householder_qr_factor as householder_qr_factor
from ._kernels.qr import qr_factor as qr_factor
from ._kernels.routes import cpu_route as cpu_route
from ._kernels.spectral import arctan_sv as arctan_sv
from ._kernels.spectral import log_divided_differences as log_divided_differences
from ._kernels.spectral import polar_factor as polar_factor
from ._kernels.spectral import sym_function as sym_function

__all__ = ["HIGHEST", "INEXACT_DTYPES", "REAL_DTYPES", "Rule", "arctan_sv", "check_array",
           "check_matrix", "cpu_route", "eye_like", "gram_error", "haar_frame",
           "householder_qr_factor", "laid_out", "log_divided_differences", "mH", "match_varying",
           "mm", "mm_h", "mm_thin", "phi", "polar_factor", "qr_factor", "routes", "sym_function",
           "triangular_solver"]
