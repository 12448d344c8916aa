"""The ``manifolds`` spec: pytrees matched by key path, functions, by_path, EUCLIDEAN, and the
containers of Flax NNX, Linen and equinox (small checks; the full integrations live elsewhere)."""
import pickle

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from flax.core import FrozenDict

import geometric
from geometric import optim
from geometric.optim import EUCLIDEAN, by_path

ST = geometric.Stiefel(8, 4)
OPTIMIZERS = {
    "riemannian_sgd": lambda spec: optim.riemannian_sgd(0.05, spec, momentum=0.9),
    "riemannian_adam": lambda spec: optim.riemannian_adam(0.05, spec),
    "manifold_adam": lambda spec: optim.manifold_adam(0.05, spec),
}
optimizers = pytest.mark.parametrize("name", list(OPTIMIZERS))
SPEC = by_path({"kernel$": lambda path, w: geometric.Stiefel(*w.shape)})


def plain_params():
    return {"layers": [{"kernel": ST.random_point(jax.random.PRNGKey(0)), "bias": jnp.ones(4)}]}


def loss(p):
    a = jnp.diag(jnp.arange(8.0))
    layer = p["layers"][0]
    return -jnp.trace(layer["kernel"].T @ a @ layer["kernel"]) + jnp.sum(layer["bias"] ** 2)


def run(opt, p, steps=5):
    @jax.jit  # one compilation instead of op-by-op dispatch of every step (manifold_adam: 15 s)
    def step(p, state):
        updates, state = opt.update(jax.grad(loss)(p), state, p)
        return optax.apply_updates(p, updates), state

    state = opt.init(p)
    for _ in range(steps):
        p, state = step(p, state)
    return p


@optimizers
def test_spec_forms_give_the_same_iterates(name):
    """A mirror dict, a prefix, a function, by_path, EUCLIDEAN and None all mean the same."""
    p = plain_params()
    specs = [{"layers": [{"kernel": ST, "bias": None}]},
             {"layers": [{"kernel": ST, "bias": EUCLIDEAN}]},
             lambda params: {"layers": [{"kernel": ST, "bias": EUCLIDEAN}]},
             SPEC,
             by_path(lambda path, w: ST if path.endswith("kernel") else None)]
    results = [run(OPTIMIZERS[name](spec), p) for spec in specs]
    for r in results[1:]:
        for a, b in zip(jax.tree.leaves(results[0]), jax.tree.leaves(r)):
            np.testing.assert_array_equal(a, b)
    assert float(ST.manifold_error(results[0]["layers"][0]["kernel"])) < 1e-5


def test_by_path_paths_and_order():
    p = {"enc": {"kernel": jnp.zeros((8, 4))}, "dec": {"kernel": jnp.zeros((8, 4))}}
    seen = []
    spec = by_path({"^enc/": lambda path, w: seen.append(path) or ST, "kernel$": None})
    assert spec(p) == {"enc": {"kernel": ST}, "dec": {"kernel": None}}
    assert seen == ["enc/kernel"]
    with pytest.raises(TypeError, match=r"by_path: the rule for 'dec/kernel' gave str"):
        by_path({"dec": "stiefel"})(p)


def test_by_path_patterns_that_decide_nothing_are_errors():
    """A pattern that no path matches (or that an earlier pattern shadows) would leave its layer
    Euclidean without a word: an error naming the pattern, unless it is listed optional."""
    p = {"hidden": {"kernel": jnp.zeros((8, 4)), "bias": jnp.zeros(4)}}
    with pytest.raises(ValueError, match=r"by_path: the pattern 'hidden\\.kernel\$' decides no "
                                         r"leaf.*'hidden/bias', 'hidden/kernel'.*optional="):
        by_path({r"hidden\.kernel$": ST})(p)
    with pytest.raises(ValueError, match=r"the pattern 'kernel\$' decides no leaf.*earlier pattern"):
        by_path({"^hidden/": None, "kernel$": ST})(p)
    assert by_path({"kernel$": ST, "^head/": ST}, optional=["^head/"])(p)["hidden"]["kernel"] is ST
    with pytest.raises(ValueError, match=r"by_path: the pattern 'kernel\[' is not a regular "
                                         r"expression"):
        by_path({"kernel[": ST})
    with pytest.raises(ValueError, match=r"`optional` names \['head'\], which are not patterns"):
        by_path({"kernel$": ST}, optional=["head"])
    opt = optim.riemannian_adam(0.1, by_path({r"hidden\.kernel$": ST}))
    with pytest.raises(ValueError, match=r"by_path: the pattern"):
        opt.init(p)


def test_a_manifold_where_params_has_no_array_is_an_error():
    """`{"w": st, "b": None, "c": st}` for params without "c": the constraint on "c" applies to
    nothing (a renamed layer); None or EUCLIDEAN there is harmless."""
    p = {"w": ST.random_point(jax.random.PRNGKey(0)), "b": jnp.zeros(4)}
    with pytest.raises(ValueError, match=r"\w*riemannian_adam: `manifolds` puts Stiefel\(n=8, p=4.* "
                                         r"at 'c', where `params` has no array.*'b', 'w'"):
        optim.riemannian_adam(0.1, {"w": ST, "b": None, "c": ST}).init(p)
    optim.riemannian_adam(0.1, {"w": ST, "b": None, "c": None}).init(p)


def test_frozendict_params_with_a_dict_spec():
    p = FrozenDict({"params": FrozenDict({"Dense_0": {"kernel": ST.random_point(jax.random.PRNGKey(0)),
                                                      "bias": jnp.zeros(4)}})})
    opt = optim.riemannian_adam(0.1, {"params": {"Dense_0": {"kernel": ST, "bias": None}}})
    state = opt.init(p)
    g = jax.tree.map(jnp.ones_like, p)
    updates, _ = opt.update(g, state, p)
    new = optax.apply_updates(p, updates)
    assert isinstance(new, FrozenDict)
    assert float(ST.manifold_error(new["params"]["Dense_0"]["kernel"])) < 1e-5


class Model(nnx.Module):
    def __init__(self, rngs):
        self.layers = nnx.List([nnx.Linear(8, 4, rngs=rngs)])
        self.layers[0].kernel[...] = ST.random_point(jax.random.PRNGKey(1))

    def __call__(self, x):
        return self.layers[0](x)


@optimizers
def test_nnx_optimizer(name):
    """``nnx.Optimizer`` passes ``Variable``s to ``init`` and plain arrays to ``update``."""
    model = Model(nnx.Rngs(0))
    x = jax.random.normal(jax.random.PRNGKey(2), (16, 8))
    # a dict spec, an nnx.State spec (boxed manifolds) and by_path, all equivalent
    state_spec = jax.tree.map(lambda w: ST if w.ndim == 2 else EUCLIDEAN, nnx.state(model, nnx.Param))
    for spec in [SPEC, {"layers": {0: {"kernel": ST, "bias": None}}}, state_spec]:
        model = Model(nnx.Rngs(0))
        opt = nnx.Optimizer(model, OPTIMIZERS[name](spec), wrt=nnx.Param)

        @nnx.jit
        def step(model, opt):
            loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - 1.0) ** 2))(model)
            opt.update(model, grads)
            return loss

        losses = [float(step(model, opt)) for _ in range(10)]
        assert losses[-1] < losses[0]
        assert float(ST.manifold_error(model.layers[0].kernel[...])) < 1e-5


class Layer(eqx.Module):
    weight: jax.Array
    bias: jax.Array | None

    def __call__(self, x):
        return x @ self.weight + (0 if self.bias is None else self.bias[None])


@optimizers
def test_equinox_mirror_module(name):
    """A mirror module is callable; it is a mirror because it holds manifolds."""
    model = Layer(ST.random_point(jax.random.PRNGKey(0)), jnp.zeros(4))
    x = jax.random.normal(jax.random.PRNGKey(2), (16, 8))
    spec = Layer(ST, EUCLIDEAN)
    opt = OPTIMIZERS[name](spec)
    state = opt.init(eqx.filter(model, eqx.is_array))

    @eqx.filter_jit
    def step(model, state):
        grads = eqx.filter_grad(lambda m: jnp.mean((m(x) - 1.0) ** 2))(model)
        updates, state = opt.update(grads, state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, updates), state

    for _ in range(5):
        model, state = step(model, state)
    assert float(ST.manifold_error(model.weight)) < 1e-5
    # a module with bias=None, and a spec with None for it: None is an empty subtree of params
    bare = Layer(ST.random_point(jax.random.PRNGKey(0)), None)
    opt = OPTIMIZERS[name](Layer(ST, None))
    grads = eqx.filter_grad(lambda m: jnp.sum(m(x)))(bare)
    updates, _ = eqx.filter_jit(opt.update)(grads, opt.init(bare), bare)
    assert updates.bias is None


def test_ambiguous_callable_pytree_is_refused():
    with pytest.raises(TypeError, match=r"`manifolds` is a callable pytree \(Layer\) with no manifold"):
        optim.riemannian_adam(0.1, Layer(None, None))


def test_structure_errors_name_the_leaf():
    opt = optim.riemannian_adam(0.1, {"w": ST})
    with pytest.raises(ValueError, match=r"nothing in `manifolds` covers the leaf 'v' of `params`"):
        opt.init({"w": ST.random_point(jax.random.PRNGKey(0)), "v": jnp.zeros(3)})
    opt = optim.riemannian_adam(0.1, {"w": {"a": ST}})
    with pytest.raises(ValueError, match=r"`manifolds` has w/a below it"):
        opt.init({"w": ST.random_point(jax.random.PRNGKey(0))})
    with pytest.raises(TypeError, match=r"got str at 'w'"):
        optim.riemannian_adam(0.1, lambda p: {"w": "stiefel"}).init({"w": jnp.zeros((8, 4))})


def test_euclidean_marker_survives_pickling():
    assert pickle.loads(pickle.dumps(EUCLIDEAN)) is EUCLIDEAN
    assert repr(EUCLIDEAN) == "EUCLIDEAN"


def test_callable_spec_with_inject_hyperparams_and_multisteps():
    p = plain_params()
    opt = optax.inject_hyperparams(optim.riemannian_adam, static_args=("manifolds",))(
        learning_rate=0.05, manifolds=SPEC)
    multi = optax.MultiSteps(optim.riemannian_sgd(0.05, SPEC), every_k_schedule=2)
    for tx in (opt, multi):
        new = run(tx, p, steps=4)
        assert float(ST.manifold_error(new["layers"][0]["kernel"])) < 1e-5
        assert float(loss(new)) < float(loss(p))


def test_riemannian_gradient_takes_every_spec_form():
    p = plain_params()
    g = jax.grad(loss)(p)
    want = geometric.riemannian_gradient(p, g, {"layers": [{"kernel": ST, "bias": None}]})
    got = geometric.riemannian_gradient(p, g, SPEC)
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
        np.testing.assert_array_equal(a, b)
