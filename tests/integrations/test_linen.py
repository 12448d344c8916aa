"""Flax Linen: ``init``/``apply`` and ``flax.training.train_state.TrainState`` with every optimizer."""
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import pytest
from flax.core import FrozenDict
from flax.training import train_state

from tests.integrations import common


class Mix(nn.Module):
    """The volume-preserving layer; its packed weight is an ordinary (Euclidean) parameter."""

    @nn.compact
    def __call__(self, h):
        packed = self.param("packed", nn.initializers.normal(0.3), (6,), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros, (common.D_HIDDEN,), jnp.float32)
        return common.mix(h, packed, bias)


class Model(nn.Module):
    @nn.compact
    def __call__(self, x):
        # Linen's default kernel init (lecun_normal) is off the manifold: start from an orthogonal one.
        h = nn.Dense(common.D_HIDDEN, kernel_init=nn.initializers.orthogonal(),
                     param_dtype=jnp.float32, name="embed")(x)
        h = Mix(name="mix")(h)
        return nn.Dense(common.D_OUT, param_dtype=jnp.float32, name="head")(h)


SPEC = {"params": common.PLAIN_SPEC}


@functools.cache
def plain_run(name):
    return common.train_plain(common.OPTIMIZERS[name](common.PLAIN_SPEC), start())


def start():
    return common.init_plain(jax.random.PRNGKey(0))


def test_init_gives_the_plain_layout_on_the_manifold():
    variables = Model().init(jax.random.PRNGKey(1), jnp.zeros((1, common.D_IN), jnp.float32))
    assert jax.tree.structure(variables) == jax.tree.structure({"params": start()})
    assert common.orthonormality_error(variables["params"]["embed"]["kernel"]) <= common.ON_MANIFOLD
    common.OPTIMIZERS["riemannian_adam"](SPEC).init(variables)  # accepted as a starting point


@pytest.mark.parametrize("name", list(common.OPTIMIZERS))
def test_train_state(name):
    model = Model()
    x, y = common.data()
    state = train_state.TrainState.create(apply_fn=model.apply, params={"params": start()},
                                          tx=common.OPTIMIZERS[name](SPEC))

    @jax.jit
    def step(state):
        loss, grads = jax.value_and_grad(lambda v: common.mse(state.apply_fn(v, x), y))(state.params)
        return state.apply_gradients(grads=grads), loss

    losses = []
    for _ in range(common.STEPS):
        state, loss = step(state)
        losses.append(float(loss))
    common.assert_trained(losses, state.params["params"]["embed"]["kernel"])
    params, plain_losses = plain_run(name)
    common.assert_same(state.params["params"], params)
    common.assert_same(losses, plain_losses)


def test_frozen_dict_params_and_apply():
    # Linen's older default container: the spec stays a plain dict.
    model = Model()
    x, y = common.data()
    params = FrozenDict({"params": start()})
    optimizer = common.OPTIMIZERS["riemannian_adam"](SPEC)
    opt_state = optimizer.init(params)

    @jax.jit
    def step(params, opt_state):
        loss, grads = jax.value_and_grad(lambda v: common.mse(model.apply(v, x), y))(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return jax.tree.map(jnp.add, params, updates), opt_state, loss

    losses = []
    for _ in range(common.STEPS):
        params, opt_state, loss = step(params, opt_state)
        losses.append(float(loss))
    assert isinstance(params, FrozenDict)
    common.assert_trained(losses, params["params"]["embed"]["kernel"])
    common.assert_same(params["params"], plain_run("riemannian_adam")[0])
