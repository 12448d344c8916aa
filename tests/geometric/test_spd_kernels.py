"""geometric/_core/spd_kernels.py: the closed-form 2×2 eigendecomposition and the matrix
functions built on it."""
import jax
import jax.numpy as jnp
import numpy as np

from geometric._core import spd_kernels
from tests.helpers import central_difference, rand


def test_closed_form_eigh_2x2():
    g = rand((50, 2, 2), 0)
    a = jnp.concatenate([g + g.mT, jnp.broadcast_to(jnp.eye(2), (2, 2, 2)) * jnp.asarray([[[3.0]], [[-1.0]]]),
                         jnp.zeros((1, 2, 2))])  # repeated eigenvalues and zero included
    w, q = spd_kernels.eigh(a)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(np.asarray(a)), atol=1e-14)
    np.testing.assert_allclose(q @ q.mT, np.broadcast_to(np.eye(2), a.shape), atol=1e-15)
    np.testing.assert_allclose((q * w[..., None, :]) @ q.mT, a, atol=1e-14)


def test_sym_function_2x2_value_and_derivative_at_a_repeated_eigenvalue():
    a = 2 * jnp.eye(2)
    d = rand((2, 2), 1)
    d = d + d.T
    f = jax.jit(lambda x: spd_kernels.sym_function(jnp.log, lambda w: 1 / w, x))
    np.testing.assert_allclose(f(a), np.log(2) * np.eye(2), atol=1e-15)
    _, tangent = jax.jvp(f, (a,), (d,))
    np.testing.assert_allclose(tangent, d / 2, atol=1e-15)  # D log(2I)[Ḋ] = Ḋ/2
    b = jnp.asarray([[2.0, 0.3], [0.3, 1.0]])
    np.testing.assert_allclose(jax.jvp(f, (b,), (d,))[1], central_difference(f, b, d), rtol=1e-8)
