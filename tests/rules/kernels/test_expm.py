"""Tests of rules/_kernels/expm.py: φ against SciPy (float64). The Padé exponential and its
Fréchet derivative are tested through rules.expm in tests/rules/linalg/test_matfun.py."""
import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg as sla

from rules.internal import phi
from tests.helpers import rand, rel_err


def test_phi_gives_the_exponential():
    """``exp(X) = I + Xφ(X)`` against SciPy, for norms that need no squaring up to many."""
    a = rand((4, 6, 6), 1)
    scales = jnp.asarray([1e-3, 0.5, 4.0, 40.0])[:, None, None]
    a = scales * a / jnp.linalg.norm(a, axis=(-2, -1), keepdims=True)
    got = jax.jit(lambda x: jnp.broadcast_to(jnp.eye(6), x.shape) + x @ phi(x))(a)
    for g, ai in zip(got, a):
        assert rel_err(g, sla.expm(np.asarray(ai))) < 1e-13
