"""Orbax: save mid-run, restore into a fresh object, and the continuation is bit-identical.

An optimizer state holds NamedTuples and ``optax.MaskedNode`` placeholders, which a checkpoint
does not record: restoring takes a target, the abstract state of a freshly initialised run
(``jax.tree.map(ocp.utils.to_shape_dtype_struct, fresh)``). Orbax needs no environment setting
here: ``StandardCheckpointer`` saves in a background thread, and leaving its ``with`` block waits
for that thread (a save of this size takes ~0.1 s).
"""
import jax
import optax
import orbax.checkpoint as ocp
import pytest
from flax import nnx
from flax.training import train_state

from tests.integrations import common
from tests.integrations import test_nnx
from tests.integrations.test_linen import Model as LinenModel

HALF = common.STEPS // 2


def save(path, tree):
    with ocp.StandardCheckpointer() as checkpointer:
        checkpointer.save(path, tree)


def restore(path, like):
    """Restore into the structure (and dtypes, shapes) of ``like``, a fresh object."""
    with ocp.StandardCheckpointer() as checkpointer:
        return checkpointer.restore(path, jax.tree.map(ocp.utils.to_shape_dtype_struct, like))


def plain_step(optimizer):
    x, y = common.data()

    @jax.jit
    def step(params, opt_state):
        loss, grads = jax.value_and_grad(lambda p: common.mse(common.forward_plain(p, x), y))(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return step


def run(step, carry, steps):
    losses = []
    for _ in range(steps):
        *carry, loss = step(*carry)
        losses.append(float(loss))
    return tuple(carry), losses


@pytest.mark.parametrize("name", list(common.OPTIMIZERS))
def test_plain_dict_continuation_is_bit_identical(name, tmp_path):
    optimizer = common.OPTIMIZERS[name](common.PLAIN_SPEC)
    step = plain_step(optimizer)
    params = common.init_plain(jax.random.PRNGKey(0))
    (params, opt_state), first = run(step, (params, optimizer.init(params)), HALF)
    save(tmp_path / "ckpt", {"params": params, "opt_state": opt_state})
    (params, opt_state), rest = run(step, (params, opt_state), common.STEPS - HALF)

    # A new process would build its objects afresh, from other values: only the structure counts.
    fresh_params = common.init_plain(jax.random.PRNGKey(1))
    fresh = {"params": fresh_params, "opt_state": optimizer.init(fresh_params)}
    restored = restore(tmp_path / "ckpt", fresh)
    assert jax.tree.structure(restored) == jax.tree.structure(fresh)
    (params2, opt_state2), rest2 = run(step, (restored["params"], restored["opt_state"]),
                                       common.STEPS - HALF)
    assert rest2 == rest
    common.assert_same((params2, opt_state2), (params, opt_state))
    common.assert_trained(first + rest, params2["embed"]["kernel"])


def test_linen_train_state(tmp_path):
    model = LinenModel()
    x, y = common.data()

    def create(key):
        return train_state.TrainState.create(
            apply_fn=model.apply, params={"params": common.init_plain(key)},
            tx=common.OPTIMIZERS["manifold_adam"](common.SPEC))

    @jax.jit
    def step(state):
        loss, grads = jax.value_and_grad(lambda v: common.mse(state.apply_fn(v, x), y))(state.params)
        return state.apply_gradients(grads=grads), loss

    (state,), first = run(step, (create(jax.random.PRNGKey(0)),), HALF)
    save(tmp_path / "ckpt", state)
    (state,), rest = run(step, (state,), common.STEPS - HALF)
    restored = restore(tmp_path / "ckpt", create(jax.random.PRNGKey(1)))
    assert int(restored.step) == HALF
    (state2,), rest2 = run(step, (restored,), common.STEPS - HALF)
    assert rest2 == rest
    common.assert_same(state2, state)
    common.assert_trained(first + rest, state2.params["params"]["embed"]["kernel"])


def test_nnx_model_and_optimizer(tmp_path):
    x, y = common.data()

    def create():
        model = test_nnx.make_model()
        tx = common.OPTIMIZERS["riemannian_adam"](common.SPEC)
        return model, nnx.Optimizer(model, tx, wrt=nnx.Param)

    def run_nnx(model, optimizer, steps):
        return [float(test_nnx.train_step(model, optimizer, x, y)) for _ in range(steps)]

    model, optimizer = create()
    first = run_nnx(model, optimizer, HALF)
    save(tmp_path / "ckpt", {"model": nnx.state(model), "optimizer": nnx.state(optimizer)})
    rest = run_nnx(model, optimizer, common.STEPS - HALF)

    model2, optimizer2 = create()
    restored = restore(tmp_path / "ckpt", {"model": nnx.state(model2),
                                           "optimizer": nnx.state(optimizer2)})
    nnx.update(model2, restored["model"])
    nnx.update(optimizer2, restored["optimizer"])
    assert int(optimizer2.step[...]) == HALF
    assert run_nnx(model2, optimizer2, common.STEPS - HALF) == rest
    common.assert_same(nnx.state(model2), nnx.state(model))
    common.assert_same(nnx.state(optimizer2), nnx.state(optimizer))
    common.assert_trained(first + rest, model2.embed.kernel[...])
