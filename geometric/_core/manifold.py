r"""The manifold template: :class:`AbstractManifold` owns the public methods, a manifold the hooks.

Every public method (``project``, ``retract``, ...) is written once, here: it checks its inputs
(at trace time: array type, dtype, shape; messages name the method, the argument, the expected
shape and the one given), brings them to the hooks' layout, and calls one private hook
(``_project``, ``_retract``, ...). A manifold is a final frozen dataclass that implements the hooks
for unchecked arrays with leading batch axes; its own methods never repeat a check.
"""
from __future__ import annotations

import abc
import functools
from collections.abc import Callable
import math
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike

from rules.internal import REAL_DTYPES, check_array, mm_h

from .checks import check_real_dtype
from .arrays import frobenius_inner, norm_from_square

__all__ = ["CAPABILITIES", "CAPABILITY_HOOKS", "AbstractManifold"]

# capability: (the hooks a manifold that declares it implements, the hooks it may override)
CAPABILITY_HOOKS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "exp": (("_exp",), ()),
    "log": (("_log",), ()),
    "dist": (("_squared_dist",), ()),  # or "log", whose squared norm is the default
    "frame": (("_to_frame", "_from_frame"), ("_frame_rgrad",)),
}
CAPABILITIES = tuple(CAPABILITY_HOOKS)


def _names(hooks: list[str]) -> str:
    return ", ".join(f"`{h}`" for h in hooks)


class AbstractManifold(abc.ABC):
    r"""A Riemannian manifold embedded in a Euclidean space of arrays of shape :attr:`shape`.

    Points, tangent vectors, Euclidean gradients and Riemannian gradients are arrays of the
    points' shape (the embedding coordinates). Every method takes leading batch axes: a stack of
    ``h`` points of St(n, p) has shape ``(h, n, p)``, and ``inner`` returns shape ``(h,)``.
    Manifolds are frozen, hashable dataclasses with static fields, so they are static ``jit``
    arguments and leaves of a ``manifolds`` pytree.

    **Writing a manifold.** Subclass with a final frozen dataclass and implement the hooks; the
    public methods of this class check the inputs and call them.

    * Required: the properties :attr:`shape`, :attr:`self_correcting` and ``_error_formula`` (the
      text of :meth:`manifold_error` in terms of ``x``, for :meth:`verify_point`), and the hooks
      ``_random_point(key, dtype)``, ``_project(x, v)``, ``_project_point(x)``,
      ``_retract(x, v)``, ``_manifold_error(x)``.
    * Defaults, overridden where the manifold differs: ``_egrad_to_rgrad = _project`` (the
      Euclidean metric's Riesz map), ``_inner`` the Frobenius inner product,
      ``_ehess_to_rhess(x, egrad, ehess, v)`` the Euclidean metric's Riemannian Hessian
      ``P_x(ehess + D P_x[v] egrad)`` (the derivative of ``_project`` by ``jax.jvp``; a manifold
      that overrides ``_egrad_to_rgrad``, i.e. has a metric of its own, must override it too, or
      :meth:`ehess_to_rhess` raises ``NotImplementedError``), ``_transport(x, y, v)
      = _project(y, v)`` (vector transport by projection onto the new tangent space),
      ``_random_tangent`` the projection of a Gaussian, ``_retract_transport`` a retraction
      followed by ``_transport`` (override it to share work between the two), ``_outside(x)``
      None (override it where arrays of the right shape can lie outside the manifold's domain:
      the public methods return nan for such points, as ``jnp.log(-1.0)`` is nan, never a finite
      number computed from a point that is not one; :meth:`project_point`,
      :meth:`manifold_error` and :meth:`verify_point` take any array).
    * :attr:`dim`, the intrinsic dimension, which the solvers of :mod:`geometric.solvers` read
      (the trust-region radius, the cap on inner iterations): by default it raises
      ``NotImplementedError``; define it as a property (or a class attribute) where it is known.
    * Optional, declared in :attr:`capabilities`: ``"exp"`` (``_exp``), ``"log"`` (``_log``),
      ``"dist"`` (``_squared_dist``, smooth at ``y = x``; by default the squared norm of
      ``_log``) and ``"frame"`` (``_to_frame``, ``_from_frame``: points are orthonormal frames,
      see :meth:`to_frame`; ``_frame_rgrad`` gives ``manifold_adam`` the Riemannian gradient as
      ``G + Y C``, by default it forms it).
      A declared capability without its hooks, or a hook without its declaration, is a
      ``TypeError`` when the class is defined; calling a method the manifold does not declare
      raises ``NotImplementedError``. The optimizers that need a capability accept every
      manifold that declares it.

    Hooks receive arrays in the manifold's own layout: for ``Stiefel(n, p, rows=True)`` the
    public methods take ``(..., p, n)`` arrays and transpose them into the hooks' ``(..., n, p)``
    and back (``_transposed``), so a manifold writes its formulas once, for columns.

    Examples:
      A circle in the plane, in one short class:

      >>> import dataclasses, jax, jax.numpy as jnp, geometric
      >>> @dataclasses.dataclass(frozen=True)
      ... class Circle(geometric.AbstractManifold):
      ...     shape = (2,)
      ...     self_correcting = True
      ...     _error_formula = "|xᵀx − 1|"
      ...
      ...     def _random_point(self, key, dtype):
      ...         return self._project_point(jax.random.normal(key, (2,), dtype))
      ...
      ...     def _project(self, x, v):
      ...         return v - x * jnp.sum(x * v, axis=-1, keepdims=True)
      ...
      ...     def _project_point(self, x):
      ...         return x / jnp.linalg.norm(x, axis=-1, keepdims=True)
      ...
      ...     def _retract(self, x, v):
      ...         return self._project_point(x + v)
      ...
      ...     def _manifold_error(self, x):
      ...         return jnp.abs(jnp.sum(x * x, axis=-1) - 1)
      >>> circle = Circle()
      >>> x = jnp.array([1.0, 0.0], jnp.float32)
      >>> print(circle.egrad_to_rgrad(x, jnp.array([3.0, 4.0], jnp.float32)))
      [0. 4.]
      >>> circle.verify_point(2 * x)
      (False, '|xᵀx − 1| = 3 > atol = 0.000488')
      >>> g, v = jnp.array([3.0, 4.0], jnp.float32), jnp.array([0.0, 1.0], jnp.float32)
      >>> print(circle.ehess_to_rhess(x, g, jnp.zeros(2, jnp.float32), v))  # -(xᵀg) v
      [ 0. -3.]
      >>> circle.exp(x, x)
      Traceback (most recent call last):
      ...
      NotImplementedError: Circle().exp: Circle has no `exp` (capabilities: none).
    """

    capabilities: ClassVar[frozenset[str]] = frozenset()
    """The optional methods this manifold has: a subset of ``"exp"``, ``"log"``, ``"dist"``,
    ``"frame"`` (:meth:`to_frame`, :meth:`from_frame`)."""

    horizontal: ClassVar[bool] = False
    """Whether tangent vectors ``Δ`` at a frame ``Y`` are horizontal, ``YᵀΔ = 0`` (a quotient
    St(N, p)/O(p) such as the Grassmann manifold); read by ``optim.manifold_adam``."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        unknown = set(cls.capabilities) - set(CAPABILITIES)
        if unknown:
            raise TypeError(f"{cls.__name__}: unknown capabilities {sorted(unknown)}; "
                            f"known: {', '.join(CAPABILITIES)}.")
        for capability, (required, optional) in CAPABILITY_HOOKS.items():
            declared = capability in cls.capabilities
            overridden = [h for h in (*required, *optional)
                          if getattr(cls, h) is not getattr(AbstractManifold, h)]
            missing = [h for h in required if h not in overridden]
            if capability == "dist" and "log" in cls.capabilities:  # the default _squared_dist
                missing = []
            if declared and missing:
                raise TypeError(f"{cls.__name__} declares {capability!r} in `capabilities` but "
                                f"implements no {_names(missing)}.")
            if overridden and not declared:
                raise TypeError(f"{cls.__name__} implements {_names(overridden)} but does not "
                                f"declare {capability!r} in `capabilities`.")

    # ------------------------------------------------------------------------------------------
    # What a manifold declares

    @property
    @abc.abstractmethod
    def shape(self) -> tuple[int, ...]:
        """Shape of one point, without batch axes."""

    @property
    @abc.abstractmethod
    def self_correcting(self) -> bool:
        """Whether :meth:`retract` lands on the manifold even from a point slightly off it.

        Retractions that normalise (QR, polar, ``x / ‖x‖``) wipe out rounding errors every step;
        rotations (Cayley, exponential) carry them along, so iterates drift off the manifold in
        float32 unless re-projected now and then (``stabilize_every`` of the optimizers).
        """

    @property
    @abc.abstractmethod
    def _error_formula(self) -> str:
        """What :meth:`manifold_error` measures, in terms of ``x`` (e.g. ``"‖xᵀx − I‖_F"``)."""

    @property
    def dim(self) -> int:
        """The intrinsic dimension of the manifold: that of every tangent space (an int).

        Raises:
          NotImplementedError: the class does not define ``dim``.
        """
        raise NotImplementedError(f"{type(self).__name__} does not define `dim`: define the "
                                  "property `dim` (the intrinsic dimension, an int) in the class.")

    @property
    def _transposed(self) -> bool:
        """Whether the public layout is the transpose of the hooks' (orthonormal rows)."""
        return False

    # ------------------------------------------------------------------------------------------
    # Public methods: check once, then call a hook

    def random_point(self, key: jax.Array, dtype: DTypeLike = jnp.float32) -> jax.Array:
        """A random point of shape :attr:`shape` (uniform, i.e. Haar, where the manifold has it).

        Use ``jax.vmap(manifold.random_point)(keys)`` for a stack of points.

        Raises:
          TypeError: ``dtype`` is not float32 or float64.
        """
        dtype = check_real_dtype(f"{self!r}.random_point", dtype)
        return self._orient(self._random_point(key, dtype))

    def random_tangent(self, key: jax.Array, x: jax.Array) -> jax.Array:
        """A random tangent vector at ``x`` (by default a projected Gaussian), shaped like ``x``."""
        (x,) = self._inputs("random_tangent", x)
        return self._orient(self._nan_outside(self._random_tangent(key, x), x))

    def check_point(self, x: jax.Array, *, argname: str = "x", fname: str | None = None) -> None:
        """Check that ``x`` is a float32/float64 array of shape ``(..., *shape)``, at trace time.

        Checks the type, dtype and shape only; :meth:`verify_point` checks the values.

        Args:
          x: the array to check.
          argname: its name in error messages.
          fname: the function named at the start of error messages (default:
            ``"<manifold>.check_point"``).

        Raises:
          TypeError: ``x`` is not a JAX or NumPy array, or not float32/float64.
          ValueError: ``x`` does not have the shape of a (batch of) point(s).
        """
        self._check_shape(f"{self!r}.check_point" if fname is None else fname, argname, x)

    def verify_point(self, x: jax.Array, *, atol: float | None = None) -> tuple[bool, str]:
        r"""Whether the concrete array ``x`` lies on the manifold within ``atol``, and why.

        Compares :meth:`manifold_error` (its largest value over the batch) with ``atol``. The
        reason names the quantity, its value and the tolerance, e.g.
        ``"‖xᵀx − I‖_F = 2.19 > atol = 0.00131"``, and for a batch the index of the worst point.

        Args:
          x: a point or a stack of points, not traced (call it outside ``jit``).
          atol: the tolerance; default ``√ε·√(size of a point)`` with ``ε`` the machine epsilon
            of ``x``'s dtype (3.5e-4·√size in float32, 1.5e-8·√size in float64): far above
            rounding and drift, far below the error of an unconstrained initialisation.

        Returns:
          ``(ok, reason)``.

        Raises:
          TypeError, ValueError: as :meth:`check_point`; ``TypeError`` also for a traced ``x``.
        """
        fname = f"{self!r}.verify_point"
        self._check_shape(fname, "x", x)
        if isinstance(x, jax.core.Tracer):
            raise TypeError(f"{fname}: `x` must be a concrete array; got a tracer (inside jit or "
                            "another transformation). Verify points before tracing.")
        if atol is None:
            atol = math.sqrt(float(np.finfo(x.dtype).eps) * math.prod(self.shape))
        errors = self._manifold_error(self._orient(x))
        if errors.size == 0:
            return True, "no points"
        # Reduced by JAX, not NumPy: a global array of a multi-process run is not addressable
        # here as a whole, its maximum is. argmax finds a nan first.
        worst = np.unravel_index(int(jnp.argmax(errors.reshape(-1))), errors.shape)
        value = float(jnp.max(errors))
        ok = value <= atol
        reason = f"{self._error_formula} = {value:.3g} {'≤' if ok else '>'} atol = {atol:.3g}"
        if errors.ndim:
            reason += f" (the largest of {errors.size} points, at index {tuple(map(int, worst))})"
        return ok, reason

    def project(self, x: jax.Array, v: jax.Array) -> jax.Array:
        """Orthogonal projection of the ambient vector ``v`` onto the tangent space at ``x``.

        Idempotent, and the identity on tangent vectors.
        """
        x, v = self._inputs("project", x, v=v)
        return self._orient(self._nan_outside(self._project(x, v), x))

    def project_point(self, x: jax.Array) -> jax.Array:
        """The point of the manifold nearest to ``x`` (used to stabilise long runs)."""
        (x,) = self._inputs("project_point", x)
        return self._orient(self._project_point(x))

    def egrad_to_rgrad(self, x: jax.Array, g: jax.Array) -> jax.Array:
        """The Riemannian gradient of ``g``: the tangent ``r`` with ``inner(x, r, ξ) = <g, ξ>``.

        The identity holds for every tangent ``ξ`` (the Riesz map of the metric). For the
        Euclidean metric this is :meth:`project`; for other metrics it is not a projection.
        """
        x, g = self._inputs("egrad_to_rgrad", x, g=g)
        return self._orient(self._nan_outside(self._egrad_to_rgrad(x, g), x))

    def ehess_to_rhess(self, x: jax.Array, egrad: jax.Array, ehess: jax.Array, v: jax.Array
                       ) -> jax.Array:
        r"""The Riemannian Hessian ``Hess f(x)[v]`` from the Euclidean derivatives of ``f`` at ``x``.

        ``egrad = ∇f(x)`` and ``ehess = ∇²f(x)[v]`` (e.g. ``jax.jvp(jax.grad(f), (x,), (v,))``)
        for a tangent ``v``, ``f`` any smooth extension of the cost to the ambient space (``egrad``
        need not be tangent). For a Riemannian submanifold (the Euclidean metric) this is

        .. math::
            \operatorname{Hess} f(x)[v] = P_x(\nabla^2 f(x)[v]) + \mathfrak{W}_x(v, P_x^\perp \nabla f(x)),

        the projected Euclidean Hessian plus the Weingarten map applied to the normal part of the
        gradient, ``P_x(D P_x[v] ∇f(x))`` (Absil, Mahony & Trumpf 2013); other metrics add their
        Christoffel terms. The result is a tangent at ``x``, linear in ``v`` and self-adjoint in
        ``inner``. Each manifold's formulas: ``docs/derivations/riemannian-hessians.md``;
        :func:`geometric.check_hessian` tests them on a cost.

        Raises:
          NotImplementedError: the manifold has a metric of its own (it overrides
            ``_egrad_to_rgrad``) and no ``_ehess_to_rhess``.

        References:
          P.-A. Absil, R. Mahony, J. Trumpf, "An extrinsic look at the Riemannian Hessian",
          GSI 2013. P.-A. Absil, R. Mahony, R. Sepulchre, *Optimization Algorithms on Matrix
          Manifolds* (2008), §5.5.
        """
        x, egrad, ehess, v = self._inputs("ehess_to_rhess", x, egrad=egrad, ehess=ehess, v=v)
        return self._orient(self._nan_outside(self._ehess_to_rhess(x, egrad, ehess, v), x))

    def inner(self, x: jax.Array, u: jax.Array, v: jax.Array) -> jax.Array:
        """The metric at ``x`` of two tangent vectors; shape: the batch axes of ``x``."""
        x, u, v = self._inputs("inner", x, u=u, v=v)
        return self._nan_outside(self._inner(x, u, v), x)

    def norm(self, x: jax.Array, v: jax.Array) -> jax.Array:
        """``√inner(x, v, v)``; its derivative at ``v = 0`` is 0 (a subgradient), not nan.

        The norm has no second derivative at ``v = 0``: ``jax.hessian`` there gives nan (also
        for ``norm**2``, whose true second derivative no derivative of the norm can carry; use
        ``inner(x, v, v)``).
        """
        x, v = self._inputs("norm", x, v=v)
        return self._nan_outside(norm_from_square(self._inner(x, v, v)), x)

    def retract(self, x: jax.Array, v: jax.Array) -> jax.Array:
        """The retraction ``R_x(v)``: a point of the manifold, ``R_x(tv) = x + tv + O(t²)``."""
        x, v = self._inputs("retract", x, v=v)
        return self._orient(self._nan_outside(self._retract(x, v), x))

    def transport(self, x: jax.Array, y: jax.Array, v: jax.Array) -> jax.Array:
        """Vector transport of the tangent ``v`` at ``x`` into the tangent space at ``y``."""
        x, y, v = self._inputs("transport", x, y=y, v=v)
        return self._orient(self._nan_outside(self._transport(x, y, v), x, y))

    def retract_transport(self, x: jax.Array, v: jax.Array, u: jax.Array
                          ) -> tuple[jax.Array, jax.Array]:
        """``(y, transport(x, y, u))`` with ``y = retract(x, v)``, sharing work where it can."""
        x, v, u = self._inputs("retract_transport", x, v=v, u=u)
        y, w = self._retract_transport(x, v, u)
        return self._orient(self._nan_outside(y, x)), self._orient(self._nan_outside(w, x))

    def manifold_error(self, x: jax.Array) -> jax.Array:
        """Distance of ``x`` from the constraint (for logging); shape: the batch axes of ``x``."""
        (x,) = self._inputs("manifold_error", x)
        return self._manifold_error(x)

    def exp(self, x: jax.Array, v: jax.Array) -> jax.Array:
        """The exponential map: the end point of the geodesic from ``x`` with velocity ``v``.

        Raises:
          NotImplementedError: the manifold does not declare ``"exp"`` in :attr:`capabilities`.
        """
        return self._tangent_or_point("exp", self._exp, x, v=v)

    def log(self, x: jax.Array, y: jax.Array) -> jax.Array:
        """The logarithm: the tangent ``v`` at ``x`` with ``exp(x, v) = y`` of least norm.

        Raises:
          NotImplementedError: the manifold does not declare ``"log"`` in :attr:`capabilities`.
        """
        return self._tangent_or_point("log", self._log, x, y=y)

    def dist(self, x: jax.Array, y: jax.Array) -> jax.Array:
        """The geodesic distance; shape: the batch axes of ``x``.

        ``√squared_dist(x, y)``. Its derivative at ``y = x`` is 0 (a subgradient; the distance is
        not differentiable there), so ``dist(x, y)**2`` has its true gradient, 0, at ``y = x``;
        its second derivative there is nan. The second derivative of ``dist**2`` at ``y = x``
        (the metric) is beyond any derivative of ``dist`` — write squared distances (Karcher
        means, variances, trust-region costs) with :meth:`squared_dist`, smooth everywhere.

        Raises:
          NotImplementedError: the manifold does not declare ``"dist"`` in :attr:`capabilities`.
        """
        self._require("dist")
        x, y = self._inputs("dist", x, y=y)
        return self._nan_outside(norm_from_square(self._squared_dist(x, y)), x, y)

    def squared_dist(self, x: jax.Array, y: jax.Array) -> jax.Array:
        """The squared geodesic distance ``dist(x, y)²``; shape: the batch axes of ``x``.

        Smooth at ``y = x`` (where ``dist`` is not): its Hessian in ``y`` there is twice the
        metric, ``∇²_y d²(x, y)|_{y=x} = 2 g_x``, and every derivative is exact — the cost to
        use for Karcher means and second-order solvers.

        Raises:
          NotImplementedError: the manifold does not declare ``"dist"`` in :attr:`capabilities`.
        """
        self._require("dist", "squared_dist")
        x, y = self._inputs("squared_dist", x, y=y)
        return self._nan_outside(self._squared_dist(x, y), x, y)

    def to_frame(self, x: jax.Array) -> jax.Array:
        """A point (or tangent vector) as an orthonormal frame ``Y ∈ St(N, p)``, ``(..., N, p)``.

        Brantner's global tangent space (``optim.manifold_adam``) works on such frames: a sphere
        point is an N×1 frame, an orthonormal-rows matrix the transpose of one. With
        :attr:`horizontal`, tangent vectors satisfy ``YᵀΔ = 0``.

        Raises:
          NotImplementedError: the manifold does not declare ``"frame"`` in :attr:`capabilities`.
        """
        self._require("frame", "to_frame")
        (x,) = self._inputs("to_frame", x)
        return self._to_frame(x)

    def frame_rgrad(self, y: jax.Array, g: jax.Array, yt_g: jax.Array
                    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(F, YᵀF, C)`` whose ``F + Y C`` is the Riemannian gradient, all in frame layout.

        ``y = to_frame(x)``, ``g`` the Euclidean gradient as a frame-layout array and
        ``yt_g = YᵀG``. ``optim.manifold_adam`` combines the gradient with products it already
        has instead of forming it as an N×p matrix (manifolds whose gradient is ``G`` plus a
        combination of ``Y``'s columns return ``(G, YᵀG, C)``).

        Raises:
          NotImplementedError: the manifold does not declare ``"frame"`` in :attr:`capabilities`.
        """
        self._require("frame", "frame_rgrad")
        return self._frame_rgrad(y, g, yt_g)

    def from_frame(self, y: jax.Array) -> jax.Array:
        """The inverse of :meth:`to_frame`.

        Raises:
          NotImplementedError: the manifold does not declare ``"frame"`` in :attr:`capabilities`.
        """
        self._require("frame", "from_frame")
        fname = f"{self!r}.from_frame"
        check_array(fname, "y", y, dtypes=REAL_DTYPES)
        point = self._orient_shape(self.shape)
        frame = tuple(jax.eval_shape(lambda: self._to_frame(jnp.zeros(point, y.dtype))).shape)
        if y.ndim < 2 or tuple(y.shape[-2:]) != frame:
            raise ValueError(f"{fname}: `y` must have shape (..., {frame[0]}, {frame[1]}); "
                             f"got {tuple(y.shape)}.")
        return self._orient(self._from_frame(y))

    # ------------------------------------------------------------------------------------------
    # Hooks. Arrays are checked, in the hooks' layout, with leading batch axes.

    @abc.abstractmethod
    def _random_point(self, key: jax.Array, dtype: jnp.dtype) -> jax.Array: ...

    @abc.abstractmethod
    def _project(self, x: jax.Array, v: jax.Array) -> jax.Array: ...

    @abc.abstractmethod
    def _project_point(self, x: jax.Array) -> jax.Array: ...

    @abc.abstractmethod
    def _retract(self, x: jax.Array, v: jax.Array) -> jax.Array: ...

    @abc.abstractmethod
    def _manifold_error(self, x: jax.Array) -> jax.Array: ...

    def _random_tangent(self, key: jax.Array, x: jax.Array) -> jax.Array:
        return self._project(x, jax.random.normal(key, x.shape, x.dtype))

    def _egrad_to_rgrad(self, x: jax.Array, g: jax.Array) -> jax.Array:
        return self._project(x, g)

    def _ehess_to_rhess(self, x: jax.Array, egrad: jax.Array, ehess: jax.Array, v: jax.Array
                        ) -> jax.Array:
        """The Euclidean metric's Hessian: ``P_x(ehess + D P_x[v] egrad)``, the derivative of the
        projection along ``v`` taken by ``jax.jvp`` of ``_project`` (a smooth formula off the
        manifold). Manifolds with another metric override it."""
        own_metric = getattr(type(self), "_egrad_to_rgrad") is not getattr(AbstractManifold,
                                                                        "_egrad_to_rgrad")
        if own_metric:
            raise NotImplementedError(
                f"{self!r}.ehess_to_rhess: {type(self).__name__} has its own metric "
                "(`_egrad_to_rgrad`) and no `_ehess_to_rhess` for it: define "
                "`_ehess_to_rhess(x, egrad, ehess, v)`, the Riemannian Hessian of that metric.")
        _, weingarten = jax.jvp(lambda y: self._project(y, egrad), (x,), (v,))
        return self._project(x, ehess + weingarten)

    def _inner(self, x: jax.Array, u: jax.Array, v: jax.Array) -> jax.Array:
        return frobenius_inner(u, v, len(self.shape))

    def _transport(self, x: jax.Array, y: jax.Array, v: jax.Array) -> jax.Array:
        return self._project(y, v)

    def _retract_transport(self, x: jax.Array, v: jax.Array, u: jax.Array
                           ) -> tuple[jax.Array, jax.Array]:
        y = self._retract(x, v)
        return y, self._transport(x, y, u)

    def _exp(self, x: jax.Array, v: jax.Array) -> jax.Array:
        raise NotImplementedError

    def _log(self, x: jax.Array, y: jax.Array) -> jax.Array:
        raise NotImplementedError

    def _squared_dist(self, x: jax.Array, y: jax.Array) -> jax.Array:
        # The log is smooth at y = x and 0 there, so ⟨log, log⟩ has every derivative.
        v = self._log(x, y)
        return self._inner(x, v, v)

    def _outside(self, x: jax.Array) -> jax.Array | None:
        """Where a point lies outside the set the formulas hold on (batch shape, bool), or None
        if every array of the right shape is in it (the default)."""
        return None

    def _to_frame(self, x: jax.Array) -> jax.Array:
        raise NotImplementedError

    def _from_frame(self, y: jax.Array) -> jax.Array:
        raise NotImplementedError

    def _frame_rgrad(self, y: jax.Array, g: jax.Array, yt_g: jax.Array
                     ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(F, YᵀF, C)`` with the Riemannian gradient ``F + Y C``, in :meth:`to_frame` layout.

        ``Y`` and ``G`` are frames, ``yt_g = YᵀG``. Frame manifolds whose gradient is ``G`` plus
        a combination of ``Y``'s columns return ``(G, YᵀG, C)``, so ``manifold_adam`` never forms
        the gradient as an N×p matrix; this default forms it (two more products).
        """
        f = self._to_frame(self._egrad_to_rgrad(self._from_frame(y), self._from_frame(g)))
        return f, mm_h(y, f), jnp.zeros_like(yt_g)

    # ------------------------------------------------------------------------------------------
    # Machinery of the public methods

    def _require(self, capability: str, method: str | None = None) -> None:
        if capability not in self.capabilities:
            have = ", ".join(c for c in CAPABILITIES if c in self.capabilities) or "none"
            raise NotImplementedError(f"{self!r}.{method or capability}: {type(self).__name__} "
                                      f"has no `{method or capability}` (capabilities: {have}).")

    def _check_shape(self, fname: str, argname: str, x: jax.Array) -> None:
        check_array(fname, argname, x, dtypes=REAL_DTYPES)
        k = len(self.shape)
        if x.ndim < k or tuple(x.shape[x.ndim - k:]) != self.shape:
            expected = "(..., " + ", ".join(map(str, self.shape)) + ")"
            raise ValueError(f"{fname}: `{argname}` must have shape {expected}; "
                             f"got {tuple(x.shape)}.")

    def _inputs(self, method: str, x: jax.Array, **like_x: jax.Array) -> tuple[jax.Array, ...]:
        """Check the point ``x`` and the arrays ``like_x`` (which must have ``x``'s shape), and
        return them all in the hooks' layout."""
        fname = f"{self!r}.{method}"
        self._check_shape(fname, "x", x)
        for argname, v in like_x.items():
            check_array(fname, argname, v, dtypes=REAL_DTYPES)
            if v.shape != x.shape:
                raise ValueError(f"{fname}: `{argname}` must have the shape of `x`, "
                                 f"{tuple(x.shape)}; got {tuple(v.shape)}.")
        return tuple(self._orient(a) for a in (x, *like_x.values()))

    def _tangent_or_point(self, capability: str, hook: Callable[[jax.Array, jax.Array], jax.Array],
                          x: jax.Array, **other: jax.Array) -> jax.Array:
        """``hook(x, other)`` of an optional capability, inputs checked, in the public layout."""
        self._require(capability)
        x, y = self._inputs(capability, x, **other)
        points = (x, y) if capability == "log" else (x,)
        return self._orient(self._nan_outside(hook(x, y), *points))

    def _nan_outside(self, out: jax.Array, *points: jax.Array) -> jax.Array:
        """``out`` with nan where a point of ``points`` is outside the domain (``_outside``), as
        ``jnp.log(-1.0)`` is nan: never a finite number computed from a point that is not one."""
        masks = [m for m in map(self._outside, points) if m is not None]
        if not masks:
            return out
        outside = jax.lax.stop_gradient(functools.reduce(jnp.logical_or, masks))
        outside = outside.reshape(outside.shape + (1,) * (out.ndim - outside.ndim))
        return jnp.where(outside, jnp.nan, out)

    def _orient(self, a: jax.Array) -> jax.Array:
        """Between the public layout and the hooks' (a transpose, its own inverse, or nothing)."""
        return a.mT if self._transposed else a

    def _orient_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return (*shape[:-2], shape[-1], shape[-2]) if self._transposed else shape
