r"""Optax optimizers for parameters on manifolds.

Every optimizer here is an optax ``GradientTransformationExtraArgs`` taking a ``manifolds`` pytree
that mirrors ``params`` (a manifold or None per leaf, or per subtree). ``update(grads, state,
params)`` takes Euclidean gradients (from ``jax.grad``) and returns updates with
``optax.apply_updates(params, updates)`` equal to the retracted point, so the optimizers drop into
any optax training loop, ``optax.chain`` (as the last transformation) and
``optax.inject_hyperparams``; ``learning_rate`` may be a schedule. State is a plain pytree of
NamedTuples and arrays (checkpointable).

Float32 drift. QR, polar and normalising retractions correct themselves every step. Rotations
(Stiefel's ``"cayley"`` and ``"exp"``, and every ``manifold_adam`` step) carry rounding errors along:
on St(256, 64), 10⁴ float32 Adam steps reach ``‖YᵀY − I‖_F ≈ 1.6e-5``. ``stabilize_every=k``
re-projects manifold leaves (``project_point``, the polar factor) every ``k`` updates; the default
``None`` does so every 100 updates for the leaves that need it, which keeps ``‖YᵀY − I‖_F`` below
2e-6, the level of a fresh QR, at the cost of one O(np²) projection per 100 steps.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax import lax
from jax.typing import ArrayLike

from . import _global_tangent
from ._core.manifold import AbstractManifold
from ._core.tree import ManifoldsTree, flatten_manifolds, is_manifold_leaf
from ._gradient import riemannian_gradient

__all__ = ["riemannian", "riemannian_sgd", "riemannian_adam", "manifold_adam", "RiemannianState",
           "RiemannianSGDState", "RiemannianAdamState", "ManifoldAdamState"]

DEFAULT_STABILIZE_EVERY = 100


# ==============================================================================================
# Shared plumbing


def _check_stabilize_every(fname: str, stabilize_every: int | None) -> None:
    if stabilize_every is None:
        return
    if isinstance(stabilize_every, bool) or not isinstance(stabilize_every, int):
        raise TypeError(f"{fname}: `stabilize_every` must be an int or None; got "
                        f"{type(stabilize_every).__name__}.")
    if stabilize_every < 1:
        raise ValueError(f"{fname}: `stabilize_every` must be ≥ 1; got {stabilize_every}.")


def _check_params(fname: str, params: optax.Params | None) -> None:
    if params is None:
        raise ValueError(f"{fname}: `update` needs `params` (the current point, to retract from): "
                         "call `update(grads, state, params)`.")


def _stabilize(m: AbstractManifold, y: jax.Array, count: jax.Array,
               stabilize_every: int | None) -> jax.Array:
    """Re-project ``y`` onto ``m`` when the ``count``-th update (1-based) is due."""
    every = stabilize_every
    if every is None:
        if m.self_correcting:
            return y
        every = DEFAULT_STABILIZE_EVERY
    return lax.cond(count % every == 0, m.project_point, lambda y: y, y)


def _check_points(fname: str, manifolds: ManifoldsTree, params: optax.Params) -> None:
    _, leaves, flat = flatten_manifolds(fname, manifolds, params=params)
    for m, x in zip(leaves, flat["params"]):
        if m is not None:
            m.check_point(x, argname="params", fname=f"{m!r}.init")


def _value(hyperparameter: optax.ScalarOrSchedule, count: jax.Array) -> ArrayLike:
    """A hyperparameter or schedule at step ``count``."""
    return hyperparameter(count) if callable(hyperparameter) else hyperparameter


def _cast(x: jax.Array, *values: ArrayLike) -> tuple[jax.Array, ...]:
    """Hyperparameters in ``x``'s dtype, so float64 schedules cannot promote float32 parameters."""
    return tuple(jnp.asarray(v, x.dtype) for v in values)


def _with_euclidean(fname: str, euclidean: optax.GradientTransformation,
                    riemannian_part: optax.GradientTransformation, manifolds: ManifoldsTree
                    ) -> optax.GradientTransformationExtraArgs:
    """Euclidean leaves to the optax transform ``euclidean``, manifold leaves to ``riemannian_part``.

    ``optax.partition`` runs ``euclidean`` on the Euclidean leaves alone, so they are bit-identical
    to ``euclidean`` used by itself; the other leaves appear to each part as ``optax.MaskedNode``.
    """
    labels = jax.tree.map(lambda m: "euclidean" if m is None else "manifold", manifolds,
                          is_leaf=is_manifold_leaf)
    tx = optax.partition({"euclidean": euclidean, "manifold": riemannian_part}, labels)

    def init_fn(params: optax.Params) -> optax.OptState:
        _check_points(fname, manifolds, params)  # clear errors before optax's
        return tx.init(params)

    def update_fn(updates: optax.Updates, state: optax.OptState, params: optax.Params | None = None,
                  **extra_args: Any) -> tuple[optax.Updates, optax.OptState]:
        _check_params(fname, params)
        flatten_manifolds(fname, manifolds, params=params, grads=updates)
        return tx.update(updates, state, params, **extra_args)

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def _zeros_or_masked(fname: str, manifolds: ManifoldsTree, params: optax.Params) -> optax.Updates:
    treedef, leaves, flat = flatten_manifolds(fname, manifolds, params=params)
    return treedef.unflatten([optax.MaskedNode() if m is None else jnp.zeros_like(x)
                              for m, x in zip(leaves, flat["params"])])


# ==============================================================================================
# Any optax transformation, on manifolds


# The states' field `count` shadows tuple.count, hence the type: ignore; the name is optax's and
# is part of the public state.


class RiemannianState(NamedTuple):
    """State of :func:`riemannian`."""

    count: jax.Array  # type: ignore[assignment]  # shape=(), int32: updates applied so far
    inner: optax.OptState  # the wrapped transformation's state


def riemannian(inner: optax.GradientTransformation, manifolds: ManifoldsTree, *,
               stabilize_every: int | None = None) -> optax.GradientTransformationExtraArgs:
    r"""Run any optax transformation on manifold parameters.

    .. math::
        \xi_t = \operatorname{grad} f(x_t), \qquad u_t = \mathrm{inner}(\xi_t), \qquad
        x_{t+1} = R_{x_t}\big(P_{x_t}(u_t)\big)

    ``grad f`` is the Riemannian gradient (:func:`geometric.riemannian_gradient`), ``u_t`` the
    output of ``inner`` (which includes the learning rate and sign), ``P`` the tangent projection
    and ``R`` the manifold's retraction. Euclidean leaves (manifold None) get ``inner``'s update
    unchanged, so with an elementwise ``inner`` (sgd, adam, ...) they behave exactly as under
    ``inner`` alone; a global ``inner`` (``clip_by_global_norm``) sees Riemannian gradients.

    Args:
      inner: any optax transformation of the gradients, e.g. ``optax.adam(1e-3)``.
      manifolds: pytree mirroring ``params`` (or a prefix of it): a manifold or None per leaf.
      stabilize_every: re-project manifold leaves onto the manifold every this many updates. None:
        every 100 updates, and only for leaves whose retraction does not correct itself.

    Returns:
      An optax ``GradientTransformationExtraArgs``; extra arguments are passed to ``inner``.

    Raises:
      ValueError: ``update`` is called without ``params``; ``stabilize_every < 1``.
      TypeError: a leaf of ``manifolds`` is neither a manifold nor None.

    Notes:
      ``inner``'s state is opaque, so its moments are not transported: they mix gradients from
      past tangent spaces, and the projection ``P`` of each step stands in for the transport.
      :func:`riemannian_sgd` and :func:`riemannian_adam` transport their momentum explicitly.

    References:
      P.-A. Absil, R. Mahony, R. Sepulchre, "Optimization Algorithms on Matrix Manifolds" (2008),
      ch. 4.

    Examples:
      >>> import jax, jax.numpy as jnp, optax, geometric
      >>> sphere = geometric.Sphere(3)
      >>> a = jnp.diag(jnp.array([3.0, 1.0, 2.0]))
      >>> loss = lambda x: x @ a @ x  # minimised by ±e₂, value 1
      >>> opt = geometric.optim.riemannian(optax.sgd(0.1), sphere)
      >>> x = sphere.project_point(jnp.ones(3))
      >>> state = opt.init(x)
      >>> for _ in range(100):
      ...     updates, state = opt.update(jax.grad(loss)(x), state, x)
      ...     x = optax.apply_updates(x, updates)
      >>> print(f"{loss(x):.4f}")
      1.0000
    """
    _check_stabilize_every("riemannian", stabilize_every)
    flatten_manifolds("riemannian", manifolds)
    inner = optax.with_extra_args_support(inner)

    def init_fn(params: optax.Params) -> optax.OptState:
        _check_points("riemannian", manifolds, params)
        return RiemannianState(jnp.zeros([], jnp.int32), inner.init(params))

    def update_fn(updates: optax.Updates, state: optax.OptState, params: optax.Params | None = None,
                  **extra_args: Any) -> tuple[optax.Updates, optax.OptState]:
        _check_params("riemannian", params)
        count = state.count + 1
        rgrads = riemannian_gradient(params, updates, manifolds)
        steps, inner_state = inner.update(rgrads, state.inner, params, **extra_args)
        treedef, leaves, flat = flatten_manifolds("riemannian", manifolds, params=params,
                                                  steps=steps)
        out = []
        for m, x, u in zip(leaves, flat["params"], flat["steps"]):
            if m is None:
                out.append(u)
                continue
            y = _stabilize(m, m.retract(x, m.project(x, u)), count, stabilize_every)
            out.append(y - x)
        return treedef.unflatten(out), RiemannianState(count, inner_state)

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


# ==============================================================================================
# Riemannian SGD with transported momentum


class RiemannianSGDState(NamedTuple):
    """State of the manifold leaves in :func:`riemannian_sgd`."""

    count: jax.Array  # type: ignore[assignment]  # shape=(), int32: updates applied so far
    momentum: optax.Updates  # like params; manifold leaves: tangent at params; others MaskedNode


def riemannian_sgd(learning_rate: optax.ScalarOrSchedule, manifolds: ManifoldsTree,
                   momentum: float = 0.0, nesterov: bool = False, *,
                   stabilize_every: int | None = None) -> optax.GradientTransformationExtraArgs:
    r"""Riemannian (stochastic) gradient descent with heavy-ball or Nesterov momentum.

    .. math::
        \xi_t &= \operatorname{grad} f(x_t) \\
        m_t &= \xi_t + \beta\, \mathcal{T}_{x_{t-1}\to x_t}(m_{t-1}) \\
        d_t &= m_t \quad\text{or, with Nesterov,}\quad d_t = \xi_t + \beta\, m_t \\
        x_{t+1} &= R_{x_t}(-\eta_t\, d_t)

    ``η_t`` is ``learning_rate`` (a float or a schedule of the step count), ``β`` is ``momentum``,
    ``R`` the manifold's retraction and ``T`` its vector transport (the projection onto the new
    tangent space, which keeps the momentum tangent at O(np²) cost). Euclidean leaves (manifold
    None) are handed to ``optax.sgd(learning_rate, momentum, nesterov)`` and are bit-identical to it.

    Args:
      learning_rate: ``η``, a float or an optax schedule.
      manifolds: pytree mirroring ``params`` (or a prefix of it): a manifold or None per leaf.
      momentum: ``β``; 0 is plain Riemannian gradient descent.
      nesterov: use Nesterov momentum.
      stabilize_every: re-project manifold leaves every this many updates; None: every 100 for
        leaves whose retraction does not correct itself.

    Returns:
      An optax ``GradientTransformationExtraArgs``.

    Raises:
      ValueError: ``update`` is called without ``params``; ``stabilize_every < 1``.
      TypeError: a leaf of ``manifolds`` is neither a manifold nor None.

    References:
      P.-A. Absil, R. Mahony, R. Sepulchre, "Optimization Algorithms on Matrix Manifolds" (2008),
      §4.2 and §8.1 (vector transport).
      S. Bonnabel, "Stochastic gradient descent on Riemannian manifolds", IEEE TAC 58 (2013),
      https://arxiv.org/abs/1111.5280.

    Examples:
      >>> import jax, jax.numpy as jnp, optax, geometric
      >>> st = geometric.Stiefel(6, 2)
      >>> a = jnp.diag(jnp.arange(6.0))
      >>> loss = lambda y: -jnp.trace(y.T @ a @ y)  # minimum: -(5 + 4)
      >>> opt = geometric.optim.riemannian_sgd(0.05, st, momentum=0.9)
      >>> y = st.random_point(jax.random.PRNGKey(0))
      >>> state = opt.init(y)
      >>> @jax.jit
      ... def step(y, state):
      ...     updates, state = opt.update(jax.grad(loss)(y), state, y)
      ...     return optax.apply_updates(y, updates), state
      >>> for _ in range(200):
      ...     y, state = step(y, state)
      >>> print(f"{loss(y):.3f}")
      -9.000
    """
    _check_stabilize_every("riemannian_sgd", stabilize_every)
    flatten_manifolds("riemannian_sgd", manifolds)

    def init_fn(params: optax.Params) -> optax.OptState:
        return RiemannianSGDState(jnp.zeros([], jnp.int32),
                                  _zeros_or_masked("riemannian_sgd", manifolds, params))

    def update_fn(updates: optax.Updates, state: optax.OptState, params: optax.Params | None = None
                  ) -> tuple[optax.Updates, optax.OptState]:
        _check_params("riemannian_sgd", params)
        count = state.count + 1
        treedef, leaves, flat = flatten_manifolds("riemannian_sgd", manifolds, params=params,
                                                  grads=updates, momentum=state.momentum)
        out, bufs = [], []
        for m, x, g, buf in zip(leaves, flat["params"], flat["grads"], flat["momentum"]):
            if m is None:
                out.append(g)
                bufs.append(buf)
                continue
            lr, beta = _cast(x, _value(learning_rate, state.count), momentum)
            xi = m.egrad_to_rgrad(x, g)
            buf = xi + beta * buf
            d = xi + beta * buf if nesterov else buf
            y = _stabilize(m, m.retract(x, -lr * d), count, stabilize_every)
            out.append(y - x)
            bufs.append(m.transport(x, y, buf))
        return treedef.unflatten(out), RiemannianSGDState(count, treedef.unflatten(bufs))

    riemannian_part = optax.GradientTransformation(init_fn, update_fn)
    return _with_euclidean("riemannian_sgd", optax.sgd(learning_rate, momentum, nesterov),
                           riemannian_part, manifolds)


# ==============================================================================================
# Riemannian Adam (Bécigneul & Ganea)


class RiemannianAdamState(NamedTuple):
    """State of the manifold leaves in :func:`riemannian_adam`."""

    count: jax.Array  # type: ignore[assignment]  # shape=(), int32: updates applied so far
    mu: optax.Updates  # like params; manifold leaves: first moment, tangent at params
    nu: optax.Updates  # like params; manifold leaves: elementwise second moment (ambient coords)


def riemannian_adam(learning_rate: optax.ScalarOrSchedule, manifolds: ManifoldsTree,
                    b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, *,
                    stabilize_every: int | None = None) -> optax.GradientTransformationExtraArgs:
    r"""Riemannian Adam: Adam with its first moment transported along the iterates.

    .. math::
        \xi_t &= \operatorname{grad} f(x_t) \\
        m_t &= \beta_1\, \mathcal{T}_{x_{t-1}\to x_t}(m_{t-1}) + (1 - \beta_1)\, \xi_t \\
        v_t &= \beta_2\, v_{t-1} + (1 - \beta_2)\, \xi_t \odot \xi_t \\
        \hat m_t &= m_t / (1 - \beta_1^t), \qquad \hat v_t = v_t / (1 - \beta_2^t) \\
        x_{t+1} &= R_{x_t}\Big(-\eta_t\, P_{x_t}\big(\hat m_t \oslash (\sqrt{\hat v_t} + \epsilon)\big)\Big)

    ``η_t`` is ``learning_rate``, ``β₁, β₂, ε`` are ``b1, b2, eps``, ``R`` the manifold's retraction,
    ``P`` the tangent projection and ``T`` the vector transport (projection onto the new tangent
    space). Euclidean leaves are handed to ``optax.adam(learning_rate, b1, b2, eps)`` and are
    bit-identical to it.

    Second moment. Bécigneul & Ganea keep one scalar ``‖ξ‖²`` per manifold factor, which needs no
    transport and makes the step invariant under isometries. Like geoopt, we keep it elementwise,
    as a diagonal preconditioner in the fixed ambient coordinates of ℝ^{n×p}: those coordinates
    mean the same at every point, so ``v`` needs no transport either, and the preconditioned step is
    projected back onto the tangent space before the retraction. This keeps Adam's per-entry
    adaptivity (rows of a weight matrix with different gradient scales), at the price of not
    being invariant under rotations of the embedding.

    Args:
      learning_rate: ``η``, a float or an optax schedule.
      manifolds: pytree mirroring ``params`` (or a prefix of it): a manifold or None per leaf.
      b1: ``β₁``, decay of the first moment.
      b2: ``β₂``, decay of the second moment.
      eps: ``ε``, added to the root of the second moment.
      stabilize_every: re-project manifold leaves every this many updates; None: every 100 for
        leaves whose retraction does not correct itself.

    Returns:
      An optax ``GradientTransformationExtraArgs``.

    Raises:
      ValueError: ``update`` is called without ``params``; ``stabilize_every < 1``.
      TypeError: a leaf of ``manifolds`` is neither a manifold nor None.

    References:
      G. Bécigneul, O.-E. Ganea, "Riemannian adaptive optimization methods", ICLR 2019,
      https://arxiv.org/abs/1810.00760.
      M. Kochurov, R. Karimov, S. Kozlukov, "Geoopt: Riemannian optimization in PyTorch" (2020),
      https://arxiv.org/abs/2005.02819.

    Examples:
      >>> import jax, jax.numpy as jnp, optax, geometric
      >>> st = geometric.Stiefel(6, 2, retraction="cayley")
      >>> a = jnp.diag(jnp.arange(6.0))
      >>> loss = lambda y: -jnp.trace(y.T @ a @ y)  # minimum: -(5 + 4)
      >>> opt = geometric.optim.riemannian_adam(optax.cosine_decay_schedule(0.1, 300), st)
      >>> y = st.random_point(jax.random.PRNGKey(0))
      >>> state = opt.init(y)
      >>> @jax.jit
      ... def step(y, state):
      ...     updates, state = opt.update(jax.grad(loss)(y), state, y)
      ...     return optax.apply_updates(y, updates), state
      >>> for _ in range(300):
      ...     y, state = step(y, state)
      >>> print(f"{loss(y):.3f}")
      -9.000
    """
    _check_stabilize_every("riemannian_adam", stabilize_every)
    flatten_manifolds("riemannian_adam", manifolds)

    def init_fn(params: optax.Params) -> optax.OptState:
        zeros = _zeros_or_masked("riemannian_adam", manifolds, params)
        return RiemannianAdamState(jnp.zeros([], jnp.int32), zeros, zeros)

    def update_fn(updates: optax.Updates, state: optax.OptState, params: optax.Params | None = None
                  ) -> tuple[optax.Updates, optax.OptState]:
        _check_params("riemannian_adam", params)
        count = state.count + 1
        treedef, leaves, flat = flatten_manifolds("riemannian_adam", manifolds, params=params,
                                                  grads=updates, mu=state.mu, nu=state.nu)
        out, mus, nus = [], [], []
        for m, x, g, mu, nu in zip(leaves, flat["params"], flat["grads"], flat["mu"], flat["nu"]):
            if m is None:
                out.append(g)
                mus.append(mu)
                nus.append(nu)
                continue
            lr, beta1, beta2, epsilon = _cast(x, _value(learning_rate, state.count), b1, b2, eps)
            xi = m.egrad_to_rgrad(x, g)
            mu = beta1 * mu + (1 - beta1) * xi
            nu = beta2 * nu + (1 - beta2) * xi * xi
            m_hat = mu / (1 - beta1**count)
            v_hat = nu / (1 - beta2**count)
            d = m.project(x, m_hat / (jnp.sqrt(v_hat) + epsilon))
            y = _stabilize(m, m.retract(x, -lr * d), count, stabilize_every)
            out.append(y - x)
            mus.append(m.transport(x, y, mu))
            nus.append(nu)
        new_state = RiemannianAdamState(count, treedef.unflatten(mus), treedef.unflatten(nus))
        return treedef.unflatten(out), new_state

    riemannian_part = optax.GradientTransformation(init_fn, update_fn)
    return _with_euclidean("riemannian_adam", optax.adam(learning_rate, b1, b2, eps),
                           riemannian_part, manifolds)


# ==============================================================================================
# Adam in the global tangent space (Brantner)


class ManifoldAdamState(NamedTuple):
    """State of the manifold leaves in :func:`manifold_adam`."""

    count: jax.Array  # type: ignore[assignment]  # shape=(), int32: updates applied so far
    mu: optax.Updates  # like params: first moment λ[A_m; B_m] as an N×p tangent at params
    nu_a: optax.Updates  # (..., p, p) per manifold leaf: second moment of A (elementwise)
    nu_b: optax.Updates  # (..., p) per manifold leaf: second moment of B (mean square per column)


_GLOBAL_RETRACTIONS = ("cayley", "exp")


def manifold_adam(learning_rate: optax.ScalarOrSchedule, manifolds: ManifoldsTree,
                  b1: float = 0.9, b2: float = 0.99, eps: float = 3e-7, retraction: str = "cayley",
                  *,
                  stabilize_every: int | None = None) -> optax.GradientTransformationExtraArgs:
    r"""Brantner's Adam in the global tangent space, in O(Np²) time per step for St(N, p).

    A tangent vector ``Δ`` at ``Y`` is read as ``(A, B) = (YᵀΔ, Y⊥ᵀΔ)`` in a frame
    ``λ = [Y, Y⊥] ∈ O(N)``; Adam runs on those coordinates; the step is retracted in the Lie algebra
    and the frame follows it, so the moments never need transport. With ``B̃ = Y⊥B = (I − YYᵀ)Δ``,
    ``M = λ[A_m; B_m]`` and ``Q_t`` the rotation that moves the frame:

    .. math::
        \Delta_t &= \operatorname{grad} f(Y_t), \quad A_t = \mathrm{skew}(Y_t^T\Delta_t), \quad
            \tilde B_t = (I - Y_tY_t^T)\Delta_t \\
        M_t &= \beta_1 M_{t-1} + (1 - \beta_1)(Y_t A_t + \tilde B_t) \\
        v^A_t &= \beta_2 v^A_{t-1} + (1 - \beta_2)\, A_t \odot A_t, \qquad
        v^B_t = \beta_2 v^B_{t-1} + (1 - \beta_2)\, \tfrac{1}{N - p}\textstyle\sum_i
            (\tilde B_t \odot \tilde B_t)_{i\cdot} \\
        W_t &= -\eta_t\Big(Y_t\,\big(\hat A^M_t \oslash (\sqrt{\hat v^A_t} + \delta)\big)
            + \hat{\tilde B}{}^M_t\, \mathrm{diag}\big(1 / (\sqrt{\hat v^B_t} + \delta)\big)\Big) \\
        Q_t &= \mathrm{cay}\big(\Omega(Y_t, W_t)\big) \text{ or } \exp\big(\Omega(Y_t, W_t)\big),
            \qquad Y_{t+1} = Q_t Y_t, \qquad M_t \leftarrow Q_t M_t

    where ``Â^M, B̃̂^M`` are the parts of ``M_t/(1 − β₁ᵗ)`` as for ``Δ``, ``v̂ = v/(1 − β₂ᵗ)``,
    ``Ω(Y, W) = (I − ½YYᵀ)WYᵀ − YWᵀ(I − ½YYᵀ)`` and ``cay(Ω) = (I − ½Ω)⁻¹(I + ½Ω)``. ``η_t, β₁, β₂,
    δ`` are ``learning_rate, b1, b2, eps`` (Brantner's defaults). ``Q_t`` is applied through the
    N×2p factors of ``Ω`` (one 2p×2p solve for Cayley, ``φ`` of a 2p×2p matrix for exp), never as
    an N×N matrix, and no complement ``Y⊥`` is stored: O(Np²) time and memory per step.

    Relation to Brantner's algorithm (GeometricMachineLearning.jl, which stores ``λ`` as an N×N
    matrix and costs O(N³) per step). ``M = λ[A_m; B_m]`` is his first moment, held fixed in
    global coordinates, because ``λ_{t+1} = λ_t cay(V_t) = Q_t λ_t``; the step ``W = λVE``, the
    frame update and the second moment of ``A`` (coordinates in the frame ``Y`` itself) are his
    too. The one difference is the second moment of ``B``: his is elementwise in the basis
    ``Y⊥``, which the reference draws at random, and following it would take the N×(N−p) matrix
    ``Y⊥`` and O(N²p) work per step. ``v^B`` here is its average over that random basis — for the
    same gradients, the mean square of each column of ``B`` — and does not depend on the basis.
    With this ``v^B`` a dense implementation that stores ``λ`` gives the same iterates (to 1e-10
    in the tests). State per leaf: ``M`` (shape of the parameter), ``v^A`` (p×p), ``v^B`` (p).

    Manifolds: :class:`~geometric.Stiefel` (the metric's Riemannian gradient is used; Adam's
    normalisation makes the canonical and Euclidean ones give the same step up to ``δ``),
    :class:`~geometric.Grassmann` (``A = 0``: horizontal vectors), :class:`~geometric.Sphere`
    (St(N, 1)) and :class:`~geometric.Orthogonal` (St(N, N): ``B`` is empty). The manifold's own
    ``retraction`` is not used: the frame update must be a rotation, ``cay`` or ``exp``. Euclidean
    leaves are handed to ``optax.adam(learning_rate, b1, b2, eps)`` and are bit-identical to it.

    Args:
      learning_rate: ``η``, a float or an optax schedule; Brantner uses 1e-3.
      manifolds: pytree mirroring ``params`` (or a prefix of it): a manifold or None per leaf.
      b1: ``β₁``.
      b2: ``β₂``.
      eps: ``δ``.
      retraction: ``"cayley"`` or ``"exp"``, the map from the Lie algebra to O(N).
      stabilize_every: re-project manifold leaves every this many updates (None: 100); the frame
        update is a rotation, which carries float32 rounding errors along.

    Returns:
      An optax ``GradientTransformationExtraArgs``.

    Raises:
      ValueError: ``update`` is called without ``params``; unknown ``retraction``;
        ``stabilize_every < 1``.
      TypeError: a leaf of ``manifolds`` is neither None nor a manifold with the capability
        ``"frame"`` (the four manifolds above).

    References:
      B. Brantner, "Generalizing Adam to manifolds for efficiently training transformers" (2023),
      https://arxiv.org/abs/2305.16901.
      A. Edelman, T. Arias, S. Smith, "The geometry of algorithms with orthogonality constraints",
      SIAM J. Matrix Anal. Appl. 20 (1998).
      Z. Wen, W. Yin, "A feasible method for optimization with orthogonality constraints",
      Math. Program. 142 (2013).

    Examples:
      >>> import jax, jax.numpy as jnp, optax, geometric
      >>> st = geometric.Stiefel(6, 2)
      >>> a = jnp.diag(jnp.arange(6.0))
      >>> loss = lambda y: -jnp.trace(y.T @ a @ y)  # minimum: -(5 + 4)
      >>> opt = geometric.optim.manifold_adam(optax.cosine_decay_schedule(0.1, 300), st)
      >>> y = st.random_point(jax.random.PRNGKey(0))
      >>> state = opt.init(y)
      >>> @jax.jit
      ... def step(y, state):
      ...     updates, state = opt.update(jax.grad(loss)(y), state, y)
      ...     return optax.apply_updates(y, updates), state
      >>> for _ in range(300):
      ...     y, state = step(y, state)
      >>> print(f"{loss(y):.3f}")
      -9.000
    """
    fname = "manifold_adam"
    _check_stabilize_every(fname, stabilize_every)
    if retraction not in _GLOBAL_RETRACTIONS:
        raise ValueError(f"{fname}: `retraction` must be 'cayley' or 'exp'; got {retraction!r}.")
    _, leaves, _ = flatten_manifolds(fname, manifolds)
    for m in leaves:
        if m is not None and not _global_tangent.supports(m):
            raise TypeError(f"{fname}: needs manifolds whose points are orthonormal frames (the "
                            f"capability 'frame': Stiefel, Grassmann, Sphere, Orthogonal); "
                            f"got {m!r}.")
    every = DEFAULT_STABILIZE_EVERY if stabilize_every is None else stabilize_every

    def init_fn(params: optax.Params) -> optax.OptState:
        treedef, leaves, flat = flatten_manifolds(fname, manifolds, params=params)
        moments = [(optax.MaskedNode(),) * 3 if m is None else _global_tangent.init_moments(m, x)
                   for m, x in zip(leaves, flat["params"])]
        mu, nu_a, nu_b = (treedef.unflatten(list(t)) for t in zip(*moments))
        return ManifoldAdamState(jnp.zeros([], jnp.int32), mu, nu_a, nu_b)

    def update_fn(updates: optax.Updates, state: optax.OptState, params: optax.Params | None = None
                  ) -> tuple[optax.Updates, optax.OptState]:
        _check_params(fname, params)
        count = state.count + 1
        treedef, leaves, flat = flatten_manifolds(fname, manifolds, params=params, grads=updates,
                                                  mu=state.mu, nu_a=state.nu_a, nu_b=state.nu_b)
        out, new = [], []
        for m, x, g, mu, nu_a, nu_b in zip(leaves, *flat.values()):
            if m is None:
                out.append(g)
                new.append((mu, nu_a, nu_b))
                continue
            lr, beta1, beta2, delta = _cast(x, _value(learning_rate, state.count), b1, b2, eps)
            y, mu, nu_a, nu_b = _global_tangent.step(
                m, x, g, mu, nu_a, nu_b, learning_rate=lr, b1=beta1, b2=beta2, eps=delta,
                count=count, retraction=retraction)
            y = lax.cond(count % every == 0, m.project_point, lambda y: y, y)
            out.append(y - x)
            new.append((mu, nu_a, nu_b))
        mu, nu_a, nu_b = (treedef.unflatten(list(t)) for t in zip(*new))
        return treedef.unflatten(out), ManifoldAdamState(count, mu, nu_a, nu_b)

    riemannian_part = optax.GradientTransformation(init_fn, update_fn)
    return _with_euclidean(fname, optax.adam(learning_rate, b1, b2, eps), riemannian_part,
                           manifolds)
