"""Tests of geometric/_core/kernels.py against NumPy/SciPy and central differences (float64).

The low-rank rotations (rotate, phi) are checked through the Stiefel retractions in
test_stiefel.py; here: the factors, expm, and the symmetric-matrix functions whose derivatives
must exist at repeated eigenvalues.
"""
import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg as sla

from geometric._core import kernels
from tests.helpers import central_difference, rand, rel_err


def orthogonal(n, seed):
    return np.linalg.qr(np.asarray(rand((n, n), seed)))[0]


def symmetric_with_spectrum(spectrum, seed):
    q = orthogonal(len(spectrum), seed)
    return jnp.asarray((q * np.asarray(spectrum)) @ q.T)


def with_singular_values(m, sigma, seed):
    u = orthogonal(m, seed)[:, :len(sigma)]
    v = orthogonal(len(sigma), seed + 1)
    return jnp.asarray((u * np.asarray(sigma)) @ v.T)


def test_qr_and_polar_factors():
    z = rand((3, 7, 4), 0)
    q = kernels.qr_factor(z)
    r = jnp.swapaxes(q, -1, -2) @ z
    assert (jnp.diagonal(r, axis1=-2, axis2=-1) > 0).all()
    np.testing.assert_allclose(jnp.tril(r, -1), 0, atol=1e-13)
    for zi, pi in zip(z, kernels.polar_factor(z)):
        np.testing.assert_allclose(pi, sla.polar(np.asarray(zi))[0], atol=1e-13)
    np.testing.assert_allclose(kernels.gram_error(q), 0, atol=1e-14)


def test_expm_matches_scipy():
    a = rand((4, 6, 6), 1)
    scales = jnp.asarray([1e-3, 0.5, 4.0, 40.0])[:, None, None]
    a = scales * a / jnp.linalg.norm(a, axis=(-2, -1), keepdims=True)
    got = jax.jit(kernels.expm)(a)
    for g, ai in zip(got, a):
        assert rel_err(g, sla.expm(np.asarray(ai))) < 1e-13


def test_safe_sqrt_has_derivative_zero_at_zero():
    s = jnp.asarray([0.0, 4.0])
    np.testing.assert_array_equal(kernels.safe_sqrt(s), [0.0, 2.0])
    np.testing.assert_array_equal(jax.vmap(jax.grad(kernels.safe_sqrt))(s), [0.0, 0.25])


def _dense_function(f, a):
    w, q = np.linalg.eigh(np.asarray(a))
    return (q * f(w)) @ q.T


def test_sym_function_derivative_at_repeated_eigenvalues():
    """Daleckii–Krein against central differences, at distinct, repeated and all-equal
    eigenvalues (where differentiating eigh gives nan)."""
    cases = [symmetric_with_spectrum(s, seed) for seed, s in
             enumerate([(0.3, 1.0, 2.0, 3.5), (1.0, 1.0, 2.0, 2.0), (0.0, 0.0, 0.0, 0.0)])]
    direction = rand((4, 4), 9)
    direction = direction + direction.T
    sym_exp = jax.jit(lambda a, d: jax.jvp(lambda a: kernels.sym_function(jnp.exp, jnp.exp, a),
                                           (a,), (d,)))
    for a in cases:
        value, tangent = sym_exp(a, direction)
        assert rel_err(value, sla.expm(np.asarray(a))) < 1e-12
        want = central_difference(lambda a: _dense_function(np.exp, a), a, direction, eps=1e-5)
        np.testing.assert_allclose(tangent, want, rtol=1e-8, atol=1e-8)
    naive = jax.jvp(lambda a: _naive(jnp.exp, a), (cases[1],), (direction,))[1]
    assert not np.isfinite(naive).all()  # why sym_function has its own rule


def _naive(f, a):
    w, q = jnp.linalg.eigh(a)
    return (q * f(w)[None, :]) @ q.T


def test_arctan_sv():
    """U arctan(Σ) Vᵀ without an SVD: its value, and derivatives at repeated and at zero
    singular values."""
    def reference(a):
        u, s, vt = np.linalg.svd(np.asarray(a), full_matrices=False)
        return (u * np.arctan(s)) @ vt

    direction = rand((6, 3), 5)
    jvp = jax.jit(lambda a, d: jax.jvp(kernels.arctan_sv, (a,), (d,)))
    for a in [rand((6, 3), 2), with_singular_values(6, (0.5, 0.5, 2.0), 3), jnp.zeros((6, 3))]:
        value, tangent = jvp(a, direction)
        np.testing.assert_allclose(value, reference(a), atol=1e-14)
        want = central_difference(reference, a, direction, eps=1e-5)
        np.testing.assert_allclose(tangent, want, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(tangent, direction, atol=1e-14)  # at A = 0 the derivative is Ȧ
    gradient = jax.jit(jax.grad(lambda a: jnp.sum(kernels.arctan_sv(a) ** 2)))(
        with_singular_values(6, (0.5, 0.5, 0.5), 4))
    assert np.isfinite(gradient).all()
