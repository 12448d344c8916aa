"""Symplectic attention and the linear symplectic transformer.

A sequence ``Z`` of shape ``(T, 2n)`` (row t = ``(q_t, p_t)``) is one point of the product phase
space ``ℝ^{2nT}`` with the form ``Ω_T = I_T ⊗ J_{2n}`` (the row-major flattening); every layer and
network must satisfy ``Mᵀ Ω_T M = Ω_T`` for ``M = ∂vec(Z')/∂vec(Z)`` (``jax.jacfwd``, float64,
1e-12 relative to ``‖M‖²``), for random parameters of order one.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geometric.nn as gnn
from tests.geometric.nn.test_sympnet import (
    assert_symplectic,
    check_derivatives,
    randomize,
    sym,
    vec,
)

N, T = 2, 4


def layer_args(name: str, dtype=jnp.float64):
    return {
        "linear_symplectic_attention_q": (gnn.linear_symplectic_attention_q, (sym(T, 1, dtype),)),
        "linear_symplectic_attention_p": (gnn.linear_symplectic_attention_p, (sym(T, 1, dtype),)),
        "symplectic_attention_q": (gnn.symplectic_attention_q, (sym(N, 2, dtype),)),
        "symplectic_attention_p": (gnn.symplectic_attention_p, (sym(N, 2, dtype),)),
        "symplectic_attention_q dense": (gnn.symplectic_attention_q, (vec((N, N), 3, dtype),)),
        "symplectic_attention_p dense": (gnn.symplectic_attention_p, (vec((N, N), 3, dtype),)),
    }[name]


LAYERS = ["linear_symplectic_attention_q", "linear_symplectic_attention_p",
          "symplectic_attention_q", "symplectic_attention_p", "symplectic_attention_q dense",
          "symplectic_attention_p dense"]

NETWORKS = {
    "default": gnn.LinearSymplecticTransformer(2 * N, T),
    "two units, p-first": gnn.LinearSymplecticTransformer(2 * N, T, n_sympnet=3, L=2,
                                                          upscaling_dimension=6,
                                                          init_upper=False),
}


@pytest.mark.parametrize("name", LAYERS)
def test_layer_symplectic(name):
    f, params = layer_args(name)
    assert_symplectic(lambda z: f(z, *params), vec((T, 2 * N), 7))


@pytest.mark.parametrize("name", NETWORKS)
def test_transformer_symplectic(name):
    net = NETWORKS[name]
    params = randomize(net.init(jax.random.PRNGKey(0), jnp.float64), 1)
    assert_symplectic(lambda z: net(params, z), vec((T, 2 * N), 7))


def test_layers_are_gradients_of_their_potentials():
    """``Q + ∇_P F(P)`` with ``F = ½ tr(Pᵀ A P)`` (linear) and ``F = logsumexp(P A Pᵀ)``."""
    z = vec((T, 2 * N), 5)
    q, p = z[:, :N], z[:, N:]
    for name in LAYERS:
        f, (a,) = layer_args(name)
        dense = a if isinstance(a, jax.Array) else a.dense()
        if name.startswith("linear"):
            potential = lambda x, d=dense: 0.5 * jnp.trace(x.T @ d @ x)
        else:
            potential = lambda x, d=dense: jax.nn.logsumexp(x @ d @ x.T)
        if "_q" in name:
            expected = jnp.concatenate([q + jax.grad(potential)(p), p], axis=1)
        else:
            expected = jnp.concatenate([q, p + jax.grad(potential)(q)], axis=1)
        np.testing.assert_allclose(f(z, a), expected, rtol=1e-12, atol=1e-14)


def test_transformer_layer_order():
    """GML's Chain per unit: attention q, n_sympnet gradient layers, attention p, n_sympnet."""
    net = NETWORKS["two units, p-first"]
    params = randomize(net.init(jax.random.PRNGKey(0), jnp.float64), 2, 0.5)
    sympnet = gnn.GSympNet(2 * N, upscaling_dimension=6, n_layers=3, init_upper=False)
    z = vec((3, T, 2 * N), 4)
    x = z
    for unit in params:
        x = sympnet(unit["sympnet_q"], gnn.linear_symplectic_attention_q(x, unit["attention_q"]))
        x = sympnet(unit["sympnet_p"], gnn.linear_symplectic_attention_p(x, unit["attention_p"]))
    np.testing.assert_allclose(net(params, z), x, rtol=1e-14)
    # GML's parameter count: 2L attention layers of T(T+1)/2, 2L·n_sympnet gradient layers.
    count = sum(x.size for x in jax.tree.leaves(params))
    assert count == 2 * 2 * T * (T + 1) // 2 + 2 * 2 * 3 * 3 * (N + 2)


@pytest.mark.parametrize("name", LAYERS)
def test_layer_transformations(name):
    f, params = layer_args(name)
    z = vec((3, T, 2 * N), 10)
    out = f(z, *params)
    np.testing.assert_allclose(jax.jit(f)(z, *params), out, rtol=1e-14)
    for i in range(3):
        np.testing.assert_allclose(f(z[i], *params), out[i], rtol=1e-13)
    np.testing.assert_allclose(jax.vmap(lambda x: f(x, *params))(z), out, rtol=1e-13)
    check_derivatives(lambda z, params: f(z, *params), z, params)


@pytest.mark.parametrize("name", NETWORKS)
def test_transformer_transformations(name):
    net = NETWORKS[name]
    params = randomize(net.init(jax.random.PRNGKey(0), jnp.float64), 1, 0.5)
    z = vec((2, T, 2 * N), 10)
    out = net(params, z)
    np.testing.assert_allclose(jax.jit(net)(params, z), out, rtol=1e-13)
    np.testing.assert_allclose(net(params, z[1]), out[1], rtol=1e-13)
    check_derivatives(lambda z, params: net(params, z), z, params)


@pytest.mark.parametrize("name", LAYERS)
def test_layer_float32(name):
    f, params = layer_args(name, jnp.float32)
    z = vec((2, T, 2 * N), 1, jnp.float32)
    out = f(z, *params)
    assert out.dtype == jnp.float32
    ref = f(z.astype(jnp.float64), *jax.tree.map(lambda x: x.astype(jnp.float64), params))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_transformer_init_float32():
    net = NETWORKS["default"]
    params = net.init(jax.random.PRNGKey(0))
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(params))
    # GML: upscaling_dimension = 2 dim; attention packed T(T+1)/2 uniform on ±√(6/(T(T+1)/2)).
    assert params[0]["sympnet_q"][0]["weight"].shape == (2 * N, N)
    assert float(jnp.abs(params[0]["attention_q"].packed).max()) <= (6 / 10) ** 0.5
    out = net(params, vec((T, 2 * N), 1, jnp.float32))
    assert out.dtype == jnp.float32 and bool(jnp.isfinite(out).all())


def test_errors():
    z = vec((T, 2 * N), 0)
    with pytest.raises(TypeError, match=r"linear_symplectic_attention_q: `a` must be a rules"):
        gnn.linear_symplectic_attention_q(z, sym(T, 0).dense())
    with pytest.raises(ValueError, match=r"linear_symplectic_attention_p: `a` must be .* n = 4"):
        gnn.linear_symplectic_attention_p(z, sym(3, 0))
    with pytest.raises(ValueError, match=r"symplectic_attention_q: `z` must have shape "
                                         r"\(\.\.\., T, 2n\)"):
        gnn.symplectic_attention_q(vec((2 * N,), 0), sym(N, 0))
    with pytest.raises(ValueError, match=r"symplectic_attention_p: `a` must have shape \(2, 2\)"):
        gnn.symplectic_attention_p(z, vec((3, 3), 0))
    with pytest.raises(TypeError, match=r"symplectic_attention_p: `a` must have dtype"):
        gnn.symplectic_attention_p(z, jnp.ones((N, N), jnp.int32))
    with pytest.raises(ValueError, match=r"LinearSymplecticTransformer: `dim` .* must be even"):
        gnn.LinearSymplecticTransformer(3, T)
    with pytest.raises(ValueError, match=r"LinearSymplecticTransformer: `L` must be ≥ 1"):
        gnn.LinearSymplecticTransformer(4, T, L=0)
    with pytest.raises(ValueError, match=r"LinearSymplecticTransformer: `upscaling_dimension`"):
        gnn.LinearSymplecticTransformer(4, T, upscaling_dimension=3)
    net = NETWORKS["default"]
    params = net.init(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"LinearSymplecticTransformer.__call__: `z` must have "
                                         r"shape \(\.\.\., 4, 4\)"):
        net(params, jnp.ones((3, 4), jnp.float32))
    assert hash(net) == hash(gnn.LinearSymplecticTransformer(4, T, upscaling_dimension=8))


@pytest.mark.parametrize("platform", ["cuda", "tpu"])
def test_export(platform):
    cases = [(lambda z, params, f=layer_args(name)[0]: f(z, *params),
              layer_args(name, jnp.float32)[1]) for name in LAYERS]
    cases += [(lambda z, params, net=net: net(params, z), net.init(jax.random.PRNGKey(0)))
              for net in NETWORKS.values()]
    z = jnp.ones((8, T, 2 * N), jnp.float32)
    for f, params in cases:
        loss = lambda z, params, f=f: jnp.sum(f(z, params) ** 2)
        for fun in (f, jax.grad(loss, argnums=(0, 1))):
            jax.export.export(jax.jit(fun), platforms=[platform])(z, params)
