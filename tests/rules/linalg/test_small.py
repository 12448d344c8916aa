"""Tests of rules/_small.py: the closed-form inverse of tiny matrices."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rules._linalg.small import closed_form_inv

_inv = jax.jit(closed_form_inv)


def _well_conditioned(shape, dtype=jnp.float64, seed=0):
    rng = np.random.default_rng(seed)
    n = shape[-1]
    a = rng.standard_normal(shape) + 2 * n * np.eye(n)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        a = a + 1j * rng.standard_normal(shape)
    return jnp.asarray(a, dtype)


@pytest.mark.parametrize("n, batch", [(1, (5,)), (2, ()), (3, (2, 3)), (4, (5,))])
def test_matches_lu_inverse(n, batch):
    a = _well_conditioned((*batch, n, n), seed=n)
    np.testing.assert_allclose(_inv(a), jnp.linalg.inv(a), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype, rtol", [(jnp.float32, 2e-6), (jnp.complex128, 1e-12)])
def test_dtypes(dtype, rtol):
    a = _well_conditioned((7, 4, 4), dtype)
    b = _inv(a)
    assert b.dtype == dtype
    np.testing.assert_allclose(b, jnp.linalg.inv(a), rtol=rtol, atol=rtol)


def test_random_matrices_are_inverted():
    # No conditioning help: A A⁻¹ = I to the accuracy the condition number allows.
    a = jnp.asarray(np.random.default_rng(1).standard_normal((1000, 3, 3)))
    residual = jnp.abs(a @ _inv(a) - jnp.broadcast_to(jnp.eye(3), a.shape)).max(axis=(-2, -1))
    cond = jnp.linalg.cond(a)
    assert bool(jnp.all(residual <= 1e-13 * cond))


@pytest.mark.parametrize("singular", [
    np.zeros((2, 2)),
    np.array([[1.0, 2.0], [2.0, 4.0]]),
    np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]),
    np.array([[1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.0], [0.0, 1.0, 0.0, 1.0],
              [1.0, 0.0, 1.0, 0.0]]),
], ids=["zero", "rank1-2x2", "rank2-3x3", "rank3-4x4"])
def test_singular_gives_non_finite_not_a_wrong_number(singular):
    n = singular.shape[-1]
    batch = jnp.stack([jnp.asarray(singular), jnp.eye(n) * 2.0])
    b = _inv(batch)
    assert not bool(jnp.all(jnp.isfinite(b[0])))
    np.testing.assert_array_equal(b[1], jnp.eye(n) / 2)  # other slices are unaffected


def test_empty_matrix():
    assert closed_form_inv(jnp.zeros((3, 0, 0))).shape == (3, 0, 0)


def test_jit_vmap_and_gradient():
    a = _well_conditioned((4, 3, 3))
    np.testing.assert_allclose(closed_form_inv(a), jnp.linalg.inv(a), rtol=1e-12)  # eager
    np.testing.assert_allclose(jax.vmap(_inv)(a), jnp.linalg.inv(a), rtol=1e-12)
    g = jnp.asarray(np.random.default_rng(2).standard_normal(a.shape))
    ours = jax.jit(jax.grad(lambda a: jnp.sum(closed_form_inv(a) * g)))(a)
    ref = jax.jit(jax.grad(lambda a: jnp.sum(jnp.linalg.inv(a) * g)))(a)
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-14)


def test_bad_input():
    with pytest.raises(ValueError, match=r"closed_form_inv: `a` must have shape \(\.\.\., n, n\) "
                                         r"with n ≤ 4; got \(5, 5\)"):
        closed_form_inv(jnp.eye(5))
    with pytest.raises(ValueError, match=r"closed_form_inv: `a` must have shape .*square.*\(2, 3\)"):
        closed_form_inv(jnp.zeros((2, 3)))
    with pytest.raises(TypeError, match="closed_form_inv: `a` must have dtype .* got int"):
        closed_form_inv(jnp.eye(2, dtype=jnp.int32))
    with pytest.raises(TypeError, match="closed_form_inv: `a` must be a JAX or NumPy array; got list"):
        closed_form_inv([[1.0]])
