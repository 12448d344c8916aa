"""Tests of rules/_linalg/sqrtm_logm.py: the principal square root and logarithm of general
matrices, their Fréchet derivatives, and rules/_kernels/roots.py beneath them."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

import rules
from rules._kernels import roots
from rules.internal import routes
from rules.testing import check_rrule
from tests.helpers import rand, rel_err, spd

FUNCTIONS = pytest.mark.parametrize("f", [rules.sqrtm, rules.logm], ids=["sqrtm", "logm"])


def _square_loss(f):
    return lambda a: jnp.sum(jnp.abs(f(a)) ** 2)


def _right_half_plane(n, seed, dtype=jnp.float64):
    """Non-normal, non-symmetric, eigenvalues well inside the right half plane."""
    return rand((n, n), seed, dtype) + 3 * jnp.eye(n, dtype=dtype)


def _non_normal(n, seed):
    """Upper triangular with a large strictly upper part: far from normal, eigenvalues in [1, 2]."""
    return jnp.diag(jnp.linspace(1.0, 2.0, n)) + 4 * jnp.triu(rand((n, n), seed), 1)


def _cases(n, dtype):
    """Right half plane, Hermitian positive definite, non-normal: one batch."""
    return jnp.stack([_right_half_plane(n, 1, dtype), spd((n, n), 2, dtype),
                      _non_normal(n, 3).astype(dtype)])


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128])
@pytest.mark.parametrize("n", [3, 7])  # Gauss–Jordan and LU inverses
def test_values_match_scipy(n, dtype):
    a = _cases(n, dtype)
    x, y = jax.jit(lambda a: (rules.sqrtm(a), rules.logm(a)))(a)
    assert x.dtype == jnp.complex128 and y.dtype == a.dtype
    for k in range(a.shape[0]):
        assert rel_err(x[k], scipy.linalg.sqrtm(np.asarray(a[k]))) < 1e-12
        assert rel_err(y[k], scipy.linalg.logm(np.asarray(a[k]))) < 1e-12
        assert rel_err(x[k] @ x[k], a[k]) < 1e-13
    assert rel_err(rules.expm(y), a) < 1e-12


def test_values_match_jax_sqrtm():
    a = _right_half_plane(5, 5)
    assert rel_err(rules.sqrtm(a), jax.scipy.linalg.sqrtm(a)) < 1e-12


def test_float32_accuracy():
    # Stated accuracy in single precision: a few units of float32 rounding times the condition.
    a = jnp.stack([_right_half_plane(5, 6), spd((5, 5), 7)])
    x, y = rules.sqrtm(a.astype(jnp.float32)), rules.logm(a.astype(jnp.float32))
    assert x.dtype == jnp.complex64 and y.dtype == jnp.float32
    for k in range(2):
        assert rel_err(x[k], scipy.linalg.sqrtm(np.asarray(a[k]))) < 2e-6
        assert rel_err(y[k], scipy.linalg.logm(np.asarray(a[k]))) < 5e-6


@pytest.mark.filterwarnings("ignore:logm result may be inaccurate")  # SciPy's, not ours
def test_logm_scales_and_many_square_roots():
    # 2^k scaling (a near multiple of I needs no square root); B near I (none either); a wide
    # spectrum (several square roots); a small scale; I + N with N nilpotent and ‖N‖ = 1e4, where
    # ‖Y^p‖^{1/p} (not ‖Y‖ = 1e4) decides: no square root. Each slice keeps its own count.
    q = np.linalg.qr(np.asarray(rand((4, 4), 8)))[0]
    wide = jnp.asarray((q * np.array([1e-3, 1.0, 10.0, 1e3])) @ q.T)
    nilpotent = 1e4 * jnp.triu(rand((4, 4), 12), 1)
    a = jnp.stack([1e6 * jnp.eye(4) + rand((4, 4), 9), jnp.eye(4) + 0.1 * rand((4, 4), 10), wide,
                   3e-5 * _right_half_plane(4, 11), jnp.eye(4) + nilpotent])
    y, res = jax.jit(roots.logm)(a)
    for k in range(a.shape[0]):
        assert rel_err(y[k], scipy.linalg.logm(np.asarray(a[k]))) < 1e-11
    assert res.s[0] == res.s[1] == res.s[4] == 0 and res.s[2] > 3


def test_dtypes_and_promotion():
    # sqrtm: complex of the input's precision (as JAX's); logm: the input's dtype.
    for dtype, root, log in [(jnp.int32, jnp.complex64, jnp.float32),
                             (jnp.int64, jnp.complex128, jnp.float64),
                             (jnp.float32, jnp.complex64, jnp.float32),
                             (jnp.complex64, jnp.complex64, jnp.complex64),
                             (jnp.complex128, jnp.complex128, jnp.complex128)]:
        spec = jax.ShapeDtypeStruct((2, 2), dtype)
        assert jax.eval_shape(rules.sqrtm, spec).dtype == root
        assert jax.eval_shape(rules.logm, spec).dtype == log
    i = jnp.array([[4, 0], [0, 9]], jnp.int32)
    np.testing.assert_allclose(rules.sqrtm(i), jnp.diag(jnp.array([2.0, 3.0])), atol=1e-6)


# ----------------------------------------------------------------------------------------------
# Derivatives


@pytest.mark.parametrize("f,dtype", [(rules.sqrtm, jnp.float64), (rules.logm, jnp.complex128)],
                         ids=["sqrtm-real", "logm-complex"])
def test_finite_differences(f, dtype):
    # Both modes (check_rrule checks jax.jvp too): sqrtm of real input (complex output), logm of
    # complex input; the other two below. n = 3 (Gauss–Jordan) here, n = 6 (LU) in the Sylvester
    # and integral checks below, vmap in the batch test.
    check_rrule(f, _right_half_plane(3, 12, dtype), check_jit=False, check_vmap=False)


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128])
def test_sqrtm_derivative_solves_sylvester(dtype):
    a, e = _non_normal(6, 13).astype(dtype), rand((6, 6), 14, dtype)
    g = rand((6, 6), 15, jnp.complex128)  # the output is complex

    @jax.jit
    def derivatives(a, e, g):
        x, l = jax.jvp(rules.sqrtm, (a,), (e,))
        pull = jax.vjp(rules.sqrtm, a)[1](g)[0]
        if jnp.iscomplexobj(a):
            return x, l, pull, jax.jvp(rules.sqrtm, (a.T,), (g,))[1]
        # Real A, complex output: the pullback is L(Aᵀ, Re X̄), real.
        return x, l, pull, jax.jvp(rules.sqrtm, (a.T,), (g.real,))[1].real

    x, l, pull, push_t = derivatives(a, e, g)
    assert rel_err(x @ l + l @ x, e) < 1e-13           # X L + L X = Ȧ
    assert rel_err(pull, push_t) < 1e-12              # Ā = L(Aᵀ, X̄)


def test_logm_derivative():
    # Against the integral formula L(A, E) = ∫₀¹ (t(A − I) + I)⁻¹ E (t(A − I) + I)⁻¹ dt
    # (Gauss–Legendre, converged), and the pullback against L(Aᵀ, ·); n = 6 takes LU.
    a, e, g = spd((6, 6), 16) + 0.3 * rand((6, 6), 17), rand((6, 6), 18), rand((6, 6), 19)
    t, w = np.polynomial.legendre.leggauss(60)
    eye = np.eye(6)
    ref = sum(wj / 2 * np.linalg.solve(tj * (a - eye) + eye, e)
              @ np.linalg.inv(tj * (a - eye) + eye) for tj, wj in zip((t + 1) / 2, w))
    l, pull, push_t = jax.jit(lambda a, e, g: (jax.jvp(rules.logm, (a,), (e,))[1],
                                                jax.vjp(rules.logm, a)[1](g)[0],
                                                jax.jvp(rules.logm, (a.T,), (g,))[1]))(a, e, g)
    assert rel_err(l, ref) < 1e-12
    assert rel_err(pull, push_t) < 1e-12


def test_commuting_direction_and_identity():
    # In the direction A itself: d√A[A] = √A / 2 and d log A[A] = I; at A = I (one step of the
    # iteration, no square root for logm): d√I[E] = E / 2, d log I[E] = E.
    a, e = jnp.stack([_right_half_plane(5, 20), jnp.eye(5)]), rand((5, 5), 32)
    t = jnp.stack([a[0], e])
    (x, dx), (_, dy) = jax.jit(lambda a, t: (jax.jvp(rules.sqrtm, (a,), (t,)),
                                             jax.jvp(rules.logm, (a,), (t,))))(a, t)
    assert rel_err(dx[0], x[0] / 2) < 1e-13 and rel_err(dy[0], jnp.eye(5)) < 1e-13
    assert rel_err(dx[1], e / 2) < 1e-15 and rel_err(dy[1], e) < 1e-15


def test_second_derivatives():
    # Forward over reverse (jax.hessian, jvp of grad) against finite differences of the gradient.
    a, d = _right_half_plane(3, 21), rand((3, 3), 22)
    w = rand((3, 3), 23)

    def sqrtm_loss(a):
        return jnp.sum(w * rules.sqrtm(a).real)

    def logm_loss(a):
        return jnp.sum(w * rules.logm(a))

    @jax.jit
    def derivatives(a, d):
        return ([jax.grad(f)(a) for f in (sqrtm_loss, logm_loss)],
                [jax.jvp(jax.grad(f), (a,), (d,))[1] for f in (sqrtm_loss, logm_loss)],
                jnp.einsum("ijkl,kl->ij", jax.hessian(sqrtm_loss)(a), d))

    eps = 1e-5
    plus, minus = derivatives(a + eps * d, d)[0], derivatives(a - eps * d, d)[0]
    _, hvps, hessian_d = derivatives(a, d)
    for hvp, p, m in zip(hvps, plus, minus):
        assert rel_err(hvp, (p - m) / (2 * eps)) < 1e-7
    assert rel_err(hessian_d, hvps[0]) < 1e-12


@FUNCTIONS
def test_reverse_over_reverse(f):
    # Reverse over reverse goes through the recorded forward and the derivative's loops in
    # reverse (JAX cannot transpose a while_loop): it agrees with forward over reverse.
    a, w = _right_half_plane(3, 41), rand((3, 3), 42)

    def loss(a):
        return jnp.sum(w * f(a).real)

    @jax.jit
    def second_derivatives(a):
        return (jax.jacfwd(jax.jacrev(loss))(a),
                jax.grad(lambda a: jnp.sum(w * jax.grad(loss)(a)))(a))

    forward_over_reverse, reverse_over_reverse = second_derivatives(a)
    assert rel_err(reverse_over_reverse, jnp.einsum("ijkl,ij->kl", forward_over_reverse, w)) < 1e-9


@FUNCTIONS
def test_batch_vmap_and_jit_match_single_slices(f):
    # Slices converging after different numbers of steps (and square roots, for logm): the batch
    # runs the most, each slice keeps its own result and derivative.
    a = jnp.stack([jnp.eye(4), _right_half_plane(4, 24), spd((4, 4), 25) * 100, _non_normal(4, 26)])
    e = rand(a.shape, 27)

    def derivatives(a, e):
        return jax.jvp(f, (a,), (e,)) + (jax.grad(_square_loss(f))(a),)

    # Under vmap each slice's loop stops at its own step: single slices, batched by JAX.
    batched = jax.jit(derivatives)(a, e)
    single = jax.jit(jax.vmap(derivatives))(a, e)
    for k in range(a.shape[0]):
        for b, s in zip(batched, single):
            assert rel_err(b[k], s[k]) < 1e-13


def test_shard_map():
    # Per device under shard_map, each device's loop runs its own slices' number of steps
    # (converged slices take fixed-point steps); the loops' carries vary over the mesh axis.
    # logm runs the iteration, its derivative and the Padé step.
    f = rules.logm
    a, t = _cases(4, jnp.float64)[:2], rand((2, 4, 4), 31)

    def values(a, t):
        return f(a), jax.grad(_square_loss(f))(a), jax.jvp(f, (a,), (t,))[1]

    mesh = Mesh(np.array(jax.devices()[:2]), ("batch",))
    mapped = jax.jit(jax.shard_map(values, mesh=mesh, in_specs=(P("batch"), P("batch")),
                                   out_specs=(P("batch"),) * 3))
    assert rel_err(mapped(a, t), jax.jit(values)(a, t)) < 1e-13


@FUNCTIONS
@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (0, 3, 3)])
def test_empty(f, shape):
    a = jnp.zeros(shape)
    assert f(a).shape == shape
    assert f(a).dtype == (jnp.complex128 if f is rules.sqrtm else jnp.float64)
    assert jax.grad(_square_loss(f))(a).shape == shape
    assert jax.jvp(f, (a,), (a,))[1].shape == shape


# ----------------------------------------------------------------------------------------------
# No principal root or logarithm; bad input


@FUNCTIONS
def test_nan_without_principal_root(f):
    # An eigenvalue on the closed negative real axis (-1, 0), real or complex: NaN, values and
    # derivatives, in that slice only.
    neg = jnp.diag(jnp.array([-1.0, 2.0, 3.0]))
    rot = jnp.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # eigenvalues ±i, 1
    a = jnp.stack([neg, jnp.diag(jnp.array([0.0, 1.0, 2.0])), rot @ rot, _right_half_plane(3, 28),
                   jnp.full((3, 3), jnp.nan)])
    values = jax.jit(lambda a: (f(a), f(a.astype(jnp.complex128)), jax.grad(_square_loss(f))(a)))
    for x in values(a):
        x = np.asarray(x)
        assert np.all(np.isnan(x[[0, 1, 2, 4]])) and np.all(np.isfinite(x[3]))
    # Near the axis but off it: the principal root exists and is found.
    b = jnp.diag(jnp.array([-1.0 + 1e-6j, 2.0, 3.0]))
    assert rel_err(f(b), getattr(scipy.linalg, f.__name__)(np.asarray(b))) < 1e-12


def test_bad_input():
    for f in (rules.sqrtm, rules.logm):
        name = f.__name__
        with pytest.raises(TypeError, match=f"{name}: `A` must be a JAX or NumPy array; got list"):
            f([[1.0]])
        with pytest.raises(ValueError, match=re.escape(f"{name}: `A` must have shape (..., n, n) "
                                                       "(square); got (2, 3)")):
            f(jnp.ones((2, 3)))
        with pytest.raises(TypeError, match=f"{name}: `A` has dtype float16"):
            f(jnp.eye(2, dtype=jnp.float16))
    a = jnp.eye(2)
    assert rel_err(rules.sqrtm(a, blocksize=64), a) == 0  # SciPy's block size: same result
    with pytest.raises(TypeError, match="sqrtm: `blocksize` must be an int; got float"):
        rules.sqrtm(a, blocksize=2.0)
    with pytest.raises(TypeError, match="sqrtm: `blocksize` must be an int; got bool"):
        rules.sqrtm(a, blocksize=True)
    with pytest.raises(ValueError, match="sqrtm: `blocksize` must be at least 1; got 0"):
        rules.sqrtm(a, blocksize=0)


# ----------------------------------------------------------------------------------------------
# Platforms


@FUNCTIONS
@pytest.mark.parametrize("n", [3, 6])
def test_lowers_for_gpu_and_tpu_without_cpu_code(f, n):
    a = jax.ShapeDtypeStruct((2, n, n), jnp.float32)
    fun = jax.jit(jax.grad(_square_loss(f)))
    for platform in ("cuda", "tpu"):
        text = jax.export.export(fun, platforms=[platform])(a).mlir_module()
        assert not re.search(r"lapack|schur|gees|geev|cpu_route", text, re.IGNORECASE)


def test_default_route_on_the_cpu():
    # What GPUs and TPUs run (LU without the CPU's [A | I] factorisation, plain products),
    # evaluated here: the same values and derivatives as the CPU's routes.
    a, e = _non_normal(6, 29), rand((6, 6), 30)

    def run():
        return jax.jit(lambda a, e: [jax.jvp(f, (a,), (e,)) + (jax.vjp(f, a)[1](f(a))[0],)
                                     for f in (rules.sqrtm, rules.logm)])(a, e)

    cpu = run()
    with routes.default_everywhere():
        default = run()
    assert rel_err(default, cpu) < 1e-13
