"""Tests of geometric/_global_tangent.py.

``manifold_adam`` against a dense reference of Brantner's algorithm is in test_optim.py, the
rotations it uses in test_rotations.py; here: the frame manifolds' gradient ``F + Y C``, and the
blocks of the global tangent space that a manifold does not have.
"""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import geometric
from geometric import optim
from tests.helpers import rand, rel_err


class _FrameSphere(geometric.Sphere):
    """A frame manifold without its own ``_frame_rgrad``: the default, which forms the gradient."""

    _frame_rgrad = geometric.AbstractManifold._frame_rgrad


@pytest.mark.parametrize("m", [
    geometric.Stiefel(7, 3), geometric.Stiefel(7, 3, metric="canonical"),
    geometric.Stiefel(7, 3, rows=True), geometric.Grassmann(7, 3), geometric.Orthogonal(4),
    geometric.Sphere(5), _FrameSphere(5)], ids=repr)
def test_frame_rgrad(m):
    """``(F, YᵀF, C)`` of ``frame_rgrad``: ``F + Y C`` is ``egrad_to_rgrad`` in frame layout."""
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    x = jax.vmap(lambda k: m.random_point(k, jnp.float64))(keys)
    g = rand(x.shape, 1, jnp.float64)
    y, gf = m.to_frame(x), m.to_frame(g)
    f, yt_f, c = m.frame_rgrad(y, gf, y.mT @ gf)
    assert rel_err(yt_f, y.mT @ f) < 1e-14
    assert rel_err(f + y @ c, m.to_frame(m.egrad_to_rgrad(x, g))) < 1e-14


def test_default_frame_rgrad_steps_alike():
    x = geometric.Sphere(5).random_point(jax.random.PRNGKey(0), jnp.float64)
    assert rel_err(_run(_FrameSphere(5), x, jnp.float64), _run(geometric.Sphere(5), x,
                                                              jnp.float64)) < 1e-13


def _run(m, x, dtype, steps=30):
    opt = optim.manifold_adam(0.05, m)
    x = x.astype(dtype)

    def body(carry, i):
        x, state = carry
        updates, state = opt.update(jnp.sin(3 * x + i) + x**2, state, x)
        return (optax.apply_updates(x, updates), state), None

    return jax.jit(lambda x: jax.lax.scan(body, (x, opt.init(x)), jnp.arange(steps, dtype=dtype))
                   [0][0])(x)


@pytest.mark.parametrize("m", [geometric.Grassmann(12, 3), geometric.Orthogonal(5),
                               geometric.Stiefel(12, 3)], ids=repr)
def test_float32_follows_float64(m):
    """The moment's rounding noise in a block the manifold lacks (A on Grassmann, B on O(n))
    must not be divided by δ into a step: float32 then follows float64."""
    x = m.random_point(jax.random.PRNGKey(0), jnp.float64)
    assert rel_err(_run(m, x, jnp.float32), _run(m, x, jnp.float64)) < 1e-4


@pytest.mark.parametrize("retraction", ["cayley", "exp"])
@pytest.mark.parametrize(("scale", "tol"), [(1e2, 1e-4), (1e4, 1e-2)])
def test_float32_follows_float64_when_the_frame_block_dominates(retraction, scale, tol):
    """When the gradient's frame block outweighs its complement part (by about ``scale``), the
    first moment is mostly ``Y A_m``: the step's complement part and the rotation's products
    must not come out of a cancellation. Measured: 1.0–1.4e-5 at 10², 1.0–1.6e-3 at 10⁴; with
    the moment held whole, as 0.1.0 did, 2–3e-3 at 10²; with ``YᵀM_B`` combined from earlier
    products instead of formed by one, 0.54 at 10⁴."""
    m = geometric.Stiefel(40, 4)
    c = rand((4, 4), 2)
    c = scale * (c - c.T)
    x = m.random_point(jax.random.PRNGKey(0), jnp.float64)

    def run(dtype, steps=30):
        opt = optim.manifold_adam(0.02, m, retraction=retraction)

        def body(carry, i):
            x, state = carry
            updates, state = opt.update(x @ c.astype(dtype) + jnp.sin(3 * x + i), state, x)
            return (optax.apply_updates(x, updates), state), None

        scan = lambda x: jax.lax.scan(body, (x, opt.init(x)), jnp.arange(steps, dtype=dtype))
        return jax.jit(lambda x: scan(x)[0][0])(x.astype(dtype))

    assert rel_err(run(jnp.float32), run(jnp.float64)) < tol
