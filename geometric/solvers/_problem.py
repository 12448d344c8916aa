"""A cost on a (product) manifold: the checked inputs of a solver and the geometry it steps with.

Points are pytrees; the ``manifold`` argument is a spec as in :mod:`geometric.optim` (a manifold,
None, or a pytree of them matching the point or a prefix of it; see ``geometric/_core/tree.py``).
The point is then a point of the product manifold: tangent vectors are pytrees like the point, the
metric is the sum of the leaves' metrics, the retraction, transport and Hessian act leaf by leaf.
A leaf holding a stack of points (leading batch axes) is the product of that many copies; a None
leaf is Euclidean space.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rules.internal import REAL_DTYPES, check_array

from .._core.arrays import safe_sqrt
from .._core.manifold import AbstractManifold
from .._core.tree import ManifoldsTree, resolve
from .._manifolds.grassmann import Grassmann
from .._manifolds.oblique import Oblique
from .._manifolds.orthogonal import Orthogonal
from .._manifolds.poincare_ball import PoincareBall
from .._manifolds.sphere import Sphere
from .._manifolds.stiefel import Stiefel

__all__ = ["Problem", "axpy", "scale", "select"]

Tree = Any


def scale(s: jax.Array, a: Tree) -> Tree:
    return jax.tree.map(lambda x: s.astype(x.dtype) * x, a)


def axpy(s: jax.Array, a: Tree, b: Tree) -> Tree:
    """``s·a + b``."""
    return jax.tree.map(lambda x, y: s.astype(x.dtype) * x + y, a, b)


def select(c: jax.Array, a: Tree, b: Tree) -> Tree:
    """``a`` where the scalar ``c`` holds, else ``b``."""
    return jax.tree.map(lambda x, y: jnp.where(c, x, y), a, b)


class Problem:
    """``cost`` on the manifold of ``manifold`` at points shaped like ``x0``, inputs checked.

    Raises (at trace time, naming ``fname``): ``TypeError`` for a leaf of ``x0`` that is not a
    float32/float64 array, leaves of different dtypes, or a cost that does not return a real
    scalar array; ``ValueError`` for a leaf whose shape does not fit its manifold, a cost of
    another shape than ``()``, a concrete ``x0`` off its manifold, or a spec that does not match.
    """

    def __init__(self, fname: str, cost: Callable[[Tree], jax.Array], manifold: ManifoldsTree,
                 x0: Tree) -> None:
        if not callable(cost):
            raise TypeError(f"{fname}: `cost` must be a function of the point; got "
                            f"{type(cost).__name__}.")
        self.fname = fname
        self._cost = cost
        self._spec = resolve(fname, manifold, x0)
        self.manifolds: list[AbstractManifold | None] = self._spec.manifolds
        leaves = self._spec.flatten("x0", x0)
        if not leaves:
            raise ValueError(f"{fname}: `x0` has no arrays.")
        for m, x, path in zip(self.manifolds, leaves, self._spec.paths):
            argname = f"x0['{path}']" if path else "x0"
            if m is None:
                check_array(fname, argname, x, dtypes=REAL_DTYPES)
            else:
                m.check_point(x, argname=argname, fname=fname)
        dtypes = {jnp.dtype(x.dtype) for x in leaves}
        if len(dtypes) > 1:
            raise TypeError(f"{fname}: the arrays of `x0` must share one dtype; got "
                            f"{', '.join(sorted(d.name for d in dtypes))}.")
        self.dtype = dtypes.pop()
        self._shapes = [tuple(x.shape) for x in leaves]
        self.eps = float(np.finfo(self.dtype).eps)
        self._check_cost(x0)
        self._check_on_manifold(leaves)

    def _check_cost(self, x0: Tree) -> None:
        out = jax.eval_shape(self._cost, x0)
        if not isinstance(out, jax.ShapeDtypeStruct) or not jnp.issubdtype(out.dtype, jnp.floating):
            what = (f"dtype {out.dtype}" if isinstance(out, jax.ShapeDtypeStruct)
                    else type(out).__name__)
            raise TypeError(f"{self.fname}: `cost` must return a real scalar array; got {what}.")
        if out.shape != ():
            raise ValueError(f"{self.fname}: `cost` must return a scalar, shape (); got shape "
                             f"{tuple(out.shape)}.")

    def _check_on_manifold(self, leaves: list[jax.Array]) -> None:
        """A concrete start off its manifold is refused (a traced one cannot be looked at)."""
        for m, x, path in zip(self.manifolds, leaves, self._spec.paths):
            if m is None or isinstance(x, jax.core.Tracer):
                continue
            ok, why = m.verify_point(x)
            if not ok:
                where = f"x0['{path}']" if path else "x0"
                raise ValueError(f"{self.fname}: `{where}` is not a point of {m!r}: {why}. "
                                 f"`{m!r}.project_point` gives the nearest one.")

    # ------------------------------------------------------------------------------------------
    # The cost and its derivatives

    def value(self, x: Tree) -> jax.Array:
        return jnp.asarray(self._cost(x), self.dtype)

    def value_and_egrad(self, x: Tree) -> tuple[jax.Array, Tree]:
        """``f(x)`` and its Euclidean gradient, in one pass."""
        f, g = jax.value_and_grad(self._cost)(x)
        return f.astype(self.dtype), g

    def rgrad(self, x: Tree, egrad: Tree) -> Tree:
        """The Riemannian gradient from the Euclidean one (the Riesz map of each leaf's metric)."""
        return self._map(lambda m, x, g: m.egrad_to_rgrad(x, g), lambda x, g: g, x, egrad)

    def value_and_rgrad(self, x: Tree) -> tuple[jax.Array, Tree]:
        f, g = self.value_and_egrad(x)
        return f, self.rgrad(x, g)

    def linearize(self, x: Tree) -> tuple[jax.Array, Tree, Callable[[Tree], Tree]]:
        """``f(x)``, ``grad f(x)`` and ``v ↦ Hess f(x)[v]``, the exact Riemannian Hessian.

        The gradient is linearised once (``jax.linearize``): each Hessian-vector product is then
        only the tangent map, ``ehess = ∇²f(x)[v]``, turned Riemannian by each leaf's
        ``ehess_to_rhess``.
        """
        (f, egrad), tangent_map = jax.linearize(jax.value_and_grad(self._cost), x)

        def hess(v: Tree) -> Tree:
            _, ehess = tangent_map(v)
            return self._map(lambda m, x, g, h, v: m.ehess_to_rhess(x, g, h, v),
                             lambda x, g, h, v: h, x, egrad, ehess, v)

        return f.astype(self.dtype), self.rgrad(x, egrad), hess

    # ------------------------------------------------------------------------------------------
    # The geometry of the product

    def inner(self, x: Tree, u: Tree, v: Tree) -> jax.Array:
        """The metric: the sum over leaves (and over the points of a stacked leaf)."""
        parts = self._map(lambda m, x, u, v: jnp.sum(m.inner(x, u, v)),
                          lambda x, u, v: jnp.sum(u * v), x, u, v, tree=False)
        return sum(parts[1:], parts[0])

    def norm(self, x: Tree, v: Tree) -> jax.Array:
        return safe_sqrt(self.inner(x, v, v))

    def retract(self, x: Tree, v: Tree) -> Tree:
        return self._map(lambda m, x, v: m.retract(x, v), jnp.add, x, v)

    def transport(self, x: Tree, y: Tree, v: Tree) -> Tree:
        """``v``, tangent at ``x``, moved to the tangent space at ``y``."""
        return self._map(lambda m, x, y, v: m.transport(x, y, v), lambda x, y, v: v, x, y, v)

    def project(self, x: Tree, v: Tree) -> Tree:
        return self._map(lambda m, x, v: m.project(x, v), lambda x, v: v, x, v)

    @property
    def dim(self) -> int:
        """The dimension of the product: each leaf's, times the points a stacked leaf holds."""
        return sum(_points(m, shape) * m.dim if m is not None else math.prod(shape)
                   for m, shape in zip(self.manifolds, self._shapes))

    @property
    def typical_distance(self) -> float:
        """Pymanopt's ``typical_dist`` of the product, ``√(Σ dᵢ²)``: the default largest
        trust-region radius."""
        return math.sqrt(sum(
            _points(m, shape) * _typical_distance(m) ** 2 if m is not None else math.prod(shape)
            for m, shape in zip(self.manifolds, self._shapes)))

    # ------------------------------------------------------------------------------------------

    def _map(self, on_manifold: Callable[..., Any], euclidean: Callable[..., Any], *trees: Tree,
             tree: bool = True) -> Any:
        """``on_manifold(m, *leaves)`` at each manifold leaf, ``euclidean(*leaves)`` elsewhere;
        a tree like the point, or the list of results with ``tree=False``."""
        flat = [self._spec.flatten("tree", t) for t in trees]
        out = [euclidean(*leaves) if m is None else on_manifold(m, *leaves)
               for m, *leaves in zip(self.manifolds, *flat)]
        return self._spec.unflatten(out) if tree else out


def _points(m: AbstractManifold, shape: tuple[int, ...]) -> int:
    """How many points of ``m`` a leaf of ``shape`` holds (its leading batch axes)."""
    return math.prod(shape[:len(shape) - len(m.shape)])


def _typical_distance(m: AbstractManifold) -> float:
    """Pymanopt 2.2.1's ``typical_dist`` of the same manifold, else ``√dim`` (Manopt's fallback)."""
    if isinstance(m, Sphere):
        return math.pi
    if isinstance(m, (Stiefel, Grassmann)):
        return math.sqrt(m.p)
    if isinstance(m, Oblique):  # the product of p spheres
        return math.pi * math.sqrt(m.p)
    if isinstance(m, Orthogonal):
        return math.pi * math.sqrt(m.n)
    if isinstance(m, PoincareBall):
        return m.dim / 8
    return math.sqrt(m.dim)
