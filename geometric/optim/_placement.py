"""Where the points are: the checks that keep a constraint from switching off without a word.

* **The start.** A point off its manifold is refused at ``init``: eagerly by a Python error, and
  under ``jit`` by an error raised when the program runs (a ``jax.debug.callback`` taken only
  when the check fails, so a passing check costs no round trip to Python).
* **The placement.** ``retract`` records, per manifold leaf, where it put the point: a fixed
  sample of its entries and, per entry, the rounding that ``optax.apply_updates`` may add
  (``|x + (y - x) - y| ≤ ε(|y| + |y - x|)``). The next update finds ``params`` there, or a
  transformation after ``retract`` (a weight decay, a scaling, clipping) changed the update and
  moved the point off its manifold; the error names the leaf. The sample is a gather of
  ``SAMPLE`` entries per leaf and step, whatever the leaf's size.

Both are on by default; ``check_points=False`` on the optimizers turns them off, for a start off
the manifold on purpose or ``params`` changed between updates on purpose.
"""
from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._core.manifold import AbstractManifold
from .._core.tree import Resolved

__all__ = ["SAMPLE", "check_placements", "check_start", "empty_placement", "placement"]

SAMPLE = 64  # entries per leaf recorded by placement(): any transform changes most of them


def _start_message(fname: str, m: AbstractManifold, path: str, reason: str) -> str:
    where = f"'{path}'" if path else "`params`"
    return (f"{fname}: the starting point {where} is not on {m!r}: {reason}. The optimizers keep "
            "a point on its manifold but do not pull one onto it; start from "
            "`geometric.optim.project_params(params, manifolds)` (the nearest points), "
            "`manifold.random_point(key)` or an orthogonal initializer (or pass "
            "check_points=False to start off the manifold on purpose).")


def check_start(fname: str, r: Resolved, params: Any) -> jax.Array:
    """Refuse a starting point off its manifold: eagerly now, under ``jit`` when it runs.

    Returns an int32 zero for the caller to add to its step count (see :func:`_when`)."""
    traced = []
    for m, path, x in zip(r.manifolds, r.paths, r.flatten("params", params)):
        if m is None:
            continue
        m.check_point(x, argname="params", fname=f"{fname}: {m!r}.init")
        if not isinstance(x, jax.core.Tracer):
            ok, reason = m.verify_point(x)
            if not ok:
                raise ValueError(_start_message(fname, m, path, reason))
            continue
        # verify_point's default tolerance, evaluated in the program.
        atol = math.sqrt(float(np.finfo(x.dtype).eps) * math.prod(m.shape))
        traced.append((m, path, atol, jnp.max(m.manifold_error(x), initial=0)))
    if not traced:
        return jnp.zeros([], jnp.int32)

    def report(*worst: Any) -> None:
        for (m, path, atol, _), w in zip(traced, worst):
            if not float(w) <= atol:
                reason = f"manifold_error = {float(w):.3g} > atol = {atol:.3g}"
                raise ValueError(_start_message(fname, m, path, reason))

    worst = [w for *_, w in traced]
    return _when(_any(~(w <= atol) for (_, _, atol, _), w in zip(traced, worst)), report, *worst)


def _indices(size: int) -> np.ndarray:
    """``SAMPLE`` positions (fewer for a small leaf) spread evenly over a flattened leaf."""
    return np.unique(np.linspace(0, max(size - 1, 0), min(SAMPLE, size)).astype(np.int64))


def empty_placement(x: jax.Array) -> jax.Array:
    """The placement before any update: shape ``(2, k)``, nothing recorded."""
    return jnp.zeros((2, len(_indices(x.size))), x.dtype)


def placement(x: jax.Array, y: jax.Array) -> jax.Array:
    """Where an update that moves ``x`` to ``y`` puts the point: ``[y; 2ε(|y| + |y - x|)]`` at the
    sampled entries (twice the rounding bound of ``optax.apply_updates``), in ``x``'s dtype.

    ``ε`` is the coarser of the two dtypes': ``y`` is wider than ``x`` when a float64
    hyperparameter (``optax.inject_hyperparams`` under x64) promotes the update, and
    ``apply_updates`` rounds ``x + (y - x)`` back to ``x``'s dtype."""
    index = _indices(y.size)
    yf, xf = y.reshape(-1)[index], x.reshape(-1)[index]
    eps = max(float(np.finfo(y.dtype).eps), float(np.finfo(x.dtype).eps))
    return jnp.stack([yf, 2 * eps * (jnp.abs(yf) + jnp.abs(yf - xf))]).astype(x.dtype)


def check_placements(fname: str, r: Resolved, params: Any, placed: Any, count: jax.Array
                     ) -> jax.Array:
    """Raise (when the program runs) if a manifold leaf of ``params`` is not where the last
    update put it (recorded in ``placed`` by :func:`placement`); ``count`` is this update's,
    1-based. Returns an int32 zero for the caller to add to its step count (:func:`_when`)."""
    leaves = [(path, x, q) for m, path, x, q in
              zip(r.manifolds, r.paths, r.flatten("params", params), r.flatten("state", placed))
              if m is not None]
    if not leaves:
        return jnp.zeros([], jnp.int32)
    moved = [jnp.max(jnp.abs(x.reshape(-1)[_indices(x.size)] - q[0]) - q[1], initial=0)
             for _, x, q in leaves]
    last = (f"`{fname}`" if fname != "retract" else
            "`retract` (the last piece of riemannian, riemannian_sgd and riemannian_adam)")

    def report(count: Any, *moved: Any) -> None:
        for (path, _, _), d in zip(leaves, moved):
            if int(count) > 1 and not float(d) <= 0:
                where = f"'{path}'" if path else "`params`"
                raise ValueError(
                    f"{fname}: the point {where} is not where the last update put it (an entry "
                    f"moved {float(d):.3g} beyond rounding): a transformation chained after "
                    f"{last} changed the update (a weight decay, a scaling, clipping), and the "
                    "point has left its manifold. Put such transformations before it, where they "
                    "act on tangent vectors (or pass check_points=False if params change between "
                    "updates on purpose).")

    return _when((count > 1) & _any(~(d <= 0) for d in moved), report, count, *moved)


def _any(flags: Any) -> jax.Array:
    """The logical or of scalar boolean arrays."""
    return jnp.any(jnp.stack(list(flags)))


def _when(failed: jax.Array, report: Any, *values: jax.Array) -> jax.Array:
    """Call ``report(*values)`` in Python only if ``failed``: no callback while checks pass, and
    one condition for all leaves (a GPU copies a condition's predicate to the CPU to branch).

    The callback is a ``pure_callback`` returning an int32 zero, which the caller adds to its step
    count: a ``debug.callback`` would give the optimizer step a side effect, and JAX dispatches a
    program with effects on its slow path (every eager call of a jitted step pays for it), while
    a pure callback whose result is unused would be dropped by the compiler. Under ``vmap`` a
    batched ``failed`` turns the ``cond`` into a ``select`` that runs the callback for every
    element, so ``report`` decides again from the values it receives. The values are cut from
    differentiation (a check has no derivative, and JAX's pure callbacks refuse a tangent), so an
    optimizer step stays differentiable, e.g. for meta-learning."""
    values = tuple(lax.stop_gradient(v) for v in values)
    zero = np.zeros((), np.int32)  # the callback's result: its shape and dtype

    def call(*v: jax.Array) -> jax.Array:
        def checked(*v: Any) -> np.ndarray:
            report(*v)
            return np.zeros((), np.int32)
        return jax.pure_callback(checked, zero, *v, vmap_method="sequential")

    return lax.cond(failed, call, lambda *v: jnp.zeros([], jnp.int32), *values)
