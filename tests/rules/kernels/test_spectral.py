"""Tests of rules/_kernels/spectral.py against NumPy/SciPy and central differences (float64): the
symmetric matrix functions, whose derivatives must exist at repeated eigenvalues, and the
decomposition they use."""
import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg as sla

from rules._kernels import spectral
from rules.internal import arctan_sv, sym_function
from tests.helpers import (central_difference, rand, rel_err, symmetric_with_spectrum,
                           with_singular_values)


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
    sym_exp = jax.jit(lambda a, d: jax.jvp(lambda a: sym_function(jnp.exp, jnp.exp, a),
                                           (a,), (d,)))
    for a in cases:
        value, tangent = sym_exp(a, direction)
        assert rel_err(value, sla.expm(np.asarray(a))) < 1e-12
        want = central_difference(lambda a: _dense_function(np.exp, a), a, direction, eps=1e-5)
        np.testing.assert_allclose(tangent, want, rtol=1e-8, atol=1e-8)
    # Why sym_function has its own rule: differentiating eigh divides by the difference of
    # repeated eigenvalues, which LAPACK returns equal (nan) or apart by rounding (a wrong number).
    naive = jax.jvp(lambda a: _naive(jnp.exp, a), (cases[1],), (direction,))[1]
    want = central_difference(lambda a: _dense_function(np.exp, a), cases[1], direction, eps=1e-5)
    assert not np.isfinite(naive).all() or rel_err(naive, want) > 1e-3


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
    jvp = jax.jit(lambda a, d: jax.jvp(arctan_sv, (a,), (d,)))
    for a in [rand((6, 3), 2), with_singular_values(6, (0.5, 0.5, 2.0), 3), jnp.zeros((6, 3))]:
        value, tangent = jvp(a, direction)
        np.testing.assert_allclose(value, reference(a), atol=1e-14)
        want = central_difference(reference, a, direction, eps=1e-5)
        np.testing.assert_allclose(tangent, want, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(tangent, direction, atol=1e-14)  # at A = 0 the derivative is Ȧ
    gradient = jax.jit(jax.grad(lambda a: jnp.sum(arctan_sv(a) ** 2)))(
        with_singular_values(6, (0.5, 0.5, 0.5), 4))
    assert np.isfinite(gradient).all()


def test_eigh_2x2():
    g = rand((50, 2, 2), 0)
    a = jnp.concatenate([g + g.mT, jnp.broadcast_to(jnp.eye(2), (2, 2, 2)) * jnp.asarray([[[3.0]], [[-1.0]]]),
                         jnp.zeros((1, 2, 2))])  # repeated eigenvalues and zero included
    w, q = spectral.eigh(a)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(np.asarray(a)), atol=1e-14)
    np.testing.assert_allclose(q @ q.mT, np.broadcast_to(np.eye(2), a.shape), atol=1e-15)
    np.testing.assert_allclose((q * w[..., None, :]) @ q.mT, a, atol=1e-14)


def test_sym_function_2x2_value_and_derivative_at_a_repeated_eigenvalue():
    a = 2 * jnp.eye(2)
    d = rand((2, 2), 1)
    d = d + d.T
    f = jax.jit(lambda x: sym_function(jnp.log, lambda w: 1 / w, x))
    np.testing.assert_allclose(f(a), np.log(2) * np.eye(2), atol=1e-15)
    _, tangent = jax.jvp(f, (a,), (d,))
    np.testing.assert_allclose(tangent, d / 2, atol=1e-15)  # D log(2I)[Ḋ] = Ḋ/2
    b = jnp.asarray([[2.0, 0.3], [0.3, 1.0]])
    np.testing.assert_allclose(jax.jvp(f, (b,), (d,))[1], central_difference(f, b, d), rtol=1e-8)
