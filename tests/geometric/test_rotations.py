"""Tests of geometric/_core/rotations.py: the Neumann solve and the block solve of the Cayley
transform (the rotations themselves are checked through the Stiefel retractions in
test_stiefel.py and manifold_adam in test_optim.py)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geometric._core import rotations
from tests.helpers import rand, rel_err


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("size", [0.0, 0.05, 0.4, 3.0])  # ‖Z‖₁ ≈ size·m; 3.0: LU
def test_neumann_solve(size, dtype):
    z = rand((3, 8, 8), 0, dtype, scale=size / 8)
    c = rand((3, 8, 5), 1, dtype)
    want = np.linalg.solve(np.eye(8) - np.asarray(z, np.float64), np.asarray(c, np.float64))
    got = jax.jit(rotations._neumann_solve)(z, c)
    assert got.dtype == dtype
    assert rel_err(got, want) < 50 * float(jnp.finfo(dtype).eps)


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
    got = jax.jit(rotations._cayley_blocks)(*(a.astype(dtype) for a in (t, s, c1, c2)))
    assert all(g.dtype == dtype for g in got)
    assert rel_err(jnp.concatenate(got, axis=-2), want) < 100 * float(jnp.finfo(dtype).eps)
