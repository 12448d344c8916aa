"""equinox: ``filter_jit``/``filter_grad``/``apply_updates``, a mirror-module spec, ``(out, in)`` weights.

``eqx.nn.Linear(8, 4)`` stores its weight as ``(4, 8)``: ``Stiefel(8, 4, rows=True)`` constrains its
rows, so the layer needs no reshaping. The volume-preserving layer keeps a ``rules.StrictlyLower``
as a field and calls the rule in ``__call__``; a hand-written layer decorates its ``__call__`` with
``rules.rrule`` and its pullback returns ∂self, a module of its own type.
"""
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

import rules
from geometric import optim
from tests.integrations import common

# The frameworks order the arithmetic of the same model differently (a vmapped ``W x`` against
# ``x W``), so the runs agree to float32 rounding, amplified a little by 25 steps.
TOL = 2e-5


class Mix(eqx.Module):
    weight: rules.StrictlyLower
    bias: jax.Array

    def __call__(self, h):
        return rules.volume_preserving_feedforward(h, self.weight, self.bias)


class Model(eqx.Module):
    embed: eqx.nn.Linear
    mix: Mix
    head: eqx.nn.Linear

    def __call__(self, x):
        h = jax.vmap(self.embed)(x)
        return jax.vmap(self.head)(self.mix(h))


class OrthogonalLinear(eqx.Module):
    """``y = x Wᵀ + b`` for a batch ``x`` of shape ``(B, in)``, with its pullback written out."""

    weight: jax.Array  # (out, in), orthonormal rows
    bias: jax.Array

    @rules.rrule
    def __call__(self, x):
        def orthogonal_linear_pullback(y_bar):
            return OrthogonalLinear(y_bar.T @ x, jnp.sum(y_bar, axis=0)), y_bar @ self.weight

        return x @ self.weight.T + self.bias[None, :], orthogonal_linear_pullback


class RuleModel(Model):
    embed: OrthogonalLinear

    def __call__(self, x):
        return jax.vmap(self.head)(self.mix(self.embed(x)))


def from_plain(params):
    """The equinox model holding the plain-dict values (weights transposed to ``(out, in)``)."""
    key = jax.random.PRNGKey(0)  # shapes only: the values come from `params`
    linear = functools.partial(eqx.filter_eval_shape, eqx.nn.Linear, key=key)
    model = Model(embed=linear(common.D_IN, common.D_HIDDEN),
                  mix=Mix(rules.StrictlyLower(params["mix"]["packed"], common.D_HIDDEN),
                          params["mix"]["bias"]),
                  head=linear(common.D_HIDDEN, common.D_OUT))
    return eqx.tree_at(
        lambda m: (m.embed.weight, m.embed.bias, m.head.weight, m.head.bias), model,
        (params["embed"]["kernel"].T, params["embed"]["bias"], params["head"]["kernel"].T,
         params["head"]["bias"]))


def to_plain(model):
    return {"embed": {"kernel": model.embed.weight.T, "bias": model.embed.bias},
            "mix": {"packed": model.mix.weight.packed, "bias": model.mix.bias},
            "head": {"kernel": model.head.weight.T, "bias": model.head.bias}}


def mirror_spec(model):
    """The spec as a module of the model's own type: a manifold or EUCLIDEAN per array."""
    spec = jax.tree.map(lambda _: optim.EUCLIDEAN, model)
    return eqx.tree_at(lambda m: m.embed.weight, spec, common.STIEFEL_ROWS)




def loss(model, x, y):
    return common.mse(model(x), y)


def train(model, optimizer):
    x, y = common.data()
    opt_state = optimizer.init(eqx.filter(model, eqx.is_array))

    @eqx.filter_jit
    def step(model, opt_state):
        value, grads = eqx.filter_value_and_grad(loss)(model, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, updates), opt_state, value

    losses = []
    for _ in range(common.STEPS):
        model, opt_state, value = step(model, opt_state)
        losses.append(float(value))
    return model, losses


def test_rules_in_call_are_differentiated_with_respect_to_the_module():
    model = from_plain(common.start())
    x, y = common.data()
    grads = eqx.filter_jit(eqx.filter_grad(loss))(model, x, y)
    assert isinstance(grads, Model) and isinstance(grads.mix.weight, rules.StrictlyLower)
    reference = jax.jit(jax.grad(lambda p: common.mse(common.forward_plain(p, x), y)))(
        common.start())
    common.assert_same(to_plain(grads), reference, tol=1e-6)

    # ∂self from the hand-written pullback of `OrthogonalLinear.__call__`.
    rule_model = RuleModel(OrthogonalLinear(model.embed.weight, model.embed.bias), model.mix,
                           model.head)
    rule_grads = eqx.filter_jit(eqx.filter_grad(loss))(rule_model, x, y)
    assert isinstance(rule_grads.embed, OrthogonalLinear)
    common.assert_same(to_plain(rule_grads), reference, tol=1e-6)


def test_a_rule_module_trains_on_the_manifold():
    model = from_plain(common.start())
    model = RuleModel(OrthogonalLinear(model.embed.weight, model.embed.bias), model.mix, model.head)
    model, losses = train(model, common.OPTIMIZERS["riemannian_adam"](mirror_spec(model)))
    common.assert_trained(losses, model.embed.weight, rows=True)
    common.assert_same(to_plain(model), common.plain_run("riemannian_adam")[0], tol=TOL)


def test_by_path_is_the_mirror():
    model = from_plain(common.start())
    params = eqx.filter(model, eqx.is_array)
    assert common.SPEC(params) == mirror_spec(model)
    model, losses = train(model, common.OPTIMIZERS["riemannian_sgd"](common.SPEC))
    common.assert_trained(losses, model.embed.weight, rows=True)
    common.assert_same(to_plain(model), common.plain_run("riemannian_sgd")[0], tol=TOL)


@pytest.mark.parametrize("name", list(common.OPTIMIZERS))
def test_mirror_module_spec(name):
    model = from_plain(common.start())
    model, losses = train(model, common.OPTIMIZERS[name](mirror_spec(model)))
    assert isinstance(model, Model) and model.embed.weight.shape == (common.D_HIDDEN, common.D_IN)
    common.assert_trained(losses, model.embed.weight, rows=True)
    params, plain_losses = common.plain_run(name)
    common.assert_same(to_plain(model), params, tol=TOL)
    common.assert_same(losses, plain_losses, tol=TOL)

