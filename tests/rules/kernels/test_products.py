"""Tests of rules/_kernels/products.py: the products of ``rules.internal``, each route."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rules.internal import laid_out, mm_h, mm_thin, routes
from tests.helpers import rand


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128])
@pytest.mark.parametrize("shape_a, shape_b", [((3, 7, 4), (3, 7, 5)), ((3, 3), (3, 2))])
def test_mm_h_is_the_conjugate_transposed_product(dtype, shape_a, shape_b):
    """aᴴb over the last two axes, laid out or unrolled, under jit, vmap and grad."""
    a, b = rand(shape_a, 20, dtype), rand(shape_b, 21, dtype)
    want = np.conj(np.swapaxes(np.asarray(a), -1, -2)) @ np.asarray(b)
    np.testing.assert_allclose(jax.jit(mm_h)(a, b), want, atol=1e-14)
    if a.ndim == 3:
        np.testing.assert_allclose(jax.vmap(mm_h)(a, b), want, atol=1e-14)
    loss = lambda f: lambda a, b: jnp.sum(jnp.sin(f(a, b)).real)  # noqa: E731
    got = jax.grad(loss(mm_h), argnums=(0, 1))(a, b)
    expected = jax.grad(loss(lambda a, b: jnp.conj(jnp.swapaxes(a, -1, -2)) @ b), argnums=(0, 1))(a, b)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, atol=1e-13)


def test_laid_out_is_a_copy_on_the_cpu_only():
    """On the CPU the transpose survives as a copy of its own, so the dot contracts its left
    operand over the last axis (XLA folds a plain ``x.mT`` into the dot: axis 0); values,
    derivatives and jvp are the identity's."""
    x = rand((5, 6), 1)
    compiled = lambda f: jax.jit(f).lower(x).compile().as_text()  # noqa: E731
    assert "lhs_contracting_dims={1}" in compiled(lambda x: laid_out(x.mT) @ x)
    assert "lhs_contracting_dims={0}" in compiled(lambda x: x.mT @ x)
    np.testing.assert_array_equal(laid_out(x), x)
    np.testing.assert_array_equal(jax.grad(lambda x: jnp.sum(laid_out(x) ** 2))(x), 2 * x)
    np.testing.assert_array_equal(jax.jvp(laid_out, (x,), (x,))[1], x)


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128])
@pytest.mark.parametrize("shape_a, shape_b", [
    ((64, 64, 16), (64, 16, 16)),  # summed as outer products on the CPU (2¹⁶ entries)
    ((4096, 12), (12, 16)),  # one tall matrix, shared right factor
    ((2, 1, 2048, 16), (3, 16, 16)),  # broadcast batch axes
    ((3, 7, 4), (3, 4, 5)),  # too small: mm
    ((4096, 24), (24, 16)),  # contraction deeper than routes.THIN_MAX_K: mm
])
def test_mm_thin_is_the_product(dtype, shape_a, shape_b):
    """``a @ b`` whichever way it is computed, under jit, vmap, grad and jvp."""
    a, b = rand(shape_a, 22, dtype), rand(shape_b, 23, dtype)
    want = np.asarray(a) @ np.asarray(b)
    np.testing.assert_allclose(jax.jit(mm_thin)(a, b), want, rtol=1e-13, atol=1e-12)
    if a.ndim == b.ndim == 3:
        np.testing.assert_allclose(jax.vmap(mm_thin)(a, b), want, rtol=1e-13, atol=1e-12)
    loss = lambda f: lambda a, b: jnp.sum(jnp.sin(f(a, b)).real)  # noqa: E731
    got = jax.grad(loss(mm_thin), argnums=(0, 1))(a, b)
    expected = jax.grad(loss(jnp.matmul), argnums=(0, 1))(a, b)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(jax.jvp(mm_thin, (a, b), (a, b))[1], 2 * want, rtol=1e-13,
                               atol=1e-11)  # (a + ȧ)(b + ḃ) with ȧ = a, ḃ = b: 2ab


def test_mm_thin_sums_outer_products_on_the_cpu_only_where_it_pays():
    """No dot left in the compiled program of a thin, large product; a dot for a deeper one."""
    compiled = lambda a, b: jax.jit(mm_thin).lower(a, b).compile().as_text()  # noqa: E731
    thin = jnp.ones((64, 64, routes.THIN_MAX_K)), jnp.ones((64, routes.THIN_MAX_K, 16))
    assert "dot(" not in compiled(*thin) and "__ynn" not in compiled(*thin)
    deep = jnp.ones((64, 64, routes.THIN_MAX_K + 1)), jnp.ones((64, routes.THIN_MAX_K + 1, 16))
    assert "dot(" in compiled(*deep) or "__ynn" in compiled(*deep)
