"""Tests of rules/_kernels/qr.py: CholeskyQR against Householder QR, and the polar factor of
rules/_kernels/spectral.py, against NumPy and central differences (float64 unless stated)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sla

from rules._kernels import qr
from rules.internal import gram_error, householder_qr_factor, polar_factor, qr_factor
from tests.helpers import (central_difference, rand, rel_err, symmetric_with_spectrum,
                           with_singular_values)


def test_qr_and_polar_factors():
    z = rand((3, 7, 4), 0)
    q = qr_factor(z)
    r = jnp.swapaxes(q, -1, -2) @ z
    assert (jnp.diagonal(r, axis1=-2, axis2=-1) > 0).all()
    np.testing.assert_allclose(jnp.tril(r, -1), 0, atol=1e-13)
    for zi, pi in zip(z, polar_factor(z)):
        np.testing.assert_allclose(pi, sla.polar(np.asarray(zi))[0], atol=1e-13)
    np.testing.assert_allclose(gram_error(q), 0, atol=1e-14)


def householder_q(z):
    """Q with diag(R) ≥ 0 of NumPy's float64 Householder QR."""
    q, r = np.linalg.qr(np.asarray(z, np.float64))
    return q * np.where(np.diagonal(r, axis1=-2, axis2=-1) >= 0, 1.0, -1.0)[..., None, :]


def orthonormality(q):
    q = np.asarray(q, np.float64)
    return np.linalg.norm(np.swapaxes(q, -1, -2) @ q - np.eye(q.shape[-1]), axis=(-2, -1))


def with_gram_condition(m, k, kappa, seed, dtype):
    """An m×k matrix, scaled by 7, whose Gram matrix has condition number ``kappa``."""
    sigma = np.logspace(0, 0.5 * np.log10(kappa), k)
    return jnp.asarray(7.0 * with_singular_values(m, sigma, seed), dtype)


# κ(G) = 1.01 takes one Cholesky pass, 10 and 1e4 two (CholeskyQR2), 1e12 Householder QR.
GRAM_CONDITIONS = [(1.01, True), (10.0, False), (1e4, False), (1e12, False)]


@pytest.mark.parametrize("kappa, one_pass", GRAM_CONDITIONS)
def test_qr_factor_is_householders_q(kappa, one_pass):
    """Every branch of qr_factor gives the Q of Householder QR with diag(R) ≥ 0: in float64 to
    rounding, in float32 at least as close to it and as orthonormal as float32 Householder QR."""
    z = with_gram_condition(160, 12, kappa, 3, jnp.float64)
    assert bool(qr._well_conditioned(qr.gram(z))) == one_pass
    want = householder_q(z)
    np.testing.assert_allclose(jax.jit(qr_factor)(z), want, atol=1e-15 * np.sqrt(kappa))
    z32 = z.astype(jnp.float32)
    got, householder = (np.asarray(q, np.float64) for q in (jax.jit(qr_factor)(z32),
                                                             householder_qr_factor(z32)))
    want = np.asarray(want)
    assert np.abs(got - want).max() <= 1.5 * np.abs(householder - want).max()
    assert orthonormality(got) <= max(1.5 * orthonormality(householder), 5e-7)


def test_qr_factor_of_a_retraction_step_in_float32():
    """Y + V on St(256, 64), at the steps where one pass, two passes and Householder run:
    ‖QᵀQ − I‖_F ≤ 1.3e-6 (float32 Householder QR: 1.5e-6) and the Q of a float64 QR to 1e-7."""
    rng = np.random.default_rng(4)
    y = np.linalg.qr(rng.standard_normal((256, 64)))[0]
    v = rng.standard_normal((256, 64))
    v -= y @ (y.T @ v + v.T @ y) / 2
    v /= np.linalg.norm(v, 2)
    for scale in (1e-3, 0.3, 3.0):
        z = y + scale * v
        got = jax.jit(qr_factor)(jnp.asarray(z, jnp.float32))
        assert orthonormality(got) <= 1.3e-6
        np.testing.assert_allclose(got, householder_q(z), atol=1e-7)


@pytest.mark.parametrize("k", [1, 2, 5, 16])
def test_well_conditioned_lower_inverse(k):
    """The product form of L⁻¹ (qr_factor's one pass for k ≤ 16) is the triangular solve's, for
    the Cholesky factor of a Gram matrix with κ = 3, the most the one-pass test lets through."""
    l = np.linalg.cholesky(np.asarray(symmetric_with_spectrum(np.linspace(1, 3, k), k)))
    want = sla.solve_triangular(l, np.eye(k), lower=True)
    np.testing.assert_allclose(qr._well_conditioned_lower_inverse(jnp.asarray(l)), want,
                               atol=1e-14)


def test_qr_factor_of_stacked_heads_in_float32():
    """64 × St(64, 16), Y + V with ‖V‖₂ = 1e-3 and 0.3 (the one-pass branch, L⁻¹ by products):
    as orthonormal as float32 Householder QR and the Q of a float64 QR to 1e-7."""
    rng = np.random.default_rng(8)
    y = np.linalg.qr(rng.standard_normal((64, 64, 16)))[0]
    v = rng.standard_normal(y.shape)
    v -= y @ (y.mT @ v + v.mT @ y) / 2
    v /= np.linalg.norm(v, 2, axis=(-2, -1), keepdims=True)
    for scale in (1e-3, 0.3):
        z = jnp.asarray(y + scale * v, jnp.float32)
        assert bool(qr._well_conditioned(qr.gram(z)))
        got = jax.jit(qr_factor)(z)
        assert orthonormality(got).max() <= orthonormality(householder_qr_factor(z)).max()
        np.testing.assert_allclose(got, householder_q(y + scale * v), atol=1e-7)


def test_qr_factor_falls_back_to_householder():
    """A rank-deficient input (a repeated column): the Cholesky passes break down and the result
    and its derivative are Householder QR's, with no nan from the discarded passes."""
    y = np.linalg.qr(np.random.default_rng(5).standard_normal((40, 3)))[0]
    z = jnp.asarray(np.hstack([y, y[:, :1]]))
    loss = lambda f: lambda z: jnp.sum(jnp.sin(3 * f(z)))  # noqa: E731
    np.testing.assert_array_equal(qr_factor(z), householder_qr_factor(z))
    got, want = (jax.grad(loss(f))(z) for f in (qr_factor, householder_qr_factor))
    assert np.isfinite(got).all()
    np.testing.assert_array_equal(got, want)


def test_qr_factor_transforms():
    """Batches, vmap (every branch runs: the test is batched), jvp against central differences."""
    z = jnp.stack([with_gram_condition(30, 4, k, 6, jnp.float64) for k, _ in GRAM_CONDITIONS[:3]])
    want = householder_q(z)
    np.testing.assert_allclose(qr_factor(z), want, atol=1e-13)
    np.testing.assert_allclose(jax.vmap(qr_factor)(z), want, atol=1e-13)
    direction = rand(z.shape, 7)
    for zi, di in zip(z, direction):
        _, tangent = jax.jvp(qr_factor, (zi,), (di,))
        assert rel_err(tangent, central_difference(qr_factor, zi, di)) < 1e-6
