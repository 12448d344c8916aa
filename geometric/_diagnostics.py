r"""Taylor-remainder checks of a cost's Riemannian gradient and Hessian (Manopt's ``checkgradient``
and ``checkhessian``).

Along a curve ``c`` through ``x`` with ``c'(0) = v``, a unit tangent, the remainders

.. math::
    E_1(t) = |f(c(t)) - f(x) - t\,\langle \operatorname{grad} f(x), v\rangle_x|, \qquad
    E_2(t) = |f(c(t)) - f(x) - t\,\langle \operatorname{grad} f(x), v\rangle_x
              - \tfrac{t^2}{2}\langle \operatorname{Hess} f(x)[v], v\rangle_x|

fall as ``t²`` and ``t³`` when the gradient and the Hessian are right (for ``E_2`` along a
second-order curve: zero covariant acceleration at ``t = 0``), and only as ``t`` and ``t²`` when
they are wrong. The checks measure the slope of ``log E`` against
``log t``. Derivation and references: ``docs/derivations/riemannian-hessians.md``.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._core.manifold import AbstractManifold
from ._core.tree import ManifoldsTree, Resolved, resolve

__all__ = ["CheckResult", "check_gradient", "check_hessian"]

# The steps t: 8 per decade from 1e-8 to 1. For a cost of order one the rounding floor below is
# about 2e-13: E ≈ t² clears it from t ≈ 5e-7 and E ≈ t³ from t ≈ 6e-5, so either fit has
# decades of asymptotic regime to choose from.
_STEPS = np.logspace(-8.0, 0.0, 65)
_WINDOW = 13  # points in a fitted range: 1.5 decades
_FLOOR = 1e3  # the remainder must exceed _FLOOR·ε·(|f(x)| + |f(c(t))|): far above rounding
_RESIDUAL = 0.02  # largest misfit of a straight line over a fitted range, in log10 units
_SLOPE_TOL = 0.1  # |slope − expected| that passes
_RELATIVE_TOL = math.sqrt(float(np.finfo(np.float64).eps))  # symmetry and tangency errors
# c''(0) of a retraction curve from c''(±h) for a unit v: the mean errs by O(h²), far below the
# remainders the Hessian check fits (t ≥ 1e-5, where E ≈ t³ ≫ h²t²).
_ACCELERATION_STEP = 1e-4


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class CheckResult:
    """The outcome of :func:`check_gradient` or :func:`check_hessian`; true when the check passed.

    Attributes:
      passed: whether the check passed (also ``bool(result)``).
      slope: the slope of ``log E(t)`` against ``log t`` over :attr:`t_range` (nan when the
        remainder is at rounding level for every ``t``: the model is exact).
      expected_slope: 2 for the gradient, 3 for the Hessian.
      t_range: the range of ``t`` the slope was fitted on (nan, nan when none).
      tangency_error: ``‖r - P_x(r)‖/‖r‖`` for the Riemannian gradient ``r`` (check_gradient)
        or ``r = Hess f(x)[v]`` (check_hessian), Euclidean norms over every leaf.
      symmetry_error: check_hessian only (else None): ``⟨Hess f(x)[u], w⟩_x - ⟨u, Hess f(x)[w]⟩_x``
        for two random unit tangents; it passes below ``√ε (‖Hess u‖ + ‖Hess w‖)``.
      reason: why the check passed or failed, in words.
      t: the steps ``t`` (a NumPy array), for plotting ``remainder`` against them.
      remainder: ``E(t)`` at each step.
    """

    passed: bool
    slope: float
    expected_slope: float
    t_range: tuple[float, float]
    tangency_error: float
    symmetry_error: float | None
    reason: str
    t: np.ndarray
    remainder: np.ndarray

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        lo, hi = self.t_range
        fields = [f"passed={self.passed}", f"slope={self.slope:.3f}",
                  f"expected_slope={self.expected_slope:g}", f"t_range=({lo:.2g}, {hi:.2g})",
                  f"tangency_error={self.tangency_error:.2g}"]
        if self.symmetry_error is not None:
            fields.append(f"symmetry_error={self.symmetry_error:.2g}")
        return f"CheckResult({', '.join(fields)}, reason={self.reason!r})"


def check_gradient(cost: Callable[[Any], jax.Array], manifold: ManifoldsTree, x: Any, *,
                   key: jax.Array) -> CheckResult:
    r"""Check the Riemannian gradient of ``cost`` at ``x`` by the slope of its Taylor remainder.

    Along the curve ``c(t) = exp_x(tv)`` (the manifold's :meth:`~AbstractManifold.exp` where it
    declares ``"exp"``, else its retraction, whose first order suffices here) with ``v`` a random
    unit tangent, ``E(t) = |f(c(t)) - f(x) - t⟨grad f(x), v⟩_x|`` is ``O(t²)`` when the gradient
    is right and ``Θ(t)`` when it is not. The gradient is :meth:`~AbstractManifold.egrad_to_rgrad`
    of JAX's gradient of ``cost``, so this checks ``cost``'s derivative (a ``jax.custom_jvp``, a
    rule) together with the manifold's Riesz map and metric.

    **How the range of t is chosen.** ``E`` is evaluated at 65 steps ``t``, 8 per decade from
    ``1e-8`` to 1. Rounding makes ``E`` noise below about ``ε·|f|``: steps where ``E`` is below
    ``1000·ε·(|f(x)| + |f(c(t))|)`` are discarded. The asymptotic regime is the one at the
    smallest ``t``, so the fitted range is the first run of 13 consecutive steps (1.5 decades),
    from the smallest ``t`` up, on which ``log E`` is a straight line in ``log t`` (a least-squares
    fit with no point off by more than 0.02 in ``log₁₀ E``); the check passes when that line's
    slope is within 0.1 of 2. A wrong gradient is caught at small ``t``, where ``E ≈ t|⟨grad - true grad, v⟩|``
    dominates (at large ``t`` any remainder grows like ``t²``). If ``E`` is at rounding level for
    every ``t`` (a linear cost, exactly modelled), the check passes with slope nan; if it is above
    rounding but follows no power law on any such range, it fails. The Riemannian gradient must
    also be tangent (``tangency_error`` below ``√ε``).

    The check runs in float64: differences of costs near ``ε·|f|`` decide it, and float32 leaves
    room for less than a decade of asymptotic regime. ``x`` must be float64 (with
    ``jax.config.update("jax_enable_x64", True)``), and a point of the manifold. Call it outside
    ``jit``: it returns Python values. ``cost`` is traced once (evaluated under ``jax.jit`` and
    ``jax.vmap`` over the steps).

    Args:
      cost: a JAX function of the point (an array, or a pytree for a product), returning a real
        float64 scalar.
      manifold: a manifold, or a spec pytree as in :mod:`geometric.optim` (a pytree matching ``x``
        or a prefix of it, leaves manifolds or None/``EUCLIDEAN``, or a function of ``x``).
      x: the point: a float64 array, or a pytree of them (points with leading batch axes are
        products of that many copies of the manifold).
      key: a JAX PRNG key (``jax.random.PRNGKey`` or ``jax.random.key``): the random direction.

    Returns:
      A :class:`CheckResult`, true when the check passes, with the fitted slope, the expected one
      (2), the fitted range of ``t``, the tangency error, and the steps and remainders.

    Raises:
      TypeError: ``cost`` is not callable or does not return a float64 scalar; ``key`` is not a
        PRNG key; a leaf of ``x`` is not a float64 array, or is traced; float64 is not enabled.
      ValueError: ``x`` does not fit ``manifold`` (its structure or a leaf's shape), or a leaf is
        not on its manifold (:meth:`~AbstractManifold.verify_point`).

    References:
      N. Boumal, *An introduction to optimization on smooth manifolds* (2023), §4.8 and §6.8.
      N. Boumal, B. Mishra, P.-A. Absil, R. Sepulchre, "Manopt, a Matlab toolbox for optimization
      on manifolds", JMLR 15 (2014) (``checkgradient``).

    Examples:
      With float64 enabled (``jax.config.update("jax_enable_x64", True)``):

      >>> import jax, jax.numpy as jnp, geometric
      >>> sphere = geometric.Sphere(4)
      >>> a = jnp.diag(jnp.arange(1.0, 5.0))
      >>> x = sphere.random_point(jax.random.PRNGKey(0), jnp.float64)
      >>> result = geometric.check_gradient(lambda x: x @ a @ x, sphere, x,
      ...                                   key=jax.random.PRNGKey(1))
      >>> bool(result), round(result.slope, 1)
      (True, 2.0)
    """
    return _check("check_gradient", 1, cost, manifold, x, key)


def check_hessian(cost: Callable[[Any], jax.Array], manifold: ManifoldsTree, x: Any, *,
                  key: jax.Array) -> CheckResult:
    r"""Check the Riemannian Hessian of ``cost`` at ``x`` by the slope of its Taylor remainder.

    With ``v`` a random unit tangent and ``Hess f(x)[v]`` the manifold's
    :meth:`~AbstractManifold.ehess_to_rhess` of JAX's derivatives of ``cost``
    (``jax.jvp(jax.grad(cost), (x,), (v,))``),

    .. math::
        E(t) = \big|f(c(t)) - f(x) - t\langle \operatorname{grad} f(x), v\rangle_x
               - \tfrac{t^2}{2}\langle \operatorname{Hess} f(x)[v], v\rangle_x\big|

    is ``O(t³)`` when the Hessian (and the gradient) are right, along a *second-order* curve
    ``c``: ``c(0) = x``, ``c'(0) = v`` and zero covariant acceleration at 0. Along a curve with
    acceleration ``a`` the quadratic term would be ``⟨Hess f(x)[v], v⟩ + ⟨grad f(x), a⟩``, so
    with a first-order retraction the check fails away from critical points. The curve is:

    * the exponential map ``exp_x(tv)``, a geodesic, where the manifold declares ``"exp"``;
    * else the retraction corrected to second order, ``R_x(tv - ½t²a)``, where ``a`` is the
      covariant acceleration of ``t ↦ R_x(tv)`` at 0, computed from the retraction and the
      metric alone, so for any metric and independently of the Hessian being checked. In the
      chart ``s ↦ R_x(s)`` of ``T_x`` the curve is a straight line and ``a`` the Riesz
      representative of the Christoffel covector ``w ↦ ∂_v g_vw - ½∂_w g_vv``, which with ``F``
      the formula of :meth:`~AbstractManifold.inner` (a smooth bilinear formula, symmetrised) is
      ``w ↦ D_xF[v](v, w) - ½D_xF[w](v, v) + F(x, R''(0), w)``, ``R''(0)`` the second
      derivative of ``t ↦ R_x(tv)`` (derivatives by ``jax.jvp`` and ``jax.grad``;
      ``docs/derivations/riemannian-hessians.md#checks``).

    The fitted range of ``t`` is chosen as in :func:`check_gradient` (the first 1.5 decades of
    steps above rounding on which ``log E`` is straight), and the slope must be within 0.1 of 3.
    The check also requires the Hessian to be tangent (``tangency_error`` below ``√ε``) and
    self-adjoint in the metric: ``|⟨Hess u, w⟩ - ⟨u, Hess w⟩| ≤ √ε (‖Hess u‖ + ‖Hess w‖)`` for
    two more random unit tangents ``u``, ``w``. On the Grassmann manifold the cost must be
    invariant under ``Y → YQ`` (a function of the subspace), or its Hessian is not self-adjoint.
    Float64 only, as :func:`check_gradient`.

    Args:
      cost: a JAX function of the point returning a real scalar, twice differentiable.
      manifold: a manifold, or a spec pytree as in :mod:`geometric.optim`.
      x: the point: a float64 array, or a pytree of them.
      key: a JAX PRNG key: the random directions.

    Returns:
      A :class:`CheckResult` with the expected slope 3 and the symmetry error.

    Raises:
      TypeError, ValueError: as :func:`check_gradient`.
      NotImplementedError: a manifold of ``manifold`` has no Riemannian Hessian (a metric of its
        own without ``_ehess_to_rhess``).

    References:
      P.-A. Absil, R. Mahony, J. Trumpf, "An extrinsic look at the Riemannian Hessian", GSI 2013.
      N. Boumal, *An introduction to optimization on smooth manifolds* (2023), §5.5, §6.8 and
      §10.7. Manopt's ``checkhessian``.

    Examples:
      With float64 enabled:

      >>> import jax, jax.numpy as jnp, geometric
      >>> st = geometric.Stiefel(5, 2)
      >>> a = jnp.diag(jnp.arange(1.0, 6.0))
      >>> x = st.random_point(jax.random.PRNGKey(0), jnp.float64)
      >>> result = geometric.check_hessian(lambda x: jnp.sum(jnp.sin(x.T @ a @ x)), st, x,
      ...                                  key=jax.random.PRNGKey(1))
      >>> bool(result), round(result.slope, 1)
      (True, 3.0)
    """
    return _check("check_hessian", 2, cost, manifold, x, key)


# ----------------------------------------------------------------------------------------------
# Input checks


def _check_inputs(fname: str, cost: Any, manifold: ManifoldsTree, x: Any, key: Any) -> Resolved:
    if not callable(cost):
        raise TypeError(f"{fname}: `cost` must be a function of the point; got "
                        f"{type(cost).__name__}.")
    if jax.dtypes.canonicalize_dtype(np.float64) != np.float64:
        raise TypeError(f"{fname} runs in float64, which is off: enable it with "
                        "jax.config.update('jax_enable_x64', True) and pass `x` in float64.")
    if not (isinstance(key, jax.Array) and (
            jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
            or (key.dtype == jnp.uint32 and key.shape == (2,)))):
        raise TypeError(f"{fname}: `key` must be a JAX PRNG key (jax.random.PRNGKey(0) or "
                        f"jax.random.key(0)); got {_describe(key)}.")
    try:
        r = resolve(fname, manifold, x)
    except ValueError as e:  # the spec's messages speak of the optimizers' arguments
        raise ValueError(str(e).replace("`manifolds`", "`manifold`").replace("`params`", "`x`")
                         ) from None
    for m, path, leaf in zip(r.manifolds, r.paths, r.flatten("x", x)):
        argname = f"x['{path}']" if path else "x"
        if isinstance(leaf, jax.core.Tracer):
            raise TypeError(f"{fname}: `{argname}` must be a concrete array; got a tracer "
                            "(inside jit or another transformation). Call the check outside.")
        if not isinstance(leaf, (jax.Array, np.ndarray)) or leaf.dtype != np.float64:
            raise TypeError(f"{fname}: `{argname}` must be a float64 array (the check compares "
                            "costs that differ by little more than rounding, which float32 cannot "
                            f"resolve); got {_describe(leaf)}. Enable float64 and pass "
                            "x.astype(jnp.float64).")
        if m is not None:
            m.check_point(jnp.asarray(leaf), argname=argname, fname=fname)
    out = jax.eval_shape(cost, x)
    if not (isinstance(out, jax.ShapeDtypeStruct) and out.shape == () and out.dtype == np.float64):
        got = (f"shape {out.shape}, dtype {out.dtype}" if isinstance(out, jax.ShapeDtypeStruct)
               else type(out).__name__)
        raise TypeError(f"{fname}: `cost` must return a real float64 scalar; got {got}.")
    return r


def _describe(a: Any) -> str:
    if isinstance(a, (jax.Array, np.ndarray)):
        return f"{type(a).__name__} of dtype {a.dtype} and shape {tuple(a.shape)}"
    return type(a).__name__


# ----------------------------------------------------------------------------------------------
# The product of the leaves' manifolds (None: Euclidean)


class _Product:
    """The methods the checks use, leaf by leaf over ``x`` (None: a Euclidean leaf), on stacks of
    tangents: every tree but ``x`` has one leading axis more than ``x``, and :meth:`inner` returns
    one number per entry of that axis."""

    def __init__(self, r: Resolved):
        self.r = r

    def leaves(self, tree: Any) -> list[Any]:
        return self.r.flatten("x", tree)

    def tree(self, leaves: list[Any]) -> Any:
        return self.r.unflatten(leaves)

    def map(self, fn: Callable[..., jax.Array], euclidean: Callable[..., jax.Array], x: Any,
            *stacks: Any) -> list[jax.Array]:
        """``fn(m, x, *leaves)`` per leaf, ``x`` broadcast along the stacks' leading axis."""
        out = []
        for m, xi, *leaves in zip(self.r.manifolds, self.leaves(x), *map(self.leaves, stacks)):
            xi = jnp.broadcast_to(xi, leaves[0].shape)
            out.append(fn(m, xi, *leaves) if m is not None else euclidean(xi, *leaves))
        return out

    def inner(self, x: Any, u: Any, v: Any) -> jax.Array:
        values = self.map(lambda m, x, u, v: m.inner(x, u, v), lambda x, u, v: u * v, x, u, v)
        return jnp.sum(jnp.stack([jnp.sum(a.reshape(a.shape[0], -1), axis=1) for a in values]),
                       axis=0)

    def unit_tangents(self, key: jax.Array, x: Any, count: int) -> Any:
        """``count`` random tangents at ``x``, stacked, each of norm 1 over the product."""
        def tangent(m: AbstractManifold | None, leaf: jax.Array, k: jax.Array) -> jax.Array:
            if m is None:
                return jax.random.normal(k, leaf.shape, leaf.dtype)
            return m.random_tangent(k, leaf)

        keys = jax.random.split(key, (len(self.r.manifolds), count))
        d = self.tree([jax.vmap(functools.partial(tangent, m, leaf))(ks)
                       for m, ks, leaf in zip(self.r.manifolds, keys, self.leaves(x))])
        norm = jnp.sqrt(self.inner(x, d, d))
        return jax.tree.map(lambda a: a / norm.reshape(-1, *(1,) * (a.ndim - 1)), d)

    def tangency_error(self, x: Any, r: Any) -> jax.Array:
        normal = self.map(lambda m, x, r: r - m.project(x, r), lambda x, r: jnp.zeros_like(r),
                          x, r)
        size = sum(jnp.sum(a * a) for a in self.leaves(r))
        return jnp.sqrt(sum(jnp.sum(a * a) for a in normal) / jnp.where(size > 0, size, 1))

    def rgrad(self, x: Any, egrad: Any) -> Any:
        return self.tree(self.map(lambda m, x, g: m.egrad_to_rgrad(x, g), lambda x, g: g,
                                  x, egrad))

    def rhess(self, x: Any, egrad: Any, ehess: Any, v: Any) -> Any:
        return self.tree(self.map(lambda m, *a: m.ehess_to_rhess(*a), lambda x, g, h, v: h,
                                  x, egrad, ehess, v))

    def curve(self, x: Any, v: Any, accelerations: list[jax.Array | None], t: jax.Array) -> Any:
        """``c(t)`` for one unstacked ``v``: exp, or the retraction along ``tv - ½t²a`` (``a``
        None: ``tv``)."""
        points = []
        for m, xi, vi, a in zip(self.r.manifolds, self.leaves(x), self.leaves(v), accelerations):
            if m is None:
                points.append(xi + t * vi)
            elif "exp" in m.capabilities:
                points.append(m.exp(xi, t * vi))
            else:
                points.append(m.retract(xi, t * vi if a is None else t * vi - 0.5 * t * t * a))
        return self.tree(points)

    def manifold_errors(self, x: Any) -> list[jax.Array | None]:
        return [None if m is None else jnp.max(m.manifold_error(xi), initial=0.0)
                for m, xi in zip(self.r.manifolds, self.leaves(x))]


def _retraction_acceleration(m: AbstractManifold, x: jax.Array, v: jax.Array) -> jax.Array:
    """The covariant acceleration at 0 of ``c(t) = R_x(tv)``, from the retraction and the metric.

    In the chart ``φ(s) = R_x(s)`` of ``T_x`` the curve is the straight line ``s = tv``, whose
    acceleration is ``Γ(v, v)``: the Riesz representative at ``x`` (``Dφ(0)`` is the identity)
    of the covector ``w ↦ Γ_w(v, v) = ∂_v g_vw - ½∂_w g_vv``, ``g_pq(s) = ⟨Dφ(s)p, Dφ(s)q⟩`` in
    the metric at ``φ(s)``. With ``F(y, p, q)`` the formula of ``inner`` (symmetrised in ``p``,
    ``q``, bilinear), the chain rule and the symmetry of ``D²φ`` leave

        Γ_w(v, v) = D_yF[v](v, w) - ½ D_yF[w](v, v) + F(x, c''(0), w),

    derivatives of order two at most. ``c''(0)`` is the mean of ``c''(±h)``: a user's retraction
    written with ``‖v‖`` has a true second derivative at 0 that its code need not give (ours are
    functions of ``‖v‖²``).
    """
    def inner(y: jax.Array, p: jax.Array, q: jax.Array) -> jax.Array:
        return 0.5 * jnp.sum(m.inner(y, p, q) + m.inner(y, q, p))

    def velocity(t: jax.Array) -> jax.Array:
        return jax.jvp(lambda t: m.retract(x, t * v), (t,), (jnp.ones_like(t),))[1]

    h = jnp.asarray([_ACCELERATION_STEP, -_ACCELERATION_STEP], x.dtype)
    acceleration = jnp.mean(jax.vmap(lambda t: jax.jvp(velocity, (t,), (jnp.ones_like(t),))[1])(h),
                            axis=0)

    def covector(w: jax.Array) -> jax.Array:  # the terms linear in w
        return jax.jvp(lambda y: inner(y, v, w), (x,), (v,))[1] + inner(x, acceleration, w)

    lowered = jax.grad(covector)(jnp.zeros_like(x)) - 0.5 * jax.grad(lambda y: inner(y, v, v))(x)
    return m.egrad_to_rgrad(x, lowered)


# ----------------------------------------------------------------------------------------------
# The check


def _evaluate(product: _Product, cost: Callable[[Any], jax.Array], order: int, x: Any,
              key: jax.Array) -> dict[str, Any]:
    """Everything the check needs from JAX, in one jitted computation: the directions (``v``,
    and for the Hessian ``u``, ``w``) are one stack, their Hessian-vector products one ``vmap``,
    the inner products one stacked call."""
    d = product.unit_tangents(key, x, 1 if order == 1 else 3)
    f0, egrad = jax.value_and_grad(cost)(x)
    rgrad = product.rgrad(x, egrad)
    v = jax.tree.map(lambda a: a[0], d)
    one = jax.tree.map(lambda a: a[:1], d)
    out: dict[str, Any] = {"f0": f0, "errors": product.manifold_errors(x)}
    accelerations: list[jax.Array | None] = [None] * len(product.r.manifolds)
    if order == 1:
        out["slope1"] = product.inner(x, jax.tree.map(lambda a: a[None], rgrad), one)[0]
        out["tangency"] = product.tangency_error(x, jax.tree.map(lambda a: a[None], rgrad))
        slope2 = jnp.zeros_like(f0)
    else:
        def hess(direction: Any) -> Any:
            g, h = jax.jvp(jax.grad(cost), (x,), (direction,))
            return product.rhess(x, g, h, direction)

        hd = jax.vmap(hess)(d)  # Hess v, Hess u, Hess w
        # ⟨grad, v⟩, ⟨Hess v, v⟩, ⟨Hess u, w⟩, ⟨u, Hess w⟩, ‖Hess u‖², ‖Hess w‖²
        left = jax.tree.map(lambda r, h, a: jnp.stack([r, h[0], h[1], a[1], h[1], h[2]]),
                            rgrad, hd, d)
        right = jax.tree.map(lambda h, a: jnp.stack([a[0], a[0], a[2], h[2], h[1], h[2]]), hd, d)
        products = product.inner(x, left, right)
        out["slope1"], slope2 = products[0], products[1]
        out["symmetry"] = products[2] - products[3]
        out["symmetry_scale"] = jnp.sqrt(products[4]) + jnp.sqrt(products[5])
        out["tangency"] = product.tangency_error(x, jax.tree.map(lambda h: h[:1], hd))
        accelerations = [None if m is None or "exp" in m.capabilities
                         else _retraction_acceleration(m, xi, vi)
                         for m, xi, vi in zip(product.r.manifolds, product.leaves(x),
                                              product.leaves(v))]
    steps = jnp.asarray(_STEPS, jnp.float64)
    values = jax.vmap(lambda t: cost(product.curve(x, v, accelerations, t)))(steps)
    model = f0 + steps * out["slope1"] + 0.5 * steps * steps * slope2
    out["remainder"] = jnp.abs(values - model)
    out["floor"] = _FLOOR * float(np.finfo(np.float64).eps) * (jnp.abs(f0) + jnp.abs(values))
    return out


def _fit(t: np.ndarray, e: np.ndarray, floor: np.ndarray, expected: int
         ) -> tuple[bool, float, tuple[float, float], str]:
    """The slope on the first straight range of steps above rounding (see check_gradient)."""
    above = np.isfinite(e) & (e > floor)
    log_t, log_e = np.log10(t), np.log10(np.where(above, e, 1.0))
    first = None
    for i in range(len(t) - _WINDOW + 1):
        window = slice(i, i + _WINDOW)
        if not above[window].all():
            continue
        slope, intercept = np.polyfit(log_t[window], log_e[window], 1)
        misfit = np.max(np.abs(log_e[window] - (slope * log_t[window] + intercept)))
        fitted = (float(slope), (float(t[i]), float(t[i + _WINDOW - 1])))
        if first is None:
            first = fitted
        if misfit <= _RESIDUAL:
            ok = abs(slope - expected) <= _SLOPE_TOL
            return ok, *fitted, (f"slope {slope:.3f} on t in [{t[i]:.2g}, {t[i + _WINDOW - 1]:.2g}]"
                                 f", {'within' if ok else 'not within'} {_SLOPE_TOL} of {expected}")
    if first is None:
        if np.isfinite(e[: _WINDOW]).all():
            return (True, math.nan, (math.nan, math.nan),
                    "the remainder is at rounding level for every t: the model is exact")
        return (False, math.nan, (math.nan, math.nan),
                "the cost is not finite along the curve at the smallest steps")
    return (False, *first, ("the remainder follows no power law on any 1.5 decades of t above "
                            f"rounding (slope {first[0]:.3f} on the first)"))


def _check(fname: str, order: int, cost: Callable[[Any], jax.Array], manifold: ManifoldsTree,
           x: Any, key: jax.Array) -> CheckResult:
    r = _check_inputs(fname, cost, manifold, x, key)
    product = _Product(r)
    out = jax.tree.map(np.asarray, jax.jit(
        lambda x, key: _evaluate(product, cost, order, x, key))(x, key))
    # Whether x is on the manifold, computed in the same program; verify_point says why not.
    for m, path, leaf, error in zip(r.manifolds, r.paths, r.flatten("x", x), out["errors"]):
        if m is not None and not error <= math.sqrt(float(np.finfo(np.float64).eps)
                                                     * math.prod(m.shape)):
            argname = f"x['{path}']" if path else "x"
            raise ValueError(f"{fname}: `{argname}` is not a point of {m!r}: "
                             f"{m.verify_point(leaf)[1]}.")
    expected = order + 1
    passed, slope, t_range, reason = _fit(_STEPS, out["remainder"], out["floor"], expected)
    tangency = float(out["tangency"])
    symmetry = None
    if not tangency <= _RELATIVE_TOL:
        passed, reason = False, f"{reason}; not tangent: relative normal part {tangency:.2g}"
    if order == 2:
        symmetry = float(out["symmetry"])
        if not abs(symmetry) <= _RELATIVE_TOL * float(out["symmetry_scale"]):
            passed = False
            reason = (f"{reason}; not self-adjoint: ⟨Hess u, w⟩ - ⟨u, Hess w⟩ = {symmetry:.2g}"
                      f" for ‖Hess u‖ + ‖Hess w‖ = {float(out['symmetry_scale']):.2g}")
    return CheckResult(passed=bool(passed), slope=slope, expected_slope=float(expected),
                       t_range=t_range, tangency_error=tangency, symmetry_error=symmetry,
                       reason=reason, t=_STEPS.copy(), remainder=out["remainder"])
