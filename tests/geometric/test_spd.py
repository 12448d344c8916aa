"""What is particular to geometric/_manifolds/spd.py: Karcher means reached by the optimizers,
derivatives at repeated eigenvalues, the retraction's positivity, batches of covariances (the
operator laws and closed-form distances are in test_manifolds)."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import geometric
from tests.helpers import central_difference, rand, spd, spd_reference_dist

METRICS = ("affine", "log_euclidean", "bures_wasserstein")
STEPS = 200


@functools.cache
def commuting_matrices():
    """Five SPD matrices with one eigenbasis, and the eigenvalues."""
    rng = np.random.default_rng(0)
    q = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    w = np.exp(rng.uniform(-1, 1, size=(5, 3)))
    return q, w, np.einsum("ij,bj,kj->bik", q, w, q)


def closed_form_mean(metric):
    """Affine and log-Euclidean: exp(mean log λ) (the geometric mean of commuting matrices);
    Bures–Wasserstein: (mean √λ)² (the Wasserstein barycentre of commuting covariances)."""
    q, w, _ = commuting_matrices()
    mean = np.exp(np.log(w).mean(0)) if metric != "bures_wasserstein" else np.sqrt(w).mean(0) ** 2
    return (q * mean) @ q.T


OPTIMIZERS = {
    "riemannian_sgd": lambda m: geometric.optim.riemannian_sgd(0.4, m),
    "riemannian_adam": lambda m: geometric.optim.riemannian_adam(
        optax.cosine_decay_schedule(0.05, STEPS), m),
}


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
@pytest.mark.parametrize("metric", METRICS)
def test_karcher_mean_of_commuting_matrices(metric, optimizer):
    """argmin Σ d(X, Yᵢ)² over SPD(3), from the identity, equals the closed-form mean."""
    m = geometric.SPD(3, metric=metric)
    ys = jnp.asarray(commuting_matrices()[2])
    loss = lambda p: jnp.mean(m.dist(jnp.broadcast_to(p["x"], ys.shape), ys) ** 2)
    opt = OPTIMIZERS[optimizer]({"x": m})

    @jax.jit
    def run(params):
        def step(carry, _):
            p, s = carry
            u, s = opt.update(jax.grad(loss)(p), s, p)
            return (optax.apply_updates(p, u), s), None
        return jax.lax.scan(step, (params, opt.init(params)), None, length=STEPS)[0][0]["x"]

    x = run({"x": jnp.eye(3)})
    tol = 1e-9 if optimizer == "riemannian_sgd" else 1e-4
    np.testing.assert_allclose(x, closed_form_mean(metric), atol=tol)
    assert float(m.manifold_error(x)) < 1e-14


@pytest.mark.parametrize("n", [2, 3])  # 2: the closed-form eigendecomposition
@pytest.mark.parametrize("metric", METRICS)
def test_dist_derivative_at_repeated_eigenvalues(metric, n):
    """Y = 2X: C⁻¹YC⁻ᵀ = 2I, a fully degenerate spectrum (eigh's derivative divides by zero)."""
    m = geometric.SPD(n, metric=metric)
    x = spd((n, n), 1)
    to_y = jax.jit(lambda p: m.dist(x, p))
    y = 2 * x
    gradient = jax.jit(jax.grad(to_y))(y)
    d = m.project(y, rand((n, n), 2))
    want = central_difference(to_y, y, d, eps=1e-6)
    np.testing.assert_allclose(jnp.vdot(gradient, d), want, rtol=1e-7)


@pytest.mark.parametrize("metric", METRICS)
def test_log_exp_and_a_batch_of_2x2_covariances(metric):
    """A batch (2, 4) of 2×2 covariances (the closed-form eigendecomposition; test_manifolds has
    4×4): every method keeps the batch axes; log inverts exp; the distance is the closed form."""
    n = 2
    m = geometric.SPD(n, metric=metric)
    g = rand((2, 4, n, n), 3)
    x = g @ g.mT / n + jnp.broadcast_to(jnp.eye(n), g.shape)
    v = 0.3 * m.project(x, rand((2, 4, n, n), 4))
    y = jax.jit(m.exp)(x, v)
    assert y.shape == x.shape and float(m.manifold_error(y).max()) < 1e-14
    np.testing.assert_allclose(jax.jit(m.log)(x, y), v, atol=1e-12)
    np.testing.assert_allclose(m.dist(x, y), m.norm(x, v), rtol=1e-12)
    per_point = jax.vmap(jax.vmap(m.dist))(x, y)
    np.testing.assert_allclose(m.dist(x, y), per_point, rtol=1e-13)
    want = [spd_reference_dist(m, a, b) for a, b in zip(np.asarray(x[0]), np.asarray(y[1]))]
    np.testing.assert_allclose(m.dist(x[0], y[1]), want, rtol=1e-11)


def test_retraction_stays_positive_definite_for_any_step():
    """X + V + ½VX⁻¹V = ½X + ½(X + V)X⁻¹(X + V): positive definite even for V = -10X."""
    m = geometric.SPD(3)
    x = spd((3, 3), 5)
    for v in (-10 * x, 50 * m.project(x, rand((3, 3), 6))):
        y = m.retract(x, v)
        assert np.linalg.eigvalsh(np.asarray(y)).min() > 0
        assert m.verify_point(y)[0]


def test_project_point_and_manifold_error():
    m = geometric.SPD(3)
    x = spd((3, 3), 7)
    np.testing.assert_array_equal(m.project_point(x + 1e-3 * (x - x.T + jnp.eye(3))),
                                  x + 1e-3 * jnp.eye(3))   # positive definite: sym only
    indefinite = jnp.diag(jnp.array([2.0, -1.0, 1.0]))
    y = m.project_point(indefinite)
    assert np.linalg.eigvalsh(np.asarray(y)).min() > 0 and m.verify_point(y)[0]
    np.testing.assert_allclose(m.manifold_error(indefinite), 1 / np.sqrt(6), rtol=1e-14)


def test_float32():
    m = geometric.SPD(3, metric="log_euclidean")
    x, y = (m.random_point(k) for k in jax.random.split(jax.random.PRNGKey(0)))
    assert x.dtype == jnp.float32
    d, g = jax.jit(jax.value_and_grad(lambda p, q: m.dist(p, q) ** 2, argnums=1))(x, x)
    d = jax.jit(m.dist)(x, y)
    assert d.dtype == jnp.float32 and bool(jnp.isfinite(g).all()) and float(jnp.abs(g).max()) < 1e-5


def test_construction():
    with pytest.raises(ValueError, match=r"SPD: `metric` must be one of 'affine', 'log_euclidean', "
                                         r"'bures_wasserstein'; got 'euclidean'"):
        geometric.SPD(3, metric="euclidean")
    with pytest.raises(TypeError, match=r"SPD: `n` must be an int"):
        geometric.SPD(3.0)
    with pytest.raises(TypeError, match=r"manifold_adam: needs manifolds whose points are "
                                        r"orthonormal frames"):
        geometric.optim.manifold_adam(0.1, {"x": geometric.SPD(3)})
