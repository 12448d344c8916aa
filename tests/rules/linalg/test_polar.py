"""Tests of rules/_linalg/polar.py (and its kernel, rules/_kernels/polar.py): the polar
decomposition, its derivatives at repeated singular values and orthogonal input, and its
second derivatives there."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import rules
from rules._kernels import polar as kernel
from rules.testing import check_frule, check_rrule
from tests.helpers import orthogonal, rand, rel_err, with_singular_values
from tests.rules.linalg.sharded import assert_sharded_like_unsharded

SHAPES = [(5, 3), (4, 4), (3, 5)]
SIDES = ["right", "left"]


def mH(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _unitary_complex(n, seed):
    """A random n×n unitary matrix."""
    return jnp.asarray(np.linalg.qr(np.asarray(rand((n, n), seed, jnp.complex128)))[0])


def _loss(sides, shape, dtype=jnp.float64, seed=40):
    """A loss of both factors of each side, with generic weights (no symmetry that would hide a
    wrong term)."""
    *batch, m, n = shape
    weights = [(rand(shape, seed + 2 * i, dtype),
                rand((*batch, m, m) if side == "left" else (*batch, n, n), seed + 2 * i + 1, dtype))
               for i, side in enumerate(sides)]

    def loss(a):
        total = jnp.zeros((), jnp.real(a).dtype)
        for side, (wu, wp) in zip(sides, weights):
            u, p = rules.polar(a, side)
            total = total + jnp.sum(jnp.real(jnp.sin(u) * wu)) + jnp.sum(jnp.real(p * wp))
        return total

    return loss


# ----------------------------------------------------------------------------------------------
# Values


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128])
@pytest.mark.parametrize("shape", SHAPES)
def test_values_match_scipy_and_jax(shape, dtype):
    for side in SIDES:
        _check_values(rand((2, *shape), 1, dtype), side)


def _check_values(a, side):
    shape = a.shape[-2:]
    u, p = rules.polar(a, side)
    for k in range(2):
        us, ps = scipy.linalg.polar(np.asarray(a[k]), side)
        assert rel_err(u[k], us) < 1e-13 and rel_err(p[k], ps) < 1e-13
    uj, pj = jax.scipy.linalg.polar(a, side, method="svd")
    assert rel_err(u, uj) < 1e-13 and rel_err(p, pj) < 1e-13
    if (shape[0] >= shape[1]) == (side == "right"):  # the shapes JAX's QDWH takes
        uq, pq = jax.scipy.linalg.polar(a, side)
        assert rel_err(u, uq) < 1e-12 and rel_err(p, pq) < 1e-12
    # every method gives the same factors; eps and max_iterations change nothing
    for kwargs in [{"method": "svd"}, {"method": "qdwh", "eps": 1e-3, "max_iterations": 1}]:
        for x, y in zip(rules.polar(a, side, **kwargs), (u, p)):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("shape", SHAPES)
def test_factors(shape, side):
    a = rand(shape, 2, jnp.complex128)
    u, p = rules.polar(a, side)
    m, n = shape
    gram = mH(u) @ u if m >= n else u @ mH(u)
    np.testing.assert_allclose(gram, jnp.eye(min(m, n)), atol=1e-14)
    np.testing.assert_array_equal(p, mH(p))
    assert np.all(np.linalg.eigvalsh(np.asarray(p)) > -1e-14)
    np.testing.assert_allclose(u @ p if side == "right" else p @ u, a, atol=1e-14)
    assert p.shape == ((n, n) if side == "right" else (m, m))


def test_float32_and_promotion():
    a = rand((6, 4), 3)
    for side in SIDES:
        u, p = rules.polar(a.astype(jnp.float32), side)
        us, ps = scipy.linalg.polar(np.asarray(a), side)
        assert u.dtype == p.dtype == jnp.float32
        assert rel_err(u, us) < 1e-5 and rel_err(p, ps) < 1e-5
        g = jax.grad(_loss([side], (6, 4), jnp.float32))(a.astype(jnp.float32))
        assert g.dtype == jnp.float32 and rel_err(g, jax.grad(_loss([side], (6, 4)))(a)) < 1e-4
    for dtype, promoted in [(jnp.int32, jnp.float32), (jnp.int64, jnp.float64),
                            (jnp.bool_, jnp.float32)]:
        u, p = rules.polar(jnp.eye(3, dtype=dtype))
        assert u.dtype == p.dtype == promoted
        np.testing.assert_array_equal(u, jnp.eye(3))
    u, p = rules.polar(a.astype(jnp.complex64))
    assert u.dtype == p.dtype == jnp.complex64


@pytest.mark.parametrize("shape", [(0, 0), (3, 0), (0, 3), (0, 4, 2)])
def test_empty(shape):
    a = jnp.zeros(shape)
    for side in SIDES:
        for x, y in zip(rules.polar(a, side), jax.scipy.linalg.polar(a, side, method="svd")):
            assert x.shape == y.shape and x.dtype == y.dtype
    assert jax.grad(_loss(SIDES, shape, seed=4))(a).shape == shape
    assert jax.jvp(lambda a: rules.polar(a, "left"), (a,), (a,))[1][0].shape == shape


def test_bad_input():
    a = jnp.eye(2)
    with pytest.raises(ValueError, match=r"polar: `a` must have shape \(\.\.\., m, n\); got \(3,\)"):
        rules.polar(jnp.ones(3))
    with pytest.raises(TypeError, match="polar: `a` must be a JAX or NumPy array; got list"):
        rules.polar([[1.0]])
    with pytest.raises(TypeError, match="polar: `a` has dtype float16"):
        rules.polar(jnp.eye(2, dtype=jnp.float16))
    with pytest.raises(ValueError, match="polar: `side` must be 'right' or 'left'; got 'up'"):
        rules.polar(a, "up")
    with pytest.raises(ValueError, match="polar: `method` must be 'qdwh' or 'svd'; got 'newton'"):
        rules.polar(a, method="newton")
    with pytest.raises(ValueError, match="polar: `eps` must be None or a float > 0; got 0.0"):
        rules.polar(a, eps=0.0)
    with pytest.raises(TypeError, match="polar: `eps` must be None or a float > 0; got str"):
        rules.polar(a, eps="tiny")
    with pytest.raises(ValueError, match="polar: `max_iterations` must be None or an int ≥ 0"):
        rules.polar(a, max_iterations=-1)
    with pytest.raises(TypeError, match="polar: `max_iterations` must be None or an int ≥ 0; "
                                        "got float"):
        rules.polar(a, max_iterations=2.0)


# ----------------------------------------------------------------------------------------------
# First derivatives


@pytest.mark.parametrize("shape,side,dtype", [
    ((5, 3), "right", jnp.float64), ((5, 3), "left", jnp.complex128),
    ((4, 4), "right", jnp.complex128), ((4, 4), "left", jnp.float64),
    ((3, 5), "right", jnp.float64), ((3, 5), "left", jnp.complex128)])
def test_finite_differences(shape, side, dtype):
    a = rand(shape, 5, dtype)
    # check_rrule checks the pushforward too (finite differences, the dot-product identity)
    check_rrule(rules.polar, a, fkwargs={"side": side}, check_jit=shape == (4, 4),
                check_vmap=dtype == jnp.float64)


# Where every singular value is repeated (orthogonal input) and where some are. JAX's default
# method has no reverse mode.
DEGENERATE = {
    "orthogonal": lambda: jnp.asarray(orthogonal(4, 6)),
    "unitary": lambda: _unitary_complex(3, 7),
    "repeated": lambda: with_singular_values(4, [3.0, 1.0, 1.0, 0.5], 8),
    "tall orthonormal": lambda: jnp.asarray(orthogonal(5, 9)[:, :3]),
    "tall repeated": lambda: with_singular_values(5, [2.0, 2.0, 1.0], 10),
    "wide repeated": lambda: with_singular_values(5, [2.0, 2.0, 1.0], 11).mT,
}


@pytest.mark.parametrize("case", DEGENERATE)
def test_finite_differences_at_repeated_singular_values(case):
    a = DEGENERATE[case]()
    side = SIDES[list(DEGENERATE).index(case) % 2]
    check = check_frule if case == "unitary" else check_rrule
    check(rules.polar, a, fkwargs={"side": side}, check_jit=False, check_vmap=False)
    # JAX's gradient: NaN or inf where singular values are equal, and where rounding splits them
    # it divides by their difference: finite there but wrong.
    w = rand(a.shape, 12, a.dtype)

    def grad(polar):
        return jax.grad(lambda a: jnp.sum(jnp.real(polar(a, side)[0] * w)))(a)

    ours = grad(rules.polar)
    theirs = grad(lambda a, side: jax.scipy.linalg.polar(a, side, method="svd"))
    assert not np.all(np.isfinite(theirs)) or rel_err(theirs, ours) > 1e-2


@pytest.mark.parametrize("shape,dtype", [((5, 3), jnp.complex128), ((4, 4), jnp.float64),
                                         ((3, 5), jnp.float64)])
def test_derivatives_match_jax(shape, dtype):
    a = rand((2, *shape), 13, dtype)
    a_dot = rand(a.shape, 14, dtype)
    wu = rand(a.shape, 15, dtype)

    def both_sides(polar):
        return lambda a: [polar(a, side) for side in SIDES]

    def loss(f):
        return lambda a: sum(jnp.sum(jnp.real(jnp.cos(u) * wu)) + jnp.sum(jnp.real(p))
                             for u, p in f(a))

    @jax.jit
    def derivatives(a, a_dot):
        return [(jax.grad(loss(f))(a), jax.jvp(f, (a,), (a_dot,))[1]) for f in (
            both_sides(rules.polar),
            both_sides(lambda a, side: jax.scipy.linalg.polar(a, side, method="svd")))]

    ours, ref = derivatives(a, a_dot)
    assert rel_err(ours, ref) < 1e-10


def test_rank_deficient_derivatives_are_nan():
    # The polar factor of a rank-deficient matrix is not unique, and has no derivative.
    for a in [jnp.diag(jnp.array([1.0, 0.0])), jnp.zeros((3, 3)),
              jnp.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])]:
        u, p = rules.polar(a)
        np.testing.assert_allclose(u @ p, a, atol=1e-15)
        for side in SIDES:
            g = jax.grad(_loss([side], a.shape, seed=16))(a)
            assert np.all(np.isnan(g))


# ----------------------------------------------------------------------------------------------
# Higher derivatives


@pytest.mark.parametrize("case", ["generic", "orthogonal", "unitary", "wide repeated"])
def test_second_derivatives(case):
    # Forward over reverse against central differences of the (checked) gradient; finite at
    # repeated singular values, since the Sylvester form is differentiated in P, never through the
    # SVD. Reverse over reverse once: the Hessian is symmetric, so the gradient of
    # Df[d] = Re Σ ∇f ⊙ d (JAX's pairing) is the same vector.
    a = rand((4, 3), 17) if case == "generic" else DEGENERATE[case]()
    loss = _loss(SIDES, a.shape, a.dtype, seed=18)
    d = rand(a.shape, 19, a.dtype)
    grad = jax.jit(jax.grad(loss))
    eps = 1e-5
    fd = (grad(a + eps * d) - grad(a - eps * d)) / (2 * eps)
    hvp = jax.jit(lambda a, d: jax.jvp(jax.grad(loss), (a,), (d,))[1])(a, d)
    assert rel_err(hvp, fd) < 1e-7
    if case == "unitary":
        grad_of_grad = jax.jit(jax.grad(lambda a, d: jnp.sum(jnp.real(jax.grad(loss)(a) * d))))
        assert rel_err(grad_of_grad(a, d), fd) < 1e-7


def test_hessian_and_third_derivative():
    a = jnp.asarray(orthogonal(3, 20))
    loss = _loss(["right"], (3, 3), seed=21)
    h = jax.jit(jax.hessian(loss))(a)
    assert np.all(np.isfinite(h))
    np.testing.assert_allclose(h.reshape(9, 9), h.reshape(9, 9).T, atol=1e-12)
    # third order: the directional derivative of the Hessian against central differences
    d = rand((3, 3), 22)
    hvp = jax.jit(lambda a: jax.jvp(jax.grad(loss), (a,), (d,))[1])
    third = jax.jit(lambda a: jax.jvp(hvp, (a,), (d,))[1])(a)
    eps = 1e-4
    assert rel_err(third, (hvp(a + eps * d) - hvp(a - eps * d)) / (2 * eps)) < 1e-6


# ----------------------------------------------------------------------------------------------
# Batches, vmap, the small-matrix route, sharding, lowering


def test_batch_vmap_jit():
    a = rand((3, 2, 5, 4), 23)
    loss = _loss(["left"], (5, 4), seed=24)
    batched = jax.jit(lambda a: jnp.sum(jax.vmap(jax.vmap(loss))(a)))
    g = jax.grad(batched)(a)
    for i in range(3):
        for j in range(2):
            np.testing.assert_allclose(g[i, j], jax.grad(loss)(a[i, j]), rtol=1e-12, atol=1e-13)
    u, p = rules.polar(a, "left")
    np.testing.assert_allclose(u[1, 0], rules.polar(a[1, 0], "left")[0], rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(p, jax.vmap(jax.vmap(lambda a: rules.polar(a, "left")[1]))(a),
                               rtol=1e-13, atol=1e-14)


def test_small_matrix_route():
    # 32 or more real 3 × 3 matrices take one-sided Jacobi (rules/_kernels/small.py): its
    # singular vectors may differ in sign from LAPACK's, the polar factors may not.
    a = rand((40, 3, 3), 25)
    u, p = rules.polar(a)
    uj, pj = jax.scipy.linalg.polar(a, method="svd")
    assert rel_err(u, uj) < 1e-12 and rel_err(p, pj) < 1e-12
    ref = jax.grad(lambda a: jnp.sum(jax.vmap(
        lambda a: jnp.sum(jnp.sin(jax.scipy.linalg.polar(a, method="svd")[0])))(a)))(a)
    ours = jax.grad(lambda a: jnp.sum(jnp.sin(rules.polar(a)[0])))(a)
    assert rel_err(ours, ref) < 1e-10


def test_sharded_batch():
    a = rand((4, 5, 3), 27)
    loss = _loss(["left"], (5, 3), seed=28)
    assert_sharded_like_unsharded(jax.value_and_grad(lambda a: jnp.sum(jax.vmap(loss)(a))), a,
                                  rtol=1e-11)


@pytest.mark.parametrize("platform", ["cuda", "tpu"])
def test_lowers_without_lapack(platform):
    for shape, side in [((6, 6), "right"), ((7, 4), "left"), ((4, 7), "right")]:
        loss = _loss([side], shape, jnp.float32, seed=29)
        spec = jax.ShapeDtypeStruct(shape, jnp.float32)
        for fun in [jax.grad(loss), jax.hessian(loss)]:
            text = jax.export.export(jax.jit(fun), platforms=[platform])(spec).mlir_module()
            calls = re.findall(r"custom_call @(\w+)", text)
            assert not [c for c in calls if re.search(r"lapack|ducc|cpu", c, re.IGNORECASE)]
            assert not re.findall(r"cpu_route\.(\w+)", text)  # the CPU routes' named scopes


# ----------------------------------------------------------------------------------------------
# The kernel: the Sylvester solve and P⁻¹, differentiated in P


def test_kernel_sylvester_and_inverse():
    _, s, v, _, p = kernel.factors(rand((5, 4), 30, jnp.complex128))
    c = rand((4, 4), 31, jnp.complex128)
    x = kernel.sylvester(p, s, v, c)
    np.testing.assert_allclose(x @ p + p @ x, c, atol=1e-13)
    np.testing.assert_allclose(kernel.inverse(p, s, v) @ p, jnp.eye(4), atol=1e-13)
    # the derivatives in P (the tangents of s and V are not used)
    p_dot, c_dot = rand((4, 4), 32, jnp.complex128), rand((4, 4), 33, jnp.complex128)
    p_dot = p_dot + mH(p_dot)
    zeros = (jnp.zeros_like(s), jnp.zeros_like(v))
    x_dot = jax.jvp(kernel.sylvester, (p, s, v, c), (p_dot, *zeros, c_dot))[1]
    np.testing.assert_allclose(x_dot @ p + p @ x_dot, c_dot - x @ p_dot - p_dot @ x, atol=1e-12)
    inv_dot = jax.jvp(kernel.inverse, (p, s, v), (p_dot, *zeros))[1]
    np.testing.assert_allclose(inv_dot, -jnp.linalg.solve(p, p_dot) @ jnp.linalg.inv(p), atol=1e-12)
