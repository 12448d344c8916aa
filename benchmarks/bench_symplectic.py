"""Training steps of the symplectic networks against the same networks written with plain ``jnp``.

One step is the loss (mean squared error), its gradient and an ``optax.adam`` update, jitted. The
plain side is what a user would write without the library: the same layers with ``jnp`` ops, the
symmetric weights unpacked from the same packed vectors with ``.at[].set``, differentiated by JAX,
updating the same parameter vectors. Run alone with ``python -m benchmarks --only symplectic`` or
``python -m benchmarks.bench_symplectic``.
"""
from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

import geometric.nn as gnn
import rules

from ._harness import Table, compile_program, fmt_ratio, fmt_time, interleaved

# ------------------------------------------------------------------------------------------------
# The networks by hand: packed vectors in, plain jnp, JAX's autodiff.


def _plain_params(params):
    """The same parameters with every rules.Symmetric replaced by its packed vector."""
    return jax.tree.map(lambda x: x.packed if isinstance(x, rules.Symmetric) else x, params,
                        is_leaf=lambda x: isinstance(x, rules.Symmetric))


def _symmetric(packed: jax.Array, n: int) -> jax.Array:
    rows, cols = np.tril_indices(n)
    return jnp.zeros((n, n), packed.dtype).at[rows, cols].set(packed).at[cols, rows].set(packed)


def _shear(z: jax.Array, step: Callable[[jax.Array], jax.Array], upper: bool) -> jax.Array:
    n = z.shape[-1] // 2
    q, p = z[..., :n], z[..., n:]
    return jnp.concatenate([q + step(p), p] if upper else [q, p + step(q)], axis=-1)


def plain_gsympnet(net: gnn.GSympNet, params, z: jax.Array) -> jax.Array:
    for i, layer in enumerate(params):
        def step(x, layer=layer):
            return (layer["scale"] * net.activation(x @ layer["weight"].T + layer["bias"])
                    ) @ layer["weight"]
        z = _shear(z, step, (i % 2 == 0) == net.init_upper)
    return z


def plain_lasympnet(net: gnn.LASympNet, params, z: jax.Array) -> jax.Array:
    n = net.dim // 2
    for i, (stack, bias) in enumerate(zip(params["linear"], params["bias"])):
        for j, packed in enumerate(stack):
            s = _symmetric(packed, n)
            z = _shear(z, lambda x, s=s: x @ s, (j % 2 == 0) == net.init_upper_linear)
        z = z + bias
        if i < net.nhidden:
            for k, scale in enumerate(params["activation"][i]):
                z = _shear(z, lambda x, a=scale: a * net.activation(x),
                           (k == 0) == net.init_upper_activation)
    return z


def plain_transformer(net: gnn.LinearSymplecticTransformer, params, z: jax.Array) -> jax.Array:
    t = net.seq_length
    sympnet = net.sympnet
    for unit in params:
        a_q, a_p = _symmetric(unit["attention_q"], t), _symmetric(unit["attention_p"], t)
        z = plain_gsympnet(sympnet, unit["sympnet_q"], _shear(z, lambda x, a=a_q: a @ x, True))
        z = plain_gsympnet(sympnet, unit["sympnet_p"], _shear(z, lambda x, a=a_p: a @ x, False))
    return z


def _j(z: jax.Array) -> jax.Array:
    """``J z`` for row vectors ``z = (q, p)``: ``(p, −q)``."""
    m = z.shape[-1] // 2
    return jnp.concatenate([z[..., m:], -z[..., :m]], axis=-1)


def plain_autoencoder(net: gnn.SymplecticAutoencoder, params, z: jax.Array) -> jax.Array:
    """Gradient layers alternating from q (``*_init_q``) within each block; a PSD-like layer
    encodes with the symplectic inverse ``J_{2n}ᵀΦᵀJ_{2N}`` and decodes with ``Φ``."""
    for part, init_q in (("encoder", net.encoder_init_q), ("decoder", net.decoder_init_q)):
        i = 0
        for layer in params[part]:
            if "basis" in layer:
                phi = layer["basis"]
                z = -_j(_j(z) @ phi) if part == "encoder" else z @ phi.T
                i = 0
                continue
            def step(x, layer=layer):
                return (layer["scale"] * net.activation(x @ layer["weight"].T + layer["bias"])
                        ) @ layer["weight"]
            z = _shear(z, step, (i % 2 == 0) == init_q)
            i += 1
    return z


# ------------------------------------------------------------------------------------------------


def _train_step(apply: Callable) -> Callable:
    optimizer = optax.adam(1e-3)

    def step(params, state, x, y):
        loss, grads = jax.value_and_grad(lambda p: jnp.mean((apply(p, x) - y) ** 2))(params)
        updates, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    return step, optimizer


def _cases(quick: bool):
    """(label, size, network, plain function, input shape)."""
    batch = 512 if quick else 4096
    return [
        ("LASympNet", "dim 2, depth 5", gnn.LASympNet(2), plain_lasympnet, (batch, 2)),
        ("LASympNet", "dim 20, depth 5, nhidden 2", gnn.LASympNet(20, nhidden=2),
         plain_lasympnet, (batch, 20)),
        ("GSympNet", "dim 2, 4 layers, width 2", gnn.GSympNet(2, n_layers=4), plain_gsympnet,
         (batch, 2)),
        ("GSympNet", "dim 20, 4 layers, width 20", gnn.GSympNet(20, n_layers=4), plain_gsympnet,
         (batch, 20)),
        ("LinearSymplecticTransformer", "dim 4, T 3, L 1",
         gnn.LinearSymplecticTransformer(4, 3), plain_transformer, (batch // 4, 3, 4)),
        ("LinearSymplecticTransformer", "dim 20, T 8, L 2",
         gnn.LinearSymplecticTransformer(20, 8, L=2), plain_transformer, (batch // 4, 8, 20)),
        ("SymplecticAutoencoder", "2N 64 → 2n 4, GML's defaults",
         gnn.SymplecticAutoencoder(64, 4), plain_autoencoder, (batch // 4, 64)),
        ("SymplecticAutoencoder", "2N 256 → 2n 6, GML's defaults",
         gnn.SymplecticAutoencoder(256, 6), plain_autoencoder, (batch // 8, 256)),
    ]


def _row(net, plain, shape, dtype, budget: float) -> list[str]:
    params = net.init(jax.random.PRNGKey(0), dtype)
    packed = _plain_params(params)
    x = jax.random.normal(jax.random.PRNGKey(1), shape, dtype)
    y = x + 0.1 * jax.random.normal(jax.random.PRNGKey(2), shape, dtype)
    ours, optimizer = _train_step(net)
    theirs, _ = _train_step(lambda p, z: plain(net, p, z))
    state, plain_state = optimizer.init(params), optimizer.init(packed)
    # A benchmark of a wrong network is worthless: the two must compute the same thing.
    difference = float(jnp.max(jnp.abs(net(params, x) - plain(net, packed, x))))
    tol = 1e-4 if dtype == jnp.float32 else 1e-11
    if not difference < tol:
        raise AssertionError(f"{type(net).__name__}: ours and the plain network differ by "
                             f"{difference:.2g}.")
    args = [(params, state, x, y), (packed, plain_state, x, y)]
    (c_ours, p_ours), (c_plain, p_plain) = (compile_program(ours, *args[0]),
                                            compile_program(theirs, *args[1]))
    (t_ours, t_plain), ratio = interleaved([jax.jit(ours), jax.jit(theirs)], args, budget=budget)
    return [fmt_time(t_ours), fmt_time(t_plain), fmt_ratio(ratio, p_ours == p_plain),
            f"{c_ours:.2f} s / {c_plain:.2f} s"]


def tables(quick: bool) -> list[Table]:
    budget = 0.3 if quick else 1.5
    table = Table("Symplectic networks: one training step (loss, gradient, Adam) against the "
                  "same network in plain `jnp`",
                  ["network", "size", "batch", "dtype", "ours", "plain jnp + JAX autodiff",
                   "ratio ours/plain", "compile ours / plain"])
    for label, size, net, plain, shape in _cases(quick):
        for dtype in (jnp.float32, jnp.float64):
            table.add([label, size, str(shape[0]), jnp.dtype(dtype).name,
                       *_row(net, plain, shape, dtype, budget)])
    table.notes += [
        "The plain side unpacks each symmetric weight from the same packed vector with "
        "`.at[rows, cols].set` (what a user writes without `rules.Symmetric`) and is "
        "differentiated by JAX; both update the same parameters with `optax.adam`.",
        "A ratio marked (=) compares two identical XLA programs. Median of per-round ratios, "
        "sides alternated; compare with the noise floor of this run (JAX's program timed "
        "against itself): a ratio inside it is parity.",
    ]
    return [table]


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    for t in tables(quick=False):
        print(t.markdown())
