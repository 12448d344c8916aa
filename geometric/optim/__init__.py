r"""Optax optimizers for parameters on manifolds, and the pieces they are chained from.

**Optimizers.** :func:`riemannian_sgd`, :func:`riemannian_adam`, :func:`global_tangent_adam`
(also ``manifold_adam``) and :func:`riemannian` (any optax transformation) are optax
``GradientTransformationExtraArgs``. ``update(grads, state, params)`` takes Euclidean gradients
(from ``jax.grad``) and returns updates with ``optax.apply_updates(params, updates)`` equal to the
retracted point, so they drop into any optax training loop, ``optax.MultiSteps`` and
``optax.inject_hyperparams``; ``learning_rate`` may be a schedule. State is a plain pytree of
NamedTuples and arrays (checkpointable).

**Pieces.** Each optimizer is an ``optax.chain`` of small transformations, as ``optax.adam`` is
``chain(scale_by_adam(), scale_by_learning_rate(lr))``:

* tangent-space pieces, whose output is a tangent vector at ``params``:
  :func:`to_riemannian_gradients`, :func:`project_to_tangent`, :func:`riemannian_trace`,
  :func:`scale_by_riemannian_adam`, :func:`scale_by_global_tangent_adam`;
* :func:`retract`, the **last** transformation: ``u ↦ R_x(u) - x``.

``riemannian_adam(lr, m) == chain(scale_by_riemannian_adam(m), scale_by_learning_rate(lr),
retract(m))``. To scale, clip, decay or schedule the step yourself, build the chain with your
transformations **before** :func:`retract`, where they act on tangent vectors::

    optax.chain(scale_by_riemannian_adam(spec), optax.scale_by_learning_rate(1e-3),
                optax.contrib.reduce_on_plateau(), retract(spec))

**Nothing may follow** :func:`retract` (so nothing may follow an optimizer here in a chain): its
updates are differences of two points of the manifold, and scaling (``optax.scale``,
``reduce_on_plateau``, a learning rate), adding (``add_decayed_weights``) or clipping them moves
``params`` off the manifold, silently. ``init`` refuses a concrete starting point that is off its
manifold (:func:`project_params` projects one).

**The spec** (``manifolds``) says which parameter lies on which manifold, in any of these forms:

* a pytree matching ``params`` or a prefix of it, by key path (a manifold at a subtree applies to
  all arrays below it), with a manifold, :data:`EUCLIDEAN` or None (no constraint) per leaf; the
  container types need not match ``params``' (a dict fits an ``nnx.State`` or a ``FrozenDict``;
  a Flax ``Variable`` counts as its array);
* a function ``params -> such a pytree``, called at ``init`` and ``update`` with what the optimizer
  is given; :func:`by_path` builds one from path patterns. (With ``optax.inject_hyperparams``,
  which calls every callable argument as a schedule, pass ``static_args=("manifolds",)``.)

A callable pytree such as an equinox module is a mirror when it holds a manifold or
:data:`EUCLIDEAN`; holding neither it is refused as ambiguous. One spec for every framework:

* plain dict / Linen (``FrozenDict`` too): ``{"params": {"Dense_0": {"kernel": Stiefel(8, 4)}}}``
  or ``by_path({"kernel$": Stiefel(8, 4)})``;
* Flax NNX: ``nnx.Optimizer(model, riemannian_adam(1e-3, by_path({"kernel$": st})),
  wrt=nnx.Param)``;
* equinox: a mirror ``eqx.tree_at(lambda m: m.weight, jax.tree.map(lambda _: EUCLIDEAN, model),
  st)`` or ``by_path({"weight$": st})`` on ``eqx.filter(model, eqx.is_array)``.

Float32 drift. QR, polar and normalising retractions correct themselves every step. Rotations
(Stiefel's ``"cayley"`` and ``"exp"``, and every ``global_tangent_adam`` step) carry rounding
errors along: on St(256, 64), 10⁴ float32 Adam steps reach ``‖YᵀY − I‖_F ≈ 1.6e-5``.
``stabilize_every=k`` re-projects manifold leaves (``project_point``, the polar factor) every ``k``
updates; the default ``None`` does so every 100 updates for the leaves that need it, which keeps
``‖YᵀY − I‖_F`` at 1.2–1.4e-6 (every method; a fresh Householder QR: 1.6–1.7e-6), at the cost of one
O(np²) projection per 100 steps.
"""
from .._core.tree import EUCLIDEAN, ManifoldsTree, by_path
from ._alias import global_tangent_adam, manifold_adam, riemannian, riemannian_adam, riemannian_sgd
from ._transforms import (ManifoldAdamState, RetractState, RiemannianAdamState, RiemannianSGDState,
                          project_params, project_to_tangent, retract, riemannian_trace,
                          scale_by_global_tangent_adam, scale_by_riemannian_adam,
                          to_riemannian_gradients)

RiemannianState = RetractState
"""The state :func:`riemannian` kept before it became a chain; now the state of :func:`retract`."""

__all__ = ["EUCLIDEAN", "ManifoldAdamState", "ManifoldsTree", "RetractState", "RiemannianAdamState",
           "RiemannianSGDState", "RiemannianState", "by_path", "global_tangent_adam",
           "manifold_adam", "project_params", "project_to_tangent", "retract", "riemannian",
           "riemannian_adam", "riemannian_sgd", "riemannian_trace", "scale_by_global_tangent_adam",
           "scale_by_riemannian_adam", "to_riemannian_gradients"]
