"""Tests of geometric/_global_tangent.py and the rotation kernels it uses.

``manifold_adam`` against a dense reference of Brantner's algorithm is in test_optim.py; here:
the Neumann solve of the Cayley transform, the frame manifolds' gradient ``F + Y C``, and the
blocks of the global tangent space that a manifold does not have.
"""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import geometric
from geometric import optim
from geometric._core import kernels
from tests.helpers import rand, rel_err


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("size", [0.0, 0.05, 0.4, 3.0])  # ‖Z‖₁ ≈ size·m; 3.0: LU
def test_neumann_solve(size, dtype):
    z = rand((3, 8, 8), 0, dtype, scale=size / 8)
    c = rand((3, 8, 5), 1, dtype)
    want = np.linalg.solve(np.eye(8) - np.asarray(z, np.float64), np.asarray(c, np.float64))
    got = jax.jit(kernels._neumann_solve)(z, c)
    assert got.dtype == dtype
    assert rel_err(got, want) < 50 * float(jnp.finfo(dtype).eps)


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


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("size", [0.0, 0.05, 1.0, 4.0])  # ≥ 1.0: the p×p solve falls back to LU
def test_cayley_blocks(size, dtype):
    """The 2p×2p solve of the Cayley transform by one p×p solve, for a step ``P`` of any size."""
    y = jnp.linalg.qr(rand((2, 9, 4), 0, jnp.float64))[0]
    w = size * rand((2, 9, 4), 1, jnp.float64)
    p_ = w - 0.5 * y @ (y.mT @ w)
    t, s = y.mT @ p_, p_.mT @ p_
    c1, c2 = rand((2, 4, 3), 2, jnp.float64), rand((2, 4, 3), 3, jnp.float64)
    x = jnp.block([[t, jnp.broadcast_to(jnp.eye(4), t.shape)], [-s, -t.mT]])
    want = np.linalg.solve(np.eye(8) - 0.5 * np.asarray(x), np.concatenate([c1, c2], axis=-2))
    got = jax.jit(kernels._cayley_blocks)(*(a.astype(dtype) for a in (t, s, c1, c2)))
    assert all(g.dtype == dtype for g in got)
    assert rel_err(jnp.concatenate(got, axis=-2), want) < 100 * float(jnp.finfo(dtype).eps)


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
