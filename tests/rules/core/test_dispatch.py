"""Tests of rules/_core/dispatch.py: eager calls of every public rule dispatch to a cached
jitted computation, as ``jnp.linalg``'s functions do: a second call with the same shapes,
dtypes and static arguments compiles nothing (JAX's own ``linalg_test.py`` checks this of its
functions, e.g. ``testIssue2131``)."""
import logging

import jax
import jax.numpy as jnp
import pytest

from tests.helpers import rand
from tests.test_platforms import RULES


def _arguments(shapes):
    args = []
    for i, shape in enumerate(shapes):
        x = rand(shape, i)
        if len(shape) >= 2 and shape[-1] == shape[-2]:  # square: well conditioned, symmetric
            x = x @ jnp.swapaxes(x, -1, -2) + shape[-1] * jnp.broadcast_to(jnp.eye(shape[-1]), shape)
        args.append(x)
    return args


@pytest.mark.parametrize("name", RULES)
def test_a_second_eager_call_compiles_nothing(name, caplog):
    f, _, shapes, _ = RULES[name]
    args = _arguments(shapes)
    jax.block_until_ready(f(*args))
    with jax.log_compiles(True), caplog.at_level(logging.WARNING, logger="jax"):
        caplog.clear()
        jax.block_until_ready(f(*args))
    compiled = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Compiling")]
    assert not compiled, compiled
