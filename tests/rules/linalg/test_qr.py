"""Tests of rules/_linalg/qr.py: QR and LQ against finite differences and JAX's autodiff."""
import functools

from hypothesis import given, settings
from hypothesis import strategies as st
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


def as_tuple(out):
    return out if isinstance(out, jax.Array) else tuple(out)


def gauge_fixed(q, r):
    """Outputs in the unique gauge diag(R) > 0 (real positive for complex): a sign-invariant view."""
    d = jnp.diagonal(r[..., : min(r.shape[-2:]), : min(r.shape[-2:])], axis1=-2, axis2=-1)
    s = jax.lax.stop_gradient(jnp.where(d == 0, 1, d / jnp.abs(d).astype(d.dtype)))
    k = s.shape[-1]
    q_fixed = q.at[..., :, :k].multiply(s[..., None, :])
    return q_fixed, r.at[..., :k, :].multiply(jnp.conj(s)[..., :, None])


def invariant_loss(qr_fn, mode, a, w1, w2):
    """A smooth, sign-invariant scalar of the QR outputs (for comparisons with JAX and hessians)."""
    out = qr_fn(a, mode=mode)
    if mode == "r":
        d = jnp.diagonal(out, axis1=-2, axis2=-1)
        s = jax.lax.stop_gradient(jnp.where(d == 0, 1, d / jnp.abs(d).astype(d.dtype)))
        return jnp.sum(jnp.real(w2 * jnp.sin(out * jnp.conj(s)[..., :, None])))
    q, r = gauge_fixed(*out)
    if mode == "complete" and q.shape[-2] > r.shape[-1]:
        n = r.shape[-1]  # the trailing columns' gauge is LAPACK's; compare them through Q₂Q₂ᴴ
        q2 = q[..., :, n:]
        extra = jnp.sum(jnp.real(jnp.cos(q2 @ jnp.conj(jnp.swapaxes(q2, -1, -2)))))
        q = q[..., :, :n]
        w1 = w1[..., :, :n]
    else:
        extra = 0.0
    return jnp.sum(jnp.real(w1 * jnp.sin(q))) + jnp.sum(jnp.real(w2 * r**2)) + extra


# ----------------------------------------------------------------------------------------------
# qr

QR_SHAPES = [(1, 1), (5, 3), (4, 4), (3, 5), (2, 3, 4, 3)]
# check_rrule's comparison with an eager (op-by-op) run is half the cost of a check and runs the
# same code at every shape: it runs at this one shape per mode and dtype.
EAGER_SHAPE = (5, 3)


@pytest.mark.parametrize("shape", QR_SHAPES)
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_finite_differences(shape, mode):
    check_rrule(rules.qr, rand(shape, 8), fkwargs={"mode": mode}, check_jit=shape == EAGER_SHAPE)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_complex_finite_differences(shape, mode):
    check_rrule(rules.qr, rand(shape, 9, jnp.complex128), fkwargs={"mode": mode},
                check_jit=shape == EAGER_SHAPE)


@pytest.mark.parametrize("shape,dtype", [(s, jnp.float64) for s in QR_SHAPES + [(2, 2, 6)]]
                         + [(s, jnp.complex128) for s in [(5, 3), (3, 5), (2, 3, 4, 3)]])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_matches_jax_vjp_on_invariant_loss(shape, mode, dtype):
    a = rand(shape, 10, dtype)
    ref_shapes = jax.eval_shape(lambda a: as_tuple(jnp.linalg.qr(a, mode=mode)), a)
    q_shape = ref_shapes.shape if mode == "r" else ref_shapes[0].shape
    r_shape = ref_shapes.shape if mode == "r" else ref_shapes[1].shape
    w1, w2 = rand(q_shape, 11, dtype), rand(r_shape, 12, dtype)
    grad = jax.jit(jax.grad(invariant_loss, argnums=2), static_argnums=(0, 1))
    assert rel_err(grad(rules.qr, mode, a, w1, w2), grad(jnp.linalg.qr, mode, a, w1, w2)) < 1e-10


@pytest.mark.parametrize("shape,dtype", [((5, 5), jnp.float64), ((7, 5), jnp.complex128),
                                         ((2, 6, 6), jnp.float64), ((3, 7), jnp.complex128)])
@pytest.mark.parametrize("mode", ["reduced", "r"])
def test_qr_blocked_pullback_and_dots(cutoffs, shape, mode, dtype):
    """The paths that only large matrices take, forced on small ones: R R̄ᴴ formed in blocks
    (odd and even n) and the products as dots with materialized transposes (the eager run is
    compared on the default path, above)."""
    cutoffs(BLOCKED_QR_GRAM_MIN_N=2, QR_UNROLL_MAX=1, UNROLL_MAX=1)
    check_rrule(rules.qr, rand(shape, 14, dtype), fkwargs={"mode": mode}, check_jit=False)


@pytest.mark.parametrize("shape,dtype", [((5, 5), jnp.float64), ((5, 7), jnp.complex128),
                                         ((6, 3), jnp.float64)])
def test_lq_blocked_pullback_and_dots(cutoffs, shape, dtype):
    cutoffs(BLOCKED_QR_GRAM_MIN_N=2, QR_UNROLL_MAX=1, UNROLL_MAX=1)
    check_rrule(rules.lq, rand(shape, 15, dtype), check_jit=False)


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_outputs_equal_jnp(mode):
    a = rand((2, 6, 4), 13)
    ours, ref = rules.qr(a, mode=mode), jnp.linalg.qr(a, mode=mode)
    for x, y in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_array_equal(x, y)





def test_qr_float32():
    a = rand((6, 4), 18)
    w1, w2 = rand((6, 4), 19), rand((4, 4), 20)
    grad = jax.jit(jax.grad(invariant_loss, argnums=2), static_argnums=(0, 1))
    g64 = grad(rules.qr, "reduced", a, w1, w2)
    g32 = grad(rules.qr, "reduced", a.astype(jnp.float32),
                                              w1.astype(jnp.float32), w2.astype(jnp.float32))
    assert g32.dtype == jnp.float32
    assert rel_err(g32, g64) < 1e-4


@settings(max_examples=8, deadline=None)
@given(batch=st.lists(st.integers(1, 2), max_size=2), m=st.integers(1, 5), n=st.integers(1, 5),
       mode=st.sampled_from(["reduced", "complete", "r"]), seed=st.integers(0, 2**16))
def test_qr_property_based_shapes(batch, m, n, mode, seed):
    shape = (*batch, m, n)
    a = rand(shape, seed)
    out_shapes = jax.eval_shape(lambda a: as_tuple(jnp.linalg.qr(a, mode=mode)), a)
    cts = jax.tree_util.tree_map(lambda y: rand(y.shape, seed + 1), out_shapes)

    @functools.partial(jax.jit, static_argnums=0)
    def value_and_pullback(fn, a, cts):
        out, pullback = jax.vjp(lambda a: as_tuple(fn(a, mode=mode)), a)
        return out, pullback(cts)[0]

    (out, ours), (ref, theirs) = value_and_pullback(rules.qr, a, cts), value_and_pullback(
        jnp.linalg.qr, a, cts)
    for x, y in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(ref)):
        assert x.shape == y.shape
    assert rel_err(ours, theirs) < 1e-9


# ----------------------------------------------------------------------------------------------
# lq


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (4, 4), (5, 3), (2, 3, 2, 4)])
def test_lq_finite_differences(shape):
    check_rrule(rules.lq, rand(shape, 21), check_jit=shape == EAGER_SHAPE)


@pytest.mark.parametrize("shape", [(3, 5), (5, 3)])
def test_lq_complex_finite_differences(shape):
    check_rrule(rules.lq, rand(shape, 22, jnp.complex128), check_jit=shape == EAGER_SHAPE)


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (2, 4, 4)])
@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128])
def test_lq_is_transposed_qr(shape, dtype):
    a = rand(shape, 23, dtype)
    l, q = rules.lq(a)
    np.testing.assert_allclose(l @ q, a, atol=1e-12)
    np.testing.assert_allclose(jnp.triu(l, 1), 0, atol=1e-14)
    # Its gradient equals JAX's autodiff of the same construction through jnp.linalg.qr.

    def lq_ref(a):
        q_t, r_t = jnp.linalg.qr(jnp.conj(jnp.swapaxes(a, -1, -2)))
        return jnp.conj(jnp.swapaxes(r_t, -1, -2)), jnp.conj(jnp.swapaxes(q_t, -1, -2))

    def loss(fn, a):
        l, q = fn(a)
        d = jnp.diagonal(l[..., : l.shape[-1], :], axis1=-2, axis2=-1)
        s = jax.lax.stop_gradient(d / jnp.abs(d).astype(d.dtype))
        return jnp.sum(jnp.real(jnp.sin(l * jnp.conj(s)[..., None, :]))) + jnp.sum(
            jnp.real(jnp.cos(q * s[..., :, None])))

    assert rel_err(jax.jit(jax.grad(functools.partial(loss, rules.lq)))(a),
                   jax.jit(jax.grad(functools.partial(loss, lq_ref)))(a)) < 1e-10


def test_lq_jit_vmap_hessian_float32():
    a = rand((3, 5), 24)

    def loss(a):
        l, q = rules.lq(a)
        return jnp.sum(l**2) + jnp.sum(jnp.sin(q * jnp.sign(jnp.diagonal(l))[:, None]))

    g = jax.jit(jax.grad(loss))(a)
    stack = jnp.stack([a, 2 * a])
    np.testing.assert_allclose(jax.jit(jax.vmap(jax.grad(loss)))(stack)[0], g, rtol=1e-12)
    h = jax.jit(jax.hessian(loss))(a)
    assert h.shape == (3, 5, 3, 5) and np.all(np.isfinite(h))
    np.testing.assert_allclose(h, jnp.swapaxes(jnp.swapaxes(h, 0, 2), 1, 3), atol=1e-8)
    g32 = jax.jit(jax.grad(loss))(a.astype(jnp.float32))
    assert g32.dtype == jnp.float32 and rel_err(g32, g) < 1e-4


@pytest.mark.parametrize("fn", [rules.qr, rules.lq])
def test_bad_input(fn):
    name = fn.__name__
    with pytest.raises(TypeError, match=f"{name}: `a` must be a JAX or NumPy array; got list"):
        fn([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(ValueError, match=rf"{name}: `a` must have shape \(\.\.\., m, n\); got \(3,\)"):
        fn(jnp.ones(3))
    with pytest.raises(TypeError, match=f"{name}: `a` must have dtype .*; got <U1"):
        fn(np.array([["a", "b"], ["c", "d"]]))
    with pytest.raises(ValueError, match=r"must have shape"):
        jax.jit(fn)(jnp.ones(3))  # raised while tracing, under jit too


def test_qr_unknown_mode():
    with pytest.raises(ValueError, match="qr: `mode` must be one of 'reduced', 'complete', 'r', "
                                         "'raw', 'full'; got 'thin'"):
        rules.qr(jnp.ones((3, 2)), mode="thin")


@pytest.mark.parametrize("mode", ["raw", "full"])
def test_qr_modes_of_jnp(mode):
    a = rand((4, 3), 30)
    for x, y in zip(rules.qr(a, mode=mode), jnp.linalg.qr(a, mode=mode)):
        np.testing.assert_array_equal(x, y)


def test_qr_result_is_jnps_own_type():
    a = rand((4, 3), 31)
    out, ref = rules.qr(a), jnp.linalg.qr(a)
    assert type(out) is type(ref) and out._fields == ("Q", "R")
    _, vjp = jax.vjp(rules.qr, a)
    (a_bar,) = vjp(jax.tree.map(jnp.ones_like, ref))  # a cotangent built from JAX's QRResult
    assert a_bar.shape == a.shape


def test_integer_input_promoted_as_jnp():
    a = jnp.array([[2, 1], [1, 1], [0, 3]], jnp.int32)
    for x, y in zip(rules.qr(a), jnp.linalg.qr(a)):
        assert x.dtype == y.dtype
        np.testing.assert_allclose(x, y, atol=1e-6)
