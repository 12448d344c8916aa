"""What is particular to geometric/_manifolds/oblique.py: a Rayleigh-quotient problem reached by
the optimizers, and the column-by-column geometry (the laws are in test_manifolds)."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import geometric
from tests.helpers import rand

OB = geometric.Oblique(6, 3)
STEPS = 300


@functools.cache
def rayleigh_problem():
    """Three 6×6 symmetric matrices, one per column, with a gap of 0.5 below their spectrum."""
    rng = np.random.default_rng(0)
    mats, lowest = [], []
    for _ in range(3):
        q = np.linalg.qr(rng.standard_normal((6, 6)))[0]
        w = np.concatenate([[rng.uniform(-1, 0)], rng.uniform(0.5, 2, size=5)])
        mats.append((q * w) @ q.T)
        lowest.append(w[0])
    return np.stack(mats), float(np.sum(lowest))


OPTIMIZERS = {
    "riemannian_sgd": lambda m: geometric.optim.riemannian_sgd(0.1, m, momentum=0.5),
    "riemannian_adam": lambda m: geometric.optim.riemannian_adam(
        optax.cosine_decay_schedule(0.05, STEPS), m),
}


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_rayleigh_quotients(optimizer):
    """min Σⱼ xⱼᵀAⱼxⱼ over unit columns: the sum of the smallest eigenvalues of the Aⱼ."""
    a, optimum = rayleigh_problem()
    a = jnp.asarray(a)
    loss = lambda p: jnp.einsum("ij,jik,kj->", p["x"], a, p["x"]) + jnp.sum(p["b"] ** 2)
    opt = OPTIMIZERS[optimizer]({"x": OB, "b": None})

    @jax.jit
    def run(params):
        def step(carry, _):
            p, s = carry
            u, s = opt.update(jax.grad(loss)(p), s, p)
            return (optax.apply_updates(p, u), s), None
        return jax.lax.scan(step, (params, opt.init(params)), None, length=STEPS)[0][0]

    start = {"x": OB.random_point(jax.random.PRNGKey(0), jnp.float64), "b": jnp.ones(2)}
    out = run(start)
    np.testing.assert_allclose(loss(out), optimum, atol=1e-6)
    assert float(OB.manifold_error(out["x"])) < 1e-14


def test_columns_are_sphere_points():
    """exp, log and dist are the sphere's, column by column; dist is the product distance."""
    sphere = geometric.Sphere(6)
    x, y = OB.project_point(rand((2, 6, 3), 1))
    v = OB.project(x, 0.5 * rand((6, 3), 2))
    np.testing.assert_allclose(OB.exp(x, v), sphere.exp(x.T, v.T).T, atol=1e-15)
    np.testing.assert_allclose(OB.log(x, y), sphere.log(x.T, y.T).T, atol=1e-15)
    np.testing.assert_allclose(OB.dist(x, y), np.linalg.norm(sphere.dist(x.T, y.T)), rtol=1e-15)
    np.testing.assert_allclose(OB.egrad_to_rgrad(x, v + x), v, atol=1e-15)


def test_construction_and_manifold_adam():
    with pytest.raises(ValueError, match=r"Oblique: `p` must be ≥ 1; got 0"):
        geometric.Oblique(3, 0)
    with pytest.raises(TypeError, match=r"manifold_adam: needs manifolds whose points are "
                                        r"orthonormal frames .* got Oblique\(n=6, p=3\)"):
        geometric.optim.manifold_adam(0.1, {"x": OB})
