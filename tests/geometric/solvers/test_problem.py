"""geometric/solvers/_problem.py: the product geometry of a pytree point, its Hessian, checks."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geometric
from geometric.solvers._problem import Problem
from tests.geometric.solvers.problems import SPHERE, rayleigh, starts

ST = geometric.Stiefel(5, 2)
SPEC = {"s": SPHERE, "t": ST, "e": None}


def _point(seed=0):
    keys = jax.random.split(jax.random.PRNGKey(seed), 3)
    return {"s": SPHERE.random_point(keys[0], jnp.float64),
            "t": jax.vmap(lambda k: ST.random_point(k, jnp.float64))(jax.random.split(keys[1], 2)),
            "e": jnp.arange(3.0)}


def _cost(p):
    return rayleigh(p["s"]) + jnp.sum(jnp.sin(p["t"])) + jnp.sum(p["e"] ** 3)


def test_the_product_acts_leaf_by_leaf():
    x = _point()
    problem = Problem("test", _cost, SPEC, x)
    u = problem.project(x, jax.tree.map(lambda a: jnp.cos(a) + 1, x))
    v = problem.project(x, jax.tree.map(jnp.sin, x))
    expected = (SPHERE.inner(x["s"], u["s"], v["s"]) + jnp.sum(ST.inner(x["t"], u["t"], v["t"]))
                + u["e"] @ v["e"])
    np.testing.assert_allclose(problem.inner(x, u, v), expected, rtol=1e-14)
    y = problem.retract(x, u)
    np.testing.assert_allclose(y["e"], x["e"] + u["e"])
    np.testing.assert_allclose(y["t"], ST.retract(x["t"], u["t"]))
    w = problem.transport(x, y, v)
    np.testing.assert_allclose(w["s"], SPHERE.transport(x["s"], y["s"], v["s"]))
    np.testing.assert_array_equal(w["e"], v["e"])
    assert problem.dim == 5 + 2 * 7 + 3
    assert math.isclose(problem.typical_distance, math.sqrt(math.pi ** 2 + 2 * 2 + 3))


def test_hessian_is_riemannian_and_symmetric():
    x = _point(1)
    problem = Problem("test", _cost, SPEC, x)
    f, g, hess = problem.linearize(x)
    f_ref, g_ref = problem.value_and_rgrad(x)
    np.testing.assert_allclose(f, f_ref, rtol=1e-15)
    u = problem.project(x, jax.tree.map(jnp.cos, x))
    v = problem.project(x, jax.tree.map(lambda a: a ** 2, x))
    hu, hv = hess(u), hess(v)
    np.testing.assert_allclose(problem.inner(x, u, hv), problem.inner(x, hu, v), rtol=1e-12)
    egrad, ehess = jax.jvp(jax.grad(_cost), (x,), (u,))
    np.testing.assert_allclose(hu["s"], SPHERE.ehess_to_rhess(x["s"], egrad["s"], ehess["s"],
                                                              u["s"]), rtol=1e-13)
    np.testing.assert_allclose(hu["e"], 6 * x["e"] * u["e"])
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-15), g, g_ref)


def test_typical_distances_are_pymanopts():
    def td(m, x):
        return Problem("test", lambda x: jnp.sum(x), m, x).typical_distance

    assert td(geometric.Grassmann(6, 4), starts(geometric.Grassmann(6, 4), 1)[0]) == 2.0
    assert math.isclose(td(geometric.Oblique(3, 4), starts(geometric.Oblique(3, 4), 1)[0]),
                        2 * math.pi)
    assert math.isclose(td(geometric.Orthogonal(4), starts(geometric.Orthogonal(4), 1)[0]),
                        2 * math.pi)
    assert math.isclose(td(None, jnp.zeros((2, 8))), 4.0)


def test_bad_points_and_costs():
    x = _point()
    with pytest.raises(TypeError, match=r"f: the arrays of `x0` must share one dtype; got "
                                        "float32, float64"):
        Problem("f", _cost, SPEC, {**x, "e": x["e"].astype(jnp.float32)})
    with pytest.raises(ValueError, match=r"f: `x0\['t'\]` must have shape \(\.\.\., 5, 2\)"):
        Problem("f", _cost, SPEC, {**x, "t": x["t"][..., :1]})
    with pytest.raises(ValueError, match=r"f: `x0\['t'\]` is not a point of Stiefel"):
        Problem("f", _cost, SPEC, {**x, "t": 2 * x["t"]})
    with pytest.raises(ValueError, match="f: `manifolds` must have the structure of `params`"):
        Problem("f", _cost, {"s": SPHERE}, x)
    with pytest.raises(TypeError, match=r"f: `x0\['e'\]` must be a JAX or NumPy array; got float"):
        Problem("f", _cost, SPEC, {**x, "e": 1.0})
    with pytest.raises(TypeError, match="f: `cost` must return a real scalar array; got dtype "
                                        "int32"):
        Problem("f", lambda p: jnp.int32(1), SPEC, x)
    with pytest.raises(TypeError, match="f: `cost` must return a real scalar array; got tuple"):
        Problem("f", lambda p: (1.0, 2.0), SPEC, x)
    # A traced start cannot be looked at: only its shape is checked.
    jax.jit(lambda x: Problem("f", _cost, SPEC, x).dim)({**x, "t": 2 * x["t"]})
