"""Tests of geometric/_global_tangent.py and the rotation kernels it uses.

``manifold_adam`` against a dense reference of Brantner's algorithm is in test_optim.py; here:
the Neumann solve of the Cayley transform, and the blocks of the global tangent space that a
manifold does not have.
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
