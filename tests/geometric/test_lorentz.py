"""What is particular to geometric/_manifolds/lorentz.py: the operator laws of every manifold (the
``laws`` of test_manifolds.py, in the Minkowski metric), closed forms, the isometry with the
Poincaré ball, the safe region in float32, and the Fréchet mean found by the optimizers."""
import dataclasses
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import geometric
from geometric import hyperbolic, optim
from geometric._core import hyperbolic as hyp
from tests.geometric.test_manifolds import BATCH, UNOPTIMIZED, jit_methods, laws
from tests.helpers import rand

# One curvature ≠ 1 (the contract tests cover c = 1): each case compiles the laws once.
MODELS = {"c2": geometric.Lorentz(3, curvature=2.0)}
TOL = 1e-12
every = pytest.mark.parametrize("name", list(MODELS))


def points(m, n, seed, dtype=jnp.float64):
    return jax.vmap(lambda k: m.random_point(k, dtype))(jax.random.split(jax.random.PRNGKey(seed), n))


@functools.cache
def results(name):
    m = MODELS[name]
    x = points(m, BATCH, 0)
    return m, jax.tree.map(np.asarray, laws(m, x, rand((6, BATCH, m.n + 1), seed=1)))


def close(got, want, tol=TOL, err_msg=""):
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=err_msg)


def np_minkowski(u, v):
    return -u[..., 0] * v[..., 0] + np.sum(u[..., 1:] * v[..., 1:], -1)


# ----------------------------------------------------------------------------------------------
# The laws of every manifold


@every
def test_projection_gradient_and_metric(name):
    m, r = results(name)
    x, u = r["x"], r["u"]
    close(np_minkowski(x, x), -1 / m.curvature)
    close(np_minkowski(x, r["batched"]["project"]), 0, 10 * TOL)  # T_x = {⟨x, v⟩_L = 0}
    close(r["project_twice"], r["batched"]["project"])
    close(r["project_tangent"], u)
    close(r["rgrad_projected"], r["batched"]["egrad_to_rgrad"])
    close(*r["riesz"], 10 * TOL)                                 # inner(x, rgrad, ξ) = <g, ξ>
    close(r["inner_swapped"], r["batched"]["inner"], 10 * TOL)
    assert r["inner_uu"].min() > 0                               # tangent vectors are spacelike
    close(r["inner_uu"], np_minkowski(u, u), 10 * TOL)
    close(r["batched"]["norm"] ** 2, r["inner_uu"], 10 * TOL)


@every
def test_retraction_is_the_exponential_map(name):
    m, r = results(name)
    got = r["batched"]
    close(r["retract_zero"], r["x"])
    close(r["exp_zero"], r["x"])
    assert got["manifold_error"].max() < TOL and m.manifold_error(r["exp_w"]).max() < TOL
    for errors in (r["retract_steps"], r["exp_steps"]):   # ‖R_x(tv) − x − tv‖ = O(t²)
        np.testing.assert_allclose(np.log2(errors[:-1] / errors[1:]), 2.0, atol=0.05)
    close(got["retract"], m.exp(r["x"], 0.3 * r["v"]))


@every
def test_transport_log_and_dist_laws(name):
    m, r = results(name)
    got = r["batched"]
    close(r["transport_projected"], got["transport"], 10 * TOL)
    close(r["transport_to_self"], r["u"])
    close(got["retract_transport"][1], got["transport"])
    close(r["project_point_of_point"], r["x"])
    close(r["log_exp"][0], r["w"], 10 * TOL)
    close(r["log_a_projected"], r["log_a"], 10 * TOL)
    close(r["dist_exp"], 0.4, 10 * TOL)
    close(r["dist_xa"], r["log_a_norm"], 10 * TOL)
    close(r["dist_ab"], r["dist_ba"], 10 * TOL)
    assert (r["dist_ac"] <= r["dist_ab"] + r["dist_bc"] + TOL).all() and (r["dist_ab"] > 1e-3).all()
    close(r["dist_self"], 0)
    assert np.isfinite(r["dist_sq_gradient"]).all()
    close(r["dist_sq_rgrad"], 0)


@every
def test_float32_and_batch_axes(name):
    m, r = results(name)
    x, g, u, v = (jnp.asarray(r[k][0], jnp.float32) for k in ("x", "g", "u", "v"))
    first = jax.tree.map(np.asarray, jit_methods(m, x, g, u, v))
    assert {a.dtype for a in jax.tree.leaves(first)} == {np.dtype(np.float32)}
    assert first["manifold_error"] < 1e-6
    for key, value in first.items():
        batched = jax.tree.map(lambda a: a[0], r["batched"][key])
        for got, want in zip(jax.tree.leaves(batched), jax.tree.leaves(value)):
            close(got, want, 2e-5, err_msg=key)


# ----------------------------------------------------------------------------------------------
# Closed forms and the isometry with the ball


@every
def test_closed_forms(name):
    m, r = results(name)
    c = m.curvature
    x, a, b, u = r["x"], r["a"], r["b"], r["u"]
    close(m.dist(a, b), np.arccosh(-c * np_minkowski(a, b)) / np.sqrt(c), 1e-11)
    d = np.arccosh(-c * np_minkowski(x, a)) / np.sqrt(c)
    tangent = a + c * np_minkowski(x, a)[:, None] * x
    close(m.log(x, a), d[:, None] * tangent / np.sqrt(np_minkowski(tangent, tangent))[:, None], 1e-10)
    s = np.sqrt(c * np_minkowski(u, u))[:, None]
    close(m.exp(x, u), np.cosh(s) * x + np.sinh(s) / s * u, 1e-11)
    # parallel transport: an isometry taking the geodesic's velocity at x to its velocity at a
    pu, pv = m.transport(x, a, u), m.transport(x, a, r["v"])
    close(m.inner(a, pu, pv), m.inner(x, u, r["v"]), 1e-11)
    close(m.transport(x, a, m.log(x, a)), -m.log(a, x), 1e-11)


@every
def test_isometry_with_the_poincare_ball(name):
    """lorentz_to_poincare is an isometry: distances agree, exp commutes with it (through its
    differential), and the metric pulls back; poincare_to_lorentz inverts it."""
    m, r = results(name)
    c = m.curvature
    ball = geometric.PoincareBall(m.n, curvature=c)
    to_ball = functools.partial(hyperbolic.lorentz_to_poincare, curvature=c)
    x, a, b, u = (jnp.asarray(r[k]) for k in ("x", "a", "b", "u"))
    close(ball.dist(to_ball(a), to_ball(b)), r["dist_ab"], 1e-11)
    close(hyperbolic.poincare_to_lorentz(to_ball(a), curvature=c), a, 1e-12)
    px, du = jax.jvp(to_ball, (x,), (u,))
    close(ball.inner(px, du, du), m.inner(x, u, u), 1e-11)
    close(ball.exp(px, du), to_ball(m.exp(x, u)), 1e-11)
    close(m.manifold_error(hyperbolic.poincare_to_lorentz(ball.project_point(2 * to_ball(a)),
                                                          curvature=c)), 0, 1e-9)


# ----------------------------------------------------------------------------------------------
# The safe region


def test_safe_region_float32_values_and_gradients_are_finite():
    """At the distance of the ball's safe sphere from the origin (12.2/√c), at and between
    antipodes, and for points projected from far outside it: finite values and gradients."""
    f32 = jnp.float32
    m = geometric.Lorentz(3, curvature=2.0)
    e = np.eye(4, dtype=np.float32)
    far = m.project_point(jnp.asarray(1e6 * np.stack([e[1], -e[1], e[2]]), f32))
    close(m.dist(far[0], jnp.asarray([1 / np.sqrt(2), 0, 0, 0], f32)), hyp.max_distance(f32, 2.0), 1e-3)
    x, y = (jnp.asarray(np.stack(p), f32) for p in zip(*[(a, b) for a in far for b in far]))
    v = m.project(x, jnp.asarray(rand(x.shape, 3), f32))
    functions = {
        "dist": lambda x, y, v: m.dist(x, y), "dist²": lambda x, y, v: m.dist(x, y) ** 2,
        "log": lambda x, y, v: m.log(x, y), "exp": lambda x, y, v: m.exp(x, v),
        "exp_far": lambda x, y, v: m.exp(x, 1e6 * v), "transport": lambda x, y, v: m.transport(x, y, v),
        "egrad_to_rgrad": lambda x, y, v: m.egrad_to_rgrad(x, v),
        "project_point": lambda x, y, v: m.project_point(1e3 * y),
    }

    @functools.partial(jax.jit, compiler_options=UNOPTIMIZED)
    def evaluate(x, y, v):
        return {key: (jax.vmap(f)(x, y, v), jax.vmap(jax.grad(
            lambda *a: jnp.sum(f(*a)), argnums=(0, 1, 2)))(x, y, v)) for key, f in functions.items()}

    for key, (values, grads) in evaluate(x, y, v).items():
        assert np.isfinite(values).all(), key
        assert all(np.isfinite(g).all() for g in grads), key
    dist = np.asarray(m.dist(x, y)).reshape(3, 3)
    close(np.diag(dist), 0, 0)
    close(dist[0, 1], 2 * hyp.max_distance(f32, 2.0), 1e-3)
    stepped = m.exp(x, 1e6 * v)
    assert np.isfinite(stepped).all() and float(m.manifold_error(stepped).max()) < 1e-6


# ----------------------------------------------------------------------------------------------
# Optimizers: the Fréchet mean


@pytest.mark.parametrize("optimizer", ["riemannian_adam", "riemannian_sgd"])
def test_frechet_mean_of_symmetric_points_is_the_centre(optimizer):
    """exp_centre(±vᵢ) for tangent vectors vᵢ: symmetric under the geodesic symmetry at the centre
    (an isometry, exp_c(v) ↦ exp_c(−v)), so their (unique) Fréchet mean is the centre."""
    m = geometric.Lorentz(3, curvature=0.5)
    centre = m.exp(jnp.asarray([np.sqrt(2.0), 0, 0, 0]), jnp.asarray([0.0, 0.4, -0.3, 0.2]))
    tangents = m.project(jnp.broadcast_to(centre, (3, 4)), rand((3, 4), 8))
    directions = jnp.concatenate([tangents, -tangents])
    cloud = m.exp(jnp.broadcast_to(centre, directions.shape), directions)
    steps = 400
    opt = {"riemannian_adam": optim.riemannian_adam(optax.cosine_decay_schedule(0.05, steps), m),
           "riemannian_sgd": optim.riemannian_sgd(0.03, m, momentum=0.5)}[optimizer]
    loss = lambda p: jnp.sum(m.dist(jnp.broadcast_to(p, cloud.shape), cloud) ** 2)

    @jax.jit
    def run(p):
        def step(carry, _):
            p, s = carry
            u, s = opt.update(jax.grad(loss)(p), s, p)
            return (optax.apply_updates(p, u), s), None
        return jax.lax.scan(step, (p, opt.init(p)), None, length=steps)[0][0]

    mean = run(jnp.asarray([np.sqrt(2.0), 0, 0, 0]))
    assert float(m.dist(mean, centre)) < 1e-6, float(m.dist(mean, centre))
    assert float(m.manifold_error(mean)) < 1e-12


def test_manifold_adam_rejects_the_hyperboloid():
    with pytest.raises(TypeError, match=r"manifold_adam: needs manifolds whose points are "
                                         r"orthonormal frames .* got Lorentz\(n=3"):
        optim.manifold_adam(1e-3, geometric.Lorentz(3))


# ----------------------------------------------------------------------------------------------
# Construction and checks


def test_construction_and_checks():
    assert geometric.Lorentz(4) == geometric.Lorentz(4, curvature=1)
    assert geometric.Lorentz(4).shape == (5,)
    with pytest.raises(ValueError, match=r"Lorentz: `n` must be ≥ 1; got 0"):
        geometric.Lorentz(0)
    with pytest.raises(ValueError, match=r"Lorentz: `curvature` must be a positive finite float; got -2"):
        geometric.Lorentz(3, curvature=-2)
    with pytest.raises(TypeError, match=r"Lorentz: `curvature` must be a positive float .* got str"):
        geometric.Lorentz(3, curvature="2")
    m = geometric.Lorentz(4)
    same = dataclasses.replace(m)
    assert same == m and hash(same) == hash(m)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.n = 2
    with pytest.raises(ValueError, match=re.escape("Lorentz(n=4, curvature=1.0).dist: `x` must have "
                                                   "shape (..., 5); got (4,).")):
        m.dist(jnp.zeros(4), jnp.zeros(4))
    x = points(m, 3, 0)
    assert m.verify_point(x)[0]
    ok, reason = m.verify_point(x.at[2, 0].multiply(-1), atol=1e-3)  # the lower sheet
    assert not ok and re.fullmatch(r"\|x₀ − √\(1/c \+ ‖x_s‖²\)\| / √\(1/c \+ ‖x_s‖²\) = 2 > atol "
                                   r"= 0\.001 \(the largest of 3 points, at index \(2,\)\)", reason), reason
