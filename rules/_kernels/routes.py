"""How a kernel chooses its route: the size cut-offs, in one table, and the platform switch.

A route is one way of computing a kernel's result. There are two kinds.

* **Every platform.** Closed forms, Jacobi sweeps and unrolled products for tiny matrices: the
  same or fewer operations than the general algorithm, on whole batch arrays, in one fused loop and
  without a solver or dot call per matrix. On a GPU a batched solver or GEMM call would launch
  tiles far larger than a 4 × 4 matrix; on a TPU a 4 × 4 product fills 1/1024 of a 128 × 128
  matrix-unit tile. They are taken by size alone.
* **CPU only**, through :func:`cpu_route`: the LU of ``[A | I]``, products laid out for
  XLA:CPU's dot, outer-product sums of thin contractions, blocked triangular products, and the
  other choices that exist because of XLA:CPU's dot emitter, LAPACK's call overheads or the cost of
  handing work between cores. Where the computation is lowered for any other platform it is the
  plain JAX computation (what ``jnp.linalg`` runs), chosen at lowering by
  :func:`jax.lax.platform_dependent`: a module exported for CUDA or TPU contains no CPU branch.

The cut-offs below are read at trace time as ``routes.NAME`` (tests set them to reach every route
at small sizes), one line each with its reason, grouped by the platforms they apply to. The
figures behind the CPU values are in ``benchmarks/RESULTS.md`` and the CHANGELOG.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import jax
from jax import lax

__all__ = ["CPU_ROUTE_SCOPE", "cpu_route", "default_everywhere"]

T = TypeVar("T")

# ----------------------------------------------------------------------------------------------
# The cut-offs: one line each, the reason in it.
#
# Every platform, by size alone (fewer or as many operations, no solver or dot call per matrix):
CLOSED_FORM_MAX_N = 4  # adjugate, cofactors, unrolled Cholesky; beyond, more flops than LU
JACOBI_MAX_N = 3  # fixed-sweep Jacobi eigh and SVD: sweep count and accuracy validated up to 3
JACOBI_MIN_BATCH = 32  # fewer matrices: a solver call each costs less than the sweeps' fixed steps
UNROLL_MAX = 4  # products of dimensions ≤ this as outer-product sums: a dot's flops, one loop
#
# CPU only (cpu_route):
QR_UNROLL_MAX = 16  # QR rules' products: XLA:CPU runs batched dots below 8 × 8 slice by slice
THIN_MAX_K = 16  # Y S with k ≤ this as k outer products: XLA:CPU's dot is slow on such shapes
THIN_MIN_SIZE = 2**16  # results below this many entries: the loop's fixed cost outweighs the dot
SHARED_LEFT_BROADCAST_MAX = 32  # a shared left matrix copied per slice: one YNNPACK batch
LU_WITH_RHS_MAX_N = 128  # solves by the LU of [A | B]; beyond, getrf's extra columns cost more
LU_WITH_IDENTITY_MAX_N = 256  # L⁻¹P by the LU of [A | I]; beyond, LU of A + unit-lower solve
LU_INVERSE_MAX_N = 512  # inverse as U⁻¹(L⁻¹P); beyond, JAX's (extra columns cost its solves)
BLOCKED_TRIANGULAR_MIN_N = 128  # triangular products in 2 × 2 blocks: half the flops from here
BLOCKED_QR_GRAM_MIN_N = 320  # QR's R R̄ᴴ in blocks, only where copyltu reads it, from here
PRODUCT_INVERSE_MAX_K = 16  # well-conditioned triangular inverses by products: no trsm per matrix
SPLIT_FRAME_MAX_SIZE = 2**15  # small frames never form [Y, M_B]: XLA:CPU thread hand-offs

# ----------------------------------------------------------------------------------------------
# The platform switch

CPU_ROUTE_SCOPE = "cpu_route"
"""The named scope every CPU route's operations carry: ``cpu_route.<name>``."""


def cpu_route(name: str, cpu: Callable[..., T], default: Callable[..., T], *args: Any) -> T:
    """``cpu(*args)`` where the computation is lowered for the CPU, ``default(*args)`` elsewhere.

    For a computation that exists because of the CPU (module docstring). The choice is made at
    lowering (:func:`jax.lax.platform_dependent`), so one traced program serves every platform
    and ``jax.export`` for CUDA or TPU on a CPU machine lowers ``default`` alone. Both functions
    are traced and must return the same structure of arrays of the same shapes and dtypes.

    Args:
      name: the route, for the named scope ``cpu_route.<name>`` that the CPU branch's operations
        carry (tests look for it in modules lowered for other platforms).
      cpu: the CPU route.
      default: the plain computation, for every other platform.
      *args: arrays (or pytrees of arrays) passed to the one that runs.
    """
    if _default_everywhere:
        return default(*args)

    def on_cpu(*a: Any) -> T:
        with jax.named_scope(f"{CPU_ROUTE_SCOPE}.{name}"):
            return cpu(*a)

    return lax.platform_dependent(*args, cpu=on_cpu, default=default)


_default_everywhere = False


@contextlib.contextmanager
def default_everywhere() -> Iterator[None]:
    """Trace every :func:`cpu_route` to its ``default`` alone, whatever the platform.

    For tests: what GPUs and TPUs run, evaluated on the CPU, so that its numbers are checked
    where CI runs. JAX's caches are cleared on entry and exit, so no program traced inside is
    reused outside, and none traced outside inside.
    """
    global _default_everywhere
    jax.clear_caches()
    _default_everywhere = True
    try:
        yield
    finally:
        _default_everywhere = False
        jax.clear_caches()
