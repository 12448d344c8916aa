"""Flax Linen: ``init``/``apply`` and ``flax.training.train_state.TrainState`` with every optimizer."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import pytest
from flax.core import FrozenDict
from flax.training import train_state

from geometric import optim
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


DICT_SPEC = {"params": common.PLAIN_SPEC}
SPECS = {"dict": DICT_SPEC, "by_path": common.SPEC}




def test_init_gives_the_plain_layout_on_the_manifold():
    variables = Model().init(jax.random.PRNGKey(1), jnp.zeros((1, common.D_IN), jnp.float32))
    assert jax.tree.structure(variables) == jax.tree.structure({"params": common.start()})
    assert common.orthonormality_error(variables["params"]["embed"]["kernel"]) <= common.ON_MANIFOLD
    common.OPTIMIZERS["riemannian_adam"](common.SPEC).init(variables)  # accepted as a start


def test_the_default_kernel_init_is_refused_by_name_and_projected_on_request():
    # lecun_normal is off the manifold; training from it would be silently wrong for the rotating
    # optimizers.
    model = nn.Dense(common.D_HIDDEN, param_dtype=jnp.float32)
    variables = model.init(jax.random.PRNGKey(1), jnp.zeros((1, common.D_IN), jnp.float32))
    spec = optim.by_path({r"kernel$": common.STIEFEL})
    with pytest.raises(ValueError, match=r"'params/kernel' is not on Stiefel\(n=8, p=4"):
        common.OPTIMIZERS["manifold_adam"](spec).init(variables)
    projected = optim.project_params(variables, spec)
    assert common.orthonormality_error(projected["params"]["kernel"]) <= common.ON_MANIFOLD
    common.OPTIMIZERS["manifold_adam"](spec).init(projected)


def test_by_path_on_the_plain_dict_is_the_dict_spec():
    optimizer = common.OPTIMIZERS["riemannian_adam"](common.SPEC)
    params, losses = common.train_plain(optimizer, common.start())
    plain_params, plain_losses = common.plain_run("riemannian_adam")
    common.assert_same(params, plain_params)
    assert losses == plain_losses


@pytest.mark.parametrize("name", list(common.OPTIMIZERS))
def test_train_state(name):
    model = Model()
    x, y = common.data()
    state = train_state.TrainState.create(apply_fn=model.apply, params={"params": common.start()},
                                          tx=common.OPTIMIZERS[name](common.SPEC))

    @jax.jit
    def step(state):
        loss, grads = jax.value_and_grad(lambda v: common.mse(state.apply_fn(v, x), y))(state.params)
        return state.apply_gradients(grads=grads), loss

    losses = []
    for _ in range(common.STEPS):
        state, loss = step(state)
        losses.append(float(loss))
    common.assert_trained(losses, state.params["params"]["embed"]["kernel"])
    params, plain_losses = common.plain_run(name)
    common.assert_same(state.params["params"], params)
    common.assert_same(losses, plain_losses)


@pytest.mark.parametrize("spec", list(SPECS))
def test_frozen_dict_params_and_apply(spec):
    # Linen's older default container; the spec is matched by key, whatever the container.
    model = Model()
    x, y = common.data()
    params = FrozenDict({"params": common.start()})
    optimizer = common.OPTIMIZERS["riemannian_adam"](SPECS[spec])
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
    common.assert_same(params["params"], common.plain_run("riemannian_adam")[0])
