"""What is particular to geometric/_manifolds/orthogonal.py: the distance has derivatives at
repeated rotation angles (closed forms against scipy's logm are in test_manifolds)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sla

import geometric
from tests.helpers import central_difference, rand

O4 = geometric.Orthogonal(4)


def test_dist_derivative_at_repeated_rotation_angles():
    """XᵀY rotates two orthogonal planes by the same angle (eigenvalues e^{±0.7i}, twice)."""
    x = O4.project_point(rand((4, 4), 2))
    q = np.linalg.qr(np.asarray(rand((4, 4), 3)))[0]
    k = q @ np.kron(np.eye(2), [[0.0, -0.7], [0.7, 0.0]]) @ q.T
    y = jnp.asarray(np.asarray(x) @ sla.expm(k))
    d = rand((4, 4), 4)
    to_y = jax.jit(lambda p: O4.dist(x, p))
    np.testing.assert_allclose(to_y(y), np.linalg.norm(k), rtol=1e-12)
    gradient = jax.jit(jax.grad(to_y))(y)
    want = central_difference(to_y, y, d, eps=1e-6)
    np.testing.assert_allclose(jnp.vdot(gradient, d), want, rtol=1e-7)


def test_construction():
    with pytest.raises(TypeError, match=r"Orthogonal: `n` must be an int"):
        geometric.Orthogonal(True)
