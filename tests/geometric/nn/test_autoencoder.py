"""geometric/nn/_autoencoder.py: PSD by the cotangent lift, the symplectic inverse, the symplectic
autoencoder (a symplectic immersion as decoder, for every parameter value) and the reduced model
(Hamiltonian: J∇(H∘ψ), its energy conserved by a symplectic integrator)."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import geometric
from geometric.nn import (
    SymplecticAutoencoder,
    cotangent_lift,
    psd_decode,
    psd_encode,
    reduced_vector_field,
)
from tests.helpers import rand


def j(m):
    return jnp.block([[jnp.zeros((m, m)), jnp.eye(m)], [-jnp.eye(m), jnp.zeros((m, m))]])


def immersion_error(d):
    """‖DᵀJD - J‖ / ‖D‖² for a Jacobian D of shape (2N, 2n)."""
    big, small = d.shape[0] // 2, d.shape[1] // 2
    return float(jnp.max(jnp.abs(d.T @ j(big) @ d - j(small))) / jnp.max(jnp.abs(d)) ** 2)


def submersion_error(e):
    """‖EJEᵀ - J‖ / ‖E‖² for a Jacobian E of shape (2n, 2N)."""
    small, big = e.shape[0] // 2, e.shape[1] // 2
    return float(jnp.max(jnp.abs(e @ j(big) @ e.T - j(small))) / jnp.max(jnp.abs(e)) ** 2)


# ------------------------------------------------------------------------------- the linear wave

@functools.cache
def wave_snapshots(n=32, steps=200, dt=0.01, c=0.5):
    """Snapshots (q, p) of the discretised linear wave q_tt = c² q_xx on [0, 1] (Dirichlet), a
    Gaussian bump started at rest, integrated with Störmer–Verlet (H = ½|p|² + ½c² qᵀKq)."""
    dx = 1 / (n + 1)
    x = np.arange(1, n + 1) * dx
    k = (2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)) / dx ** 2
    q, p = np.exp(-((x - 0.5) / 0.1) ** 2), np.zeros(n)
    rows = []
    for _ in range(steps):
        rows.append(np.concatenate([q, p]))
        p = p - 0.5 * dt * c ** 2 * (k @ q)
        q = q + dt * p
        p = p - 0.5 * dt * c ** 2 * (k @ q)
    return np.stack(rows)


@pytest.mark.parametrize("reduced_dim", [2, 6, 10])
def test_cotangent_lift_is_on_the_manifold_and_optimal(reduced_dim):
    z = jnp.asarray(wave_snapshots())
    n = z.shape[1] // 2
    phi = cotangent_lift(z, reduced_dim)
    sp = geometric.SymplecticStiefel(n, reduced_dim // 2)
    assert phi.shape == sp.shape
    assert float(sp.manifold_error(phi)) < 1e-14
    np.testing.assert_allclose(phi.T @ phi, np.eye(reduced_dim), atol=1e-14)  # orthosymplectic
    # the symplectic inverse of an orthosymplectic basis is its transpose
    np.testing.assert_allclose(psd_encode(z, phi), z @ phi, atol=1e-13)
    projected = psd_decode(psd_encode(z, phi), phi)
    error = float(jnp.sum((z - projected) ** 2))
    sigma = np.linalg.svd(np.concatenate([z[:, :n], z[:, n:]], axis=0).T, compute_uv=False)
    np.testing.assert_allclose(error, np.sum(sigma[reduced_dim // 2:] ** 2), rtol=1e-9)
    # a cotangent lift of the positions' POD basis alone does no better
    v = np.linalg.svd(np.asarray(z[:, :n]).T)[0][:, :reduced_dim // 2]
    pod = jnp.asarray(np.block([[v, np.zeros_like(v)], [np.zeros_like(v), v]]))
    assert float(jnp.sum((z - psd_decode(psd_encode(z, pod), pod)) ** 2)) >= error * (1 - 1e-12)


def test_cotangent_lift_batches_and_differentiates():
    z = rand((2, 12, 8), 1)
    phi = cotangent_lift(z, 4)
    assert phi.shape == (2, 8, 4)
    for i in range(2):
        np.testing.assert_allclose(jnp.abs(phi[i]), jnp.abs(cotangent_lift(z[i], 4)), atol=1e-13)

    def projection_error(z):  # invariant under the singular vectors' signs
        phi = cotangent_lift(z, 2)
        return jnp.sum((z - (z @ phi) @ phi.T) ** 2)

    z0, direction = rand((12, 8), 2), rand((12, 8), 3)
    eps = 1e-6
    fd = (projection_error(z0 + eps * direction) - projection_error(z0 - eps * direction)) / (2 * eps)
    np.testing.assert_allclose(jnp.vdot(jax.grad(projection_error)(z0), direction), fd, rtol=1e-6)
    tangent = jax.jvp(projection_error, (z0,), (direction,))[1]
    np.testing.assert_allclose(tangent, fd, rtol=1e-6)


# ------------------------------------------------------------------------- PSD-like encode/decode

def spst_point(n, k, seed, dtype=jnp.float64):
    return geometric.SymplecticStiefel(n, k).random_point(jax.random.PRNGKey(seed), dtype)


def test_psd_encode_is_a_symplectic_left_inverse():
    phi = spst_point(5, 2, 0)  # not orthosymplectic: Φ⁺ ≠ Φᵀ
    assert float(jnp.max(jnp.abs(phi.T @ phi - jnp.eye(4)))) > 0.1
    xi = rand((3, 7, 4), 1)
    np.testing.assert_allclose(psd_encode(psd_decode(xi, phi), phi), xi, atol=1e-13)
    z0, xi0 = rand(10, 2), rand(4, 3)
    d = jax.jacfwd(lambda x: psd_decode(x, phi))(xi0)
    e = jax.jacfwd(lambda z: psd_encode(z, phi))(z0)
    np.testing.assert_allclose(e @ d, np.eye(4), atol=1e-13)
    assert immersion_error(d) < 1e-14
    assert submersion_error(e) < 1e-14
    np.testing.assert_allclose(e, -j(2) @ phi.T @ j(5), atol=1e-15)  # J_{2n}ᵀ Φᵀ J_{2N}


def pendulum_chain(z):
    """A nonlinear, non-quadratic Hamiltonian on R^{2N}: coupled pendulums."""
    n = z.shape[-1] // 2
    q, p = z[..., :n], z[..., n:]
    coupling = jnp.sum((q[..., 1:] - q[..., :-1]) ** 2, axis=-1)
    return 0.5 * jnp.sum(p ** 2, axis=-1) + jnp.sum(1 - jnp.cos(q), axis=-1) + 0.5 * coupling


def test_psd_reduced_model_is_the_symplectic_galerkin_projection():
    phi = spst_point(5, 2, 4)
    f = reduced_vector_field(pendulum_chain, lambda xi: psd_decode(xi, phi))
    xi = rand((3, 4), 5, scale=0.5)
    full = jax.vmap(lambda z: j(5) @ jax.grad(pendulum_chain)(z))(psd_decode(xi, phi))
    np.testing.assert_allclose(f(xi), psd_encode(full, phi), atol=1e-13)  # Φ⁺ X_H(Φξ)


# --------------------------------------------------------------------------- the autoencoder

CONFIGS = {
    "gml-defaults": {},
    "p-first": {"encoder_init_q": False, "decoder_init_q": False, "n_decoder_blocks": 2},
    "output-layers": {"n_decoder_output_layers": 2, "n_encoder_blocks": 3,
                      "n_decoder_layers": 2},
}


def scrambled(ae, params, seed):
    """Parameters far from the initialisation: general points of SpSt (Φ⁺ ≠ Φᵀ) and Gaussian
    gradient-layer weights, scales and biases."""
    keys = iter(jax.random.split(jax.random.PRNGKey(seed), 100))
    spec = ae.manifolds(params)

    def draw(layer, layer_spec):
        if "basis" in layer:
            return {"basis": layer_spec["basis"].random_point(next(keys), jnp.float64)}
        return {name: jax.random.normal(next(keys), a.shape, jnp.float64)
                for name, a in layer.items()}

    return {part: tuple(draw(layer, s) for layer, s in zip(params[part], spec[part]))
            for part in params}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_decoder_is_a_symplectic_immersion_and_encoder_a_submersion(config):
    ae = SymplecticAutoencoder(12, 4, sympnet_upscale=2, **CONFIGS[config])
    for seed, params in enumerate([ae.init(jax.random.PRNGKey(0), jnp.float64),
                                   scrambled(ae, ae.init(jax.random.PRNGKey(0)), 1)]):
        d = jax.jit(jax.jacfwd(ae.decode, argnums=1))(params, rand(4, 10 + seed))
        e = jax.jit(jax.jacfwd(ae.encode, argnums=1))(params, rand(12, 20 + seed))
        assert d.shape == (12, 4) and e.shape == (4, 12)
        assert immersion_error(d) < 1e-12
        assert submersion_error(e) < 1e-12


def test_architecture_follows_gml():
    ae = SymplecticAutoencoder(100, 10, n_encoder_blocks=2, n_encoder_layers=4,
                               n_decoder_blocks=3, n_decoder_layers=2)
    assert ae.decoder_dims == (10, 54, 100)  # GML's docs: 5:22:50 → (5, 27, 50), times two
    assert ae.encoder_dims == (100, 10)
    params = ae.init(jax.random.PRNGKey(0))
    encoder = params["encoder"]
    assert [set(layer) for layer in encoder] == [{"weight", "scale", "bias"}] * 4 + [{"basis"}]
    assert encoder[0]["weight"].shape == (250, 50)  # GradientLayerQ{100, 100}(500): K is 250×50
    assert encoder[4]["basis"].shape == (100, 10)
    shapes = [layer.get("basis", layer.get("weight")).shape for layer in params["decoder"]]
    assert shapes == [(25, 5), (25, 5), (54, 10), (135, 27), (135, 27), (100, 54)]
    for layer in jax.tree.leaves(params):
        assert layer.dtype == jnp.float32
    # init: GML's blockdiag(Φ, Φ) with orthonormal Φ; zero biases
    basis = encoder[4]["basis"]
    np.testing.assert_allclose(basis.T @ basis, np.eye(10), atol=1e-5)
    np.testing.assert_array_equal(basis[:50, 5:], 0.0)
    np.testing.assert_array_equal(basis[:50, :5], basis[50:, 5:])
    assert not np.any(encoder[0]["bias"])
    # the spec mirrors the parameters
    spec = ae.manifolds(params)
    assert jax.tree.structure(spec, is_leaf=lambda x: x is None) == jax.tree.structure(params)
    assert spec["decoder"][5]["basis"] == geometric.SymplecticStiefel(50, 27)
    assert hash(ae) == hash(SymplecticAutoencoder(100, 10, n_decoder_layers=2))


def test_gml_iterations_with_a_remainder():
    # GML: Vector(n : (N - n) ÷ (blocks - 1) : N) with the last entry replaced by N
    assert SymplecticAutoencoder(22, 4, n_decoder_blocks=3).decoder_dims == (4, 12, 22)
    # 2:1:7 has six entries: GML's sequence may be longer than the number of blocks asked for
    assert SymplecticAutoencoder(14, 4, n_decoder_blocks=4).decoder_dims == (4, 6, 8, 10, 12, 14)


def test_reduced_model_is_hamiltonian_and_conserves_its_energy():
    ae = SymplecticAutoencoder(12, 4, n_encoder_layers=2, sympnet_upscale=2)
    params = scrambled(ae, ae.init(jax.random.PRNGKey(0)), 3)
    decoder = functools.partial(ae.decode, params)
    f = reduced_vector_field(pendulum_chain, decoder)
    reduced_h = lambda xi: pendulum_chain(decoder(xi))
    xi0 = rand(4, 6, scale=0.3)
    # f = J∇H̃ = (Dψ)⁺ X_H(ψ), and Df = J·Hess H̃ (Jᵀ Df symmetric)
    d = jax.jacfwd(decoder)(xi0)
    galerkin = -j(2) @ d.T @ j(6) @ (j(6) @ jax.grad(pendulum_chain)(decoder(xi0)))
    np.testing.assert_allclose(f(xi0), galerkin, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(f(xi0), j(2) @ jax.grad(reduced_h)(xi0), rtol=1e-14)
    s = j(2).T @ jax.jacfwd(f)(xi0)
    np.testing.assert_allclose(s, s.T, atol=1e-10 * float(jnp.max(jnp.abs(s))))
    np.testing.assert_allclose(f(jnp.stack([xi0, 2 * xi0])), jnp.stack([f(xi0), f(2 * xi0)]),
                               rtol=1e-13)

    @jax.jit
    def midpoint_energies(xi, h):
        def step(xi, _):  # implicit midpoint, solved by fixed-point iteration
            def iterate(nxt, _):
                return xi + h * f(0.5 * (xi + nxt)), None
            nxt = jax.lax.scan(iterate, xi + h * f(xi), None, length=20)[0]
            return nxt, reduced_h(nxt)
        return jax.lax.scan(step, xi, None, length=100)[1] - reduced_h(xi)

    coarse = float(jnp.max(jnp.abs(midpoint_energies(xi0, 0.02)[:50])))  # up to t = 1
    fine = float(jnp.max(jnp.abs(midpoint_energies(xi0, 0.01))))
    assert fine < 1e-4 * float(jnp.abs(reduced_h(xi0)))
    assert 3.0 < coarse / fine < 5.0  # second order, no drift


def test_training_keeps_the_psd_weights_on_the_manifold():
    ae = SymplecticAutoencoder(12, 4, n_encoder_layers=2, sympnet_upscale=2)
    z = jnp.asarray(wave_snapshots(n=6, steps=64, dt=0.05))
    params = ae.init(jax.random.PRNGKey(1), jnp.float64)
    spec = ae.manifolds(params)
    opt = geometric.optim.riemannian_adam(1e-2, spec)
    loss = lambda p: jnp.mean(jnp.sum((ae(p, z) - z) ** 2, axis=-1))

    @jax.jit
    def step(params, state):
        value, grads = jax.value_and_grad(loss)(params)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, value

    state, losses = opt.init(params), []
    for _ in range(30):
        params, state, value = step(params, state)
        losses.append(float(value))
    assert losses[-1] < 0.5 * losses[0]
    for part in ("encoder", "decoder"):
        for layer, layer_spec in zip(params[part], spec[part]):
            if "basis" in layer:
                assert float(layer_spec["basis"].manifold_error(layer["basis"])) < 1e-13
    d = jax.jacfwd(functools.partial(ae.decode, params))(rand(4, 7))
    assert immersion_error(d) < 1e-12


def test_batch_axes_dtypes_and_transformations():
    ae = SymplecticAutoencoder(8, 2, n_encoder_layers=2, n_decoder_blocks=2, sympnet_upscale=2)
    params = ae.init(jax.random.PRNGKey(0), jnp.float64)
    z = rand((3, 5, 8), 1)
    out = ae(params, z)
    assert out.shape == z.shape
    np.testing.assert_allclose(out, jax.vmap(jax.vmap(lambda x: ae(params, x)))(z), rtol=1e-13)
    np.testing.assert_allclose(jax.jit(ae.__call__)(params, z), out, rtol=1e-13)
    # float32 parameters and inputs stay float32, close to the float64 result
    params32 = jax.tree.map(lambda a: a.astype(jnp.float32), params)
    out32 = ae(params32, z.astype(jnp.float32))
    assert out32.dtype == jnp.float32
    np.testing.assert_allclose(out32, out, atol=1e-4)
    # grad and jvp in the parameters, against a central difference
    loss = jax.jit(lambda p: jnp.sum(ae(p, z) ** 2))
    direction = jax.tree.map(lambda a: rand(a.shape, 9), params)
    eps = 1e-6
    shifted = lambda s: loss(jax.tree.map(lambda a, d: a + s * eps * d, params, direction))
    fd = (shifted(1) - shifted(-1)) / (2 * eps)
    grads = jax.grad(loss)(params)
    np.testing.assert_allclose(sum(jnp.vdot(g, d) for g, d in zip(
        jax.tree.leaves(grads), jax.tree.leaves(direction))), fd, rtol=1e-6)
    np.testing.assert_allclose(jax.jvp(loss, (params,), (direction,))[1], fd, rtol=1e-6)


@pytest.mark.parametrize("call, error, match", [
    (lambda: SymplecticAutoencoder(9, 4), ValueError, "`full_dim` must be even"),
    (lambda: SymplecticAutoencoder(8, 8), ValueError, "`reduced_dim` must be smaller"),
    (lambda: SymplecticAutoencoder(8, 2, n_decoder_blocks=5), ValueError,
     "`n_decoder_blocks` must be at most"),
    (lambda: SymplecticAutoencoder(8, 2, n_encoder_blocks=1), ValueError,
     "`n_encoder_blocks` must be ≥ 2"),
    (lambda: SymplecticAutoencoder(8, 2, n_encoder_layers=-1), ValueError,
     "`n_encoder_layers` must be ≥ 0"),
    (lambda: SymplecticAutoencoder(8.0, 2), TypeError, "`full_dim` must be an int"),
    (lambda: SymplecticAutoencoder(8, 2, encoder_init_q=1), TypeError,
     "`encoder_init_q` must be True or False"),
    (lambda: SymplecticAutoencoder(8, 2, activation="tanh"), TypeError,
     "`activation` must be callable"),
])
def test_constructor_errors(call, error, match):
    with pytest.raises(error, match="SymplecticAutoencoder: " + match):
        call()


def test_bad_inputs():
    ae = SymplecticAutoencoder(8, 2, n_decoder_blocks=2)
    params = ae.init(jax.random.PRNGKey(0))
    with pytest.raises(TypeError, match="SymplecticAutoencoder.init: `dtype` must be"):
        ae.init(jax.random.PRNGKey(0), jnp.int32)
    with pytest.raises(ValueError, match=r"SymplecticAutoencoder.encode: `z` must have shape "
                                         r"\(\.\.\., 8\); got \(3, 6\)"):
        ae.encode(params, jnp.zeros((3, 6)))
    with pytest.raises(TypeError, match="SymplecticAutoencoder.decode: `xi` must have dtype"):
        ae.decode(params, jnp.zeros(2, jnp.int32))
    phi = spst_point(3, 1, 0)
    with pytest.raises(ValueError, match=r"psd_encode: `z` must have shape \(\.\.\., 6\)"):
        psd_encode(jnp.zeros(4), phi)
    with pytest.raises(ValueError, match=r"psd_decode: `xi` must have shape \(\.\.\., 2\)"):
        psd_decode(jnp.zeros(4), phi)
    with pytest.raises(ValueError, match=r"psd_decode: `phi` must have shape \(2N, 2n\) with "
                                         r"even sides; got \(6, 3\)"):
        psd_decode(jnp.zeros(3), jnp.zeros((6, 3)))
    with pytest.raises(ValueError, match="psd_encode: `phi` must have shape"):
        psd_encode(jnp.zeros(6), jnp.zeros((2, 6, 2)))
    with pytest.raises(TypeError, match="cotangent_lift: `snapshots` must have dtype"):
        cotangent_lift(jnp.zeros((4, 6), jnp.int32), 2)
    with pytest.raises(ValueError, match="cotangent_lift: `snapshots` must have shape"):
        cotangent_lift(jnp.zeros((4, 5)), 2)
    with pytest.raises(ValueError, match="cotangent_lift: `reduced_dim` must be even"):
        cotangent_lift(jnp.zeros((4, 6)), 3)
    with pytest.raises(ValueError, match=r"cotangent_lift: `reduced_dim` must be at most "
                                         r"min\(2N, 4m\) = 4"):
        cotangent_lift(jnp.zeros((1, 6)), 6)
    f = reduced_vector_field(pendulum_chain, lambda xi: psd_decode(xi, phi))
    with pytest.raises(ValueError, match=r"reduced_vector_field: `xi` must have shape \(\.\.\., "
                                         r"2n\)"):
        f(jnp.zeros(3))


@pytest.mark.parametrize("platform", ["cuda", "tpu"])
def test_lowers_for_accelerators(platform):
    ae = SymplecticAutoencoder(8, 2, n_encoder_layers=2, n_decoder_blocks=2, sympnet_upscale=2)
    params = ae.init(jax.random.PRNGKey(0))
    spec = lambda shape: jax.ShapeDtypeStruct(shape, jnp.float32)
    param_specs = jax.tree.map(lambda a: spec(a.shape), params)

    def export(f, *args):
        return jax.export.export(jax.jit(f), platforms=[platform])(*args).out_avals

    assert export(ae.__call__, param_specs, spec((5, 8)))[0].shape == (5, 8)
    assert export(jax.grad(lambda p, z: jnp.sum(ae(p, z) ** 2)), param_specs, spec((5, 8)))
    assert export(lambda z: cotangent_lift(z, 2), spec((10, 8)))[0].shape == (8, 2)
    assert export(psd_encode, spec((5, 8)), spec((8, 2)))[0].shape == (5, 2)
    assert export(psd_decode, spec((5, 2)), spec((8, 2)))[0].shape == (5, 8)
    f = reduced_vector_field(pendulum_chain, functools.partial(ae.decode, params))
    assert export(f, spec((5, 2)))[0].shape == (5, 2)
