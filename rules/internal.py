"""Helpers shared by :mod:`rules` and :mod:`geometric`: semi-public, like ``equinox.internal``.

These are the building blocks the library's own rules and manifolds are written with. They are
documented and tested, and ``geometric`` imports them from here (never from a private module of
``rules``). They are public enough for users who write rules or manifolds of their own, but their
signatures may change between minor versions; the stable API is ``rules`` and ``geometric``.

Everything works on batch-leading arrays ``(..., m, n)``:

* :class:`Rule`: the mechanism every rule of the library is defined with (a forward, an explicit
  pushforward and an explicit pullback, for every JAX transformation);
* :func:`mm`: batched matrix product at full precision (unrolled for tiny matrices);
* :func:`mm_thin`: the product of a frame and a small matrix, ``Y S``, fast on the CPU for
  contractions up to ``THIN_CONTRACTION`` deep;
* :func:`mm_h`: ``aᴴb``, the product of a Gram type, fast on every backend (:func:`laid_out`);
* :func:`laid_out`: ``x`` as an array of its own on the CPU, so XLA does not fold its transpose;
* :func:`mH`: conjugate transpose of the last two axes (``x.mT`` is the plain transpose);
* :func:`eye_like`: identity matrices of a batch's shape and dtype;
* :func:`check_array`, :func:`check_matrix`: trace-time input checks whose messages name the
  function, the argument, the expected shape or dtype and what was given;
* :func:`match_varying`: make operands vary over the same ``shard_map`` mesh axes;
* ``HIGHEST``, ``REAL_DTYPES``, ``INEXACT_DTYPES``: the precision and dtype sets the checks use.
"""
from ._core.arrays import HIGHEST as HIGHEST
from ._core.arrays import THIN_CONTRACTION as THIN_CONTRACTION
from ._core.arrays import eye_like as eye_like
from ._core.arrays import laid_out as laid_out
from ._core.arrays import mH as mH
from ._core.arrays import mm as mm
from ._core.arrays import mm_h as mm_h
from ._core.arrays import mm_thin as mm_thin
from ._core.checks import INEXACT_DTYPES as INEXACT_DTYPES
from ._core.checks import REAL_DTYPES as REAL_DTYPES
from ._core.checks import check_array as check_array
from ._core.checks import check_matrix as check_matrix
from ._core.rule import Rule as Rule
from ._core.sharding import match_varying as match_varying

__all__ = ["HIGHEST", "INEXACT_DTYPES", "REAL_DTYPES", "THIN_CONTRACTION", "Rule", "check_array",
           "check_matrix", "eye_like", "laid_out", "mH", "match_varying", "mm", "mm_h", "mm_thin"]
