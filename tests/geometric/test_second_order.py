"""Second derivatives at the removable singularities: ``exp`` and ``log`` at ``v = 0`` / ``y = x``,
and squared distances, on every manifold that has them.

A formula through a norm ``‖v‖`` has no second derivative at ``v = 0`` even where the map it
computes is smooth (``cos‖v‖``, ``arcosh(1 + δ)²``); these tests pin that ours are functions of
``‖v‖²`` with exact derivatives of every order there, that ``squared_dist`` has the Hessian
``2g`` at ``y = x``, and that ``dist``, which has no second derivative there, says so with nan.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geometric
from geometric import hyperbolic

MANIFOLDS = {
    "sphere": geometric.Sphere(5),
    "oblique": geometric.Oblique(4, 3),
    "poincare": geometric.PoincareBall(3, curvature=0.7),
    "lorentz": geometric.Lorentz(3, curvature=1.3),
    "spd-affine": geometric.SPD(3),
    "spd-log_euclidean": geometric.SPD(3, metric="log_euclidean"),
    "spd-bures_wasserstein": geometric.SPD(3, metric="bures_wasserstein"),
    "grassmann": geometric.Grassmann(5, 2),
    "stiefel-canonical": geometric.Stiefel(5, 2, metric="canonical", retraction="exp"),
}
# Grassmann's exp and log are matrix functions with no norm in them; its squared distance is
# checked below, like every manifold's.
EXP = [k for k, m in MANIFOLDS.items() if "exp" in m.capabilities and k != "grassmann"]
LOG = [k for k, m in MANIFOLDS.items() if "log" in m.capabilities and k != "grassmann"]
DIST = [k for k, m in MANIFOLDS.items() if "dist" in m.capabilities]
# Bures–Wasserstein's log at y = x is rounding, not 0 (a square root of XY): dist there is ~1e-8,
# a norm of rounding with a unit gradient, not the singular point itself.
EXACT_AT_X = [k for k in DIST if k != "spd-bures_wasserstein"]


def _setup(name):
    m = MANIFOLDS[name]
    x = m.random_point(jax.random.PRNGKey(0), jnp.float64)
    v = m.random_tangent(jax.random.PRNGKey(1), x)
    w = jax.random.normal(jax.random.PRNGKey(2), x.shape, jnp.float64)
    return m, x, v, w


def _second_difference(f, h=1e-3):
    """Richardson-extrapolated central second difference of ``f`` at 0: error O(h⁴)."""
    f = jax.jit(f)
    d = lambda h: (f(h) - 2 * f(0.0) + f(-h)) / h**2
    return (4 * d(h / 2) - d(h)) / 3


@pytest.mark.parametrize("name", EXP)
def test_exp_has_its_second_derivative_at_zero(name):
    m, x, v, w = _setup(name)
    f = lambda t: jnp.sum(m.exp(x, t * v) * w)
    np.testing.assert_allclose(jax.jit(jax.grad(jax.grad(f)))(0.0), _second_difference(f), rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("name", LOG)
def test_log_has_its_second_derivative_at_the_base_point(name):
    m, x, v, w = _setup(name)
    y = lambda t: m.exp(x, t * v) if "exp" in m.capabilities else m.retract(x, t * v)
    f = lambda t: jnp.sum(m.log(x, y(t)) * w)
    np.testing.assert_allclose(jax.jit(jax.grad(jax.grad(f)))(0.0), _second_difference(f), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", DIST)
def test_squared_dist_has_hessian_twice_the_metric_at_y_equal_x(name):
    m, x, v, _ = _setup(name)
    hv = jax.jvp(jax.grad(lambda y: m.squared_dist(x, y)), (x,), (v,))[1]
    np.testing.assert_allclose(jnp.sum(hv * v), 2 * m.inner(x, v, v), rtol=1e-10)
    assert float(jnp.max(jnp.abs(jax.grad(lambda y: m.squared_dist(x, y))(x)))) < 1e-13
    # and away from x it is dist², its derivatives those of dist²
    y = m.exp(x, 0.3 * v) if "exp" in m.capabilities else m.retract(x, 0.3 * v)
    np.testing.assert_allclose(m.squared_dist(x, y), m.dist(x, y) ** 2, rtol=1e-12)
    g1 = jax.grad(lambda y: m.squared_dist(x, y))(y)
    g2 = jax.grad(lambda y: m.dist(x, y) ** 2)(y)
    np.testing.assert_allclose(g1, g2, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", EXACT_AT_X)
def test_dist_says_it_has_no_second_derivative_at_y_equal_x(name):
    """dist's gradient there is the subgradient 0; its Hessian, and dist²'s through it, nan —
    never the wrong 0 a masked square root would give."""
    m, x, v, _ = _setup(name)
    assert float(jnp.max(jnp.abs(jax.grad(lambda y: m.dist(x, y))(x)))) == 0
    assert float(jnp.max(jnp.abs(jax.grad(lambda y: m.dist(x, y) ** 2)(x)))) == 0
    hv = jax.jvp(jax.grad(lambda y: m.dist(x, y) ** 2), (x,), (v,))[1]
    assert np.isnan(hv).any()
    # away from x, dist's second derivative is a number
    y = m.exp(x, 0.3 * v) if "exp" in m.capabilities else m.retract(x, 0.3 * v)
    assert np.isfinite(jax.jvp(jax.grad(lambda y: m.dist(x, y)), (y,), (v,))[1]).all()


def test_norm_second_derivative_is_nan_at_zero_and_inner_is_the_smooth_square():
    m, x, v, _ = _setup("sphere")
    zero = jnp.zeros_like(v)
    assert float(jnp.max(jnp.abs(jax.grad(lambda u: m.norm(x, u))(zero)))) == 0
    assert np.isnan(jax.jvp(jax.grad(lambda u: m.norm(x, u) ** 2), (zero,), (v,))[1]).any()
    hv = jax.jvp(jax.grad(lambda u: m.inner(x, u, u)), (zero,), (v,))[1]
    np.testing.assert_allclose(jnp.sum(hv * v), 2 * m.inner(x, v, v), rtol=1e-12)


def test_squared_dist_is_smooth_in_float32_and_batched():
    m = geometric.PoincareBall(4)
    x = jnp.stack([m.random_point(k, jnp.float32) for k in jax.random.split(jax.random.PRNGKey(0), 3)])
    v = m.random_tangent(jax.random.PRNGKey(1), x)
    hv = jax.jvp(jax.grad(lambda y: jnp.sum(m.squared_dist(x, y))), (x,), (v,))[1]
    np.testing.assert_allclose(jnp.sum(hv * v, -1), 2 * m.inner(x, v, v), rtol=1e-5)
    assert hv.dtype == jnp.float32


@pytest.mark.parametrize("f", [hyperbolic.expmap0, hyperbolic.logmap0])
def test_origin_maps_have_their_second_derivative_at_zero(f):
    w = jnp.asarray([0.3, -0.2, 0.5])
    a = jnp.asarray([1.0, 2.0, -1.0])
    g = lambda t: jnp.sum(f(t * w, curvature=0.8) * a)
    np.testing.assert_allclose(jax.grad(jax.grad(g))(0.0), _second_difference(g), atol=1e-9)
    gg = lambda t: jnp.sum(f(t * w + 0.1, curvature=0.8) ** 2)  # third order, away from 0 too
    np.testing.assert_allclose(jax.grad(jax.grad(gg))(0.0), _second_difference(gg), rtol=1e-7)


def test_a_trust_region_karcher_mean_from_a_data_point():
    """The cost Σ d²(x, aᵢ)/2 started at a data point: its Hessian there includes the metric of
    the coinciding term (with dist**2 it would be nan, never a silently wrong step)."""
    m = geometric.SPD(3)
    a = jnp.stack([m.random_point(k, jnp.float64) for k in jax.random.split(jax.random.PRNGKey(3), 5)])
    cost = lambda x: 0.5 * jnp.mean(m.squared_dist(jnp.broadcast_to(x, a.shape), a))
    result = geometric.solvers.trust_region(cost, m, a[0])
    assert result.converged and result.iterations < 10
    g = jax.grad(lambda x: jnp.sum(jax.vmap(lambda ai: m.squared_dist(x, ai))(a)))(result.point)
    assert float(jnp.max(jnp.abs(m.egrad_to_rgrad(result.point, g)))) < 1e-8
