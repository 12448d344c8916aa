"""Small problems with known optima that the solver tests share."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import geometric
from tests.helpers import symmetric_with_spectrum

SOLVERS = ["steepest_descent", "conjugate_gradient", "lbfgs", "trust_region"]

# A well-separated spectrum: every solver converges in a few dozen iterations.
SPECTRUM = np.array([-2.0, -1.0, 0.5, 1.0, 2.0, 4.0])
A = symmetric_with_spectrum(SPECTRUM, 0)
SPHERE = geometric.Sphere(6)


def rayleigh(x):
    """``-xᵀAx``, minimised on the sphere by the dominant eigenvector: ``-max(SPECTRUM)``."""
    return -x @ A.astype(x.dtype) @ x


def starts(manifold, count, dtype=jnp.float64, seed=0):
    """``count`` random points, stacked."""
    keys = jax.random.split(jax.random.PRNGKey(seed), count)
    return jax.vmap(lambda k: manifold.random_point(k, dtype))(keys)


def solver(name):
    return getattr(geometric.solvers, name)
