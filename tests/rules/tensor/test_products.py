"""Tests of rules/_tensor.py: batched tensor products and their pullbacks."""
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rules
from rules.testing import check_rrule


def _rand(shape, seed=0, dtype=jnp.float64):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return jnp.asarray(x, dtype)


def _mT(x):
    return jnp.swapaxes(x, -1, -2)


# name: (rule, plain-jnp reference, operand shapes for batch axes `b` and sizes m, k, n)
OPS = {
    "tensor_tensor_mul": (rules.tensor_tensor_mul, lambda a, b: a @ b,
                          lambda b, m, k, n: ((*b, m, k), (*b, k, n))),
    "tensor_transpose_tensor_mul": (rules.tensor_transpose_tensor_mul, lambda a, b: _mT(a) @ b,
                                    lambda b, m, k, n: ((*b, k, m), (*b, k, n))),
    "mat_tensor_mul": (rules.mat_tensor_mul, lambda w, a: jnp.matmul(w, a),
                       lambda b, m, k, n: ((m, k), (*b, k, n))),
    "tensor_mat_mul": (rules.tensor_mat_mul, lambda a, w: jnp.matmul(a, w),
                       lambda b, m, k, n: ((*b, m, k), (k, n))),
    "tensor_transpose_mat_mul": (rules.tensor_transpose_mat_mul, lambda a, w: jnp.matmul(_mT(a), w),
                                 lambda b, m, k, n: ((*b, k, m), (k, n))),
    "tensor_transpose": (rules.tensor_transpose, _mT, lambda b, m, k, n: ((*b, m, k),)),
}
NAMES = list(OPS)
BATCHES = [(), (4,), (2, 3)]


def _args(name, batch, sizes=(3, 4, 2), dtype=jnp.float64, seed=0):
    return tuple(_rand(s, seed + i, dtype) for i, s in enumerate(OPS[name][2](batch, *sizes)))


def _vjp_both(name, cases, seed=9):
    """``[((y, x̄), (y_ref, x̄_ref))]`` of the rule and its plain-jnp reference, for each argument
    tuple in ``cases``, with the same random cotangent; one compilation for all of them."""
    rule, ref = OPS[name][:2]
    cs = [_rand(jax.eval_shape(rule, *args).shape, seed, args[0].dtype) for args in cases]

    def pair(args, c):
        return [(lambda y, pb: (y, pb(c)))(*jax.vjp(f, *args)) for f in (rule, ref)]

    return jax.jit(lambda cases, cs: [pair(a, c) for a, c in zip(cases, cs)])(cases, cs)


@pytest.mark.parametrize("name", NAMES)
def test_matches_jax_vjp(name):
    for (y, cts), (y_ref, cts_ref) in _vjp_both(name, [_args(name, b) for b in BATCHES]):
        np.testing.assert_allclose(y, y_ref, rtol=1e-12, atol=1e-12)
        for ct, ct_ref in zip(cts, cts_ref):
            assert ct.shape == ct_ref.shape and ct.dtype == ct_ref.dtype
            np.testing.assert_allclose(ct, ct_ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_check_rrule(name):
    # Pullback and (registered) pushforward against finite differences, jit and vmap.
    check_rrule(OPS[name][0], *_args(name, (2,)), max_entries=12)


def test_check_rrule_packed_operand():
    w = rules.SkewSymmetric(_rand((3,), 1), 3)
    check_rrule(rules.mat_tensor_mul, w, _rand((2, 3, 2), 2), max_entries=12)
    check_rrule(rules.tensor_mat_mul, _rand((2, 2, 3), 3), rules.Symmetric(_rand((6,), 4), 3),
                max_entries=12)


@pytest.mark.parametrize("name", ["mat_tensor_mul", "tensor_mat_mul", "tensor_transpose_mat_mul"])
def test_shared_cotangent_is_one_contraction(name):
    # The shared matrix's cotangent comes straight out of one dot_general over the batch axes:
    # no reduce_sum of a per-slice stack anywhere in the pullback.
    rule = inspect.unwrap(OPS[name][0])  # the rule itself, without the dispatching jit
    args = _args(name, (5, 6), sizes=(3, 4, 2))
    shared = 0 if name == "mat_tensor_mul" else 1
    y, pullback = jax.vjp(rule, *args)
    jaxpr = jax.make_jaxpr(pullback)(jnp.zeros_like(y)).jaxpr
    assert "reduce_sum" not in [e.primitive.name for e in jaxpr.eqns]
    producer = next(e for e in jaxpr.eqns if jaxpr.outvars[shared] in e.outvars)
    assert producer.primitive.name == "dot_general"
    # ... applied to the cotangent and the residual operand themselves, not to a reshaped copy.
    assert all(v in jaxpr.invars or v in jaxpr.constvars for v in producer.invars)


@pytest.mark.parametrize("name", ["tensor_tensor_mul", "mat_tensor_mul", "tensor_transpose_mat_mul"])
def test_complex(name):
    [((y, cts), (y_ref, cts_ref))] = _vjp_both(name, [_args(name, (3,), dtype=jnp.complex128)])
    np.testing.assert_allclose(y, y_ref, rtol=1e-12, atol=1e-12)
    for ct, ct_ref in zip(cts, cts_ref):
        np.testing.assert_allclose(ct, ct_ref, rtol=1e-10, atol=1e-12)


@pytest.mark.standard_promotion  # mixed dtypes, promoted as jnp.matmul promotes them
def test_dtype_promotion_as_matmul():
    a32, w64 = _rand((2, 3, 4), 0, jnp.float32), _rand((4, 2), 1)
    y = rules.tensor_mat_mul(a32, w64)
    assert y.dtype == jnp.matmul(a32, w64).dtype == jnp.float64
    ga, gw = jax.grad(lambda a, w: rules.tensor_mat_mul(a, w).sum(), argnums=(0, 1))(a32, w64)
    assert ga.dtype == jnp.float32 and gw.dtype == jnp.float64
    wc = _rand((4, 2), 2, jnp.complex128)
    assert rules.tensor_mat_mul(a32, wc).dtype == jnp.complex128
    ga = jax.grad(lambda a: jnp.real(rules.tensor_mat_mul(a, wc)).sum())(a32)
    assert ga.dtype == jnp.float32


def test_float32():
    for name in NAMES:
        [((y, cts), (y_ref, cts_ref))] = _vjp_both(name, [_args(name, (4,), dtype=jnp.float32)])
        assert y.dtype == jnp.float32
        np.testing.assert_allclose(y, y_ref, rtol=1e-5, atol=1e-5)
        for ct, ct_ref in zip(cts, cts_ref):
            assert ct.dtype == jnp.float32
            np.testing.assert_allclose(ct, ct_ref, rtol=1e-5, atol=1e-5)





def test_vmap_with_shared_matrix_unbatched():
    a, w = _rand((3, 2, 4, 5), 0), _rand((5, 2), 1)
    y = jax.vmap(rules.tensor_mat_mul, in_axes=(0, None))(a, w)
    np.testing.assert_allclose(y, a @ w, rtol=1e-12)
    gw = jax.grad(lambda w: jnp.sum(jax.vmap(rules.tensor_mat_mul, in_axes=(0, None))(a, w) ** 2))(w)
    np.testing.assert_allclose(gw, jax.grad(lambda w: jnp.sum((a @ w) ** 2))(w), rtol=1e-10)


def test_bad_input():
    a, w = jnp.zeros((5, 3, 4)), jnp.zeros((3, 2))
    with pytest.raises(ValueError, match=r"tensor_mat_mul: `a` of shape \(5, 3, 4\) and `w` of shape "
                                         r"\(3, 2\) do not match; expected \(\.\.\., m, k\) and \(k, n\)"):
        rules.tensor_mat_mul(a, w)
    with pytest.raises(ValueError, match=r"tensor_tensor_mul: `a` of shape \(5, 3, 4\) and `b` of "
                                         r"shape \(4, 4, 2\) do not match"):
        rules.tensor_tensor_mul(a, jnp.zeros((4, 4, 2)))
    with pytest.raises(ValueError, match=r"mat_tensor_mul: `w` must be a matrix of shape \(m, k\) "
                                         r"without batch axes .*got \(2, 3, 3\)"):
        rules.mat_tensor_mul(jnp.zeros((2, 3, 3)), jnp.zeros((2, 3, 1)))
    with pytest.raises(ValueError, match=r"tensor_transpose: `a` must have shape \(\.\.\., m, n\); "
                                         r"got \(3,\)"):
        rules.tensor_transpose(jnp.zeros(3))
    with pytest.raises(TypeError, match="tensor_tensor_mul: `b` must have dtype .* got int32"):
        rules.tensor_tensor_mul(a, jnp.zeros((5, 4, 2), jnp.int32))
    with pytest.raises(TypeError, match="mat_tensor_mul: `w` must be a JAX or NumPy array; got list"):
        rules.mat_tensor_mul([[1.0]], jnp.zeros((2, 1, 1)))
