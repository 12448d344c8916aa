"""Tests of rules/_layers/feedforward.py: the volume-preserving feed-forward layer."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rules
from rules.testing import check_frule, check_rrule
from tests.helpers import rand as _rand


def plain_feedforward(x, w_dense, bias=None, activation=jnp.tanh):
    z = x @ w_dense.T
    return x + activation(z if bias is None else z + jnp.broadcast_to(bias, z.shape))


# ----------------------------------------------------------------------------------------------
# Volume-preserving feed-forward


FEEDFORWARD = [rules.StrictlyLower, rules.StrictlyUpper]


@pytest.mark.parametrize("cls, with_bias", [(rules.StrictlyLower, True),
                                             (rules.StrictlyUpper, False)], ids=["lower", "upper"])
def test_feedforward_matches_plain_and_rules(cls, with_bias):
    d = 3
    x, w = _rand((2, 4, d), 8), cls(_rand((3,), 9), d)
    bias = _rand((d,), 10) if with_bias else None
    args = (x, w) + ((bias,) if with_bias else ())
    np.testing.assert_allclose(rules.volume_preserving_feedforward(*args),
                               plain_feedforward(x, w.dense(), bias), atol=1e-13)
    check_rrule(rules.volume_preserving_feedforward, *args, max_entries=12)


def test_feedforward_vector_activation_and_float32():
    w = rules.StrictlyUpper(_rand((6,), 11), 4)
    x = _rand((4,), 12)
    ident = lambda z: z  # noqa: E731
    np.testing.assert_allclose(rules.volume_preserving_feedforward(x, w, activation=ident),
                               x + w.dense() @ x, atol=1e-13)
    y32 = rules.volume_preserving_feedforward(x.astype(jnp.float32),
                                              rules.StrictlyUpper(w.packed.astype(jnp.float32), 4))
    assert y32.dtype == jnp.float32
    np.testing.assert_allclose(y32, plain_feedforward(x, w.dense()), rtol=1e-5, atol=1e-6)
    check_frule(rules.volume_preserving_feedforward, x, w, fkwargs={"activation": jnp.sin})


@pytest.mark.parametrize("cls", FEEDFORWARD, ids=lambda c: c.__name__)
def test_feedforward_preserves_volume(cls):
    t, d = 3, 4
    w, bias = cls(_rand((6,), 13), d), _rand((d,), 14)
    f = lambda v: rules.volume_preserving_feedforward(v.reshape(t, d), w, bias).reshape(-1)  # noqa: E731
    jac = jax.jit(jax.jacrev(f))(_rand((t * d,), 15))
    assert abs(float(jnp.linalg.det(jac)) - 1) < 1e-8


def test_feedforward_bad_input():
    ff = rules.volume_preserving_feedforward
    x = jnp.zeros((2, 3))
    with pytest.raises(TypeError, match=r"volume_preserving_feedforward: `weight` must be a "
                                        r"rules.StrictlyLower or rules.StrictlyUpper; got SkewSymmetric"):
        ff(x, rules.SkewSymmetric(jnp.zeros(3), 3))
    with pytest.raises(TypeError, match="got ArrayImpl"):
        ff(x, jnp.zeros((3, 3)))
    with pytest.raises(ValueError, match=r"`x` of shape \(2, 3\) must be \(\.\.\., d\) with d = "
                                         r"weight.n = 4"):
        ff(x, rules.StrictlyLower(jnp.zeros(6), 4))
    with pytest.raises(ValueError, match=r"`bias` must have shape \(d,\) = \(3,\); got \(2, 3\)"):
        ff(x, rules.StrictlyLower(jnp.zeros(3), 3), x)
    with pytest.raises(TypeError, match="`x` must have dtype float32, float64; got int32"):
        ff(x.astype(jnp.int32), rules.StrictlyLower(jnp.zeros(3), 3))
