"""Shared check for the linear-algebra tests: a rule on a batch sharded over two CPU devices.

The root ``conftest.py`` sets ``jax_num_cpu_devices=2``.
"""
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def assert_sharded_like_unsharded(fn, *args, rtol=1e-12):
    """``jit(fn)`` on arguments sharded over their leading (batch) axis equals the unsharded run.

    ``fn`` should return values and gradients, so that both the forward and the pullback run on
    the sharded batch; the leading axis of every argument must be even.
    """
    mesh = Mesh(np.array(jax.devices()[:2]), ("batch",))
    sharding = NamedSharding(mesh, P("batch"))
    sharded = [jax.device_put(x, sharding) for x in args]
    assert all(len(x.sharding.device_set) == 2 for x in sharded)
    got = jax.jit(fn)(*sharded)
    want = jax.jit(fn)(*args)
    for x, y in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=rtol)
