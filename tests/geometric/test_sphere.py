"""What is particular to geometric/_manifolds/sphere.py: great circles in closed form."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geometric
from tests.helpers import rand

SPHERE = geometric.Sphere(5)


def test_dist_of_near_and_antipodal_points():
    x, y = SPHERE.project_point(rand((2, 4, 5), 0))
    step = 1e-9 * SPHERE.project(x, y)
    near = SPHERE.project_point(x + step)  # arccos(xᵀy) cannot resolve this angle
    dist = jax.jit(SPHERE.dist)(jnp.stack([x, x]), jnp.stack([-x, near]))
    np.testing.assert_allclose(dist[0], np.pi, rtol=1e-15)
    np.testing.assert_allclose(dist[1], np.linalg.norm(step, axis=-1), rtol=1e-6)


def test_exp_follows_the_great_circle():
    x = jnp.asarray([1.0, 0.0, 0.0, 0.0, 0.0])
    v = jnp.asarray([0.0, 0.0, 2.0, 0.0, 0.0])
    np.testing.assert_allclose(SPHERE.exp(x, v), [np.cos(2.0), 0, np.sin(2.0), 0, 0], atol=1e-15)
    np.testing.assert_allclose(SPHERE.log(x, SPHERE.exp(x, v)), v, atol=1e-14)


def test_construction():
    with pytest.raises(ValueError, match=r"Sphere: `n` must be ≥ 1; got 0"):
        geometric.Sphere(0)
    assert jax.tree.leaves({"x": SPHERE}) == [SPHERE]
