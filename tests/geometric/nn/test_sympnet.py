"""SympNet layers and networks: exact symplecticity, the Hamiltonian-flow form of every layer,
GeometricMachineLearning.jl's layer order, transformations, dtypes, batch axes, errors, export.

Symplecticity: ``M = ∂z'/∂z`` by ``jax.jacfwd`` in float64 must satisfy ``Mᵀ J M = J`` to 1e-12
relative to ``‖M‖²`` for random parameters of order one (not the small initial ones).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geometric.nn as gnn
import rules

N = 3  # q and p in R^3


def omega(n: int) -> np.ndarray:
    """``J_{2n} = [[0, I], [-I, 0]]``."""
    eye, zero = np.eye(n), np.zeros((n, n))
    return np.block([[zero, eye], [-eye, zero]])


def symplecticity_error(jac: jax.Array, form: np.ndarray) -> float:
    """``‖Mᵀ Ω M − Ω‖ / max(1, ‖M‖²)`` (Frobenius)."""
    m = np.asarray(jac, np.float64)
    return float(np.linalg.norm(m.T @ form @ m - form) / max(1.0, np.linalg.norm(m) ** 2))


def assert_symplectic(f, z0: jax.Array) -> None:
    """``f`` maps ``(2n,)`` to ``(2n,)``, or ``(T, 2n)`` to ``(T, 2n)`` with ``Ω = I_T ⊗ J_{2n}``."""
    assert z0.dtype == jnp.float64
    size = z0.size
    jac = jax.jacfwd(f)(z0).reshape(size, size)
    steps, width = (1, z0.shape[0]) if z0.ndim == 1 else z0.shape
    form = np.kron(np.eye(steps), omega(width // 2))
    assert symplecticity_error(jac, form) <= 1e-12
    # The test is not vacuous: the map is not the identity.
    assert float(np.linalg.norm(np.asarray(jac) - np.eye(size))) > 1e-2


def randomize(params, seed: int, scale: float = 1.0):
    """Every leaf (a Symmetric's packed entries included) replaced by ``scale · N(0, 1)``."""
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
    return jax.tree.unflatten(tree, [scale * jax.random.normal(k, x.shape, x.dtype)
                                     for k, x in zip(keys, leaves)])


def sym(n: int, seed: int, dtype=jnp.float64) -> rules.Symmetric:
    key = jax.random.PRNGKey(seed)
    return rules.Symmetric(jax.random.normal(key, (n * (n + 1) // 2,), dtype), n)


def vec(shape, seed: int, dtype=jnp.float64, scale: float = 1.0) -> jax.Array:
    return scale * jax.random.normal(jax.random.PRNGKey(seed), shape, dtype)


def layer_args(name: str, dtype=jnp.float64):
    """``(function, params)`` of each layer with random parameters of order one (h = 5)."""
    return {
        "linear_q": (gnn.linear_q, (sym(N, 1, dtype), vec((2 * N,), 2, dtype))),
        "linear_p": (gnn.linear_p, (sym(N, 1, dtype), vec((2 * N,), 2, dtype))),
        "activation_q": (gnn.activation_q, (vec((N,), 3, dtype, 2.0),)),
        "activation_p": (gnn.activation_p, (vec((N,), 3, dtype, 2.0),)),
        "gradient_q": (gnn.gradient_q, (vec((5, N), 4, dtype), vec((5,), 5, dtype, 2.0),
                                        vec((5,), 6, dtype))),
        "gradient_p": (gnn.gradient_p, (vec((5, N), 4, dtype), vec((5,), 5, dtype, 2.0),
                                        vec((5,), 6, dtype))),
    }[name]


LAYERS = ["linear_q", "linear_p", "activation_q", "activation_p", "gradient_q", "gradient_p"]

NETWORKS = {
    "LASympNet": gnn.LASympNet(2 * N),
    "LASympNet p-first": gnn.LASympNet(2 * N, depth=3, nhidden=2, init_upper_linear=False,
                                       init_upper_activation=False),
    "LASympNet linear only": gnn.LASympNet(2 * N, depth=4, nhidden=0),
    "GSympNet": gnn.GSympNet(2 * N),
    "GSympNet p-first": gnn.GSympNet(2 * N, upscaling_dimension=4, n_layers=5, init_upper=False,
                                     activation=jax.nn.sigmoid),
}


@pytest.mark.parametrize("name", LAYERS)
def test_layer_symplectic(name):
    f, params = layer_args(name)
    assert_symplectic(lambda z: f(z, *params), vec((2 * N,), 7))


@pytest.mark.parametrize("name", NETWORKS)
def test_network_symplectic(name):
    net = NETWORKS[name]
    params = randomize(net.init(jax.random.PRNGKey(0), jnp.float64), 1)
    assert_symplectic(lambda z: net(params, z), vec((2 * N,), 7))


def test_layers_are_hamiltonian_flows():
    """Each q-layer is ``q + ∇V(p)`` for its potential V (the p-layers: ``p + ∇V(q)``)."""
    z = vec((2 * N,), 8)
    q, p = z[:N], z[N:]
    s, bias = layer_args("linear_q")[1]
    (scale,) = layer_args("activation_q")[1]
    w, a, b = layer_args("gradient_q")[1]
    log_cosh = lambda x: jnp.logaddexp(x, -x)
    potentials = {
        "linear": (lambda x: 0.5 * x @ s.dense() @ x, (s, bias)),
        "activation": (lambda x: jnp.sum(scale * log_cosh(x)), (scale,)),
        "gradient": (lambda x: jnp.sum(a * log_cosh(w @ x + b)), (w, a, b)),
    }
    for kind, (potential, params) in potentials.items():
        shift = bias if kind == "linear" else 0.0
        expected_q = jnp.concatenate([q + jax.grad(potential)(p), p]) + shift
        expected_p = jnp.concatenate([q, p + jax.grad(potential)(q)]) + shift
        np.testing.assert_allclose(getattr(gnn, f"{kind}_q")(z, *params), expected_q, rtol=1e-13)
        np.testing.assert_allclose(getattr(gnn, f"{kind}_p")(z, *params), expected_p, rtol=1e-13)


def test_lasympnet_layer_order():
    """GeometricMachineLearning.jl's Chain: [linear q, p, (q, …) + bias, activation q, p] per
    hidden block, then a last linear module; p-first variants swap the order."""
    z = vec((4, 2 * N), 9)
    for upper_linear in (True, False):
        for upper_act in (True, False):
            net = gnn.LASympNet(2 * N, depth=3, nhidden=1, init_upper_linear=upper_linear,
                                init_upper_activation=upper_act)
            params = randomize(net.init(jax.random.PRNGKey(2), jnp.float64), 3)
            lin = [gnn.linear_q, gnn.linear_p] if upper_linear else [gnn.linear_p, gnn.linear_q]
            act = ([gnn.activation_q, gnn.activation_p] if upper_act
                   else [gnn.activation_p, gnn.activation_q])
            x = z
            for module in range(2):
                s = [rules.Symmetric(w, N) for w in params["linear"][module].packed]
                x = lin[0](lin[1](lin[0](x, s[0]), s[1]), s[2], params["bias"][module])
                if module == 0:
                    x = act[1](act[0](x, params["activation"][0][0]), params["activation"][0][1])
            np.testing.assert_allclose(net(params, z), x, rtol=1e-14)


def test_gsympnet_layer_order_and_sizes():
    net = gnn.GSympNet(2 * N, n_layers=3, init_upper=False)
    params = net.init(jax.random.PRNGKey(0), jnp.float64)
    # GML: upscaling_dimension = 2 dim, weight (upscaling_dimension/2, n), bias zero.
    assert net.upscaling_dimension == 4 * N
    assert params[0]["weight"].shape == (2 * N, N)
    assert all(float(jnp.abs(layer["bias"]).max()) == 0.0 for layer in params)
    # GML's parameterlength: upscaling_dimension/2 · (n + 2) per layer.
    assert sum(x.size for x in jax.tree.leaves(params)) == 3 * 2 * N * (N + 2)
    params = randomize(params, 1)
    z = vec((2 * N,), 2)
    x = z
    for i, layer in enumerate(params):
        x = (gnn.gradient_p if i % 2 == 0 else gnn.gradient_q)(
            x, layer["weight"], layer["scale"], layer["bias"])
    np.testing.assert_allclose(net(params, z), x, rtol=1e-14)


def test_init_glorot_bounds_and_dtype():
    """GML's GlorotUniform: uniform on ±√(6/Σ shape); a packed weight counts its entries."""
    net = gnn.LASympNet(2 * N, depth=2)
    params = net.init(jax.random.PRNGKey(0))
    packed = params["linear"][0].packed
    assert packed.dtype == jnp.float32 and packed.shape == (2, 6)
    assert float(jnp.abs(packed).max()) <= (6 / 6) ** 0.5
    assert float(jnp.abs(params["bias"][0]).max()) <= (6 / (2 * N)) ** 0.5
    g = gnn.GSympNet(2 * N).init(jax.random.PRNGKey(0), jnp.float64)
    assert g[0]["weight"].dtype == jnp.float64
    assert float(jnp.abs(g[0]["weight"]).max()) <= (6 / (3 * N)) ** 0.5


@pytest.mark.parametrize("name", LAYERS)
def test_layer_transformations(name):
    f, params = layer_args(name)
    z = vec((4, 2 * N), 10)
    out = f(z, *params)
    np.testing.assert_allclose(jax.jit(f)(z, *params), out, rtol=1e-14)
    # leading batch axes: row by row, and under vmap
    for i in range(4):
        np.testing.assert_allclose(f(z[i], *params), out[i], rtol=1e-14)
    np.testing.assert_allclose(jax.vmap(lambda x: f(x, *params))(z), out, rtol=1e-14)
    check_derivatives(lambda z, params: f(z, *params), z, params)


@pytest.mark.parametrize("name", NETWORKS)
def test_network_transformations(name):
    net = NETWORKS[name]
    params = randomize(net.init(jax.random.PRNGKey(0), jnp.float64), 1, 0.5)
    z = vec((2, 3, 2 * N), 10)
    out = net(params, z)
    assert out.shape == z.shape
    np.testing.assert_allclose(jax.jit(net)(params, z), out, rtol=1e-13)
    np.testing.assert_allclose(jax.jit(type(net).__call__, static_argnums=0)(net, params, z), out,
                               rtol=1e-13)
    np.testing.assert_allclose(net(params, z[1, 2]), out[1, 2], rtol=1e-13)
    check_derivatives(lambda z, params: net(params, z), z, params)


def check_derivatives(f, z, params) -> None:
    """jvp against a central difference, and grad against jvp (in z and in the parameters)."""
    loss = lambda z, params: jnp.sum(jnp.sin(f(z, params)))
    dz, dparams = vec(z.shape, 11), randomize(params, 12)
    eps = 1e-6
    shifted = lambda t: loss(z + t * dz, jax.tree.map(lambda x, d: x + t * d, params, dparams))
    fd = (shifted(eps) - shifted(-eps)) / (2 * eps)
    _, tangent = jax.jvp(loss, (z, params), (dz, dparams))
    np.testing.assert_allclose(tangent, fd, rtol=1e-6, atol=1e-8)
    gz, gparams = jax.grad(loss, argnums=(0, 1))(z, params)
    inner = jnp.sum(gz * dz) + sum(jnp.sum(g * d) for g, d in
                                   zip(jax.tree.leaves(gparams), jax.tree.leaves(dparams)))
    np.testing.assert_allclose(inner, tangent, rtol=1e-12)


@pytest.mark.parametrize("name", LAYERS)
def test_layer_float32(name):
    f, params = layer_args(name, jnp.float32)
    z = vec((3, 2 * N), 1, jnp.float32)
    out = f(z, *params)
    assert out.dtype == jnp.float32 and out.shape == z.shape
    ref = f(z.astype(jnp.float64), *jax.tree.map(lambda x: x.astype(jnp.float64), params))
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", NETWORKS)
def test_network_float32(name):
    net = NETWORKS[name]
    params = net.init(jax.random.PRNGKey(0))
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(params))
    out = jax.jit(net)(params, vec((5, 2 * N), 1, jnp.float32))
    assert out.dtype == jnp.float32 and bool(jnp.isfinite(out).all())


def test_layer_errors():
    z, s = vec((2 * N,), 0), sym(N, 1)
    with pytest.raises(TypeError, match=r"linear_q: `s` must be a rules\.Symmetric"):
        gnn.linear_q(z, s.dense())
    with pytest.raises(ValueError, match=r"linear_p: `s` must be a rules\.Symmetric with n = 2"):
        gnn.linear_p(vec((4,), 0), s)
    with pytest.raises(ValueError, match=r"linear_q: `bias` must have shape \(6,\)"):
        gnn.linear_q(z, s, vec((N,), 0))
    with pytest.raises(ValueError, match=r"activation_q: `z` must have shape \(\.\.\., 2n\)"):
        gnn.activation_q(vec((5,), 0), vec((2,), 0))
    with pytest.raises(TypeError, match=r"activation_p: `z` must have dtype float32, float64"):
        gnn.activation_p(jnp.ones(6, jnp.int32), vec((N,), 0))
    with pytest.raises(ValueError, match=r"activation_p: `scale` must have shape \(3,\)"):
        gnn.activation_p(z, vec((4,), 0))
    with pytest.raises(ValueError, match=r"gradient_q: `weight` must have shape \(h, 3\)"):
        gnn.gradient_q(z, vec((5, 2), 0), vec((5,), 0), vec((5,), 0))
    with pytest.raises(ValueError, match=r"gradient_p: `bias` must have shape \(5,\)"):
        gnn.gradient_p(z, vec((5, N), 0), vec((5,), 0), vec((4,), 0))
    with pytest.raises(TypeError, match=r"gradient_p: `weight` must be a JAX or NumPy array"):
        gnn.gradient_p(z, [[1.0]], vec((1,), 0), vec((1,), 0))


def test_network_errors():
    with pytest.raises(ValueError, match=r"LASympNet: `dim` .* must be even"):
        gnn.LASympNet(3)
    with pytest.raises(ValueError, match=r"LASympNet: `depth` must be at most 5"):
        gnn.LASympNet(4, depth=6)
    with pytest.raises(TypeError, match=r"LASympNet: `init_upper_linear` must be True or False"):
        gnn.LASympNet(4, init_upper_linear=1)
    with pytest.raises(ValueError, match=r"GSympNet: `upscaling_dimension` must be even"):
        gnn.GSympNet(4, upscaling_dimension=5)
    with pytest.raises(ValueError, match=r"GSympNet: `n_layers` must be ≥ 1"):
        gnn.GSympNet(4, n_layers=0)
    with pytest.raises(TypeError, match=r"GSympNet: `activation` must be a callable"):
        gnn.GSympNet(4, activation="tanh")
    with pytest.raises(TypeError, match=r"GSympNet.init: `dtype` must be float32 or float64"):
        gnn.GSympNet(4).init(jax.random.PRNGKey(0), jnp.int32)
    net = gnn.GSympNet(4)
    params = net.init(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"GSympNet.__call__: `z` must have shape \(\.\.\., 4\)"):
        net(params, jnp.ones(6, jnp.float32))
    with pytest.raises(ValueError, match=r"GSympNet.__call__: `params` must hold 2 layers"):
        net(params[:1], jnp.ones(4, jnp.float32))
    with pytest.raises(ValueError, match=r"LASympNet.__call__: `z` must have shape \(\.\.\., 4\)"):
        la = gnn.LASympNet(4)
        la(la.init(jax.random.PRNGKey(0)), jnp.ones((2, 2), jnp.float32))
    params = la.init(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"LASympNet.__call__: `params\['linear'\]\[1\]` must "
                                         r"be a rules.Symmetric stack of shape \(5, 2, 2\)"):
        la({**params, "linear": (params["linear"][0], params["linear"][1].packed)},
           jnp.ones(4, jnp.float32))


def test_networks_hashable():
    assert gnn.GSympNet(4) == gnn.GSympNet(4, upscaling_dimension=8)
    assert hash(gnn.GSympNet(4)) == hash(gnn.GSympNet(4, upscaling_dimension=8))
    assert hash(gnn.LASympNet(4)) == hash(gnn.LASympNet(4, depth=5, nhidden=1))


@pytest.mark.parametrize("platform", ["cuda", "tpu"])
def test_export(platform):
    """Every layer and network lowers for GPU and TPU: forward, and the gradient of a loss."""
    cases = [(lambda z, params, f=f: f(z, *params), layer_args(name, jnp.float32)[1])
             for f, name in ((layer_args(name)[0], name) for name in LAYERS)]
    cases += [(lambda z, params, net=net: net(params, z), net.init(jax.random.PRNGKey(0)))
              for net in NETWORKS.values()]
    z = jnp.ones((8, 2 * N), jnp.float32)
    for f, params in cases:
        loss = lambda z, params, f=f: jnp.sum(f(z, params) ** 2)
        for fun in (f, jax.grad(loss, argnums=(0, 1))):
            jax.export.export(jax.jit(fun), platforms=[platform])(z, params)


def test_symplecticity_check_detects_a_dense_shear():
    """The check is not vacuous: a shear by a non-symmetric matrix fails it."""
    m = vec((N, N), 3)
    shear = lambda z: jnp.concatenate([z[:N] + z[N:] @ m, z[N:]])
    with pytest.raises(AssertionError):
        assert_symplectic(shear, vec((2 * N,), 7))
