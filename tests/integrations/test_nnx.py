"""Flax NNX: ``nnx.Optimizer(model, tx, wrt=nnx.Param)`` with every optimizer, and ``split``/``merge``.

``nnx.Optimizer`` hands the optimizer an ``nnx.State`` of ``Param`` boxes at ``init`` and of plain
arrays at ``update``; the spec (``by_path``, or a dict with the state's keys) fits both.
"""
import jax
import jax.numpy as jnp
import optax
import pytest
from flax import nnx

from tests.integrations import common


class Mix(nnx.Module):
    def __init__(self, *, rngs):
        self.packed = nnx.Param(jax.random.normal(rngs.params(), (6,), jnp.float32))
        self.bias = nnx.Param(jnp.zeros(common.D_HIDDEN, jnp.float32))

    def __call__(self, h):
        return common.mix(h, self.packed[...], self.bias[...])


class Model(nnx.Module):
    def __init__(self, *, rngs):
        self.embed = nnx.Linear(common.D_IN, common.D_HIDDEN,
                                kernel_init=nnx.initializers.orthogonal(), rngs=rngs)
        self.mix = Mix(rngs=rngs)
        self.head = nnx.Linear(common.D_HIDDEN, common.D_OUT, rngs=rngs)

    def __call__(self, x):
        return self.head(self.mix(self.embed(x)))



def make_model():
    """A model holding the plain-dict start values."""
    model = Model(rngs=nnx.Rngs(1))
    state = nnx.state(model, nnx.Param)
    nnx.replace_by_pure_dict(state, common.start())
    nnx.update(model, state)
    return model



@nnx.jit
def train_step(model, optimizer, x, y):
    loss, grads = nnx.value_and_grad(lambda m: common.mse(m(x), y))(model)
    optimizer.update(model, grads)
    return loss


def train(model, optimizer):
    x, y = common.data()
    return [float(train_step(model, optimizer, x, y)) for _ in range(common.STEPS)]


def test_the_model_has_the_plain_layout():
    assert nnx.to_pure_dict(nnx.state(make_model(), nnx.Param)).keys() == common.start().keys()
    # NNX's own orthogonal initializer starts on the manifold.
    model = Model(rngs=nnx.Rngs(2))
    assert common.orthonormality_error(model.embed.kernel[...]) <= common.ON_MANIFOLD


@pytest.mark.parametrize("name", list(common.OPTIMIZERS))
def test_nnx_optimizer(name):
    model = make_model()
    optimizer = nnx.Optimizer(model, common.OPTIMIZERS[name](common.SPEC), wrt=nnx.Param)
    losses = train(model, optimizer)
    common.assert_trained(losses, model.embed.kernel[...])
    params, plain_losses = common.plain_run(name)
    common.assert_same(nnx.to_pure_dict(nnx.state(model, nnx.Param)), params)
    assert losses == plain_losses


def test_a_dict_spec_fits_the_state():
    model = make_model()
    optimizer = nnx.Optimizer(model, common.OPTIMIZERS["riemannian_adam"](common.PLAIN_SPEC),
                              wrt=nnx.Param)
    losses = train(model, optimizer)
    common.assert_trained(losses, model.embed.kernel[...])
    common.assert_same(nnx.to_pure_dict(nnx.state(model, nnx.Param)),
                       common.plain_run("riemannian_adam")[0])


def test_functional_split_merge():
    x, y = common.data()
    graphdef, params, rest = nnx.split(make_model(), nnx.Param, ...)
    optimizer = common.OPTIMIZERS["manifold_adam"](common.SPEC)
    opt_state = optimizer.init(params)

    @jax.jit
    def step(params, opt_state):
        loss, grads = jax.value_and_grad(
            lambda p: common.mse(nnx.merge(graphdef, p, rest)(x), y))(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    losses = []
    for _ in range(common.STEPS):
        params, opt_state, loss = step(params, opt_state)
        losses.append(float(loss))
    model = nnx.merge(graphdef, params, rest)
    common.assert_trained(losses, model.embed.kernel[...])
    plain_params, plain_losses = common.plain_run("manifold_adam")
    common.assert_same(nnx.to_pure_dict(params), plain_params)
    assert losses == plain_losses
