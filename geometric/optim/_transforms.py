r"""The pieces the optimizers are chained from; each is an optax transformation usable alone.

Every piece takes the ``manifolds`` spec, resolves it against the ``params`` it is given, works on
the manifold leaves and hands the Euclidean leaves to the optax transformation they would get
without manifolds (or passes them through). All but :func:`retract` return tangent vectors at
``params``; :func:`retract` turns a tangent step into ``R_x(u) - x`` and must come last.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from .. import _global_tangent
from .._core.manifold import AbstractManifold
from .._core.tree import ManifoldsTree, check_spec, resolve
from ._base import (check_stabilize_every, manifold_transform, map_manifolds, resolve_update,
                    stabilize, transport_to)
from ._placement import check_placements, check_start, empty_placement, placement

__all__ = ["ManifoldAdamState", "RetractState", "RiemannianAdamState", "RiemannianSGDState",
           "project_params", "project_to_tangent", "retract", "riemannian_trace",
           "scale_by_global_tangent_adam", "scale_by_riemannian_adam", "to_riemannian_gradients"]

# The states' field `count` shadows tuple.count, hence the type: ignore; the name is optax's.


def _stateless(fname: str, manifolds: ManifoldsTree, leaf: Any
               ) -> optax.GradientTransformationExtraArgs:
    """A stateless piece applying ``leaf(m, x, u)`` to the manifold leaves of the updates."""
    check_spec(fname, manifolds)

    def update_fn(updates: optax.Updates, state: optax.OptState, params: optax.Params | None = None,
                  **extra_args: Any) -> tuple[optax.Updates, optax.OptState]:
        r = resolve_update(fname, manifolds, params)
        (out,) = map_manifolds(r, lambda m, x, u: (leaf(m, x, u),), params, updates, outputs=1,
                               euclidean=lambda x, u: (u,))
        return out, state

    return optax.GradientTransformationExtraArgs(lambda params: optax.EmptyState(), update_fn)


def to_riemannian_gradients(manifolds: ManifoldsTree) -> optax.GradientTransformationExtraArgs:
    r"""Euclidean gradients to Riemannian gradients: ``g ↦ grad f(x)``, the Riesz map of the metric.

    .. math:: u = \operatorname{egrad\_to\_rgrad}_x(g) \quad(= P_x(g) \text{ for the Euclidean metric})

    Euclidean leaves pass through. The transformation form of :func:`geometric.riemannian_gradient`.
    """
    return _stateless("to_riemannian_gradients", manifolds, lambda m, x, g: m.egrad_to_rgrad(x, g))


def project_to_tangent(manifolds: ManifoldsTree) -> optax.GradientTransformationExtraArgs:
    r"""Project updates onto the tangent space at ``params``: ``u ↦ P_x(u)``.

    Puts back on ``T_x`` what an elementwise transformation (Adam's scaling, weight decay) took off
    it. Euclidean leaves pass through.
    """
    return _stateless("project_to_tangent", manifolds, lambda m, x, u: m.project(x, u))


# ----------------------------------------------------------------------------------------------
# Moments


class RiemannianSGDState(NamedTuple):
    """State of :func:`riemannian_trace` (the momentum of :func:`riemannian_sgd`)."""

    momentum: optax.Updates  # like params: manifold leaves tangent at the last params; else masked
    previous: optax.Updates  # the last params (manifold leaves), for the lazy transport
    euclidean: optax.OptState  # optax.trace's state for the Euclidean leaves


def riemannian_trace(manifolds: ManifoldsTree, decay: float, nesterov: bool = False
                     ) -> optax.GradientTransformationExtraArgs:
    r"""Heavy-ball or Nesterov momentum of Riemannian gradients, transported along the iterates.

    .. math::
        \xi_t = \operatorname{grad} f(x_t), \qquad
        m_t = \xi_t + \beta\, \mathcal{T}_{x_{t-1}\to x_t}(m_{t-1}), \qquad
        u_t = m_t \ \text{ or, with Nesterov, }\ u_t = \xi_t + \beta\, m_t

    ``β`` is ``decay``; ``u_t`` is tangent at ``x_t``. The transport (by projection onto
    ``T_{x_t}``) is applied lazily, at the update that is given ``x_t``. Euclidean leaves get
    ``optax.trace(decay, nesterov)``, bit for bit.
    """
    def update_leaf(m: AbstractManifold, x: jax.Array, g: jax.Array, buf: jax.Array,
                    prev: jax.Array) -> tuple[Any, ...]:
        (beta,) = _cast(x, decay)
        xi = m.egrad_to_rgrad(x, g)
        buf = xi + beta * transport_to(m, prev, x, buf)
        return xi + beta * buf if nesterov else buf, buf, x

    return manifold_transform("riemannian_trace", manifolds, optax.trace(decay, nesterov),
                              RiemannianSGDState, lambda m, x: (jnp.zeros_like(x), x),
                              update_leaf)


class RiemannianAdamState(NamedTuple):
    """State of :func:`scale_by_riemannian_adam`."""

    count: jax.Array  # type: ignore[assignment]  # shape=(), int32: updates so far
    mu: optax.Updates  # like params: manifold leaves: first moment, tangent at the last params
    nu: optax.Updates  # like params: manifold leaves: elementwise second moment (ambient coords)
    previous: optax.Updates  # the last params (manifold leaves), for the lazy transport
    euclidean: optax.OptState  # optax.scale_by_adam's state for the Euclidean leaves


def scale_by_riemannian_adam(manifolds: ManifoldsTree, b1: float = 0.9, b2: float = 0.999,
                             eps: float = 1e-8) -> optax.GradientTransformationExtraArgs:
    r"""Adam's scaling of Riemannian gradients, first moment transported: a tangent direction.

    .. math::
        \xi_t &= \operatorname{grad} f(x_t) \\
        m_t &= \beta_1\, \mathcal{T}_{x_{t-1}\to x_t}(m_{t-1}) + (1 - \beta_1)\, \xi_t \\
        v_t &= \beta_2\, v_{t-1} + (1 - \beta_2)\, \xi_t \odot \xi_t \\
        u_t &= P_{x_t}\big(\hat m_t \oslash (\sqrt{\hat v_t} + \epsilon)\big), \qquad
            \hat m_t = m_t / (1 - \beta_1^t), \quad \hat v_t = v_t / (1 - \beta_2^t)

    The second moment is elementwise in the ambient coordinates, which mean the same at every
    point, so it needs no transport (see :func:`riemannian_adam`). The transport of ``m`` is
    applied lazily, at the update that is given ``x_t``. Euclidean leaves get
    ``optax.scale_by_adam(b1, b2, eps)``, bit for bit.
    """
    def update_leaf(m: AbstractManifold, x: jax.Array, g: jax.Array, mu: jax.Array, nu: jax.Array,
                    prev: jax.Array, *, count: jax.Array) -> tuple[Any, ...]:
        beta1, beta2, epsilon = _cast(x, b1, b2, eps)
        xi = m.egrad_to_rgrad(x, g)
        mu = beta1 * transport_to(m, prev, x, mu) + (1 - beta1) * xi
        nu = beta2 * nu + (1 - beta2) * xi * xi
        m_hat, v_hat = mu / (1 - beta1**count), nu / (1 - beta2**count)
        return m.project(x, m_hat / (jnp.sqrt(v_hat) + epsilon)), mu, nu, x

    return manifold_transform("scale_by_riemannian_adam", manifolds,
                              optax.scale_by_adam(b1, b2, eps), RiemannianAdamState,
                              lambda m, x: (jnp.zeros_like(x), jnp.zeros_like(x), x), update_leaf)


class ManifoldAdamState(NamedTuple):
    """State of :func:`scale_by_global_tangent_adam`."""

    count: jax.Array  # type: ignore[assignment]  # shape=(), int32: updates so far
    mu: optax.Updates  # like params: the first moment's complement part Y⊥B_m, rotated
    mu_a: optax.Updates  # (..., p, p) per manifold leaf: the first moment's frame block A_m
    nu_a: optax.Updates  # (..., p, p) per manifold leaf: second moment of A (elementwise)
    nu_b: optax.Updates  # (..., p) per manifold leaf: second moment of B (mean square per column)
    placed: optax.Updates  # per manifold leaf: where the last update put the point (with
    # global_tangent_adam's retraction; optim._placement), zeros for the piece alone
    euclidean: optax.OptState  # optax.adam's state for the Euclidean leaves


GLOBAL_RETRACTIONS = ("cayley", "exp")


def check_global_retraction(fname: str, retraction: str) -> None:
    if retraction not in GLOBAL_RETRACTIONS:
        raise ValueError(f"{fname}: `retraction` must be 'cayley' or 'exp'; got {retraction!r}.")


def check_frames(fname: str, manifolds: list[AbstractManifold]) -> None:
    for m in manifolds:
        if not _global_tangent.supports(m):
            have = ", ".join(frame_manifolds())
            raise TypeError(f"{fname}: needs manifolds whose points are orthonormal frames (the "
                            f"capability 'frame'; in geometric: {have}); got {m!r}.")


def frame_manifolds() -> list[str]:
    """The manifolds of :mod:`geometric` with the capability ``"frame"``, by name."""
    import geometric  # the package that imports this module: its names, read when needed
    classes = [getattr(geometric, name) for name in geometric.__all__]
    return sorted(c.__name__ for c in classes if isinstance(c, type)
                  and issubclass(c, AbstractManifold) and "frame" in c.capabilities)


def scale_by_global_tangent_adam(learning_rate: optax.ScalarOrSchedule, manifolds: ManifoldsTree,
                                 b1: float = 0.9, b2: float = 0.99, eps: float = 3e-7,
                                 retraction: str = "cayley") -> optax.GradientTransformationExtraArgs:
    r"""Brantner's Adam in the global tangent space, up to the retraction: the step ``W_t``.

    Returns the tangent step ``W_t`` of :func:`global_tangent_adam` (learning rate included)
    and rotates the first moment ``M_t`` by the ``Q_t = cay(Ω(Y_t, W_t))`` (or ``exp``) that
    ``retract(manifolds, method=retraction)`` then applies to the point. The learning rate is
    part of this piece because ``Q_t`` depends on the step itself; a transformation between this
    piece and the retraction that rescales ``W_t`` moves the point by the rescaled step while
    ``M_t`` follows the unscaled one (the point stays on the manifold). Euclidean leaves get
    ``optax.adam(learning_rate, b1, b2, eps)``, bit for bit.

    Chained with ``retract``, the rotation is computed twice (for ``M`` here, for the point
    there); :func:`global_tangent_adam` does both in one low-rank application.
    """
    return global_tangent_transform("scale_by_global_tangent_adam", learning_rate, manifolds, b1,
                                    b2, eps, retraction, retract_too=False, stabilize_every=None,
                                    check_points=False)


def global_tangent_transform(fname: str, learning_rate: optax.ScalarOrSchedule,
                             manifolds: ManifoldsTree, b1: float, b2: float, eps: float,
                             retraction: str, *, retract_too: bool, stabilize_every: int | None,
                             check_points: bool) -> optax.GradientTransformationExtraArgs:
    """:func:`scale_by_global_tangent_adam`, or with ``retract_too`` the whole optimizer (the
    step and the retraction share the rotation of ``[Y, M]``; ``check_points`` as in
    :func:`retract`)."""
    check_global_retraction(fname, retraction)
    check_stabilize_every(fname, stabilize_every)
    check_frames(fname, check_spec(fname, manifolds))

    def check_init(r: Any, params: optax.Params) -> jax.Array | None:
        check_frames(fname, [m for m in r.manifolds if m is not None])
        return check_start(fname, r, params) if retract_too and check_points else None

    def init_leaf(m: AbstractManifold, x: jax.Array) -> tuple[jax.Array, ...]:
        return (*_global_tangent.init_moments(m, x), empty_placement(x))

    def update_leaf(m: AbstractManifold, x: jax.Array, g: jax.Array, mu: jax.Array,
                    mu_a: jax.Array, nu_a: jax.Array, nu_b: jax.Array, placed: jax.Array, *,
                    count: jax.Array) -> tuple[jax.Array, ...]:
        lr, beta1, beta2, delta = _cast(x, _value(learning_rate, count - 1), b1, b2, eps)
        w, y, mu, mu_a, nu_a, nu_b = _global_tangent.step(
            m, x, g, mu, mu_a, nu_a, nu_b, learning_rate=lr, b1=beta1, b2=beta2, eps=delta,
            count=count, retraction=retraction)
        if retract_too:
            y = stabilize(m, y, count, stabilize_every, False)
            w, placed = y - x, placement(x, y)
        return w, mu, mu_a, nu_a, nu_b, placed

    def check_update(r: Any, params: optax.Params, state: ManifoldAdamState) -> jax.Array | None:
        if retract_too and check_points:
            return check_placements(fname, r, params, state.placed, state.count + 1)
        return None

    return manifold_transform(fname, manifolds, optax.adam(learning_rate, b1, b2, eps),
                              ManifoldAdamState, init_leaf, update_leaf, check_init=check_init,
                              check_update=check_update)


def _value(hyperparameter: optax.ScalarOrSchedule, count: jax.Array) -> Any:
    """A hyperparameter or schedule at step ``count``."""
    return hyperparameter(count) if callable(hyperparameter) else hyperparameter


def _cast(x: jax.Array, *values: Any) -> tuple[jax.Array, ...]:
    """Hyperparameters in ``x``'s dtype, so float64 schedules cannot promote float32 parameters."""
    return tuple(jnp.asarray(v, x.dtype) for v in values)


# ----------------------------------------------------------------------------------------------
# The retraction, last


class RetractState(NamedTuple):
    """State of :func:`retract`."""

    count: jax.Array  # type: ignore[assignment]  # shape=(), int32: updates so far
    placed: optax.Updates  # like params: manifold leaves: where the last update put the point
    # (a sample of entries and their rounding bounds, optim._placement); else masked


def retract(manifolds: ManifoldsTree, *, method: str | None = None,
            stabilize_every: int | None = None, check_points: bool = True
            ) -> optax.GradientTransformationExtraArgs:
    r"""The last transformation: tangent steps to point differences, ``u ↦ R_x(u) - x``.

    .. math::
        x_{t+1} = x_t + (R_{x_t}(u_t) - x_t) = R_{x_t}(u_t)

    so ``optax.apply_updates(params, updates)`` lands on the manifold. Nothing may follow it in a
    chain: ``R_x(u) - x`` is a difference of two points, not a tangent vector, and scaling it
    (``optax.scale``, ``reduce_on_plateau``, a learning rate), adding to it
    (``add_decayed_weights``) or clipping it moves ``params`` off the manifold. Put such
    transformations before ``retract``, where they act on tangent vectors. Euclidean leaves pass
    through, so the rule costs them nothing.

    With ``check_points`` (the default) no constraint switches off without a word: ``init``
    refuses a starting point off its manifold, naming its path, the manifold and the error (use
    :func:`project_params`) — eagerly, or under ``jit`` as an error raised when the program runs;
    and each update checks that ``params`` is where the last one put it, so that a
    transformation after ``retract`` is an error naming the leaf at the next update, not a drift
    off the manifold. The check reads a fixed sample of entries per leaf (``optim._placement``).

    Args:
      manifolds: the spec (see :mod:`geometric.optim`).
      method: None: each manifold's own retraction. ``"cayley"`` or ``"exp"``: the frame
        rotation ``Q = cay(Ω(x, u))`` or ``exp(Ω(x, u))`` of :func:`global_tangent_adam`
        (manifolds with the capability ``"frame"``).
      stabilize_every: re-project manifold leaves every this many updates (``project_point``);
        None: every 100 updates for retractions that do not correct themselves (rotations).
      check_points: check the start and each update's point (above); False for a start off the
        manifold, or ``params`` changed between updates, on purpose.

    Returns:
      An optax ``GradientTransformationExtraArgs`` with state :class:`RetractState`.

    Raises:
      ValueError: ``update`` without ``params``; a starting point off its manifold, or a point
        moved since the last update (under ``jit``: when the program runs); an unknown
        ``method``; ``stabilize_every < 1``.
    """
    fname = "retract"
    check_stabilize_every(fname, stabilize_every)
    if method is not None:
        check_global_retraction(fname, method)
        check_frames(fname, check_spec(fname, manifolds))
    else:
        check_spec(fname, manifolds)

    def init_fn(params: optax.Params) -> optax.OptState:
        r = resolve(fname, manifolds, params)
        if method is not None:
            check_frames(fname, [m for m in r.manifolds if m is not None])
        count = check_start(fname, r, params) if check_points else jnp.zeros([], jnp.int32)
        (placed,) = map_manifolds(r, lambda m, x: (empty_placement(x),), params, outputs=1)
        return RetractState(count, placed)

    def update_fn(updates: optax.Updates, state: optax.OptState, params: optax.Params | None = None,
                  **extra_args: Any) -> tuple[optax.Updates, optax.OptState]:
        r = resolve_update(fname, manifolds, params)
        count = state.count + 1
        if check_points:
            count += check_placements(fname, r, params, state.placed, count)

        def leaf(m: AbstractManifold, x: jax.Array, u: jax.Array, placed: jax.Array
                 ) -> tuple[jax.Array, jax.Array]:
            if method is None:
                y = stabilize(m, m.retract(x, u), count, stabilize_every, m.self_correcting)
            else:
                y = stabilize(m, _global_tangent.retract(m, x, u, method), count,
                              stabilize_every, self_correcting=False)
            return y - x, placement(x, y)

        out, placed = map_manifolds(r, leaf, params, updates, state.placed, outputs=2,
                                    euclidean=lambda x, u, p: (u, p))
        return out, RetractState(count, placed)

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def project_params(params: optax.Params, manifolds: ManifoldsTree) -> optax.Params:
    """``params`` with each manifold leaf replaced by the nearest point of its manifold.

    For a starting point that is not on the manifold (an unconstrained initializer such as
    ``lecun_normal``), before ``init``: ``m.project_point`` (for matrix manifolds the polar
    factor). Euclidean leaves are returned unchanged.

    Examples:
      >>> import jax.numpy as jnp, geometric
      >>> p = geometric.optim.project_params({"w": jnp.array([3.0, 4.0])}, geometric.Sphere(2))
      >>> print(p["w"])
      [0.6 0.8]
    """
    r = resolve("project_params", manifolds, params)
    (out,) = map_manifolds(r, lambda m, x: (m.project_point(x),), params, outputs=1,
                           euclidean=lambda x: (x,))
    return out
