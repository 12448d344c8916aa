"""Tests of rules/_layers/attention.py: volume-preserving attention."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rules
from rules.testing import check_rrule
from tests.helpers import rand as _rand

WEIGHTINGS = ["skew", "arbitrary"]


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


def _skew(shape, seed):
    s = _rand(shape, seed)
    return s - _mT(s)


# ----------------------------------------------------------------------------------------------
# Volume-preserving attention

# (batch, T, d): T = 1, T < d, T = d without batch axes, T > d (T > 4: LU path), two batch axes.
SHAPES = [(2, 1, 3), (2, 2, 4), (3, 3), (2, 5, 2), (2, 2, 3, 2)]


def _attention_args(shape, seed=0):
    return _rand(shape, seed, scale=0.5), _rand((shape[-1], shape[-1]), seed + 1)


@pytest.mark.parametrize("weighting", WEIGHTINGS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_attention_matches_jax_vjp(shape, weighting):
    x, a = _attention_args(shape)
    y_bar = _rand(shape, 2)

    @jax.jit
    def vjps(x, a):
        f = lambda x, a: rules.volume_preserving_attention(x, a, weighting=weighting)  # noqa: E731
        g = lambda x, a: plain_attention(x, a, weighting)  # noqa: E731
        return [(lambda y, pb: (y, pb(y_bar)))(*jax.vjp(h, x, a)) for h in (f, g)]

    (y, (x_bar, a_bar)), (y_ref, (x_bar_ref, a_bar_ref)) = vjps(x, a)
    np.testing.assert_allclose(y, y_ref, rtol=1e-12, atol=1e-13)
    for got, want in [(x_bar, x_bar_ref), (a_bar, a_bar_ref)]:
        scale = max(float(jnp.abs(want).max()), 1.0)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * scale)


@pytest.mark.parametrize("weighting", WEIGHTINGS)
@pytest.mark.parametrize("shape", [(2, 1, 3), (2, 2, 4), (3, 3), (2, 5, 2)],
                         ids=["T=1", "T<d", "T=d, no batch", "T>d, LU path"])
def test_attention_check_rrule(shape, weighting):
    # The kit also checks the registered pushforward, vmap, and (once per weighting) jit against
    # an eager run.
    check_rrule(rules.volume_preserving_attention, *_attention_args(shape),
                fkwargs={"weighting": weighting}, max_entries=12, check_jit=shape == (3, 3))


def _jacobian_det(weighting, t, d, seed):
    x, a = _attention_args((t, d), seed)
    f = lambda v: rules.volume_preserving_attention(  # noqa: E731
        v.reshape(t, d), a, weighting=weighting).reshape(-1)
    return float(jnp.linalg.det(jax.jit(jax.jacrev(f))(x.reshape(-1))))


@pytest.mark.parametrize("t, d", [(3, 3), (2, 5), (6, 2), (4, 4)])
def test_skew_attention_preserves_volume(t, d):
    assert abs(_jacobian_det("skew", t, d, seed=t + d) - 1) < 1e-8


def test_arbitrary_attention_does_not_preserve_volume():
    dets = [_jacobian_det("arbitrary", t, d, seed=t + d) for t, d in [(3, 3), (4, 4), (6, 2)]]
    assert all(abs(det - 1) > 1e-3 for det in dets), dets


@pytest.mark.parametrize("weighting", WEIGHTINGS)
def test_attention_lambda_is_orthogonal(weighting):
    x, a = _attention_args((5, 6, 3), 3)
    y = rules.volume_preserving_attention(x, a, weighting=weighting)
    # y = Λᵀ x with Λ orthogonal: the Gram matrices of the feature columns agree.
    np.testing.assert_allclose(_mT(y) @ y, _mT(x) @ x, atol=1e-12)
    lam = rules.cayley(plain_c(x, a, weighting))
    np.testing.assert_allclose(_mT(lam) @ lam, _eye(6, lam), atol=1e-12)
    np.testing.assert_allclose(y, _mT(lam) @ x, atol=1e-12)


@pytest.mark.parametrize("weighting", WEIGHTINGS)
def test_attention_float32(weighting):
    x, a = _attention_args((8, 4, 3), 5)
    y_bar = _rand((8, 4, 3), 6)

    def grad(f, x, a):
        return jax.jit(jax.grad(lambda x, a: jnp.sum(f(x, a, weighting=weighting)
                                                     * y_bar.astype(x.dtype)),
                                argnums=(0, 1)))(x, a)

    got = grad(rules.volume_preserving_attention, x.astype(jnp.float32), a.astype(jnp.float32))
    want = grad(plain_attention, x, a)
    for g, w in zip(got, want):
        assert g.dtype == jnp.float32
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * float(jnp.abs(w).max()))


def test_attention_packed_skew_weight():
    x, a = _attention_args((2, 4, 3), 7)
    s = rules.SkewSymmetric.from_dense(a - a.T)
    np.testing.assert_allclose(rules.volume_preserving_attention(x, s),
                               rules.volume_preserving_attention(x, 2 * a), atol=1e-12)
    y_bar = _rand(x.shape, 8)  # not ‖y‖²: it equals ‖x‖² and has no gradient in the weight
    grad = jax.jit(jax.grad(lambda s: jnp.sum(rules.volume_preserving_attention(x, s) * y_bar)))
    grad_dense = jax.grad(lambda a: jnp.sum(plain_attention(x, a) * y_bar))(s.dense())
    np.testing.assert_allclose(grad(s).packed, rules.SkewSymmetric.from_dense(
        grad_dense - grad_dense.T).packed, rtol=1e-10)


def test_attention_bad_input():
    x, a = jnp.zeros((2, 5, 3)), jnp.zeros((3, 3))
    attention = rules.volume_preserving_attention
    with pytest.raises(ValueError, match=r"volume_preserving_attention: `a` must have shape \(d, d\) "
                                         r"= \(3, 3\) for `x` of shape \(2, 5, 3\) \(\.\.\., T, d\); "
                                         r"got \(5, 5\)"):
        attention(x, jnp.zeros((5, 5)))
    with pytest.raises(ValueError, match="`weighting` must be 'skew' or 'arbitrary'; got 'tril'"):
        attention(x, a, weighting="tril")
    with pytest.raises(ValueError, match=r"`x` must have shape \(\.\.\., m, n\); got \(3,\)"):
        attention(jnp.zeros(3), a)
    with pytest.raises(TypeError, match="`x` must have dtype float32, float64; got complex128"):
        attention(x.astype(jnp.complex128), a)
    with pytest.raises(TypeError, match="`a` must be a JAX or NumPy array; got list"):
        attention(x, [[0.0] * 3] * 3)
