"""Tests of rules/_linalg/dense.py: inv, solve, det, slogdet against finite differences and JAX."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rules
from rules.internal import routes
from rules.testing import check_rrule
from tests.helpers import rand, rel_err
from tests.rules.linalg.sharded import assert_sharded_like_unsharded


def well_conditioned(shape, seed=0, dtype=jnp.float64):
    n = shape[-1]
    return rand(shape, seed, dtype) + 2 * n ** 0.5 * jnp.broadcast_to(jnp.eye(n, dtype=dtype), shape)


# ----------------------------------------------------------------------------------------------
# inv


@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 3, 4, 4)])
@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128])
def test_inv_finite_differences(shape, dtype):
    # The comparison with an eager run (half the cost of a check) at one shape per dtype.
    check_rrule(rules.inv, well_conditioned(shape, 1, dtype), check_jit=shape == (3, 3))


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128])
def test_inv_matches_jax_vjp(dtype):
    a = well_conditioned((2, 5, 5), 2, dtype)
    b_bar = rand((2, 5, 5), 3, dtype)
    ours = jax.vjp(rules.inv, a)[1](b_bar)[0]
    ref = jax.vjp(jnp.linalg.inv, a)[1](b_bar)[0]
    assert rel_err(ours, ref) < 1e-12


def test_inv_jit_vmap_hessian():
    a = well_conditioned((3, 3), 4)
    w = rand((3, 3), 5)

    def loss(inv_fn, a):
        return jnp.sum(w * jnp.tanh(inv_fn(a)))

    np.testing.assert_allclose(jax.jit(rules.inv)(a), jnp.linalg.inv(a), rtol=1e-12)
    stack = jnp.stack([a, 2 * a])
    np.testing.assert_allclose(jax.vmap(rules.inv)(stack), jnp.linalg.inv(stack), rtol=1e-12)
    h_ours = jax.jit(jax.hessian(functools.partial(loss, rules.inv)))(a)
    h_ref = jax.jit(jax.hessian(functools.partial(loss, jnp.linalg.inv)))(a)
    assert rel_err(h_ours, h_ref) < 1e-10
    g_vmap = jax.jit(jax.vmap(jax.grad(functools.partial(loss, rules.inv))))(stack)
    g_ref = jax.jit(jax.vmap(jax.grad(functools.partial(loss, jnp.linalg.inv))))(stack)
    assert rel_err(g_vmap, g_ref) < 1e-12


def test_inv_float32():
    a = well_conditioned((4, 4), 6)
    b_bar = rand((4, 4), 7)
    g32 = jax.vjp(rules.inv, a.astype(jnp.float32))[1](b_bar.astype(jnp.float32))[0]
    g64 = jax.vjp(rules.inv, a)[1](b_bar)[0]
    assert g32.dtype == jnp.float32
    assert rel_err(g32, g64) < 1e-5


def test_inv_singular_propagates_like_jax():
    for a in [jnp.zeros((3, 3)), jnp.ones((2, 4, 4)), jnp.array([[1.0, 2.0], [2.0, 4.0]])]:
        ours, ref = jax.jit(rules.inv)(a), jax.jit(jnp.linalg.inv)(a)
        np.testing.assert_array_equal(np.isfinite(ours), np.isfinite(ref))
        assert not np.all(np.isfinite(ours))
        g = jax.jit(jax.grad(lambda a: jnp.sum(rules.inv(a))))(a)
        assert not np.all(np.isfinite(g))


def test_bad_input():
    with pytest.raises(TypeError, match="inv: `a` must be a JAX or NumPy array; got list"):
        rules.inv([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(ValueError, match=r"inv: `a` must have shape \(\.\.\., n, n\); got \(3,\)"):
        rules.inv(jnp.ones(3))
    with pytest.raises(TypeError, match="inv: `a` must have dtype .*; got <U1"):
        rules.inv(np.array([["a", "b"], ["c", "d"]]))
    with pytest.raises(ValueError, match=r"must have shape"):
        jax.jit(rules.inv)(jnp.ones(3))  # raised while tracing, under jit too
    with pytest.raises(ValueError, match=r"inv: `a` must have shape \(\.\.\., n, n\) \(square\); got \(2, 3, 4\)"):
        rules.inv(jnp.ones((2, 3, 4)))


@pytest.mark.parametrize("dtype", [jnp.int32, jnp.int64, jnp.bool_])
def test_integer_input_promoted_as_jnp(dtype):
    a = jnp.array([[2, 1], [1, 1]], dtype)
    np.testing.assert_array_equal(rules.inv(a), jnp.linalg.inv(a))
    assert rules.inv(a).dtype == jnp.linalg.inv(a).dtype


HALF = (r"^{}: `{}` has dtype {}\. Unsupported dtype {}: the cpu backend's factorisations .* "
        r"`{}.astype\(jnp.float32\)`")


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=["float16", "bfloat16"])
def test_half_precision_is_refused_naming_the_function(dtype):
    """JAX fails at lowering with KeyError(numpy.float16) (LAPACK has no half precision); ours
    says which function and argument, at trace time, as JAX's type of error (NotImplementedError,
    "Unsupported dtype") and a TypeError. JAX's closed-form det (n ≤ 3) takes it."""
    a = jnp.eye(4, dtype=dtype)
    with pytest.raises(NotImplementedError, match="Unsupported dtype"):
        jax.block_until_ready(jnp.linalg.inv(a))
    name = jnp.dtype(dtype).name
    calls = {"inv": lambda: rules.inv(a), "qr": lambda: rules.qr(a), "lq": lambda: rules.lq(a),
             "cholesky": lambda: rules.cholesky(a), "eigh": lambda: rules.eigh(a),
             "svd": lambda: rules.svd(a), "slogdet": lambda: rules.slogdet(a),
             "det": lambda: rules.det(a), "expm": lambda: rules.expm(a),
             "solve": lambda: rules.solve(a, a[:, 0])}
    for fname, call in calls.items():
        argname = "A" if fname == "expm" else "a"
        with pytest.raises(TypeError, match=HALF.format(fname, argname, name, name, argname)):
            jax.jit(call)()
        with pytest.raises(NotImplementedError, match="Unsupported dtype"):
            call()
    assert rules.det(a[:3, :3]).dtype == dtype


# ----------------------------------------------------------------------------------------------
# solve, det, slogdet. For n ≤ 4 they run the closed forms of small.py, for larger n LU.


def dense_outputs(a_small, b_small, a_lu, b_lu):
    """Every output of the three rules on both routes (one finite-difference check covers all)."""
    return (rules.solve(a_small, b_small), rules.det(a_small), tuple(rules.slogdet(a_small)),
            rules.solve(a_lu, b_lu), rules.det(a_lu), tuple(rules.slogdet(a_lu)))


def test_solve_det_slogdet_finite_differences():
    # Both routes (closed forms, LU); complex input is compared with JAX's derivatives below. A
    # batch of right-hand sides for one matrix (folded into columns) and one vector shared by a
    # batch of matrices: the two broadcasting paths.
    # check_jit=False: evaluated op by op, the closed forms compile hundreds of tiny programs
    # (most of this test's time); every other check here runs under jit.
    check_rrule(dense_outputs, well_conditioned((2, 2, 2), 40), rand((2,), 41),
                well_conditioned((5, 5), 42), rand((2, 5, 1), 43), check_jit=False)


@pytest.mark.parametrize("n", [3, 6])
def test_solve_det_slogdet_match_jax(n):
    a = jnp.stack([well_conditioned((n, n), 44), rand((n, n), 45)])      # (2, n, n)
    ac = well_conditioned((2, n, n), 46, jnp.complex128)
    b, bc = rand((2, n, 3), 47), rand((2, n, 3), 48, jnp.complex128)
    cts = [rand((2, n, 3), 49), rand((2,), 50), rand((2,), 51), rand((2,), 52)]
    cts_c = [rand((2, n, 3), 53, jnp.complex128), rand((2,), 54, jnp.complex128),
             rand((2,), 55, jnp.complex128), rand((2,), 56)]

    def all_three(solve, det, slogdet):
        return lambda a, b: (solve(a, b), det(a), *slogdet(a))

    @jax.jit
    def derivatives(a, b, ac, bc):
        out = []
        for fn in (all_three(rules.solve, rules.det, rules.slogdet),
                   all_three(jnp.linalg.solve, jnp.linalg.det, jnp.linalg.slogdet)):
            for x, y, c in [(a, b, cts), (ac, bc, cts_c)]:
                value, pullback = jax.vjp(fn, x, y)
                out.append((value, pullback(tuple(c)), jax.jvp(fn, (x, y), (y[..., :1] * x, y))[1]))
        return out[:2], out[2:]

    ours, ref = derivatives(a, b, ac, bc)
    assert rel_err(ours, ref) < 1e-11


def test_solve_lu_of_a_alone_route(cutoffs):
    # From n = 128 the forward factorises A alone and keeps the row permutation for the
    # derivatives (π⁻¹ by a scatter); forced here on n = 5. The derivative formulas are the ones
    # the finite-difference test checks on the other route; this checks the factorisation path
    # against JAX's vjp and jvp in real and complex arithmetic (a batch of matrices), and a
    # second derivative.
    cutoffs(LU_WITH_RHS_MAX_N=0)
    a, b = well_conditioned((2, 5, 5), 70), rand((2, 5, 3), 71)
    ac, bc = well_conditioned((2, 5, 5), 73, jnp.complex128), rand((2, 5, 3), 74, jnp.complex128)

    @jax.jit
    def derivatives(a, b, ac, bc):
        out = []
        for solve in (rules.solve, jnp.linalg.solve):
            for x, y in [(a, b), (ac, bc)]:
                value, pullback = jax.vjp(solve, x, y)
                tangent = jax.jvp(solve, (x, y), (y[..., :1] * x, y))[1]
                out.append((value, pullback(jnp.cos(y)), tangent))
            out.append(jax.hessian(lambda x: jnp.sum(jnp.sin(solve(x, b[0]))))(a[0]))
        return out[:3], out[3:]

    ours, ref = derivatives(a, b, ac, bc)
    assert rel_err(ours, ref) < 1e-11


def cofactors(a):
    a = np.asarray(a)
    n = a.shape[-1]
    return np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1))
                      for j in range(n)] for i in range(n)])


@pytest.fixture(params=["wide LU", "LU of A"])
def lu_route(request, cutoffs):
    """Both routes of lu.lu_with_lower_inverse at small n: the LU of [A | I], and (with the
    threshold lowered) the LU of A followed by a solve with the permutation matrix."""
    if request.param == "LU of A":
        cutoffs(LU_WITH_IDENTITY_MAX_N=5)
    return request.param


@pytest.mark.parametrize("n", [3, 6])
def test_det_gradient_at_singular_matrices_is_the_cofactor_matrix(n, lu_route):
    rng = np.random.default_rng(56)
    last = rng.standard_normal((n, n))
    last[-1] = last[0] + last[1]      # LU's zero pivot is the last one (JAX gets these right)
    first = rng.standard_normal((n, n))
    first[:, 0] = 0                   # a zero first column: LU's zero pivot comes first
    low_rank = np.outer(rng.standard_normal(n), rng.standard_normal(n))   # rank 1: adj = 0
    stack = jnp.asarray(np.stack([last, first, low_rank]))
    ours, ref = jax.jit(lambda a: [jax.vmap(jax.grad(f))(a) for f in (rules.det, jnp.linalg.det)])(stack)
    for g, a in zip(ours, stack):
        np.testing.assert_allclose(g, cofactors(a), atol=1e-12 * n ** 2)
    if n > 4:  # JAX's cofactor solve misses a zero pivot that is not the last one
        assert np.max(np.abs(ref[1])) == 0 < np.max(np.abs(cofactors(first)))


def test_singular_like_jax(lu_route):
    @jax.jit
    def outputs(z):
        o = jnp.ones(z.shape[-1])
        return [(solve(z, o), *slogdet(z)) for solve, slogdet in [
            (rules.solve, rules.slogdet), (jnp.linalg.solve, jnp.linalg.slogdet)]] + [
            jax.grad(lambda a: rules.slogdet(a).logabsdet)(z)]

    for n in [3, 6]:
        (x, sign, logabsdet), (x_ref, sign_ref, logabsdet_ref), grad = outputs(jnp.zeros((n, n)))
        assert not np.any(np.isfinite(x)) and not np.any(np.isfinite(x_ref))
        assert (float(sign), float(logabsdet)) == (float(sign_ref), float(logabsdet_ref))
        assert not np.all(np.isfinite(grad))
    out, ref = rules.slogdet(rand((2, 5, 5), 57)), jnp.linalg.slogdet(rand((2, 5, 5), 57))
    assert type(out) is type(ref) and out._fields == ("sign", "logabsdet")


@pytest.mark.parametrize("a_shape,b_shape", [((4, 4), (4,)), ((3, 4, 4), (4,)), ((4, 4), (3, 4, 2)),
                                             ((3, 1, 5, 5), (2, 5, 2)), ((0, 0), (0,)),
                                             ((2, 0, 0), (2, 0, 3)), ((0, 3, 3), (3,))])
def test_shapes_and_batching_as_jnp(a_shape, b_shape):
    a, b = well_conditioned(a_shape, 47) if a_shape[-1] else jnp.zeros(a_shape), rand(b_shape, 48)

    def loss(solve, det, slogdet, a, b):
        return jnp.sum(solve(a, b) ** 2) + jnp.sum(det(a)) + jnp.sum(slogdet(a).logabsdet)

    # Ours runs under jax_numpy_rank_promotion="raise"; jnp.linalg.solve does not.
    out = jax.jit(lambda a, b: [rules.solve(a, b), rules.det(a), *rules.slogdet(a), jax.grad(
        functools.partial(loss, rules.solve, rules.det, rules.slogdet), (0, 1))(a, b)])(a, b)
    with jax.numpy_rank_promotion("allow"):
        ref = jax.jit(lambda a, b: [jnp.linalg.solve(a, b), jnp.linalg.det(a), *jnp.linalg.slogdet(a)])(a, b)
        if a.size:  # JAX's det gradient fails on empty matrices (an IndexError in _cofactor_solve)
            ref.append(jax.jit(jax.grad(functools.partial(
                loss, jnp.linalg.solve, jnp.linalg.det, jnp.linalg.slogdet), (0, 1)))(a, b))
    assert [x.shape for x in jax.tree_util.tree_leaves(out)[:4]] == [x.shape for x in ref[:4]]
    assert out[4][0].shape == a.shape and out[4][1].shape == b.shape
    assert rel_err(out[: len(ref)], ref) < 1e-10


@pytest.mark.standard_promotion  # mixed dtypes, promoted as jnp.linalg promotes them
def test_dtypes_as_jnp():
    a32 = well_conditioned((3, 3), 49).astype(jnp.float32)
    for b in [jnp.arange(3), jnp.arange(3.0), jnp.arange(3.0, dtype=jnp.float32)]:
        assert rules.solve(a32, b).dtype == jnp.linalg.solve(a32, b).dtype
    a = well_conditioned((4, 4), 58)

    def loss(a):
        return jnp.sum(rules.solve(a, a[:, :1])) + rules.det(a) + rules.slogdet(a).logabsdet

    grad = jax.jit(jax.grad(loss))
    g32, g64 = grad(a.astype(jnp.float32)), grad(a)
    assert g32.dtype == jnp.float32 and rel_err(g32, g64) < 1e-5
    h = jnp.eye(2, dtype=jnp.float16) * 3
    assert rules.det(h).dtype == jnp.float16 and float(rules.det(h)) == float(jnp.linalg.det(h))
    with pytest.raises(TypeError, match="slogdet: `a` has dtype float16"):
        rules.slogdet(jnp.eye(6, dtype=jnp.float16))
    with pytest.raises(TypeError, match="solve: `a` has dtype float16"):
        rules.solve(jnp.eye(6, dtype=jnp.float16), jnp.ones(6, jnp.float16))


def test_solve_bad_input():
    a = jnp.eye(3)
    with pytest.raises(TypeError, match="solve: `b` must be a JAX or NumPy array; got list"):
        rules.solve(a, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"solve: `b` must have shape \(n,\) or \(\.\.\., n, k\) "
                                         r"with n = 3 \(`a` has shape \(3, 3\)\); got \(4,\)"):
        rules.solve(a, jnp.ones(4))
    with pytest.raises(ValueError, match=r"solve: `b` must have shape .* got \(2, 3\)"):
        rules.solve(jnp.ones((2, 3, 3)), jnp.ones((2, 3)))  # a batch of vectors is (..., n, 1)
    with pytest.raises(ValueError, match=r"solve: the batch shapes of `a` \(2, 3, 3\) and `b` "
                                         r"\(4, 3, 1\) do not broadcast"):
        rules.solve(jnp.ones((2, 3, 3)), jnp.ones((4, 3, 1)))
    with pytest.raises(ValueError, match=r"solve: `a` must have shape \(\.\.\., n, n\) \(square\)"):
        jax.jit(rules.solve)(jnp.ones((3, 2)), jnp.ones(3))


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128])
def test_large_matrix_routes_match_jax(dtype):
    """The routes taken from a size on: inv from LU_INVERSE_MAX_N (JAX's inverse as the forward);
    inv, det, slogdet and expm's solves from LU_WITH_IDENTITY_MAX_N (the LU of A, then L⁻¹P by a
    triangular solve); values, jvp and vjp."""
    m, real = routes.LU_WITH_IDENTITY_MAX_N, dtype == jnp.float64  # expm's is dtype-blind: once
    scale = 1 / (2 * m ** 0.5)  # det of well_conditioned((m, m)) is about (2√m)^m: overflow
    for fn, ref, n in [(rules.inv, jnp.linalg.inv, routes.LU_INVERSE_MAX_N),
                       (rules.inv, jnp.linalg.inv, m),
                       (lambda a: rules.det(scale * a), lambda a: jnp.linalg.det(scale * a), m),
                       (lambda a: rules.slogdet(a).logabsdet,
                        lambda a: jnp.linalg.slogdet(a).logabsdet, m),
                       (lambda a: rules.expm(scale * a),
                        lambda a: jax.scipy.linalg.expm(scale * a), m)][:None if real else -1]:
        a, t = well_conditioned((n, n), 70, dtype), rand((n, n), 71, dtype)
        (y, y_dot), (y_ref, y_dot_ref) = jax.jvp(fn, (a,), (t,)), jax.jvp(ref, (a,), (t,))
        ct = rand(jnp.shape(y), 72, y.dtype)
        a_bar, a_bar_ref = jax.vjp(fn, a)[1](ct)[0], jax.vjp(ref, a)[1](ct)[0]
        for got, want in [(y, y_ref), (y_dot, y_dot_ref), (a_bar, a_bar_ref)]:
            assert rel_err(got, want) < 1e-11


@pytest.mark.parametrize("fn", [rules.det, rules.slogdet], ids=["det", "slogdet"])
def test_det_slogdet_bad_input(fn):
    name = fn.__name__
    with pytest.raises(TypeError, match=f"{name}: `a` must be a JAX or NumPy array; got list"):
        fn([[1.0]])
    with pytest.raises(ValueError, match=rf"{name}: `a` must have shape \(\.\.\., n, n\) \(square\); "
                                         r"got \(2, 3\)"):
        fn(jnp.ones((2, 3)))


def test_higher_derivatives_match_jax():
    a3, a6 = well_conditioned((3, 3), 61), well_conditioned((6, 6), 62)
    b3, b6 = rand((3, 2), 63), rand((6, 2), 64)

    def loss(solve, det, slogdet, a, b):
        return jnp.sum(jnp.sin(solve(a, b))) + jnp.sin(det(a)) + slogdet(a).logabsdet ** 2

    @jax.jit
    def derivatives(a3, b3, a6, b6):
        out = []
        for fns in [(rules.solve, rules.det, rules.slogdet),
                    (jnp.linalg.solve, jnp.linalg.det, jnp.linalg.slogdet)]:
            l = functools.partial(loss, *fns)
            out.append((jax.hessian(l, (0, 1))(a3, b3),
                        jax.grad(lambda a: jnp.sum(jax.grad(l)(a, b6) ** 2))(a6)))
        return out

    ours, ref = derivatives(a3, b3, a6, b6)
    assert rel_err(ours, ref) < 1e-9


def test_sharded_batch():
    a, b = well_conditioned((4, 6, 6), 65), rand((4, 6, 2), 66)
    t = well_conditioned((4, 3, 3), 67)

    def values_and_grads(a, b, t):
        def loss(a, b, t):
            return (jnp.sum(rules.solve(a, b) ** 2) + jnp.sum(rules.det(a)) + jnp.sum(rules.det(t))
                    + jnp.sum(rules.slogdet(t).logabsdet) + jnp.sum(rules.solve(t, b[:, :3])))
        return jax.value_and_grad(loss, argnums=(0, 1, 2))(a, b, t)

    assert_sharded_like_unsharded(values_and_grads, a, b, t)


def test_slogdet_method_as_jax_takes_it():
    a = well_conditioned((2, 5, 5), 90)
    for method in (None, "lu", "qr"):
        for x, y in zip(rules.slogdet(a, method=method), jnp.linalg.slogdet(a, method=method)):
            np.testing.assert_allclose(x, y, rtol=1e-12)
    with pytest.raises(ValueError, match=r"slogdet: `method` must be None, 'lu' or 'qr'"):
        rules.slogdet(a, method="svd")


def test_no_warning_for_numpy_operands_without_x64():
    """With x64 off (JAX's default), a float32 matrix and a NumPy float64 or int64 right-hand
    side give float32, as jnp.linalg does, and warn about nothing (warnings are errors here)."""
    import subprocess
    import sys

    from tests.helpers import cpu_subprocess_env

    script = (
        "import numpy as np, jax.numpy as jnp, rules\n"
        "a = jnp.eye(3, dtype=jnp.float32) * 2\n"
        "for b in (np.ones(3), np.ones((3, 2), np.int64)):\n"
        "    assert rules.solve(a, b).dtype == jnp.linalg.solve(a, b).dtype == jnp.float32\n"
        "    assert rules.cho_solve((rules.cholesky(a), True), b).dtype == jnp.float32\n"
        "assert rules.inv(np.eye(3)).dtype == jnp.linalg.inv(np.eye(3)).dtype\n")
    env = cpu_subprocess_env(1)
    env.pop("JAX_ENABLE_X64", None)
    result = subprocess.run([sys.executable, "-W", "error", "-c", script], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
