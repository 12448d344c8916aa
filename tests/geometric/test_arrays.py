"""Tests of geometric/_core/arrays.py."""
import jax
import jax.numpy as jnp
import numpy as np

from geometric._core.arrays import safe_sqrt


def test_safe_sqrt_has_derivative_zero_at_zero():
    s = jnp.asarray([0.0, 4.0])
    np.testing.assert_array_equal(safe_sqrt(s), [0.0, 2.0])
    np.testing.assert_array_equal(jax.vmap(jax.grad(safe_sqrt))(s), [0.0, 0.25])
