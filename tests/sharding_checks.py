"""Multi-device checks, run in a subprocess with 8 simulated CPU devices by tests/test_sharding.py.

``XLA_FLAGS=--xla_force_host_platform_device_count=8`` must be set before JAX starts, so these
checks cannot run in the test process itself. Each check returns the largest relative difference
between the multi-device and the single-device result; the script prints them as JSON.
"""
from __future__ import annotations

import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import geometric
import rules

BATCH = 16  # divisible by 8 devices


def rand(shape, seed, dtype=jnp.float32):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def rel(a, b) -> float:
    worst = 0.0
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        worst = max(worst, float(np.max(np.abs(x - y)) / max(np.max(np.abs(y)), 1e-30)))
    return worst


def rule_cases():
    """(name, function of batch-leading arrays, arguments, which arguments carry the batch)."""
    eye4 = jnp.broadcast_to(jnp.eye(4, dtype=jnp.float32), (BATCH, 4, 4))
    eye6 = jnp.broadcast_to(jnp.eye(6, dtype=jnp.float32), (BATCH, 6, 6))
    w = rand((3, 3), 9)
    lower = rules.StrictlyLower(rand((3,), 10), 3)
    return [
        ("inv small", rules.inv, (rand((BATCH, 4, 4), 1) + 4 * eye4,), (True,)),
        ("inv", rules.inv, (rand((BATCH, 6, 6), 2) + 5 * eye6,), (True,)),
        ("qr", lambda a: tuple(rules.qr(a)), (rand((BATCH, 6, 4), 3),), (True,)),
        ("qr wide", lambda a: tuple(rules.qr(a)), (rand((BATCH, 3, 5), 4),), (True,)),
        ("lq", lambda a: tuple(rules.lq(a)), (rand((BATCH, 3, 5), 5),), (True,)),
        ("tensor_tensor_mul", rules.tensor_tensor_mul, (rand((BATCH, 3, 4), 6), rand((BATCH, 4, 2), 7)),
         (True, True)),
        ("tensor_mat_mul (shared weight)", rules.tensor_mat_mul, (rand((BATCH, 5, 3), 8), w),
         (True, False)),
        ("cayley", rules.cayley, (rand((BATCH, 4, 4), 11) - jnp.swapaxes(rand((BATCH, 4, 4), 11), 1, 2),),
         (True,)),
        ("attention skew", rules.volume_preserving_attention, (rand((BATCH, 3, 3), 12), w), (True, False)),
        ("attention arbitrary",
         lambda x, a: rules.volume_preserving_attention(x, a, weighting="arbitrary"),
         (rand((BATCH, 5, 3), 13), w), (True, False)),
        ("feedforward", lambda x, p: rules.volume_preserving_feedforward(x, rules.StrictlyLower(p, 3)),
         (rand((BATCH, 3, 3), 14), lower.packed), (True, False)),
    ]


def loss_of(fn):
    def loss(*args):
        return sum(jnp.sum(jnp.sin(y)) for y in jax.tree_util.tree_leaves(fn(*args)))
    return loss


def check_named_sharding(mesh):
    """(i) each rule, its gradient and its jvp under jit, batch sharded over the mesh, vs one device."""
    results = {}
    for name, fn, args, batched in rule_cases():
        shardings = [NamedSharding(mesh, P("batch") if b else P()) for b in batched]
        tangents = tuple(rand(a.shape, 100 + i) for i, a in enumerate(args))
        grad = jax.grad(loss_of(fn), argnums=tuple(range(len(args))))

        def all_modes(args, tangents):
            return fn(*args), grad(*args), jax.jvp(fn, args, tangents)[1]

        ref = jax.jit(all_modes)(args, tangents)
        sharded = tuple(jax.device_put(a, s) for a, s in zip(args, shardings))
        sharded_tangents = tuple(jax.device_put(t, s) for t, s in zip(tangents, shardings))
        results[f"named sharding: {name}"] = rel(jax.jit(all_modes)(sharded, sharded_tangents), ref)
    return results


def check_shard_map(mesh):
    """(ii) each rule, its gradient and its jvp inside shard_map over the batch axis."""
    results = {}
    for name, fn, args, batched in rule_cases():
        specs = tuple(P("batch") if b else P() for b in batched)
        tangents = tuple(rand(a.shape, 100 + i) for i, a in enumerate(args))
        grad = jax.grad(loss_of(fn), argnums=tuple(range(len(args))))

        def per_device(args, tangents):
            # A replicated (shared) operand's cotangent comes back already summed over devices;
            # its tangent is replicated, and each device pushes it through its own batch slice.
            return fn(*args), grad(*args), jax.jvp(fn, args, tangents)[1]

        out_batched = jax.tree_util.tree_map(lambda _: P("batch"), jax.eval_shape(fn, *args))
        mapped = jax.jit(jax.shard_map(per_device, mesh=mesh, in_specs=(specs, specs),
                                       out_specs=(out_batched, specs, out_batched)))
        ref = jax.jit(lambda a, t: (fn(*a), grad(*a), jax.jvp(fn, a, t)[1]))(args, tangents)
        results[f"shard_map: {name}"] = rel(mapped(args, tangents), ref)
    return results


def check_stiefel_heads(mesh):
    """(iv) manifold optimizers on a stack of 8 Stiefel heads sharded over the devices."""
    results = {}
    heads, n, p = 8, 12, 3
    st = geometric.Stiefel(n, p)
    w0 = jnp.stack([st.random_point(jax.random.PRNGKey(i), dtype=jnp.float32) for i in range(heads)])
    target = rand((heads, n, p), 20)

    # Procrustes-type loss: every gradient coordinate is O(1). (A Rayleigh quotient would make
    # YᵀG symmetric, so Adam would normalise rounding noise in skew(YᵀG) and amplify any change
    # of summation order between the sharded and the single-device program.)
    def loss(w):
        return jnp.sum((w - target) ** 2)

    for name, opt in [("riemannian_adam", geometric.optim.riemannian_adam(1e-2, st)),
                      ("manifold_adam", geometric.optim.manifold_adam(1e-2, st)),
                      ("riemannian_sgd", geometric.optim.riemannian_sgd(1e-2, st, momentum=0.9))]:
        @jax.jit
        def run(w):
            def step(carry, _):
                w, state = carry
                updates, state = opt.update(jax.grad(loss)(w), state, w)
                return (optax.apply_updates(w, updates), state), loss(w)
            (w, _), losses = jax.lax.scan(step, (w, opt.init(w)), length=20)
            return w, losses

        ref = run(w0)
        out = run(jax.device_put(w0, NamedSharding(mesh, P("batch"))))
        results[f"stiefel heads: {name}"] = rel(out, ref)
    return results


def check_data_parallel(mesh):
    """(iii) the rigid-body VPT training step, batch sharded over 8 devices, params replicated."""
    from examples.rigid_body import models, train

    model = models.make_model("vpt")
    params = model.init(np.random.default_rng(0), jnp.float32)
    optimizer, _ = train.make_optimizer(1e-2, 1e-6, 20)
    step = train.make_train_step(model, optimizer)
    inputs = rand((20, 1024, 3, 3), 30)
    targets = inputs + 0.1 * rand((20, 1024, 3, 3), 31)

    def trajectory(batch_sharding, replicated):
        p, state = jax.device_put((params, optimizer.init(params)), replicated)
        losses = []
        for k in range(20):
            batch = jax.device_put((inputs[k], targets[k]), batch_sharding)
            p, state, loss = step(p, state, batch)
            losses.append(loss)
        return p, jnp.stack(losses)

    one = jax.devices()[0]
    ref = trajectory(one, one)
    out = trajectory(NamedSharding(mesh, P("batch")), NamedSharding(mesh, P()))
    return {"data parallel: vpt loss trajectory": rel(out[1], ref[1]),
            "data parallel: vpt parameters after 20 steps": rel(out[0], ref[0])}


def main() -> None:
    assert len(jax.devices()) == 8, f"expected 8 simulated devices, got {jax.devices()}"
    mesh = Mesh(np.array(jax.devices()), ("batch",))
    results = {}
    checks = {"named": check_named_sharding, "shard_map": check_shard_map,
              "heads": check_stiefel_heads, "training": check_data_parallel}
    for check in sys.argv[1:] or list(checks):
        results.update(checks[check](mesh))
    print("RESULTS " + json.dumps(results))


if __name__ == "__main__":
    main()
