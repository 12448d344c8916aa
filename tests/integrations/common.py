"""The model every integration test trains, written once as plain JAX on a plain dict.

Each framework test builds the same model in its framework (an orthogonally constrained layer
``embed``, a volume-preserving feed-forward layer ``mix`` computed by a rule, a Euclidean ``head``),
trains it with a geometric optimizer, and compares it with :func:`train_plain` started from the
same values: the plain-dict path, where ``manifolds`` is an ordinary nested dict.

Parameters are float32 (the suite turns on x64), so the on-manifold bound is the float32 one.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

import geometric
import rules
from geometric import optim

D_IN, D_HIDDEN, D_OUT, BATCH = 8, 4, 2, 64
STEPS = 25
ON_MANIFOLD = 1e-5  # ‖WᵀW − I‖_F in float32

# The plain-dict layout: Linen and NNX store a dense kernel as (in, out), orthonormal columns.
STIEFEL = geometric.Stiefel(D_IN, D_HIDDEN)
# equinox (and PyTorch) store (out, in): orthonormal rows.
STIEFEL_ROWS = geometric.Stiefel(D_IN, D_HIDDEN, rows=True)
PLAIN_SPEC = {"embed": {"kernel": STIEFEL, "bias": None}, "mix": None, "head": None}
# The same, written once by path for every framework: the plain dict and Flax (``embed/kernel``,
# Linen with a ``params/`` prefix) and equinox (``embed/weight``, orthonormal rows). A model has
# one of the two names, so each pattern is optional (by_path refuses a pattern that decides no
# leaf unless told so).
SPEC = optim.by_path({r"embed/kernel$": STIEFEL, r"embed/weight$": STIEFEL_ROWS},
                     optional=[r"embed/kernel$", r"embed/weight$"])

OPTIMIZERS: dict[str, Callable[[object], optax.GradientTransformationExtraArgs]] = {
    "riemannian_sgd": lambda spec: optim.riemannian_sgd(0.05, spec, momentum=0.9),
    "riemannian_adam": lambda spec: optim.riemannian_adam(0.02, spec),
    "manifold_adam": lambda spec: optim.manifold_adam(0.02, spec),
}


def data() -> tuple[jax.Array, jax.Array]:
    """Inputs ``(BATCH, D_IN)`` and targets ``(BATCH, D_OUT)`` of a fixed random teacher, float32."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, D_IN))
    teacher = rng.standard_normal((D_IN, D_OUT)) / np.sqrt(D_IN)
    return jnp.asarray(x, jnp.float32), jnp.asarray(np.sin(x @ teacher), jnp.float32)


@jax.jit  # one compilation instead of a dozen eager ops
def init_plain(key: jax.Array) -> dict:
    """Plain-dict parameters, float32, the constrained kernel on the manifold."""
    k_embed, k_mix, k_head = jax.random.split(key, 3)
    n_packed = rules.StrictlyLower.packed_size(D_HIDDEN)
    return {
        "embed": {"kernel": STIEFEL.random_point(k_embed), "bias": jnp.zeros(D_HIDDEN, jnp.float32)},
        "mix": {"packed": 0.3 * jax.random.normal(k_mix, (n_packed,), jnp.float32),
                "bias": jnp.zeros(D_HIDDEN, jnp.float32)},
        "head": {"kernel": 0.5 * jax.random.normal(k_head, (D_HIDDEN, D_OUT), jnp.float32),
                 "bias": jnp.zeros(D_OUT, jnp.float32)},
    }


def mix(h: jax.Array, packed: jax.Array, bias: jax.Array) -> jax.Array:
    """The volume-preserving layer ``h + tanh(h Lᵀ + c)``, ``L`` strictly lower (a rule)."""
    return rules.volume_preserving_feedforward(h, rules.StrictlyLower(packed, D_HIDDEN), bias)


def start() -> dict:
    """The start of every run: the model's parameters as a plain dict."""
    return init_plain(jax.random.PRNGKey(0))


def forward_plain(params: dict, x: jax.Array) -> jax.Array:
    h = x @ params["embed"]["kernel"] + params["embed"]["bias"][None, :]
    h = mix(h, params["mix"]["packed"], params["mix"]["bias"])
    return h @ params["head"]["kernel"] + params["head"]["bias"][None, :]


def mse(prediction: jax.Array, target: jax.Array) -> jax.Array:
    return jnp.mean((prediction - target) ** 2)


def train_plain(optimizer: optax.GradientTransformation, params: dict, steps: int = STEPS
                ) -> tuple[dict, list[float]]:
    """The reference run: ``steps`` jitted optax steps on the plain dict; final params and losses."""
    x, y = data()
    state = optimizer.init(params)

    @jax.jit
    def step(params, state):
        loss, grads = jax.value_and_grad(lambda p: mse(forward_plain(p, x), y))(params)
        updates, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    losses = []
    for _ in range(steps):
        params, state, loss = step(params, state)
        losses.append(float(loss))
    return params, losses


@functools.cache
def plain_run(name: str) -> tuple[dict, list[float]]:
    """:func:`train_plain` with ``OPTIMIZERS[name]`` and the dict spec from :func:`start`, once."""
    return train_plain(OPTIMIZERS[name](PLAIN_SPEC), start())


def orthonormality_error(w: jax.Array, *, rows: bool = False) -> float:
    """``‖WᵀW − I‖_F`` (``‖WWᵀ − I‖_F`` with ``rows``), in float64 so it measures ``w`` alone."""
    w = np.asarray(w, np.float64)
    gram = w @ w.T if rows else w.T @ w
    return float(np.linalg.norm(gram - np.eye(gram.shape[0])))


def assert_trained(losses: list[float], *kernels: jax.Array, rows: bool = False) -> None:
    """Loss went down (to under half, and the last below every one of the first five), on manifold."""
    assert losses[-1] < 0.5 * losses[0] and losses[-1] < min(losses[:5]), losses
    for w in kernels:
        assert np.asarray(w).dtype == np.float32
        assert orthonormality_error(w, rows=rows) <= ON_MANIFOLD


def assert_same(tree_a, tree_b, *, tol: float = 0.0) -> None:
    """Two runs agree leaf by leaf: bit for bit, or to ``tol`` where the frameworks order the
    arithmetic differently."""
    a, b = jax.tree.leaves(tree_a), jax.tree.leaves(tree_b)
    assert len(a) == len(b)
    for u, v in zip(a, b):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=tol, atol=tol)
