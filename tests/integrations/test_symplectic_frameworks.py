"""A G-SympNet inside an equinox Module, a Flax NNX Module and a Flax Linen module.

The network is a frozen dataclass (hashable: a static field) and its parameters an ordinary
pytree, so each framework holds them as it holds any parameters. Each model learns the same
symplectic map (a rotation in every ``(q_i, p_i)`` plane: the harmonic oscillator's flow) with
``optax.adam`` from the same start, and must agree with the plain-JAX run.
"""
import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

import geometric.nn as gnn
from tests.integrations.common import mse

NET = gnn.GSympNet(4, n_layers=4)
STEPS, ANGLE = 20, 0.3
TOL = 2e-5  # the frameworks order float32 arithmetic alike up to rounding


def data():
    z = jax.random.normal(jax.random.PRNGKey(0), (64, 4), jnp.float32)
    q, p = z[:, :2], z[:, 2:]
    c, s = np.cos(ANGLE), np.sin(ANGLE)
    return z, jnp.concatenate([c * q + s * p, c * p - s * q], axis=1)


def start():
    return NET.init(jax.random.PRNGKey(1))


def train_plain():
    x, y = data()
    params, optimizer = start(), optax.adam(1e-2)
    state = optimizer.init(params)

    @jax.jit
    def step(params, state):
        loss, grads = jax.value_and_grad(lambda p: mse(NET(p, x), y))(params)
        updates, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    losses = []
    for _ in range(STEPS):
        params, state, loss = step(params, state)
        losses.append(float(loss))
    return params, losses


def assert_matches_plain(params, losses):
    plain_params, plain_losses = train_plain()
    assert plain_losses[-1] < 0.5 * plain_losses[0]
    np.testing.assert_allclose(losses, plain_losses, rtol=TOL)
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(plain_params), strict=True):
        np.testing.assert_allclose(a, b, rtol=TOL, atol=TOL)


# ------------------------------------------------------------------------------------ equinox


class EqxSympNet(eqx.Module):
    net: gnn.GSympNet = eqx.field(static=True)
    params: tuple

    def __call__(self, z):
        return self.net(self.params, z)


def test_equinox():
    model, optimizer = EqxSympNet(NET, start()), optax.adam(1e-2)
    state = optimizer.init(eqx.filter(model, eqx.is_array))
    x, y = data()

    @eqx.filter_jit
    def step(model, state):
        loss, grads = eqx.filter_value_and_grad(lambda m: mse(m(x), y))(model)
        updates, state = optimizer.update(grads, state, model)
        return eqx.apply_updates(model, updates), state, loss

    losses = []
    for _ in range(STEPS):
        model, state, loss = step(model, state)
        losses.append(float(loss))
    assert_matches_plain(model.params, losses)


# ------------------------------------------------------------------------------------ Flax NNX


class NnxSympNet(nnx.Module):
    def __init__(self, net, params):
        self.net = net
        self.params = nnx.data(jax.tree.map(nnx.Param, params))

    def __call__(self, z):
        params = jax.tree.map(lambda v: v[...], self.params,
                              is_leaf=lambda x: isinstance(x, nnx.Variable))
        return self.net(params, z)


def test_nnx():
    model = NnxSympNet(NET, start())
    optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
    x, y = data()

    @nnx.jit
    def step(model, optimizer):
        loss, grads = nnx.value_and_grad(lambda m: mse(m(x), y))(model)
        optimizer.update(model, grads)
        return loss

    losses = [float(step(model, optimizer)) for _ in range(STEPS)]
    params = nnx.to_pure_dict(nnx.state(model, nnx.Param))["params"]
    assert_matches_plain([params[i] for i in range(NET.n_layers)], losses)


# ----------------------------------------------------------------------------------- Flax Linen


class LinenSympNet(nn.Module):
    net: gnn.GSympNet

    @nn.compact
    def __call__(self, z):
        return self.net(self.param("sympnet", lambda key: start()), z)


def test_linen():
    model, optimizer = LinenSympNet(NET), optax.adam(1e-2)
    x, y = data()
    variables = model.init(jax.random.PRNGKey(2), x)
    state = optimizer.init(variables)

    @jax.jit
    def step(variables, state):
        loss, grads = jax.value_and_grad(lambda v: mse(model.apply(v, x), y))(variables)
        updates, state = optimizer.update(grads, state, variables)
        return optax.apply_updates(variables, updates), state, loss

    losses = []
    for _ in range(STEPS):
        variables, state, loss = step(variables, state)
        losses.append(float(loss))
    assert_matches_plain(variables["params"]["sympnet"], losses)
