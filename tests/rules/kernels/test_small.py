"""Tests of rules/_kernels/small.py: closed-form inverse and Cholesky, Jacobi eigh and SVD of tiny matrices."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rules._kernels.small import (
    closed_form_cholesky,
    closed_form_inv,
    closed_form_lower_inv,
    jacobi_eigh,
    jacobi_svd,
)

_inv = jax.jit(closed_form_inv)


def _well_conditioned(shape, dtype=jnp.float64, seed=0):
    rng = np.random.default_rng(seed)
    n = shape[-1]
    a = rng.standard_normal(shape) + 2 * n * np.eye(n)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        a = a + 1j * rng.standard_normal(shape)
    return jnp.asarray(a, dtype)


@pytest.mark.parametrize("n, batch", [(1, (5,)), (2, ()), (3, (2, 3)), (4, (5,))])
def test_matches_lu_inverse(n, batch):
    a = _well_conditioned((*batch, n, n), seed=n)
    np.testing.assert_allclose(_inv(a), jnp.linalg.inv(a), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype, rtol", [(jnp.float32, 2e-6), (jnp.complex128, 1e-12)])
def test_dtypes(dtype, rtol):
    a = _well_conditioned((7, 4, 4), dtype)
    b = _inv(a)
    assert b.dtype == dtype
    np.testing.assert_allclose(b, jnp.linalg.inv(a), rtol=rtol, atol=rtol)


def test_random_matrices_are_inverted():
    # No conditioning help: A A⁻¹ = I to the accuracy the condition number allows.
    a = jnp.asarray(np.random.default_rng(1).standard_normal((1000, 3, 3)))
    residual = jnp.abs(a @ _inv(a) - jnp.broadcast_to(jnp.eye(3), a.shape)).max(axis=(-2, -1))
    cond = jnp.linalg.cond(a)
    assert bool(jnp.all(residual <= 1e-13 * cond))


@pytest.mark.parametrize("singular", [
    np.zeros((2, 2)),
    np.array([[1.0, 2.0], [2.0, 4.0]]),
    np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]),
    np.array([[1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.0], [0.0, 1.0, 0.0, 1.0],
              [1.0, 0.0, 1.0, 0.0]]),
], ids=["zero", "rank1-2x2", "rank2-3x3", "rank3-4x4"])
def test_singular_gives_non_finite_not_a_wrong_number(singular):
    n = singular.shape[-1]
    batch = jnp.stack([jnp.asarray(singular), jnp.eye(n) * 2.0])
    b = _inv(batch)
    assert not bool(jnp.all(jnp.isfinite(b[0])))
    np.testing.assert_array_equal(b[1], jnp.eye(n) / 2)  # other slices are unaffected


def test_empty_matrix():
    assert closed_form_inv(jnp.zeros((3, 0, 0))).shape == (3, 0, 0)


def test_jit_vmap_and_gradient():
    a = _well_conditioned((4, 3, 3))
    np.testing.assert_allclose(closed_form_inv(a), jnp.linalg.inv(a), rtol=1e-12)  # eager
    np.testing.assert_allclose(jax.vmap(_inv)(a), jnp.linalg.inv(a), rtol=1e-12)
    g = jnp.asarray(np.random.default_rng(2).standard_normal(a.shape))
    ours = jax.jit(jax.grad(lambda a: jnp.sum(closed_form_inv(a) * g)))(a)
    ref = jax.jit(jax.grad(lambda a: jnp.sum(jnp.linalg.inv(a) * g)))(a)
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-14)


def test_bad_input():
    with pytest.raises(ValueError, match=r"closed_form_inv: `a` must have shape \(\.\.\., n, n\) "
                                         r"with n ≤ 4; got \(5, 5\)"):
        closed_form_inv(jnp.eye(5))
    with pytest.raises(ValueError, match=r"closed_form_inv: `a` must have shape .*square.*\(2, 3\)"):
        closed_form_inv(jnp.zeros((2, 3)))
    with pytest.raises(TypeError, match="closed_form_inv: `a` must have dtype .* got int"):
        closed_form_inv(jnp.eye(2, dtype=jnp.int32))
    with pytest.raises(TypeError, match="closed_form_inv: `a` must be a JAX or NumPy array; got list"):
        closed_form_inv([[1.0]])


@pytest.mark.parametrize("dtype, tol", [(jnp.float64, 1e-13), (jnp.complex128, 1e-13),
                                        (jnp.float32, 1e-5)])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_cholesky_and_triangular_inverse_match_lapack(n, dtype, tol):
    g = _well_conditioned((6, n, n), dtype, seed=n)
    a = g @ jnp.conj(g.mT) / n
    l = jax.jit(closed_form_cholesky)(a)
    assert l.dtype == dtype
    np.testing.assert_allclose(l, jnp.linalg.cholesky(a), rtol=tol, atol=tol)
    np.testing.assert_array_equal(closed_form_cholesky(jnp.tril(a)), l)  # the lower triangle only
    inverse = jax.jit(closed_form_lower_inv)(l)
    np.testing.assert_array_equal(jnp.triu(inverse, 1), 0)
    np.testing.assert_allclose(inverse, jnp.linalg.inv(l), rtol=tol, atol=tol)
    np.testing.assert_allclose(closed_form_lower_inv(l + jnp.triu(g, 1)), inverse)


def test_cholesky_not_definite_and_singular_factor_are_not_finite():
    a = jnp.stack([jnp.array([[1.0, 2.0], [2.0, 1.0]]), jnp.array([[0.0, 0.0], [0.0, 1.0]]),
                   jnp.array([[jnp.nan, 0.0], [0.0, 1.0]]), jnp.array([[4.0, 2.0], [2.0, 2.0]])])
    l = closed_form_cholesky(a)
    np.testing.assert_array_equal(l, jnp.linalg.cholesky(a))  # NaN on and below the diagonal
    np.testing.assert_array_equal(l[3], [[2.0, 0.0], [1.0, 1.0]])
    inverse = closed_form_lower_inv(jnp.array([[0.0, 0.0], [1.0, 1.0]]))
    assert not np.isfinite(inverse[0, 0]) and not np.isfinite(inverse[1, 0])
    with pytest.raises(ValueError, match=r"closed_form_cholesky: `a` must have shape \(\.\.\., n, "
                                         r"n\) with n ≤ 4; got \(5, 5\)"):
        closed_form_cholesky(jnp.eye(5))


def _hard_symmetric(count, n, seed):
    """Random symmetric matrices, and ones with nearly equal, equal and widely scaled eigenvalues."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((count, n, n))
    q = np.linalg.qr(rng.standard_normal((4 * count, n, n)))[0]
    lam = rng.standard_normal((4 * count, n))
    lam[:count, -1] = lam[:count, 0] * (1 + 1e-7 * rng.standard_normal(count))  # near-degenerate
    lam[count:2 * count] = 1.0                                                  # a multiple of I
    lam[2 * count:3 * count] *= 10.0 ** rng.integers(-6, 7, (count, n))           # graded
    lam[3 * count:] *= 10.0 ** rng.integers(-20, 21, (count, 1))                  # scaled
    return np.concatenate([(x + np.swapaxes(x, -1, -2)) / 2,
                           (q * lam[:, None, :]) @ np.swapaxes(q, -1, -2)])


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("dtype, tol", [(jnp.float32, 2e-6), (jnp.float64, 5e-15)])
def test_jacobi_eigh_accuracy(n, dtype, tol):
    # As accurate as LAPACK's syevd: eigenvalues, residual and orthogonality to rounding.
    h = _hard_symmetric(500, n, n)
    w, v = jax.jit(jacobi_eigh)(jnp.asarray(h, dtype))
    assert w.dtype == v.dtype == dtype
    w, v = np.float64(w), np.float64(v)
    ref = np.linalg.eigvalsh(np.float64(np.asarray(h, dtype)))
    scale = np.max(np.abs(ref), axis=-1, keepdims=True)
    assert np.all(np.diff(w, axis=-1) >= 0)
    assert np.max(np.abs(w - ref) / scale) < tol
    residual = np.float64(np.asarray(h, dtype)) @ v - v * w[..., None, :]
    assert np.max(np.linalg.norm(residual, axis=-2) / scale) < tol
    assert np.max(np.abs(np.swapaxes(v, -1, -2) @ v - np.eye(n))) < tol


def test_jacobi_eigh_triangles_and_exact_degeneracy():
    a = jnp.array([[2.0, 9.0, 9.0], [1.0, 2.0, 9.0], [0.0, 0.0, 5.0]])  # lower triangle: λ = 1, 3, 5
    for args, w_ref in [((True, False), [1.0, 3.0, 5.0]), ((False, False), np.linalg.eigvalsh(
            np.triu(a) + np.triu(a, 1).T)), ((True, True), np.linalg.eigvalsh((a + a.T) / 2))]:
        np.testing.assert_allclose(jacobi_eigh(a, *args)[0], w_ref, rtol=1e-14)
    w, v = jacobi_eigh(jnp.diag(jnp.array([2.0, 1.0, 2.0])))  # diagonal: no rotation at all
    np.testing.assert_array_equal(w, [1.0, 2.0, 2.0])
    np.testing.assert_array_equal(jnp.abs(v), jnp.eye(3)[:, [1, 0, 2]])
    assert bool(jnp.all(jnp.isnan(jacobi_eigh(jnp.full((2, 2), jnp.nan))[0])))
    assert jacobi_eigh(jnp.zeros((4, 0, 0)))[0].shape == (4, 0)


def test_jacobi_eigh_bad_input():
    with pytest.raises(ValueError, match=r"jacobi_eigh: `a` must have shape \(\.\.\., n, n\) "
                                         r"with n ≤ 3; got \(4, 4\)"):
        jacobi_eigh(jnp.eye(4))
    with pytest.raises(TypeError, match="jacobi_eigh: `a` must have dtype .* got complex128"):
        jacobi_eigh(jnp.eye(2, dtype=jnp.complex128))


def _hard_square(count, n, seed):
    """Random matrices, and ones of rank n - 1 and 1, orthogonal, graded and widely scaled."""
    rng = np.random.default_rng(seed)
    q1 = np.linalg.qr(rng.standard_normal((5 * count, n, n)))[0]
    q2 = np.linalg.qr(rng.standard_normal((5 * count, n, n)))[0]
    s = np.abs(rng.standard_normal((5 * count, n)))
    s[:count, -1] = 0
    s[count:2 * count, 1:] = 0
    s[2 * count:3 * count] = 1.0
    s[3 * count:4 * count] *= 10.0 ** rng.integers(-6, 7, (count, n))
    s[4 * count:] *= 10.0 ** rng.integers(-30, 31, (count, 1))
    return np.concatenate([rng.standard_normal((count, n, n)), (q1 * s[:, None, :]) @ q2,
                           np.zeros((1, n, n))])


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("dtype, tol", [(jnp.float32, 3e-6), (jnp.float64, 1e-14)])
def test_jacobi_svd_accuracy(n, dtype, tol):
    # As accurate as LAPACK's gesdd, and U, V orthogonal even at rank-deficient matrices.
    a = jnp.asarray(_hard_square(300, n, n), dtype)
    u, s, vh = jax.jit(jacobi_svd)(a)
    assert u.dtype == s.dtype == vh.dtype == dtype
    a, u, s, vh = map(np.float64, (a, u, s, vh))
    ref = np.linalg.svd(a, compute_uv=False)
    scale = np.maximum(ref[..., :1], np.finfo(np.float64).tiny)
    assert np.all(np.diff(s, axis=-1) <= 0)
    assert np.max(np.abs(s - ref) / scale) < tol
    residual = np.linalg.norm(a - (u * s[..., None, :]) @ vh, axis=(-2, -1)) / scale[..., 0]
    assert np.max(residual) < tol
    for q in (u, np.swapaxes(vh, -1, -2)):
        assert np.max(np.abs(np.swapaxes(q, -1, -2) @ q - np.eye(n))) < tol


def test_jacobi_svd_exact_cases_and_bad_input():
    u, s, vh = jacobi_svd(jnp.diag(jnp.array([1.0, 3.0, 2.0])))  # no rotation, only a sort
    np.testing.assert_array_equal(s, [3.0, 2.0, 1.0])
    np.testing.assert_array_equal(u, np.eye(3)[:, [1, 2, 0]])
    np.testing.assert_array_equal(vh, np.eye(3)[[1, 2, 0]])
    assert bool(jnp.all(jnp.isnan(jacobi_svd(jnp.full((2, 2), jnp.nan))[1])))
    assert jacobi_svd(jnp.zeros((4, 0, 0)))[1].shape == (4, 0)
    with pytest.raises(ValueError, match=r"jacobi_svd: `a` must have shape .* with n ≤ 3"):
        jacobi_svd(jnp.eye(4))
    with pytest.raises(ValueError, match=r"jacobi_svd: `a` must have shape .*square"):
        jacobi_svd(jnp.zeros((2, 3)))
