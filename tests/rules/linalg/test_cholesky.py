"""Tests of rules/_linalg/cholesky.py: cholesky and cho_solve against finite differences and JAX."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rules
from rules.testing import check_rrule
from tests.helpers import rand, rel_err
from tests.rules.linalg.sharded import assert_sharded_like_unsharded


def spd(shape, seed=0, dtype=jnp.float64):
    """Well-conditioned Hermitian positive definite matrices ``G Gᴴ/n + I`` (any batch shape)."""
    g = rand(shape, seed, dtype)
    n = shape[-1]
    return g @ jnp.conj(g.mT) / max(n, 1) + jnp.broadcast_to(jnp.eye(n, dtype=dtype), shape)


def _jax_cho_solve(c, b, lower=True):
    with jax.numpy_rank_promotion("allow"):
        return jax.scipy.linalg.cho_solve((c, lower), b)


# ----------------------------------------------------------------------------------------------
# cholesky


def test_cholesky_finite_differences():
    check_rrule(rules.cholesky, spd((3, 3), 1, jnp.complex128), fkwargs={"upper": True})


# n ≤ 4: the closed-form factor and triangular inverse (rules/_linalg/small.py); 5: LAPACK.
@pytest.mark.parametrize("n", [3, 5])
@pytest.mark.parametrize("symmetrize_input", [True, False])
def test_cholesky_matches_jax(symmetrize_input, n):
    args = [(spd((2, n, n), 2, dtype), rand((2, n, n), 3, dtype), rand((2, n, n), 4, dtype))
            for dtype in (jnp.float64, jnp.complex128)]

    @jax.jit
    def derivatives(args):
        out = []
        for chol in (rules.cholesky, jnp.linalg.cholesky):
            f = functools.partial(chol, symmetrize_input=symmetrize_input)
            out.append([(f(a), jax.vjp(f, a)[1](l_bar), jax.jvp(f, (a,), (da,))[1], f(a, upper=True))
                        for a, da, l_bar in args])
        return out

    ours, ref = derivatives(args)
    assert rel_err(ours, ref) < 1e-12


@pytest.mark.parametrize("n, dtype", [(257, jnp.float64), (130, jnp.complex128)])
def test_cholesky_blocked_products_match_jax(n, dtype):
    # n ≥ 128: the triangular products are split into blocks (257: twice, with odd halves).
    a, da, l_bar = spd((n, n), 7, dtype), rand((n, n), 8, dtype), rand((n, n), 9, dtype)

    @jax.jit
    def derivatives(a, da, l_bar):
        return [(jax.vjp(chol, a)[1](l_bar), jax.jvp(chol, (a,), (da,))[1])
                for chol in (rules.cholesky, jnp.linalg.cholesky)]

    ours, ref = derivatives(a, da, l_bar)
    assert rel_err(ours, ref) < 1e-11


def test_cholesky_reads_the_hermitian_part():
    a = spd((4, 4), 5, jnp.complex128)
    skew = rand((4, 4), 6, jnp.complex128)
    skew = skew - jnp.conj(skew.T)
    np.testing.assert_allclose(rules.cholesky(a + skew), rules.cholesky(a), atol=1e-14)
    g = jax.grad(lambda a: jnp.sum(jnp.abs(rules.cholesky(a)) ** 2))(a)
    np.testing.assert_allclose(g, jnp.conj(g.T), atol=1e-14)  # Hermitian gradient
    # symmetrize_input=False reads the lower triangle only, as LAPACK (and JAX) do: for n ≤ 4
    # the closed form, beyond it LAPACK.
    for n in (4, 6):
        lower = jnp.tril(spd((n, n), 5, jnp.complex128))
        upper = jnp.triu(rand((n, n), 6, jnp.complex128), 1)
        ours = rules.cholesky(lower, symmetrize_input=False)
        np.testing.assert_array_equal(rules.cholesky(lower + upper, symmetrize_input=False), ours)
        np.testing.assert_allclose(ours, jnp.linalg.cholesky(lower, symmetrize_input=False),
                                   atol=1e-14)


def test_cholesky_not_positive_definite_is_nan_like_jax():
    a = -spd((2, 3, 3), 7)
    np.testing.assert_array_equal(rules.cholesky(a), jnp.linalg.cholesky(a))  # NaN lower triangle
    assert np.all(np.isnan(rules.cholesky(a)[:, np.tril_indices(3)[0], np.tril_indices(3)[1]]))
    assert np.all(np.isnan(jax.grad(lambda a: jnp.sum(rules.cholesky(a)))(a)))


# ----------------------------------------------------------------------------------------------
# cho_solve


def test_cho_solve_finite_differences():
    c = rules.cholesky(spd((2, 4, 4), 8))
    check_rrule(lambda c, b: rules.cho_solve((c, True), b), c, rand((2, 4, 3), 9))


@pytest.mark.parametrize("n", [2, 5])
@pytest.mark.parametrize("lower", [True, False])
def test_cho_solve_matches_jax(lower, n):
    args = []
    for dtype in (jnp.float64, jnp.complex128):
        c = rules.cholesky(spd((2, n, n), 10, dtype), upper=not lower)
        args.append((c, rand((2, n, 2), 11, dtype), rand((2, n, n), 12, dtype),
                     rand((2, n, 2), 13, dtype), rand((2, n, 2), 14, dtype)))
    tri = jnp.tril if lower else jnp.triu

    @jax.jit
    def derivatives(args):
        out = []
        # JAX's cho_solve reads one triangle but differentiates both; restrict its input.
        for f in (lambda c, b: rules.cho_solve((c, lower), b),
                  lambda c, b: _jax_cho_solve(tri(c), b, lower)):
            out.append([(f(c, b), jax.vjp(f, c, b)[1](x_bar), jax.jvp(f, (c, b), (dc, db))[1])
                        for c, b, dc, db, x_bar in args])
        return out

    ours, ref = derivatives(args)
    assert rel_err(ours, ref) < 1e-12


@pytest.mark.parametrize("c_shape,b_shape", [((4, 4), (4,)), ((3, 4, 4), (4,)), ((4, 4), (3, 4, 2)),
                                             ((0, 0), (0,)), ((2, 0, 0), (2, 0, 1))])
def test_cho_solve_shapes_as_jax(c_shape, b_shape):
    c = rules.cholesky(spd(c_shape, 15)) if c_shape[-1] else jnp.zeros(c_shape)
    b = rand(b_shape, 16)
    out, ref = rules.cho_solve((c, True), b), _jax_cho_solve(c, b)
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-14)
    g = jax.grad(lambda c, b: jnp.sum(rules.cho_solve((c, True), b) ** 2), argnums=(0, 1))(c, b)
    assert g[0].shape == c.shape and g[1].shape == b.shape


def test_cholesky_then_cho_solve_is_solve():
    # Through the factor, A ↦ A⁻¹B has the derivatives of rules.solve on the Hermitian part.
    a, b = spd((2, 4, 4), 17), rand((2, 4, 2), 18)

    def via_cholesky(a, b):
        return rules.cho_solve((rules.cholesky(a), True), b)

    def via_lu(a, b):
        return rules.solve(0.5 * (a + a.mT), b)

    h = jax.jit(jax.hessian(lambda a, b: jnp.sum(jnp.sin(via_cholesky(a, b))), argnums=(0, 1)))(a, b)
    h_ref = jax.jit(jax.hessian(lambda a, b: jnp.sum(jnp.sin(via_lu(a, b))), argnums=(0, 1)))(a, b)
    assert rel_err(h, h_ref) < 1e-10


# ----------------------------------------------------------------------------------------------
# Both: higher derivatives, dtypes, bad input, sharding


def test_cholesky_higher_derivatives_match_jax():
    a = spd((4, 4), 19)

    def loss(chol, a):
        return jnp.sum(jnp.sin(chol(a)))

    @jax.jit
    def derivatives(a):
        out = []
        for chol in (rules.cholesky, jnp.linalg.cholesky):
            l = functools.partial(loss, chol)
            out.append((jax.hessian(l)(a), jax.grad(lambda a: jnp.sum(jax.grad(l)(a) ** 2))(a)))
        return out

    ours, ref = derivatives(a)
    assert rel_err(ours, ref) < 1e-10


def test_float32_empty_and_half():
    a = spd((3, 3), 20)
    g64 = jax.grad(lambda a: jnp.sum(rules.cholesky(a)))(a)
    g32 = jax.grad(lambda a: jnp.sum(rules.cholesky(a)))(a.astype(jnp.float32))
    assert g32.dtype == jnp.float32 and rel_err(g32, g64) < 1e-5
    for shape in [(0, 0), (2, 0, 0), (0, 3, 3)]:
        z = jnp.zeros(shape)
        assert rules.cholesky(z).shape == shape
        assert jax.grad(lambda a: jnp.sum(rules.cholesky(a)))(z).shape == shape
    with pytest.raises(TypeError, match="cholesky: `a` has dtype float16"):
        rules.cholesky(jnp.eye(3, dtype=jnp.float16))


def test_bad_input():
    with pytest.raises(TypeError, match="cholesky: `a` must be a JAX or NumPy array; got list"):
        rules.cholesky([[1.0]])
    with pytest.raises(ValueError, match=r"cholesky: `a` must have shape \(\.\.\., n, n\) \(square\); "
                                         r"got \(2, 3\)"):
        rules.cholesky(jnp.ones((2, 3)))
    c = jnp.eye(3)
    with pytest.raises(ValueError, match=r"cho_solve: `c_and_lower` must be a pair \(c, lower\); got"):
        rules.cho_solve(c, jnp.ones(3))
    with pytest.raises(TypeError, match="cho_solve: `lower` must be a bool; got str"):
        rules.cho_solve((c, "lower"), jnp.ones(3))
    with pytest.raises(ValueError, match=r"cho_solve: `b` must have shape \(n,\) or \(\.\.\., n, k\) "
                                         r"with n = 3 \(`c` has shape \(3, 3\)\); got \(2,\)"):
        rules.cho_solve((c, True), jnp.ones(2))
    with pytest.raises(TypeError, match="cho_solve: `c` must be a JAX or NumPy array; got list"):
        rules.cho_solve(([[1.0]], True), jnp.ones(1))


@pytest.mark.parametrize("n", [3, 5])
def test_sharded_batch(n):
    a, b = spd((4, n, n), 21), rand((4, n, 2), 22)

    def values_and_grads(a, b):
        loss = lambda a, b: jnp.sum(rules.cho_solve((rules.cholesky(a), True), b) ** 2)  # noqa: E731
        return jax.value_and_grad(loss, argnums=(0, 1))(a, b)

    assert_sharded_like_unsharded(values_and_grads, a, b)


def test_cho_solve_takes_scipys_options():
    a = jnp.asarray(np.eye(3) * 2.0)
    b = jnp.ones((3, 2))
    c = rules.cholesky(a)
    np.testing.assert_allclose(rules.cho_solve((c, True), b, overwrite_b=True, check_finite=False),
                               b / 2)
