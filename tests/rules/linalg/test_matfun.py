"""Tests of rules/_linalg/matfun.py: expm (the Cayley transform is tested in tests/rules/layers)."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rules
from rules.testing import check_rrule
from tests.helpers import rand, rel_err
from tests.rules.linalg.sharded import assert_sharded_like_unsharded


def test_expm_finite_differences():
    # LU of the Padé denominator and a few squarings; tiny matrices (the closed-form inverse) are
    # compared with JAX's derivatives below.
    # check_jit=False: op by op, the squaring loops compile one program per step and branch.
    check_rrule(rules.expm, 2.0 * rand((5, 5), 1, jnp.complex128), check_jit=False)


@pytest.mark.parametrize("shape,dtype", [((3, 3, 3), jnp.float64), ((2, 6, 6), jnp.float32)])
def test_expm_matches_jax(shape, dtype):
    # Both Padé degrees (13 in double, 7 in single precision) and both denominator solves (closed
    # form, LU); complex input is checked against finite differences above. Slices of very
    # different norms: each keeps its own number of squarings.
    scales = jnp.array([0.01, 1.0, 30.0][: shape[0]])[:, None, None]
    a = (rand(shape, 2, dtype) * scales).astype(dtype)
    da, x_bar = rand(shape, 3, dtype), rand(shape, 4, dtype)

    @jax.jit
    def derivatives(a):
        return [(f(a), jax.vjp(f, a)[1](x_bar), jax.jvp(f, (a,), (da,))[1])
                for f in (rules.expm, jax.scipy.linalg.expm)]

    ours, ref = derivatives(a)
    # Both are backward stable; with 30·‖A‖ the squarings amplify rounding by ~κ(exp).
    tol = 1e-4 if dtype == jnp.float32 else 1e-10
    for x, y in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(ref)):
        assert x.dtype == y.dtype
        for k in range(shape[0]):
            assert rel_err(x[k], y[k]) < tol


def test_expm_properties():
    k = rand((4, 3, 3), 5)
    k = k - k.mT   # skew-symmetric: exp is a rotation
    r = jax.jit(rules.expm)(k)
    np.testing.assert_allclose(r @ r.mT, jnp.broadcast_to(jnp.eye(3), r.shape), atol=1e-13)
    np.testing.assert_allclose(jnp.linalg.det(r), 1.0, atol=1e-13)
    # exp(A) commutes with A, and the Fréchet derivative in the direction A is A exp(A).
    a = rand((6, 6), 6)
    x, dx = jax.jit(lambda a: jax.jvp(rules.expm, (a,), (a,)))(a)
    np.testing.assert_allclose(dx, a @ x, rtol=1e-11, atol=1e-11)
    # The pullback is the Fréchet derivative at Aᵀ.
    g = rand((6, 6), 7)
    pull = jax.jit(lambda a, g: jax.vjp(rules.expm, a)[1](g)[0])(a, g)
    push_t = jax.jit(lambda a, g: jax.jvp(rules.expm, (a.T,), (g,))[1])(a, g)
    np.testing.assert_allclose(pull, push_t, rtol=1e-11, atol=1e-11)


def test_expm_higher_derivatives():
    # Against finite differences of the (checked) gradient: JAX's own expm takes minutes to
    # compile under jax.hessian.
    a, d = rand((2, 2), 8), rand((2, 2), 9)

    def loss(a):
        return jnp.sum(jnp.sin(rules.expm(a)))

    grad = jax.jit(jax.grad(loss))
    hvp, grad_of_grad = jax.jit(lambda a, d: (
        jax.jvp(jax.grad(loss), (a,), (d,))[1],
        jax.grad(lambda a: jnp.vdot(jax.grad(loss)(a), d))(a)))(a, d)
    eps = 1e-5
    fd = (grad(a + eps * d) - grad(a - eps * d)) / (2 * eps)
    assert rel_err(hvp, fd) < 1e-8
    assert rel_err(grad_of_grad, fd) < 1e-8  # the Hessian is symmetric


def test_expm_large_norm_and_nonfinite_are_nan_like_jax():
    a = jnp.stack([jnp.full((3, 3), 1e6), jnp.full((3, 3), jnp.inf), jnp.eye(3)])
    ours, ref = rules.expm(a), jax.scipy.linalg.expm(a)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(ref))
    assert np.all(np.isnan(ours[:2])) and np.all(np.isfinite(ours[2]))


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (0, 3, 3)])
def test_expm_empty(shape):
    a = jnp.zeros(shape)
    assert rules.expm(a).shape == jax.scipy.linalg.expm(a).shape == shape
    assert jax.grad(lambda a: jnp.sum(rules.expm(a)))(a).shape == shape


def test_expm_dtypes_and_bad_input():
    assert rules.expm(jnp.eye(2, dtype=jnp.int32)).dtype == jnp.float32
    with pytest.raises(TypeError, match="float16 is not supported"):
        rules.expm(jnp.eye(2, dtype=jnp.float16))
    with pytest.raises(TypeError, match="expm: `a` must be a JAX or NumPy array; got list"):
        rules.expm([[1.0]])
    with pytest.raises(ValueError, match=r"expm: `a` must have shape \(\.\.\., n, n\) \(square\); "
                                         r"got \(2, 3\)"):
        rules.expm(jnp.ones((2, 3)))


def test_expm_sharded_batch():
    a = rand((4, 5, 5), 9)
    assert_sharded_like_unsharded(
        jax.value_and_grad(lambda a: jnp.sum(jnp.sin(rules.expm(a)))), a, rtol=1e-11)
