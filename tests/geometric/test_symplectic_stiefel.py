"""What is particular to geometric/_manifolds/symplectic_stiefel.py: a symplectic eigenvalue
problem solved by the optimizers (Williamson), the retraction's exact symplecticity, the metric's
closed form (the operator laws are in test_manifolds)."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import geometric
from tests.helpers import rand

SP = geometric.SymplecticStiefel(3, 1)
STEPS = 400


def j(m):
    return np.block([[np.zeros((m, m)), np.eye(m)], [-np.eye(m), np.zeros((m, m))]])


@functools.cache
def williamson_problem():
    """A 6×6 SPD matrix and 2·(its smallest symplectic eigenvalue): the minimum of tr(XᵀAX) over
    SpSt(6, 2) (Bhatia & Jain 2015, Thm. 5). Symplectic eigenvalues: |Im| of eig(JA)."""
    rng = np.random.default_rng(3)
    g = rng.standard_normal((6, 6))
    a = g @ g.T / 6 + np.eye(6)
    d = np.sort(np.abs(np.linalg.eigvals(j(3) @ a).imag))[::2]
    return a, 2 * d[0]


OPTIMIZERS = {
    "riemannian_sgd": lambda m: geometric.optim.riemannian_sgd(0.05, m, momentum=0.5),
    "riemannian_adam": lambda m: geometric.optim.riemannian_adam(
        optax.cosine_decay_schedule(0.05, STEPS), m),
}


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_trace_minimisation_reaches_twice_the_smallest_symplectic_eigenvalue(optimizer):
    a, optimum = williamson_problem()
    a = jnp.asarray(a)
    loss = lambda p: jnp.trace(p["x"].T @ a @ p["x"])
    opt = OPTIMIZERS[optimizer]({"x": SP})

    @jax.jit
    def run(params):
        def step(carry, _):
            p, s = carry
            u, s = opt.update(jax.grad(loss)(p), s, p)
            return (optax.apply_updates(p, u), s), None
        return jax.lax.scan(step, (params, opt.init(params)), None, length=STEPS)[0][0]

    out = run({"x": SP.random_point(jax.random.PRNGKey(0), jnp.float64)})
    np.testing.assert_allclose(loss(out), optimum, rtol=1e-6)
    assert float(SP.manifold_error(out["x"])) < 1e-12


def test_retraction_is_symplectic_for_large_steps():
    sp = geometric.SymplecticStiefel(4, 2)
    x = sp.random_point(jax.random.PRNGKey(1), jnp.float64)
    z = sp.project(x, rand((8, 4), 2))
    ys = jax.jit(sp.retract)(jnp.broadcast_to(x, (3, 8, 4)), jnp.asarray([1e-3, 1.0, 5.0])[:, None, None] * z[None])
    assert float(sp.manifold_error(ys).max()) < 1e-12
    np.testing.assert_allclose(sp.retract(x, 1e-6 * z), x + 1e-6 * z, atol=1e-10)


def test_metric_and_riesz_map_in_closed_form():
    """g(U, V) = tr(Uᵀ(I - ½JXG⁻¹XᵀJᵀ)VG⁻¹) with G = XᵀX, and the gradient EXᵀX + JXEᵀJX."""
    x = np.asarray(SP.random_point(jax.random.PRNGKey(4), jnp.float64))
    u, v = (np.asarray(SP.random_tangent(k, jnp.asarray(x))) for k in jax.random.split(jax.random.PRNGKey(5)))
    gi = np.linalg.inv(x.T @ x)
    want = np.trace(u.T @ (np.eye(6) - 0.5 * j(3) @ x @ gi @ x.T @ j(3).T) @ v @ gi)
    np.testing.assert_allclose(SP.inner(x, u, v), want, rtol=1e-12)
    e = np.asarray(rand((6, 2), 6))
    np.testing.assert_allclose(SP.egrad_to_rgrad(x, e), e @ x.T @ x + j(3) @ x @ e.T @ j(3) @ x,
                               atol=1e-13)


def test_project_point_restores_the_constraint():
    x = SP.random_point(jax.random.PRNGKey(7), jnp.float64)
    y = x + 0.05 * rand((6, 2), 8)
    assert float(SP.manifold_error(y)) > 1e-2
    z = SP.project_point(y)
    assert float(SP.manifold_error(z)) < 1e-13
    assert float(jnp.abs(z - y).max()) < 0.2


def test_construction():
    with pytest.raises(ValueError, match=r"SymplecticStiefel: `k` must satisfy k ≤ n = 2; got k = 3"):
        geometric.SymplecticStiefel(2, 3)
    assert geometric.SymplecticStiefel(2, 2).shape == (4, 4)  # the symplectic group Sp(4)
    with pytest.raises(NotImplementedError, match=r"has no `exp`"):
        SP.exp(jnp.zeros((6, 2)), jnp.zeros((6, 2)))
