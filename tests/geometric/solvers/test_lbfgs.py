"""geometric/solvers/_lbfgs.py: the two-loop recursion, memory, a nonconvex Euclidean cost."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geometric
from geometric.solvers._lbfgs import _direction, _Memory
from geometric.solvers._problem import Problem
from tests.geometric.solvers.problems import SPECTRUM, SPHERE, rayleigh, starts


def test_two_loop_recursion_is_the_bfgs_inverse_hessian():
    """In ℝ⁴ with 3 of 5 slots in use: -H g with H from the BFGS updates of γI, oldest first."""
    rng = np.random.default_rng(0)
    s, y = rng.standard_normal((2, 5, 4))
    y = y + 3 * s  # <s, y> > 0
    rho = 1 / np.sum(s * y, axis=1)
    g = rng.standard_normal(4)
    gamma = 0.3
    problem = Problem("test", lambda x: jnp.sum(x ** 2), None, jnp.zeros(4))
    mem = _Memory(jnp.asarray(s), jnp.asarray(y), jnp.asarray(rho), jnp.int32(3),
                  jnp.asarray(gamma))
    h = gamma * np.eye(4)
    for j in range(2, 5):
        v = np.eye(4) - rho[j] * np.outer(y[j], s[j])
        h = v.T @ h @ v + rho[j] * np.outer(s[j], s[j])
    np.testing.assert_allclose(_direction(problem, jnp.zeros(4), jnp.asarray(g), mem), -h @ g,
                               rtol=1e-12)


def test_rosenbrock_in_euclidean_space():
    def rosenbrock(p):
        return (1 - p["x"]) ** 2 + 100 * (p["y"] - p["x"] ** 2) ** 2

    x0 = {"x": jnp.asarray(-1.2), "y": jnp.asarray(1.0)}
    res = geometric.solvers.lbfgs(rosenbrock, None, x0, gradient_tolerance=1e-10)
    assert bool(res.converged)
    np.testing.assert_allclose([res.point["x"], res.point["y"]], [1.0, 1.0], rtol=1e-9)


def test_memory_shortens_the_solve():
    x0 = starts(SPHERE, 1)[0]
    runs = {m: geometric.solvers.lbfgs(rayleigh, SPHERE, x0, memory=m, gradient_tolerance=1e-10)
            for m in (1, 10)}
    assert all(bool(r.converged) for r in runs.values())
    assert runs[10].iterations < runs[1].iterations
    np.testing.assert_allclose(-runs[10].cost, SPECTRUM.max(), rtol=1e-15)


def test_memory_option():
    x0 = starts(SPHERE, 1)[0]
    with pytest.raises(ValueError, match="lbfgs: `memory` must be ≥ 1; got 0"):
        geometric.solvers.lbfgs(rayleigh, SPHERE, x0, memory=0)
    with pytest.raises(TypeError, match="lbfgs: `memory` must be an int; got float"):
        geometric.solvers.lbfgs(rayleigh, SPHERE, x0, memory=2.0)
    assert jax.eval_shape(lambda x: geometric.solvers.lbfgs(rayleigh, SPHERE, x, memory=3),
                          x0).point.shape == (6,)
