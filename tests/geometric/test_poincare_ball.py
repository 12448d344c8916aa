"""What is particular to geometric/_manifolds/poincare_ball.py: the operator laws of every manifold
(the ``laws`` of test_manifolds.py), the closed forms of Ganea et al., the safe ball in float32,
and the Fréchet mean found by the optimizers."""
import dataclasses
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import geometric
from geometric import optim
from geometric._core import hyperbolic as hyp
from tests.geometric.test_manifolds import BATCH, UNOPTIMIZED, jit_methods, laws
from tests.helpers import rand

# One curvature ≠ 1 (the contract tests cover c = 1): each case compiles the laws once.
BALLS = {"c0.5": geometric.PoincareBall(3, curvature=0.5)}
TOL = 1e-12
every = pytest.mark.parametrize("name", list(BALLS))


def points(m, n, seed, dtype=jnp.float64):
    return jax.vmap(lambda k: m.random_point(k, dtype))(jax.random.split(jax.random.PRNGKey(seed), n))


@functools.cache
def results(name):
    m = BALLS[name]
    x = points(m, BATCH, 0)
    return m, jax.tree.map(np.asarray, laws(m, x, rand((6, BATCH, m.n), seed=1)))


def close(got, want, tol=TOL, err_msg=""):
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=err_msg)


# ----------------------------------------------------------------------------------------------
# Closed forms in NumPy (Ganea, Bécigneul & Hofmann 2018), one point pair at a time


def np_mobius(x, y, c):
    xy, x2, y2 = x @ y, x @ x, y @ y
    return ((1 + 2 * c * xy + c * y2) * x + (1 - c * x2) * y) / (1 + 2 * c * xy + c**2 * x2 * y2)


def np_lambda(x, c):
    return 2 / (1 - c * x @ x)


def np_exp(x, v, c):
    nv = np.linalg.norm(v)
    return np_mobius(x, np.tanh(np.sqrt(c) * np_lambda(x, c) * nv / 2) * v / (np.sqrt(c) * nv), c)


def np_log(x, y, c):
    u = np_mobius(-x, y, c)
    nu = np.linalg.norm(u)
    return 2 / (np.sqrt(c) * np_lambda(x, c)) * np.arctanh(np.sqrt(c) * nu) * u / nu


def np_dist(x, y, c):
    return 2 / np.sqrt(c) * np.arctanh(np.sqrt(c) * np.linalg.norm(np_mobius(-x, y, c)))


def np_transport(x, y, v, c):
    """(λ_x/λ_y) gyr[y, −x] v with the gyration by its definition ⊖(a ⊕ b) ⊕ (a ⊕ (b ⊕ w)); the
    gyration is linear, so v is scaled into the ball and back."""
    s = 1e-3 / np.linalg.norm(v)
    a, b = y, -x
    gyr = np_mobius(-np_mobius(a, b, c), np_mobius(a, np_mobius(b, s * v, c), c), c) / s
    return np_lambda(x, c) / np_lambda(y, c) * gyr


# ----------------------------------------------------------------------------------------------
# The laws of every manifold


@every
def test_projection_gradient_and_metric(name):
    m, r = results(name)
    close(r["batched"]["project"], r["g"])                 # T_x = ℝⁿ
    close(r["project_twice"], r["batched"]["project"])
    close(r["rgrad_projected"], r["batched"]["egrad_to_rgrad"])
    close(*r["riesz"], 10 * TOL)                             # inner(x, rgrad, ξ) = <g, ξ>
    close(r["inner_swapped"], r["batched"]["inner"], 10 * TOL)
    assert r["inner_uu"].min() > 0
    close(r["batched"]["norm"] ** 2, r["inner_uu"], 10 * TOL)
    lam = 2 / (1 - m.curvature * np.sum(r["x"] ** 2, -1))
    close(r["inner_uu"], lam**2 * np.sum(r["u"] ** 2, -1), 10 * TOL)


@every
def test_retraction_is_the_exponential_map(name):
    m, r = results(name)
    got = r["batched"]
    close(r["retract_zero"], r["x"])
    close(r["exp_zero"], r["x"])
    assert got["manifold_error"].max() == 0 and m.manifold_error(r["exp_w"]).max() == 0
    for errors in (r["retract_steps"], r["exp_steps"]):   # ‖R_x(tv) − x − tv‖ = O(t²)
        np.testing.assert_allclose(np.log2(errors[:-1] / errors[1:]), 2.0, atol=0.05)
    close(got["retract"], m.exp(r["x"], 0.3 * r["v"]))


@every
def test_transport_log_and_dist_laws(name):
    m, r = results(name)
    got = r["batched"]
    close(r["transport_to_self"], r["u"])
    close(got["retract_transport"][0], got["retract"])
    close(got["retract_transport"][1], got["transport"])
    close(r["project_point_of_point"], r["x"])
    close(r["log_exp"][0], r["w"], 10 * TOL)
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
    assert r["batched"]["inner"].shape == (BATCH,)
    for key, value in first.items():
        batched = jax.tree.map(lambda a: a[0], r["batched"][key])
        for got, want in zip(jax.tree.leaves(batched), jax.tree.leaves(value)):
            close(got, want, 2e-5, err_msg=key)


# ----------------------------------------------------------------------------------------------
# Closed forms


@every
def test_closed_forms(name):
    m, r = results(name)
    c = m.curvature
    for i in range(BATCH):
        x, a, b, v, u = (r[k][i] for k in ("x", "a", "b", "v", "u"))
        close(m.dist(x, a), np_dist(x, a, c), 1e-11)
        close(m.dist(a, b), np_dist(a, b, c), 1e-11)
        close(m.exp(x, v), np_exp(x, v, c), 1e-11)
        close(m.log(x, a), np_log(x, a, c), 1e-10)
        close(m.transport(x, a, u), np_transport(x, a, u, c), 1e-8)  # the reference loses digits


@every
def test_transport_is_parallel_along_the_geodesic(name):
    """An isometry taking the geodesic's velocity at x to its velocity at y: P(log_x y) = −log_y x."""
    m, r = results(name)
    x, y, u, v = r["x"], r["a"], r["u"], r["v"]
    pu, pv = m.transport(x, y, u), m.transport(x, y, v)
    close(m.inner(y, pu, pv), m.inner(x, u, v), 1e-11)
    close(m.transport(x, y, m.log(x, y)), -m.log(y, x), 1e-11)
    close(m.transport(y, x, pu), u, 1e-11)


def test_far_points_and_the_origin():
    m = BALLS["c0.5"]
    c = m.curvature
    x = jnp.asarray([0.0, 0.0, 0.0])
    for radius in (0.5, 0.99, 1 - 1e-6):
        y = jnp.asarray([radius / np.sqrt(c), 0.0, 0.0])
        close(m.dist(x, y), 2 / np.sqrt(c) * np.arctanh(radius), 1e-9)  # d depends on 1 − r
        close(m.exp(x, m.log(x, y)), y, 1e-9)
        close(m.dist(-y, y), 4 / np.sqrt(c) * np.arctanh(radius), 1e-10)


# ----------------------------------------------------------------------------------------------
# The safe ball


@pytest.mark.parametrize("c", [1.0, 4.0])
def test_safe_ball_float32_values_and_gradients_are_finite(c):
    """On the boundary of the safe ball (√c‖x‖ = 1 − ε), at and between antipodes, and beyond it
    by rounding: every method and its gradient is finite. Just inside the unit sphere and outside
    the ball, points are not in the domain: every method but project_point gives nan, and the
    gradients stay finite (0 through the nan)."""
    m = geometric.PoincareBall(3, curvature=c)
    f32 = jnp.float32
    edge = (1 - hyp.ball_margin(f32)) / np.sqrt(c)
    e0, e1 = np.eye(3, dtype=np.float32)[:2]
    on = [edge * e0, -edge * e0, edge * e1]
    rounding = [(1 - 0.6 * hyp.ball_margin(f32)) / np.sqrt(c) * e1]
    outside = [(1 - 1e-7) / np.sqrt(c) * e1, 2 / np.sqrt(c) * e0]
    inside = on + rounding
    pairs = [(a, b) for a in inside for b in inside] + [(a, b) for a in outside for b in inside]
    n_inside = len(inside) ** 2
    x, y = (jnp.asarray(np.stack(p), f32) for p in zip(*pairs))
    v = jnp.asarray(rand(x.shape, 3), f32)
    functions = {
        "dist": lambda x, y, v: m.dist(x, y), "dist²": lambda x, y, v: m.dist(x, y) ** 2,
        "log": lambda x, y, v: m.log(x, y), "exp": lambda x, y, v: m.exp(x, y),
        "exp_far": lambda x, y, v: m.exp(x, 1e4 * y),
        "transport": lambda x, y, v: m.transport(x, y, v),
        "egrad_to_rgrad": lambda x, y, v: m.egrad_to_rgrad(x, y),
        "inner": lambda x, y, v: m.inner(x, y, v), "project_point": lambda x, y, v: m.project_point(y),
    }

    @functools.partial(jax.jit, compiler_options=UNOPTIMIZED)
    def evaluate(x, y, v):
        return {key: (jax.vmap(f)(x, y, v), jax.vmap(jax.grad(
            lambda *a: jnp.sum(f(*a)), argnums=(0, 1, 2)))(x, y, v)) for key, f in functions.items()}

    for key, (values, grads) in evaluate(x, y, v).items():
        assert np.isfinite(values[:n_inside]).all(), key
        if key != "project_point":
            assert np.isnan(values[n_inside:]).any(axis=tuple(range(1, values.ndim))).all(), key
        assert all(np.isfinite(g).all() for g in grads), key
    dist = np.asarray(m.dist(x[:16], y[:16])).reshape(4, 4)[:3, :3]
    close(np.diag(dist), 0, 0)
    close(dist[0, 1], 2 * hyp.max_distance(f32, c), 1e-4)      # antipodes: 16.6/√c (float32 edge)
    stepped = m.exp(x[:n_inside], 1e4 * v[:n_inside])
    assert float(m.manifold_error(stepped).max()) <= 2 * np.finfo(f32).eps  # in the safe ball
    assert float(m.manifold_error(x[-1])) > 0.9 and float(m.manifold_error(m.project_point(x[-1]))) == 0


def test_float32_accuracy_for_near_and_far_points():
    """Near points: dist ≈ λ_x‖y − x‖ to float32 precision (the artanh of a Möbius difference
    loses digits there); far points on the edge of the float32 safe ball: float32 agrees with
    float64 on the same float32 inputs."""
    m = geometric.PoincareBall(5)
    x = np.asarray(points(m, 4, 5, jnp.float32))
    h = 1e-4 * np.asarray(rand(x.shape, 6), np.float32)
    y = x + h
    want = 2 / (1 - np.sum(x.astype(np.float64) ** 2, -1)) * np.linalg.norm(h.astype(np.float64), axis=-1)
    np.testing.assert_allclose(m.dist(jnp.asarray(x), jnp.asarray(y)), want, rtol=2e-3)
    far = np.asarray(rand((2, 4, 5), 7))
    far = (1 - hyp.ball_margin(jnp.float32)) * far / np.linalg.norm(far, axis=-1, keepdims=True)
    a, b = far.astype(np.float32)
    got = m.dist(jnp.asarray(a), jnp.asarray(b))
    want = m.dist(jnp.asarray(a, jnp.float64), jnp.asarray(b, jnp.float64))
    np.testing.assert_allclose(got, want, rtol=1e-4)


# ----------------------------------------------------------------------------------------------
# Optimizers: the Fréchet mean


def symmetric_cloud(m, centre, lengths):
    """exp_centre(±l eᵢ/λ) for each axis eᵢ: symmetric under the geodesic symmetry at ``centre``,
    an isometry, so their Fréchet mean (unique: the ball has negative curvature) is ``centre``."""
    lam = 2 / (1 - m.curvature * centre @ centre)
    directions = jnp.concatenate([jnp.eye(m.n), -jnp.eye(m.n)]) * (lengths[:, None] / lam)
    return m.exp(jnp.broadcast_to(centre, directions.shape), directions)


@pytest.mark.parametrize("optimizer", ["riemannian_adam", "riemannian_sgd"])
def test_frechet_mean_of_symmetric_points_is_the_centre(optimizer):
    m = geometric.PoincareBall(4, curvature=0.5)
    centre = hyp.expmap0(jnp.asarray([0.4, -0.3, 0.2, 0.1]), 0.5)
    cloud = symmetric_cloud(m, centre, jnp.asarray([0.5, 1.0, 1.5, 2.0] * 2))
    steps = 400
    opt = {"riemannian_adam": optim.riemannian_adam(optax.cosine_decay_schedule(0.05, steps), m),
           "riemannian_sgd": optim.riemannian_sgd(0.02, m, momentum=0.5)}[optimizer]
    loss = lambda p: jnp.sum(m.dist(jnp.broadcast_to(p, cloud.shape), cloud) ** 2)

    @jax.jit
    def run(p):
        def step(carry, _):
            p, s = carry
            u, s = opt.update(jax.grad(loss)(p), s, p)
            return (optax.apply_updates(p, u), s), None
        return jax.lax.scan(step, (p, opt.init(p)), None, length=steps)[0][0]

    mean = run(jnp.zeros(4))
    assert float(m.dist(mean, centre)) < 1e-6, float(m.dist(mean, centre))
    assert float(m.manifold_error(mean)) == 0


def test_manifold_adam_rejects_the_ball():
    with pytest.raises(TypeError, match=r"manifold_adam: needs manifolds whose points are "
                                         r"orthonormal frames .* got PoincareBall\(n=3"):
        optim.manifold_adam(1e-3, geometric.PoincareBall(3))


# ----------------------------------------------------------------------------------------------
# Construction, checks, transformations


def test_construction():
    assert geometric.PoincareBall(5) == geometric.PoincareBall(5, curvature=1)
    assert hash(geometric.PoincareBall(5, np.float32(2.0))) == hash(geometric.PoincareBall(5, 2.0))
    assert isinstance(geometric.PoincareBall(5, 1).curvature, float)
    assert geometric.PoincareBall(2).shape == (2,) and jax.tree.leaves([BALLS["c0.5"]]) == [BALLS["c0.5"]]
    with pytest.raises(ValueError, match=r"PoincareBall: `n` must be ≥ 1; got 0"):
        geometric.PoincareBall(0)
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match=r"PoincareBall: `curvature` must be a positive finite"):
            geometric.PoincareBall(3, curvature=bad)
    for bad in ("1", True, None):
        with pytest.raises(TypeError, match=r"PoincareBall: `curvature` must be a positive float"):
            geometric.PoincareBall(3, curvature=bad)
    m = BALLS["c0.5"]
    same = dataclasses.replace(m)
    assert same == m and hash(same) == hash(m) and same is not m
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.curvature = 2.0
    assert set(m.capabilities) == {"exp", "log", "dist"}


def test_input_checks_and_verify_point():
    m = geometric.PoincareBall(4)
    with pytest.raises(ValueError, match=re.escape("PoincareBall(n=4, curvature=1.0).dist: `x` must "
                                                   "have shape (..., 4); got (3,).")):
        m.dist(jnp.zeros(3), jnp.zeros(3))
    with pytest.raises(ValueError, match=r"\.log: `y` must have the shape of `x`, \(4,\); got \(2, 4\)"):
        m.log(jnp.zeros(4), jnp.zeros((2, 4)))
    with pytest.raises(TypeError, match=r"exp: `v` must have dtype float32, float64; got int32"):
        m.exp(jnp.zeros(4), jnp.zeros(4, jnp.int32))
    with pytest.raises(NotImplementedError, match=r"PoincareBall has no `to_frame`"):
        m.to_frame(jnp.zeros(4))
    x = points(m, 3, 0)
    assert m.verify_point(x)[0]
    ok, reason = m.verify_point(x.at[1].set(jnp.asarray([1.5, 0, 0, 0])), atol=1e-3)
    assert not ok and re.fullmatch(r"max\(0, √c‖x‖ − \(1 − ε\)\) = 0\.5 > atol = 0\.001 \(the "
                                   r"largest of 3 points, at index \(1,\)\)", reason), reason


def test_jit_vmap_and_grad():
    m = BALLS["c0.5"]
    x, y = points(m, 5, 1), points(m, 5, 2)
    dist = jax.jit(geometric.PoincareBall.dist, static_argnums=0)(m, x, y)
    close(jax.vmap(m.dist)(x, y), dist)
    close(dist, [np_dist(a, b, 0.5) for a, b in zip(np.asarray(x), np.asarray(y))], 1e-11)
    # grad of the distance: the unit-speed direction, −log_x(y)/d, after the Riesz map
    g = jax.vmap(jax.grad(m.dist))(x, y)
    close(m.egrad_to_rgrad(x, g), -m.log(x, y) / dist[:, None], 1e-10)


def test_sharded_batch_of_points():
    """A batch sharded over two devices (the test configuration's CPU devices) gives the
    unsharded results, and a riemannian_adam step keeps the sharding."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    m = BALLS["c0.5"]
    sharding = NamedSharding(Mesh(np.asarray(jax.devices()[:2]), ("batch",)), PartitionSpec("batch"))
    x, y = points(m, 4, 1), points(m, 4, 2)
    xs, ys = jax.device_put(x, sharding), jax.device_put(y, sharding)
    close(jax.jit(m.dist)(xs, ys), m.dist(x, y))
    close(jax.jit(m.log)(xs, ys), m.log(x, y))
    opt = optim.riemannian_adam(0.01, m)
    loss = lambda p: jnp.sum(m.dist(p, ys) ** 2)
    step = jax.jit(lambda p, s: opt.update(jax.grad(loss)(p), s, p))
    updates, _ = step(xs, opt.init(xs))
    assert optax.apply_updates(xs, updates).sharding.is_equivalent_to(sharding, 2)
