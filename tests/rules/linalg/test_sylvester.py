"""Tests of rules/_linalg/sylvester.py: the Sylvester and continuous Lyapunov equations, on the
CPU route (Schur forms, eigendecompositions) and on the default route of GPUs and TPUs (the sign
iteration, run here under ``routes.default_everywhere``)."""

import contextlib
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import rules
from rules._kernels import sylvester as kernel
from rules.internal import routes
from rules.testing import check_rrule
from tests.helpers import rand, rel_err, spd
from tests.rules.linalg.sharded import assert_sharded_like_unsharded

C128 = jnp.complex128
ROUTES = {"cpu": contextlib.nullcontext, "default": routes.default_everywhere}


def _shifted(shape, seed, dtype=jnp.float64):
    """Non-symmetric matrices with spectra in Re z > 0: ``G + 3·√n·I``, ``G`` Gaussian (its
    eigenvalues lie within about ``√n``, ``√(2n)`` for complex ``G``, of the origin)."""
    n = shape[-1]
    return rand(shape, seed, dtype) + (3 * n**0.5) * jnp.broadcast_to(jnp.eye(n, dtype=dtype), shape)


def _kron_solve(a, b, c):
    """``AX + XB = C`` by the ``mn × mn`` Kronecker system (reference, differentiable by JAX)."""
    m, n = c.shape[-2:]
    k = jnp.kron(jnp.eye(n, dtype=a.dtype), a) + jnp.kron(b.T, jnp.eye(m, dtype=a.dtype))
    return jnp.linalg.solve(k, c.T.reshape(-1)).reshape(n, m).T


def _scipy(f, *args):
    """SciPy's solver slice by slice (in float64/complex128)."""
    args = [np.asarray(x, np.complex128 if jnp.iscomplexobj(x) else np.float64) for x in args]
    batch = args[-1].shape[:-2]
    out = np.empty(args[-1].shape, args[-1].dtype)
    for i in np.ndindex(*batch):
        out[i] = f(*(x[i] for x in args))
    return out


# ----------------------------------------------------------------------------------------------
# Values


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("dtype", [jnp.float64, C128, jnp.float32])
def test_sylvester_matches_scipy(route, dtype):
    # Non-symmetric A (6 × 6) and B (4 × 4), a batch of 2, spectra of A and -B apart.
    a, b, c = _shifted((2, 6, 6), 1, dtype), _shifted((2, 4, 4), 2, dtype), rand((2, 6, 4), 3, dtype)
    ref = _scipy(scipy.linalg.solve_sylvester, a, b, c)
    tol = 1e-4 if dtype == jnp.float32 else 1e-12
    with ROUTES[route]():
        for method in ["schur", "eigen"]:
            x = rules.solve_sylvester(a, b, c, method=method)
            assert x.dtype == dtype and x.shape == (2, 6, 4)
            assert rel_err(x, ref) < tol


@pytest.mark.parametrize("dtype", [jnp.float64, C128, jnp.float32])
def test_sylvester_matches_jax(dtype):
    a, b, c = _shifted((3, 3), 4, dtype), _shifted((5, 5), 5, dtype), rand((3, 5), 6, dtype)
    tol = 1e-4 if dtype == jnp.float32 else 1e-12
    for method in ["schur", "eigen"]:
        x = rules.solve_sylvester(a, b, c, method=method)
        ref = jax.scipy.linalg.solve_sylvester(a, b, c, method=method)
        assert x.dtype == ref.dtype and rel_err(x, ref) < tol


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("dtype", [jnp.float64, C128, jnp.float32])
def test_lyapunov_matches_scipy(route, dtype):
    a = -_shifted((2, 5, 5), 7, dtype)            # stable, non-normal
    q = rand((2, 5, 5), 8, dtype)
    ref = _scipy(scipy.linalg.solve_continuous_lyapunov, a, q)
    with ROUTES[route]():
        x = rules.solve_continuous_lyapunov(a, q)
    assert x.dtype == dtype
    assert rel_err(x, ref) < (1e-4 if dtype == jnp.float32 else 1e-12)


def test_harder_problems_match_scipy():
    # A far from normal (Schur form with a large strictly upper part) and spectra 1e-3 from the
    # imaginary axis: more sign steps, and both routes as accurate as the conditioning allows.
    rng = np.random.default_rng(9)
    t = np.triu(rng.standard_normal((12, 12)), 1) - np.diag(rng.uniform(1e-3, 1.0, 12))
    q = np.linalg.qr(rng.standard_normal((12, 12)))[0]
    a, c = jnp.asarray(q @ t @ q.T), rand((12, 12), 10)
    ref = scipy.linalg.solve_continuous_lyapunov(np.asarray(a), np.asarray(c))
    for route in ROUTES.values():
        with route():
            assert rel_err(rules.solve_continuous_lyapunov(a, c), ref) < 1e-9
            assert rel_err(rules.solve_sylvester(a, a.T, c), ref) < 1e-9


def test_blocked_triangular_solve(monkeypatch):
    # The blocked column sweep of large matrices, at small sizes (blocks of 3, padded).
    monkeypatch.setattr(kernel, "BLOCKED_MIN_N", 4)
    monkeypatch.setattr(kernel, "BLOCK", 3)
    a, b, c = _shifted((7, 7), 11, C128), _shifted((5, 5), 12, C128), rand((2, 7, 5), 13, C128)
    x, grads = jax.jit(jax.value_and_grad(
        lambda a, b, c: jnp.sum(jnp.abs(rules.solve_sylvester(a, b, c)) ** 2), (0, 1, 2)))(a, b, c)
    ref = jax.value_and_grad(lambda a, b, c: jnp.sum(jnp.abs(jax.vmap(
        _kron_solve, (None, None, 0))(a, b, c)) ** 2), (0, 1, 2))(a, b, c)
    assert rel_err((x, grads), ref) < 1e-12


def test_solutions_and_properties():
    # X = I solves AX + XB = A + B; a stable A with SPD Q gives a symmetric negative definite X.
    a, b = _shifted((4, 4), 14), _shifted((4, 4), 15)
    np.testing.assert_allclose(rules.solve_sylvester(a, b, a + b), jnp.eye(4), atol=1e-13)
    one = jnp.ones((1, 1))
    np.testing.assert_allclose(rules.solve_sylvester(2 * one, 3 * one, 10 * one), 2 * one)
    x = rules.solve_continuous_lyapunov(-a, spd((4, 4), 16))
    np.testing.assert_allclose(x, x.T, atol=1e-13)
    assert jnp.all(jnp.linalg.eigvalsh(x) < 0)


# ----------------------------------------------------------------------------------------------
# Derivatives


def test_finite_differences():
    # Pullback and pushforward (check_rrule checks both) in float64, real and complex, on both
    # routes; jit is compared with op-by-op runs elsewhere in this file (compile time).
    check_rrule(rules.solve_sylvester, _shifted((4, 4), 20), _shifted((3, 3), 21),
                rand((4, 3), 22), check_jit=False)
    check_rrule(rules.solve_continuous_lyapunov, -_shifted((3, 3), 23, C128),
                rand((3, 3), 24, C128), check_jit=False, check_vmap=False)
    with routes.default_everywhere():
        check_rrule(rules.solve_sylvester, _shifted((3, 3), 25, C128), _shifted((2, 2), 26, C128),
                    rand((3, 2), 27, C128), check_jit=False, check_vmap=False)


def test_eigen_method_derivatives():
    # The eigendecomposition route's solves (a division in the eigenbasis) give the derivatives
    # of the Schur route.
    a, b, c = _shifted((4, 4), 28, C128), _shifted((3, 3), 29, C128), rand((4, 3), 30, C128)
    tangents = (rand((4, 4), 31, C128), rand((3, 3), 32, C128), rand((4, 3), 33, C128))

    def derivatives(method):
        def f(a, b, c):
            return rules.solve_sylvester(a, b, c, method=method)

        return jax.jvp(f, (a, b, c), tangents)[1], jax.vjp(f, a, b, c)[1](c)

    assert rel_err(jax.jit(lambda: derivatives("eigen"))(), derivatives("schur")) < 1e-12


def test_pullback_and_pushforward_against_kronecker():
    """Gradients, jvps and second derivatives (Hessian, forward-over-reverse and reverse-over-
    reverse) against JAX differentiating the Kronecker system."""
    a, b, c = _shifted((4, 4), 33), _shifted((3, 3), 34), rand((4, 3), 35)
    d = (rand((4, 4), 36), rand((3, 3), 37), rand((4, 3), 38))

    def derivatives(f, hessian=True):
        def loss(a, b, c):
            return jnp.sum(jnp.sin(f(a, b, c)))

        grad = jax.grad(loss, argnums=(0, 1, 2))
        return lambda a, b, c: (
            grad(a, b, c), jax.jvp(f, (a, b, c), d)[1], jax.jvp(grad, (a, b, c), d)[1],
            jax.grad(lambda *x: sum(jnp.vdot(u, v) for u, v in zip(grad(*x), d)),
                     argnums=(0, 1, 2))(a, b, c),
            *([jax.hessian(loss)(a, b, c)] if hessian else []))

    ref = jax.jit(derivatives(_kron_solve))(a, b, c)
    assert rel_err(jax.jit(derivatives(rules.solve_sylvester))(a, b, c), ref) < 1e-12
    with routes.default_everywhere():
        assert rel_err(jax.jit(derivatives(rules.solve_sylvester, hessian=False))(a, b, c),
                       ref[:-1]) < 1e-12


def test_lyapunov_derivatives_are_not_holomorphic():
    # Ȧ enters as Ȧ X + X Ȧᴴ: the gradient has a conjugated term; against the Kronecker system
    # with conj(A), and second derivatives too.
    a, q = -_shifted((3, 3), 36, C128), rand((3, 3), 37, C128)
    da = rand((3, 3), 38, C128)

    def loss(f):
        return lambda a: jnp.sum(jnp.abs(f(a, q)) ** 2)

    def kron(a, q):
        return _kron_solve(a, jnp.conj(a.T), q)

    def derivatives(f):
        g = jax.grad(loss(f))
        return lambda a: (g(a), jax.jvp(g, (a,), (da,))[1])

    ref = derivatives(kron)(a)
    for route in ROUTES.values():
        with route():
            assert rel_err(jax.jit(derivatives(rules.solve_continuous_lyapunov))(a), ref) < 1e-12


def test_vmap_shared_coefficients_and_batch():
    """A and B without batch axes are factorised once for a batch of C: the same values and
    cotangents (summed over the batch) as with A and B broadcast, and as vmap over C."""
    a, b, c = _shifted((4, 4), 40), _shifted((3, 3), 41), rand((5, 4, 3), 42)

    def loss(a, b, c, broadcast=False):
        if broadcast:
            a, b = jnp.broadcast_to(a, (5, 4, 4)), b[None]
        return jnp.sum(jnp.sin(rules.solve_sylvester(a, b, c)))

    shared, broadcast = jax.jit(lambda a, b, c: [
        jax.value_and_grad(functools.partial(loss, broadcast=flag), argnums=(0, 1, 2))(a, b, c)
        for flag in (False, True)])(a, b, c)
    assert rel_err(shared, broadcast) < 1e-13
    mapped = jax.jit(jax.vmap(rules.solve_sylvester, in_axes=(None, None, 0)))(a, b, c)
    assert rel_err(mapped, rules.solve_sylvester(a, b, c)) < 1e-14


def _value_jvp_vjp(f, args):
    tangents = tuple(rand(x.shape, 51 + i, x.dtype) for i, x in enumerate(args))
    out_bar = rand(args[-1].shape, 55, args[-1].dtype)

    def run(*args):
        value, tangent = jax.jvp(f, args, tangents)
        return value, tangent, jax.vjp(f, *args)[1](out_bar)

    return run


@pytest.mark.parametrize("f, args", [
    (rules.solve_sylvester, (_shifted((2, 5, 5), 43), _shifted((2, 4, 4), 44), rand((2, 5, 4), 45))),
    (rules.solve_continuous_lyapunov, (-_shifted((5, 5), 49, C128), rand((5, 5), 50, C128))),
], ids=["sylvester", "lyapunov complex"])
def test_cpu_route_matches_default_route(f, args):
    # Value, jvp and vjp of the CPU routes against what GPUs and TPUs run, on this CPU.
    run = _value_jvp_vjp(f, args)
    on_cpu = jax.jit(run)(*args)
    with routes.default_everywhere():
        default = jax.jit(run)(*args)
    assert rel_err(on_cpu, default) < 1e-12


def test_sharded_batch():
    a, b, c = _shifted((4, 5, 5), 56), _shifted((4, 3, 3), 57), rand((4, 5, 3), 58)
    assert_sharded_like_unsharded(jax.value_and_grad(
        lambda a, b, c: jnp.sum(jnp.sin(rules.solve_sylvester(a, b, c))), argnums=(0, 1, 2)),
        a, b, c, rtol=1e-11)


# ----------------------------------------------------------------------------------------------
# No unique solution: NaN


@pytest.mark.parametrize("route", ROUTES)
def test_nan_without_a_unique_solution(route):
    eye = jnp.eye(3)
    c = rand((3, 3), 60)
    with ROUTES[route]():
        # λ_i + μ_j = 0: A = I, B = -I; and Lyapunov with an eigenvalue on the imaginary axis.
        assert jnp.all(jnp.isnan(rules.solve_sylvester(eye, -eye, c)))
        rot = jnp.array([[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])
        assert jnp.all(jnp.isnan(rules.solve_continuous_lyapunov(rot, c)))
        # Only the singular slice of a batch, and its gradient, are NaN.
        a = jnp.stack([eye, -2 * eye])
        x, g = jax.value_and_grad(lambda a: jnp.sum(rules.solve_sylvester(a, -eye, c)))(a)
        assert jnp.isnan(x)
        assert jnp.all(jnp.isnan(g[0])) and jnp.all(jnp.isfinite(g[1]))


def test_tol_as_jax_on_the_cpu():
    # λ + μ = 1e-9: NaN below JAX's default tol, a solution with tol = 0.
    a, b, c = jnp.diag(jnp.array([1.0, 2.0])), jnp.diag(jnp.array([1e-9 - 1.0, 1.0])), jnp.ones((2, 2))
    ref = jax.scipy.linalg.solve_sylvester(a, b, c)
    assert jnp.all(jnp.isnan(rules.solve_sylvester(a, b, c))) and jnp.all(jnp.isnan(ref))
    x = rules.solve_sylvester(a, b, c, tol=0.0)
    np.testing.assert_allclose(x, c / (jnp.diag(a)[:, None] + jnp.diag(b)[None, :]), rtol=1e-6)
    assert jnp.all(jnp.isnan(rules.solve_sylvester(a, b, c, tol=jnp.asarray(2.0))))


def test_default_route_domain():
    # A with eigenvalues on both sides of the imaginary axis: uniquely solvable (the CPU solves
    # it), but the spectra of A and -B are not on opposite sides of it: NaN by default.
    a, b, c = jnp.diag(jnp.array([1.0, -1.0])), jnp.diag(jnp.array([3.0, 4.0])), jnp.ones((2, 2))
    assert jnp.all(jnp.isfinite(rules.solve_sylvester(a, b, c)))
    with routes.default_everywhere():
        assert jnp.all(jnp.isnan(rules.solve_sylvester(a, b, c)))
        assert jnp.all(jnp.isnan(rules.solve_continuous_lyapunov(a, c)))
        # A line at Re z = -2 separates them: A + 2I and B - 2I (the same equation) are solved.
        shift = 2 * jnp.eye(2)
        np.testing.assert_allclose(rules.solve_sylvester(a + shift, b - shift, c),
                                   c / jnp.array([[4.0, 5.0], [2.0, 3.0]]), rtol=1e-14)
        # A and B both stable: the iteration ends at A_∞ = -I, and X = -C_∞/2.
        np.testing.assert_allclose(rules.solve_sylvester(-b, -b, c),
                                   -c / jnp.array([[6.0, 7.0], [7.0, 8.0]]), rtol=1e-14)


# ----------------------------------------------------------------------------------------------
# Shapes, dtypes, bad input, platforms


@pytest.mark.parametrize("shapes", [((0, 0), (3, 3), (0, 3)), ((2, 2), (0, 0), (2, 0)),
                                    ((0, 2, 2), (3, 3), (2, 3)), ((2, 2), (3, 3), (0, 2, 3))])
def test_empty(shapes):
    a, b, c = (jnp.ones(s) for s in shapes)
    x = rules.solve_sylvester(a, b, c)
    assert x.shape == jnp.broadcast_shapes(shapes[0][:-2], shapes[2][:-2]) + shapes[2][-2:]
    grads = jax.grad(lambda a, b, c: jnp.sum(rules.solve_sylvester(a, b, c)), (0, 1, 2))(a, b, c)
    assert [g.shape for g in grads] == list(shapes)
    assert rules.solve_continuous_lyapunov(jnp.ones((2, 0, 0)), jnp.ones((0, 0))).shape == (2, 0, 0)


def test_dtypes_and_bad_input():
    eye = jnp.eye(2, dtype=jnp.int32)
    assert rules.solve_sylvester(eye, eye, eye).dtype == jnp.float32
    assert rules.solve_continuous_lyapunov(eye, eye).dtype == jnp.float32
    with pytest.raises(ValueError, match=r"solve_sylvester: `A` \(\.\.\., m, m\), `B` \(\.\.\., n, "
                                         r"n\) and `C` \(\.\.\., m, n\) must agree in m and n; got "
                                         r"shapes \(3, 3\), \(2, 2\) and \(2, 2\)"):
        rules.solve_sylvester(jnp.eye(3), jnp.eye(2), jnp.ones((2, 2)))
    with pytest.raises(ValueError, match=r"solve_sylvester: the batch axes of `A` \(2, 3, 3\), "
                                         r"`B` \(2, 2\) and `C` \(4, 3, 2\) do not broadcast"):
        rules.solve_sylvester(jnp.ones((2, 3, 3)), jnp.eye(2), jnp.ones((4, 3, 2)))
    with pytest.raises(ValueError, match=r"solve_sylvester: `B` must have shape \(\.\.\., n, n\) "
                                         r"\(square\); got \(2, 3\)"):
        rules.solve_sylvester(jnp.eye(2), jnp.ones((2, 3)), jnp.ones((2, 2)))
    with pytest.raises(ValueError, match="solve_sylvester: `method` must be 'schur' or 'eigen'; "
                                         "got 'qr'"):
        rules.solve_sylvester(jnp.eye(2), jnp.eye(2), jnp.eye(2), method="qr")
    with pytest.raises(TypeError, match="solve_sylvester: `tol` must be a real scalar; got "
                                        "complex128"):
        rules.solve_sylvester(jnp.eye(2), jnp.eye(2), jnp.eye(2), tol=1j)
    with pytest.raises(TypeError, match="solve_sylvester: `C` has dtype float16"):
        rules.solve_sylvester(jnp.eye(2), jnp.eye(2), jnp.eye(2, dtype=jnp.float16))
    with pytest.raises(TypeError, match="solve_continuous_lyapunov: `a` must be a JAX or NumPy "
                                        "array; got list"):
        rules.solve_continuous_lyapunov([[1.0]], jnp.eye(1))
    with pytest.raises(ValueError, match=r"solve_continuous_lyapunov: `a` and `q` must have shapes "
                                         r"\(\.\.\., n, n\) with the same n; got \(3, 3\) and "
                                         r"\(2, 2\)"):
        rules.solve_continuous_lyapunov(jnp.eye(3), jnp.eye(2))


@pytest.mark.parametrize("platform", ["cuda", "tpu"])
def test_lowers_without_lapack(platform):
    a, b, c = _shifted((6, 6), 61), _shifted((5, 5), 62), rand((6, 5), 63)

    def loss(a, b, c):
        return jnp.sum(rules.solve_sylvester(a, b, c) ** 2) + jnp.sum(
            rules.solve_continuous_lyapunov(-a, c[:, 1:] @ c[:, 1:].T) ** 2)

    for f in (jax.grad(loss, argnums=(0, 1, 2)), jax.hessian(loss)):
        text = jax.export.export(jax.jit(f), platforms=[platform])(a, b, c).mlir_module()
        assert "cpu_route." not in text
        calls = set(re.findall(r"custom_call @(\w+)", text))
        assert not {call for call in calls if re.search("lapack|schur|eig", call)}, calls
