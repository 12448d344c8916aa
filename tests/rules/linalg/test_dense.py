"""Tests of rules/_linalg/dense.py: the inverse against finite differences and JAX's autodiff."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rules
from rules.testing import check_rrule
from tests.helpers import rand, rel_err


def well_conditioned(shape, seed=0, dtype=jnp.float64):
    n = shape[-1]
    return rand(shape, seed, dtype) + 2 * n ** 0.5 * jnp.broadcast_to(jnp.eye(n, dtype=dtype), shape)


# ----------------------------------------------------------------------------------------------
# inv


@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 3, 4, 4)])
@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128])
def test_inv_finite_differences(shape, dtype):
    check_rrule(rules.inv, well_conditioned(shape, 1, dtype))


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128])
def test_inv_matches_jax_vjp(dtype):
    a = well_conditioned((2, 5, 5), 2, dtype)
    b_bar = rand((2, 5, 5), 3, dtype)
    ours = jax.vjp(rules.inv, a)[1](b_bar)[0]
    ref = jax.vjp(jnp.linalg.inv, a)[1](b_bar)[0]
    assert rel_err(ours, ref) < 1e-12





def test_inv_float32():
    a = well_conditioned((4, 4), 6)
    b_bar = rand((4, 4), 7)
    g32 = jax.vjp(rules.inv, a.astype(jnp.float32))[1](b_bar.astype(jnp.float32))[0]
    g64 = jax.vjp(rules.inv, a)[1](b_bar)[0]
    assert g32.dtype == jnp.float32
    assert rel_err(g32, g64) < 1e-5


def test_inv_singular_propagates_like_jax():
    for a in [jnp.zeros((3, 3)), jnp.ones((2, 4, 4)), jnp.array([[1.0, 2.0], [2.0, 4.0]])]:
        ours, ref = jax.jit(rules.inv)(a), jax.jit(jnp.linalg.inv)(a)
        np.testing.assert_array_equal(np.isfinite(ours), np.isfinite(ref))
        assert not np.all(np.isfinite(ours))
        g = jax.jit(jax.grad(lambda a: jnp.sum(rules.inv(a))))(a)
        assert not np.all(np.isfinite(g))


def test_bad_input():
    with pytest.raises(TypeError, match="inv: `a` must be a JAX or NumPy array; got list"):
        rules.inv([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(ValueError, match=r"inv: `a` must have shape \(\.\.\., n, n\); got \(3,\)"):
        rules.inv(jnp.ones(3))
    with pytest.raises(TypeError, match="inv: `a` must have dtype .*; got <U1"):
        rules.inv(np.array([["a", "b"], ["c", "d"]]))
    with pytest.raises(ValueError, match=r"must have shape"):
        jax.jit(rules.inv)(jnp.ones(3))  # raised while tracing, under jit too
    with pytest.raises(ValueError, match=r"inv: `a` must have shape \(\.\.\., n, n\) \(square\); got \(2, 3, 4\)"):
        rules.inv(jnp.ones((2, 3, 4)))


@pytest.mark.parametrize("dtype", [jnp.int32, jnp.int64, jnp.bool_])
def test_integer_input_promoted_as_jnp(dtype):
    a = jnp.array([[2, 1], [1, 1]], dtype)
    np.testing.assert_array_equal(rules.inv(a), jnp.linalg.inv(a))
    assert rules.inv(a).dtype == jnp.linalg.inv(a).dtype


def test_half_precision_as_jnp():
    a = jnp.eye(3, dtype=jnp.float16)
    with pytest.raises(NotImplementedError, match="Unsupported dtype float16"):
        jax.block_until_ready(jnp.linalg.inv(a))
    with pytest.raises(NotImplementedError, match="Unsupported dtype float16"):
        jax.block_until_ready(rules.inv(a))
