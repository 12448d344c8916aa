"""What is particular to geometric/_manifolds/grassmann.py: the logarithm does not depend on the
basis, derivatives at repeated principal angles (the closed-form distance is in test_manifolds)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sla

import geometric
from tests.helpers import central_difference, rand

GR = geometric.Grassmann(6, 2)


def test_log_does_not_depend_on_the_basis():
    x, y = GR.project_point(rand((2, 6, 2), 1))
    q = np.linalg.qr(np.asarray(rand((2, 2), 2)))[0]
    logs = jax.jit(GR.log)(jnp.stack([x, x]), jnp.stack([y @ q, y]))
    np.testing.assert_allclose(logs[0], logs[1], atol=1e-13)


def test_dist_derivative_at_repeated_principal_angles():
    """Both principal angles 0.3 (an SVD-based logarithm has no derivative here)."""
    x = GR.project_point(rand((6, 2), 3))
    direction = sla.polar(np.asarray(GR.project(x, rand((6, 2), 4))))[0]  # horizontal, σ = (1, 1)
    z = np.cos(0.3) * x + np.sin(0.3) * direction  # the geodesic, for orthonormal directions
    np.testing.assert_allclose(sla.subspace_angles(np.asarray(x), np.asarray(z)), [0.3, 0.3],
                               rtol=1e-12)
    d = rand((6, 2), 5)
    to_z = jax.jit(lambda p: GR.dist(x, p))
    gradient = jax.jit(jax.grad(to_z))(z)
    want = central_difference(to_z, z, d, eps=1e-6)
    np.testing.assert_allclose(jnp.vdot(gradient, d), want, rtol=1e-7)


def test_rows_and_construction():
    rows = geometric.Grassmann(6, 2, rows=True)
    assert rows.shape == (2, 6)
    x, g = GR.project_point(rand((6, 2), 6)), rand((6, 2), 7)
    np.testing.assert_allclose(rows.project(x.T, g.T), GR.project(x, g).T, atol=1e-15)
    with pytest.raises(ValueError, match=r"Grassmann: `p` must satisfy p ≤ n"):
        geometric.Grassmann(2, 3)
