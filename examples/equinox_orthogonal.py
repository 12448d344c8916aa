"""equinox: an orthogonally constrained layer and a volume-preserving layer, trained and checkpointed.

The model is ``x ↦ head(mix(embed(x)))``:

- ``embed``: ``eqx.nn.Linear(16, 8)``, whose weight is stored ``(out, in) = (8, 16)``, with
  orthonormal rows: ``geometric.Stiefel(16, 8, rows=True)``, no reshaping;
- ``mix``: the volume-preserving feed-forward layer ``h + tanh(h Lᵀ + c)`` of Brantner et al., a
  module holding a ``rules.StrictlyLower`` and calling ``rules.volume_preserving_feedforward``;
- ``head``: an ordinary ``eqx.nn.Linear(8, 1)``.

It fits a fixed random teacher of the same form on 256 samples (full batch). The manifold spec is
a mirror of the model: ``jax.tree.map`` puts ``geometric.optim.EUCLIDEAN`` at every array and
``eqx.tree_at`` the Stiefel manifold at the constrained weight. Training is the usual equinox loop
(``filter_jit``, ``filter_value_and_grad``, ``apply_updates``). Orbax's ``CheckpointManager`` keeps
the last two checkpoints of the model's arrays and the optimizer state; ``--resume`` continues
from the newest one, bit-for-bit the uninterrupted run. A checkpoint that does not read
(truncated, corrupt, or saved with another ``--optimizer``) is named in a warning and the one
before it is used; if none reads, the program stops with one line (exit status 2), as the other
examples do (``examples/_training.py``).

Examples::

    python -m examples.equinox_orthogonal --steps 300
    python -m examples.equinox_orthogonal --steps 600 --resume      # 300 more steps
"""
from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

import geometric
import rules
from examples import _training

D_IN, D_HIDDEN, N_SAMPLES = 16, 8, 256
OPTIMIZERS = {
    "riemannian_adam": geometric.optim.riemannian_adam,
    "global_tangent_adam": geometric.optim.global_tangent_adam,
    "riemannian_sgd": lambda lr, spec: geometric.optim.riemannian_sgd(lr, spec, momentum=0.9),
}
STIEFEL = geometric.Stiefel(D_IN, D_HIDDEN, rows=True)  # (8, 16) weights, W Wᵀ = I


class VolumePreserving(eqx.Module):
    """``h + tanh(h Lᵀ + c)`` with ``L`` strictly lower triangular: Jacobian determinant 1."""

    weight: rules.StrictlyLower
    bias: jax.Array

    def __init__(self, d: int, *, key: jax.Array):
        self.weight = rules.StrictlyLower(0.3 * jax.random.normal(key, (d * (d - 1) // 2,),
                                                                  jnp.float32), d)
        self.bias = jnp.zeros(d, jnp.float32)

    def __call__(self, h: jax.Array) -> jax.Array:
        return rules.volume_preserving_feedforward(h, self.weight, self.bias)


class Model(eqx.Module):
    embed: eqx.nn.Linear
    mix: VolumePreserving
    head: eqx.nn.Linear

    def __init__(self, key: jax.Array):
        k_embed, k_mix, k_head = jax.random.split(key, 3)
        embed = eqx.nn.Linear(D_IN, D_HIDDEN, key=k_embed)
        # equinox's default weight is off the manifold: start on it.
        self.embed = eqx.tree_at(lambda l: l.weight, embed, STIEFEL.random_point(k_embed))
        self.mix = VolumePreserving(D_HIDDEN, key=k_mix)
        self.head = eqx.nn.Linear(D_HIDDEN, 1, key=k_head)

    def __call__(self, x: jax.Array) -> jax.Array:  # x: (batch, D_IN)
        h = self.mix(jax.vmap(self.embed)(x))
        return jax.vmap(self.head)(h)[:, 0]



def manifolds(model: Model) -> Model:
    """The spec: a model of the same type, EUCLIDEAN at every array but the constrained weight.

    (EUCLIDEAN rather than None: in equinox None is an empty subtree, which ``eqx.tree_at`` cannot
    replace.)
    """
    spec = jax.tree.map(lambda _: geometric.optim.EUCLIDEAN, eqx.filter(model, eqx.is_array))
    return eqx.tree_at(lambda m: m.embed.weight, spec, STIEFEL)


def make_data(seed: int) -> tuple[jax.Array, jax.Array]:
    """Inputs ``(256, 16)`` and the outputs of a random teacher of the model's form."""
    teacher = Model(jax.random.PRNGKey(seed + 1))
    x = jax.random.normal(jax.random.PRNGKey(seed), (N_SAMPLES, D_IN), jnp.float32)
    return x, teacher(x)


def orthonormality_error(model: Model) -> float:
    """``‖WWᵀ − I‖_F`` of the constrained weight (orthonormal rows)."""
    w = model.embed.weight
    return float(jnp.linalg.norm(w @ w.T - jnp.eye(D_HIDDEN)))


def make_train_step(optimizer: optax.GradientTransformation):
    @eqx.filter_jit
    def train_step(model: Model, opt_state: optax.OptState, x: jax.Array, y: jax.Array):
        loss, grads = eqx.filter_value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
        params = eqx.filter(model, eqx.is_array)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return eqx.apply_updates(model, updates), opt_state, loss  # retracted onto the manifold

    return train_step


# -- command line --------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = _training.ArgumentParser(prog="python -m examples.equinox_orthogonal",
                                      description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=_training.positive_int, default=300, help="optimizer steps in all")
    parser.add_argument("--lr", type=_training.positive_float, default=1e-2, help="learning rate")
    parser.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default="riemannian_adam",
                        help="geometric optimizer")
    parser.add_argument("--seed", type=_training.nonnegative_int, default=0, help="data and initialisation")
    parser.add_argument("--checkpoint-dir", type=_training.directory, default="runs/equinox_orthogonal",
                        help="where Orbax keeps the last two checkpoints")
    parser.add_argument("--checkpoint-every", type=_training.positive_int, default=100,
                        help="save every N steps (and at the last one)")
    parser.add_argument("--log-every", type=_training.positive_int, default=50, help="print every N steps")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest readable checkpoint in --checkpoint-dir (none: start at step 0)")
    return parser


# -- training ------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train; returns the final step, the losses of the steps run, ``‖WWᵀ − I‖`` and the model."""
    parser = build_parser()
    args = parser.parse_args(argv)
    directory = _training.make_directory(parser, args.checkpoint_dir.absolute(), "--checkpoint-dir")

    x, y = make_data(args.seed)
    model = Model(jax.random.PRNGKey(args.seed))
    optimizer = OPTIMIZERS[args.optimizer](args.lr, manifolds(model))
    opt_state = optimizer.init(eqx.filter(model, eqx.is_array))
    train_step = make_train_step(optimizer)

    # An orbax.checkpoint.CheckpointManager; _training restores (ocp.args.StandardRestore) the newest
    # checkpoint that reads and saves (ocp.args.StandardSave) over one that did not.
    with _training.orbax_manager(directory, max_to_keep=2) as manager:
        newest = manager.latest_step()
        if newest is not None and not args.resume:
            parser.error(f"argument --checkpoint-dir: {str(args.checkpoint_dir)!r} holds checkpoints "
                         f"(the newest at step {newest}): pass --resume, or choose another directory")
        start = 0
        if args.resume:
            # Restore into the fresh objects' structure: a checkpoint records arrays, not types.
            params, static = eqx.partition(model, eqx.is_array)
            found = _training.resume_orbax(manager, {"model": params, "opt_state": opt_state}, parser)
            if found is not None:
                start, restored = found
                model, opt_state = eqx.combine(restored["model"], static), restored["opt_state"]
                print(f"resumed from step {start} in {args.checkpoint_dir}")

        losses: list[float] = []
        for step in range(start + 1, args.steps + 1):
            model, opt_state, loss_array = train_step(model, opt_state, x, y)
            loss = float(loss_array)
            losses.append(loss)
            if not math.isfinite(loss):
                sys.exit(f"diverged at step {step}: the loss is {loss}; try a smaller --lr")
            if step % args.log_every == 0 or step in (start + 1, args.steps):
                print(f"step {step:5d}  loss {loss:.3e}  ‖WWᵀ − I‖ {orthonormality_error(model):.1e}")
            if step % args.checkpoint_every == 0 or step == args.steps:
                _training.save_orbax(manager, step, {"model": eqx.filter(model, eqx.is_array), "opt_state": opt_state})
    if start >= args.steps:
        print(f"nothing to do: the checkpoint is at step {start} ≥ --steps {args.steps}")
    return {"step": max(start, args.steps), "losses": losses,
            "orthonormality_error": orthonormality_error(model), "model": model}


if __name__ == "__main__":
    main()
