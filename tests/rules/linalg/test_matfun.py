"""Tests of rules/_linalg/matfun.py: the Cayley transform."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rules
from rules.testing import check_rrule
from tests.helpers import rand as _rand


def _mT(x):
    return jnp.swapaxes(x, -1, -2)


def _eye(n, like):
    return jnp.broadcast_to(jnp.eye(n, dtype=like.dtype), (*like.shape[:-2], n, n))


def plain_cayley(c):
    eye = _eye(c.shape[-1], c)
    return (eye - c) @ jnp.linalg.inv(eye + c)


def plain_c(x, a, weighting):
    if weighting == "skew":
        return x @ ((a - a.T) / 2) @ _mT(x)
    p = jnp.tril(x @ a @ _mT(x), -1) / math.sqrt(x.shape[-1])
    return p - _mT(p)


def plain_attention(x, a, weighting="skew"):
    """The layer in plain jnp ops, as a user would write it (the paper's ZΛ, transposed)."""
    return _mT(plain_cayley(plain_c(x, a, weighting))) @ x


def plain_feedforward(x, w_dense, bias=None, activation=jnp.tanh):
    z = x @ w_dense.T
    return x + activation(z if bias is None else z + jnp.broadcast_to(bias, z.shape))


def _skew(shape, seed):
    s = _rand(shape, seed)
    return s - _mT(s)


# ----------------------------------------------------------------------------------------------
# Cayley transform


@pytest.mark.parametrize("n", [1, 3, 4, 6])
def test_cayley_matches_definition_and_is_orthogonal(n):
    c = _skew((3, n, n), n)
    general = _rand((3, n, n), n, scale=0.3)  # not skew: still (I - C)(I + C)⁻¹
    lam, lam_ref, lam_general, lam_general_ref = jax.jit(
        lambda c, g: (rules.cayley(c), plain_cayley(c), rules.cayley(g), plain_cayley(g)))(c, general)
    np.testing.assert_allclose(lam, lam_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lam_general, lam_general_ref, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(_mT(lam) @ lam, _eye(n, lam), atol=1e-12)
    np.testing.assert_allclose(np.linalg.det(lam), np.ones(3), atol=1e-12)


@pytest.mark.parametrize("n, dtype", [(3, jnp.float64), (6, jnp.float64), (4, jnp.complex128),
                                      (5, jnp.complex128)])
def test_cayley_matches_jax_vjp(n, dtype):
    c = _skew((2, n, n), n).astype(dtype) + _rand((2, n, n), 1, dtype, scale=0.2)
    lam_bar = _rand((2, n, n), 2, dtype)

    @jax.jit
    def vjps(c):
        return [jax.vjp(f, c)[1](lam_bar)[0] for f in (rules.cayley, plain_cayley)]

    ours, ref = vjps(c)
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n", [3, 6])
def test_cayley_check_rrule(n):
    # Skew plus a small general part keeps I + C well conditioned for the finite differences.
    c = _skew((2, n, n), n) / 2 + _rand((2, n, n), 3, scale=0.1)
    check_rrule(rules.cayley, c, max_entries=12)





def test_cayley_bad_input():
    with pytest.raises(ValueError, match=r"cayley: `c` must have shape \(\.\.\., n, n\) \(square\); "
                                         r"got \(2, 3\)"):
        rules.cayley(jnp.zeros((2, 3)))
    with pytest.raises(TypeError, match="cayley: `c` must have dtype .* got int32"):
        rules.cayley(jnp.zeros((2, 2), jnp.int32))
