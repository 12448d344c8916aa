"""The optimizers: chains of the pieces in :mod:`._transforms`, as optax builds ``adam``."""
from __future__ import annotations

import optax

from .._core.tree import ManifoldsTree, check_spec
from ._base import check_stabilize_every
from ._transforms import (global_tangent_transform, project_to_tangent, retract,
                          riemannian_trace, scale_by_riemannian_adam, to_riemannian_gradients)

__all__ = ["global_tangent_adam", "manifold_adam", "riemannian", "riemannian_adam",
           "riemannian_sgd"]


def riemannian(inner: optax.GradientTransformation, manifolds: ManifoldsTree, *,
               stabilize_every: int | None = None, check_points: bool = True
               ) -> optax.GradientTransformationExtraArgs:
    r"""Run any optax transformation on manifold parameters.

    .. math::
        \xi_t = \operatorname{grad} f(x_t), \qquad u_t = \mathrm{inner}(\xi_t), \qquad
        x_{t+1} = R_{x_t}\big(P_{x_t}(u_t)\big)

    ``chain(to_riemannian_gradients(manifolds), inner, project_to_tangent(manifolds),
    retract(manifolds))``: ``grad f`` is the Riemannian gradient, ``u_t`` the output of
    ``inner`` (which includes the learning rate and sign), ``P`` the tangent projection and ``R``
    the manifold's retraction. Euclidean leaves get ``inner``'s update unchanged, so with an
    elementwise ``inner`` (sgd, adam, ...) they behave exactly as under ``inner`` alone; a global
    ``inner`` (``clip_by_global_norm``) sees Riemannian gradients.

    Args:
      inner: any optax transformation of the gradients, e.g. ``optax.adam(1e-3)``.
      manifolds: the spec (see :mod:`geometric.optim`).
      stabilize_every: re-project manifold leaves onto the manifold every this many updates. None:
        every 100 updates, and only for leaves whose retraction does not correct itself.
      check_points: refuse a start off the manifold (eagerly, or under ``jit`` when the program
        runs) and a point moved since the last update by a transformation chained after this
        optimizer, naming the leaf (:func:`retract`); False turns both checks off.

    Returns:
      An optax ``GradientTransformationExtraArgs``; extra arguments are passed to ``inner``.

    Raises:
      ValueError: ``update`` is called without ``params``; ``stabilize_every < 1``.
      TypeError: a leaf of ``manifolds`` is neither a manifold nor EUCLIDEAN nor None.

    Notes:
      ``inner``'s state is opaque, so its moments are not transported: they mix gradients from
      past tangent spaces, and the projection ``P`` of each step stands in for the transport.
      :func:`riemannian_sgd` and :func:`riemannian_adam` transport their momentum.

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
    check_stabilize_every("riemannian", stabilize_every)
    check_spec("riemannian", manifolds)
    return optax.chain(to_riemannian_gradients(manifolds), inner, project_to_tangent(manifolds),
                       retract(manifolds, stabilize_every=stabilize_every,
                               check_points=check_points))


def riemannian_sgd(learning_rate: optax.ScalarOrSchedule, manifolds: ManifoldsTree,
                   momentum: float = 0.0, nesterov: bool = False, *,
                   stabilize_every: int | None = None, check_points: bool = True
                   ) -> optax.GradientTransformationExtraArgs:
    r"""Riemannian (stochastic) gradient descent with heavy-ball or Nesterov momentum.

    .. math::
        \xi_t &= \operatorname{grad} f(x_t) \\
        m_t &= \xi_t + \beta\, \mathcal{T}_{x_{t-1}\to x_t}(m_{t-1}) \\
        d_t &= m_t \quad\text{or, with Nesterov,}\quad d_t = \xi_t + \beta\, m_t \\
        x_{t+1} &= R_{x_t}(-\eta_t\, d_t)

    ``chain(riemannian_trace(manifolds, momentum, nesterov), scale_by_learning_rate(η),
    retract(manifolds))`` (without momentum, :func:`to_riemannian_gradients` in place of the
    trace). ``η_t`` is ``learning_rate`` (a float or a schedule of the step count), ``β`` is
    ``momentum``, ``R`` the manifold's retraction and ``T`` its vector transport (the projection
    onto the new tangent space). Euclidean leaves get ``optax.sgd(learning_rate, momentum,
    nesterov)`` and are bit-identical to it.

    Args:
      learning_rate: ``η``, a float or an optax schedule.
      manifolds: the spec (see :mod:`geometric.optim`).
      momentum: ``β``; 0 is plain Riemannian gradient descent.
      nesterov: use Nesterov momentum.
      stabilize_every: re-project manifold leaves every this many updates; None: every 100 for
        leaves whose retraction does not correct itself.
      check_points: as in :func:`riemannian`.

    Returns:
      An optax ``GradientTransformationExtraArgs``.

    Raises:
      ValueError: ``update`` is called without ``params``; ``stabilize_every < 1``.
      TypeError: a leaf of ``manifolds`` is neither a manifold nor EUCLIDEAN nor None.

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
    check_stabilize_every("riemannian_sgd", stabilize_every)
    check_spec("riemannian_sgd", manifolds)
    direction = (riemannian_trace(manifolds, momentum, nesterov) if momentum
                 else to_riemannian_gradients(manifolds))
    return optax.chain(direction, optax.scale_by_learning_rate(learning_rate),
                       retract(manifolds, stabilize_every=stabilize_every,
                               check_points=check_points))


def riemannian_adam(learning_rate: optax.ScalarOrSchedule, manifolds: ManifoldsTree,
                    b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, *,
                    stabilize_every: int | None = None, check_points: bool = True
                    ) -> optax.GradientTransformationExtraArgs:
    r"""Riemannian Adam: Adam with its first moment transported along the iterates.

    .. math::
        \xi_t &= \operatorname{grad} f(x_t) \\
        m_t &= \beta_1\, \mathcal{T}_{x_{t-1}\to x_t}(m_{t-1}) + (1 - \beta_1)\, \xi_t \\
        v_t &= \beta_2\, v_{t-1} + (1 - \beta_2)\, \xi_t \odot \xi_t \\
        \hat m_t &= m_t / (1 - \beta_1^t), \qquad \hat v_t = v_t / (1 - \beta_2^t) \\
        x_{t+1} &= R_{x_t}\Big(-\eta_t\, P_{x_t}\big(\hat m_t \oslash (\sqrt{\hat v_t} + \epsilon)\big)\Big)

    ``chain(scale_by_riemannian_adam(manifolds, b1, b2, eps), scale_by_learning_rate(η),
    retract(manifolds))``, as ``optax.adam`` is ``chain(scale_by_adam, scale_by_learning_rate)``.
    ``η_t`` is ``learning_rate``, ``β₁, β₂, ε`` are ``b1, b2, eps``, ``R`` the manifold's
    retraction, ``P`` the tangent projection and ``T`` the vector transport (projection onto the
    new tangent space). Euclidean leaves are bit-identical to ``optax.adam(learning_rate, b1, b2,
    eps)``.

    Second moment. Bécigneul & Ganea keep one scalar ``‖ξ‖²`` per manifold factor, which needs no
    transport and makes the step invariant under isometries. Like geoopt, we keep it elementwise,
    as a diagonal preconditioner in the fixed ambient coordinates of ℝ^{n×p}: those coordinates
    mean the same at every point, so ``v`` needs no transport either, and the preconditioned step is
    projected back onto the tangent space before the retraction. This keeps Adam's per-entry
    adaptivity (rows of a weight matrix with different gradient scales), at the price of not
    being invariant under rotations of the embedding.

    Args:
      learning_rate: ``η``, a float or an optax schedule.
      manifolds: the spec (see :mod:`geometric.optim`).
      b1: ``β₁``, decay of the first moment.
      b2: ``β₂``, decay of the second moment.
      eps: ``ε``, added to the root of the second moment.
      stabilize_every: as in :func:`riemannian_sgd`.
      check_points: as in :func:`riemannian`.

    Returns:
      An optax ``GradientTransformationExtraArgs``.

    Raises:
      ValueError, TypeError: as :func:`riemannian_sgd`.

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
      >>> def step(carry, _):
      ...     y, state = carry
      ...     updates, state = opt.update(jax.grad(loss)(y), state, y)
      ...     return (optax.apply_updates(y, updates), state), None
      >>> y = st.random_point(jax.random.PRNGKey(0))
      >>> (y, _), _ = jax.jit(lambda y: jax.lax.scan(step, (y, opt.init(y)), length=300))(y)
      >>> print(f"{loss(y):.3f}")
      -9.000
    """
    check_stabilize_every("riemannian_adam", stabilize_every)
    check_spec("riemannian_adam", manifolds)
    return optax.chain(scale_by_riemannian_adam(manifolds, b1, b2, eps),
                       optax.scale_by_learning_rate(learning_rate),
                       retract(manifolds, stabilize_every=stabilize_every,
                               check_points=check_points))


def global_tangent_adam(learning_rate: optax.ScalarOrSchedule, manifolds: ManifoldsTree,
                        b1: float = 0.9, b2: float = 0.99, eps: float = 3e-7,
                        retraction: str = "cayley", *, stabilize_every: int | None = None,
                        check_points: bool = True) -> optax.GradientTransformationExtraArgs:
    r"""Brantner's Adam in the global tangent space, in O(Np²) time per step for St(N, p).

    The same as ``chain(scale_by_global_tangent_adam(learning_rate, manifolds, b1, b2, eps,
    retraction), retract(manifolds, method=retraction))``, in one transformation, because the
    point and the first moment are rotated together (one low-rank application instead of two).
    Also available as ``manifold_adam``.

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
    in the tests). State per leaf: ``M`` as its frame block ``A_m = YᵀM`` (p×p), which the
    rotation leaves unchanged, and its complement part ``(I − YYᵀ)M`` (shape of the parameter,
    rotated with the point); ``v^A`` (p×p); ``v^B`` (p).

    Manifolds: those with the capability ``"frame"``
    (:attr:`geometric.AbstractManifold.capabilities`), whose points are read as frames
    ``Y ∈ St(N, p)`` by ``to_frame``: a sphere point is St(N, 1), a square one St(N, N) with ``B``
    empty, and a horizontal manifold (Grassmann) has ``A = 0``.
    The metric's Riemannian gradient is used (Adam's normalisation makes Stiefel's canonical and
    Euclidean ones give the same step up to ``δ``). The manifold's own ``retraction`` is not used:
    the frame update must be a rotation, ``cay`` or ``exp``. Euclidean leaves are handed to
    ``optax.adam(learning_rate, b1, b2, eps)`` and are bit-identical to it.

    Args:
      learning_rate: ``η``, a float or an optax schedule; Brantner uses 1e-3.
      manifolds: the spec (see :mod:`geometric.optim`).
      b1: ``β₁``.
      b2: ``β₂``.
      eps: ``δ``.
      retraction: ``"cayley"`` or ``"exp"``, the map from the Lie algebra to O(N).
      stabilize_every: re-project manifold leaves every this many updates (None: 100); the frame
        update is a rotation, which carries float32 rounding errors along.
      check_points: as in :func:`riemannian`.

    Returns:
      An optax ``GradientTransformationExtraArgs``.

    Raises:
      ValueError: ``update`` is called without ``params``; unknown ``retraction``;
        ``stabilize_every < 1``.
      TypeError: a leaf of ``manifolds`` is neither None nor a manifold with the capability
        ``"frame"``; the message names those of :mod:`geometric`.

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
      >>> opt = geometric.optim.global_tangent_adam(optax.cosine_decay_schedule(0.1, 300), st)
      >>> def body(_, carry):
      ...     y, state = carry
      ...     updates, state = opt.update(jax.grad(loss)(y), state, y)
      ...     return optax.apply_updates(y, updates), state
      >>> y = st.random_point(jax.random.PRNGKey(0))
      >>> y, _ = jax.jit(lambda y: jax.lax.fori_loop(0, 300, body, (y, opt.init(y))))(y)
      >>> print(f"{loss(y):.3f}")
      -9.000
    """
    return global_tangent_transform("manifold_adam", learning_rate, manifolds, b1, b2, eps,
                                    retraction, retract_too=True, stabilize_every=stabilize_every,
                                    check_points=check_points)


manifold_adam = global_tangent_adam
"""The former name of :func:`global_tangent_adam`."""
