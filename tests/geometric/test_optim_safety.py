"""No silent constraint violation: transformations go before `retract` (one after it is reported),
and a starting point off its manifold is refused, eagerly and under jit (or projected on request).
The cases of issues 12 and 32, in float32."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import geometric
from geometric import optim

ST = geometric.Stiefel(8, 4)
ST_CAYLEY = geometric.Stiefel(8, 4, retraction="cayley")
A = jnp.diag(jnp.arange(8.0, dtype=jnp.float32))


def loss(p):
    return -jnp.trace(p["w"].T @ A @ p["w"]) + jnp.sum((p["b"] - 1.0) ** 2)


def params(w=None):
    return {"w": ST.random_point(jax.random.PRNGKey(0)) if w is None else w, "b": jnp.zeros(4)}


def train(opt, p, steps=30):
    state = opt.init(p)

    @jax.jit
    def step(p, state):
        value, grads = jax.value_and_grad(loss)(p)
        updates, state = opt.update(grads, state, p, value=value)
        return optax.apply_updates(p, updates), state

    for _ in range(steps):
        p, state = step(p, state)
    return p


SPEC = {"w": ST, "b": None}
# Each user transform of issue 12, placed where it belongs: before the retraction.
USER_TRANSFORMS = {
    "reduce_on_plateau": lambda: optax.contrib.reduce_on_plateau(patience=2, factor=0.5),
    "scale_0.5": lambda: optax.scale(0.5),
    "add_decayed_weights_0.1": lambda: optax.add_decayed_weights(0.1),
}


@pytest.mark.parametrize("user", list(USER_TRANSFORMS))
@pytest.mark.parametrize("tangent", ["riemannian_adam", "riemannian_sgd"])
def test_user_transforms_before_the_retraction_stay_on_the_manifold(user, tangent):
    direction = {"riemannian_adam": optim.scale_by_riemannian_adam(SPEC),
                 "riemannian_sgd": optim.riemannian_trace(SPEC, 0.9)}[tangent]
    # weight decay acts on gradients (before the learning rate, as in adamw); the others on steps
    pieces = [direction, optax.scale_by_learning_rate(0.05), USER_TRANSFORMS[user]()]
    if user.startswith("add_decayed_weights"):
        pieces[1:] = pieces[:0:-1]
    opt = optax.chain(*pieces, optim.retract(SPEC))
    p = params()
    out = train(opt, p)
    assert float(ST.manifold_error(out["w"])) <= 1e-5
    assert float(loss(out)) < float(loss(p))


def test_manifold_adam_pieces_with_a_user_transform():
    opt = optax.chain(optim.scale_by_global_tangent_adam(0.05, SPEC), optax.scale(0.5),
                      optax.contrib.reduce_on_plateau(patience=2), optim.retract(SPEC, method="cayley"))
    p = params()
    out = train(opt, p)
    assert float(ST.manifold_error(out["w"])) <= 1e-5
    assert float(loss(out)) < float(loss(p))


AFTER = r"retract: the point 'w' is not where the last update put it .*Put such transformations before it"


@pytest.mark.parametrize("user", ["scale_0.5", "add_decayed_weights_0.1"])
@pytest.mark.parametrize("make", [lambda s, **k: optim.riemannian_adam(0.05, s, **k),
                                  lambda s, **k: optim.manifold_adam(0.05, s, **k)],
                         ids=["riemannian_adam", "manifold_adam"])
def test_a_transform_after_the_retraction_is_reported(user, make):
    """A transform after the optimizer would leave the manifold: the next update says so, naming
    the leaf; with the documented opt-out the drift is the user's."""
    with pytest.raises(Exception, match=AFTER.replace("retract", r"\w+")):
        train(optax.chain(make(SPEC), USER_TRANSFORMS[user]()), params(), steps=2)
    out = train(optax.chain(make(SPEC, check_points=False), USER_TRANSFORMS[user]()), params(),
                steps=5)
    assert float(ST.manifold_error(out["w"])) > 1e-4


def test_placement_check_under_vmap():
    """A batched check runs its callback for every element (cond becomes select): it must neither
    raise for points in place nor miss one that moved."""
    opt = optim.riemannian_adam(0.05, SPEC)
    p = jax.vmap(lambda k: params(ST.random_point(k)))(jax.random.split(jax.random.PRNGKey(1), 3))
    state = jax.vmap(opt.init)(p)

    def step(p, state, scale):
        updates, state = opt.update(jax.grad(loss)(p), state, p)
        return optax.apply_updates(p, jax.tree.map(lambda u: scale * u, updates)), state

    batched = jax.jit(jax.vmap(step, in_axes=(0, 0, 0)))
    ones = jnp.ones(3)
    for _ in range(3):
        p, state = batched(p, state, ones)
    assert float(jnp.max(ST.manifold_error(p["w"]))) <= 1e-5
    p, state = batched(p, state, ones.at[1].set(0.5))
    with pytest.raises(Exception, match=AFTER):
        batched(p, state, ones)
    with pytest.raises(Exception, match="starting point 'w' is not on"):
        jax.vmap(opt.init)({"w": p["w"].at[2].multiply(2.0), "b": p["b"]})


def lecun_start():
    return params(jax.nn.initializers.lecun_normal()(jax.random.PRNGKey(3), (8, 4), jnp.float32))


@pytest.mark.parametrize("make", [lambda s: optim.manifold_adam(0.05, s),
                                  lambda s: optim.riemannian_adam(0.05, {"w": ST_CAYLEY, "b": None}),
                                  lambda s: optim.riemannian_sgd(0.05, s)],
                         ids=["manifold_adam", "riemannian_adam_cayley", "riemannian_sgd"])
def test_start_off_the_manifold_is_refused_or_projected(make):
    opt = make(SPEC)
    with pytest.raises(ValueError, match=r"\w+: the starting point 'w' is not on Stiefel\(n=8, p=4.*"
                                         r"‖xᵀx − I‖_F = \d.* > atol = .*project_params"):
        opt.init(lecun_start())
    p = optim.project_params(lecun_start(), SPEC)
    assert float(ST.manifold_error(p["w"])) <= 1e-5
    np.testing.assert_array_equal(p["b"], lecun_start()["b"])
    out = train(opt, p)
    assert float(ST.manifold_error(out["w"])) <= 1e-5


@pytest.mark.parametrize("name", ["riemannian_adam", "riemannian_sgd", "manifold_adam",
                                  "global_tangent_adam"])
def test_a_traced_start_is_checked_when_it_runs(name):
    """Under jit the values are unknown at trace time: the program refuses them when it runs."""
    opt = getattr(optim, name)(0.05, SPEC)
    jax.jit(opt.init)(params())
    with pytest.raises(Exception, match=r"\w+: the starting point 'w' is not on Stiefel\(n=8, p=4"
                                        r".*manifold_error = .* > atol = .*check_points=False"):
        jax.block_until_ready(jax.jit(opt.init)(lecun_start()))
    jax.jit(getattr(optim, name)(0.05, SPEC, check_points=False).init)(lecun_start())
    with pytest.raises(ValueError, match=r"must have shape \(\.\.\., 8, 4\); got \(4, 8\)"):
        jax.jit(opt.init)(params(jnp.zeros((4, 8))))


def test_pieces_alone():
    """Each tangent-space piece alone returns tangent vectors at params."""
    p = params()
    g = jax.grad(loss)(p)
    for piece in [optim.to_riemannian_gradients(SPEC), optim.project_to_tangent(SPEC),
                  optim.scale_by_riemannian_adam(SPEC), optim.riemannian_trace(SPEC, 0.9, nesterov=True),
                  optim.scale_by_global_tangent_adam(0.1, SPEC)]:
        u, _ = piece.update(g, piece.init(p), p)
        np.testing.assert_allclose(ST.project(p["w"], u["w"]), u["w"], rtol=1e-5, atol=1e-6)
    u, _ = optim.to_riemannian_gradients(SPEC).update(g, optax.EmptyState(), p)
    np.testing.assert_array_equal(u["w"], ST.egrad_to_rgrad(p["w"], g["w"]))
    np.testing.assert_array_equal(u["b"], g["b"])


@pytest.mark.parametrize("name", ["riemannian_adam", "riemannian_sgd", "manifold_adam",
                                  "global_tangent_adam"])
def test_a_checked_step_stays_differentiable(name):
    """The checks have no derivative: forward and reverse mode through init and update (as in
    meta-learning a step size) agree with finite differences, checks on."""
    opt = getattr(optim, name)(0.05, SPEC)

    def after_steps(scale):
        p = params()
        p = {"w": p["w"], "b": jnp.full(4, 0.5) * scale}
        state = opt.init(p)
        for _ in range(2):
            updates, state = opt.update(jax.grad(loss)(p), state, p)
            p = optax.apply_updates(p, updates)
        return loss(p)

    s = jnp.float32(1.0)
    jvp = jax.jvp(after_steps, (s,), (jnp.float32(1.0),))[1]
    grad = jax.grad(after_steps)(s)
    fd = (after_steps(s + 1e-2) - after_steps(s - 1e-2)) / 2e-2
    assert abs(float(grad)) > 0.1
    np.testing.assert_allclose(jvp, grad, rtol=1e-4)
    np.testing.assert_allclose(grad, fd, rtol=2e-2, atol=1e-3)
