"""Flax NNX: an orthogonally constrained layer and a volume-preserving layer, trained and checkpointed.

The model is ``x ↦ head(mix(embed(x)))``:

- ``embed``: ``nnx.Linear(16, 8)`` whose kernel (``(in, out)``, orthonormal columns) lives on the
  Stiefel manifold St(16, 8) and is trained there by a geometric optimizer;
- ``mix``: the volume-preserving feed-forward layer ``h + tanh(h Lᵀ + c)`` of Brantner et al.,
  ``L`` strictly lower triangular (``rules.volume_preserving_feedforward``, an explicit pullback);
- ``head``: an ordinary ``nnx.Linear(8, 1)``.

It fits a fixed random teacher of the same form on 256 samples (full batch). The manifold spec is
written once by parameter path (``geometric.optim.by_path``) and handed to ``nnx.Optimizer`` with
``wrt=nnx.Param``. Orbax's ``CheckpointManager`` keeps the last two checkpoints of
``nnx.state(model)`` and ``nnx.state(optimizer)``; ``--resume`` continues from the newest one, and
the continuation is bit-for-bit the uninterrupted run (full batch, constant learning rate). A
checkpoint that does not read (truncated, corrupt, or saved with another ``--optimizer``) is named
in a warning and the one before it is used; if none reads, the program stops with one line
(exit status 2), as the other examples do (``examples/_training.py``).

Examples::

    python -m examples.nnx_orthogonal --steps 300
    python -m examples.nnx_orthogonal --steps 600 --resume      # 300 more steps
"""
from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

import geometric
import rules
from examples import _training

D_IN, D_HIDDEN, N_SAMPLES = 16, 8, 256
OPTIMIZERS = {
    "riemannian_adam": geometric.optim.riemannian_adam,
    "global_tangent_adam": geometric.optim.global_tangent_adam,
    "riemannian_sgd": lambda lr, spec: geometric.optim.riemannian_sgd(lr, spec, momentum=0.9),
}
# One rule: every kernel of a layer called `embed` is on St(16, 8); everything else is Euclidean.
MANIFOLDS = geometric.optim.by_path({r"embed/kernel$": geometric.Stiefel(D_IN, D_HIDDEN)})


class VolumePreserving(nnx.Module):
    """``h + tanh(h Lᵀ + c)`` with ``L`` strictly lower triangular: Jacobian determinant 1."""

    def __init__(self, d: int, *, rngs: nnx.Rngs):
        self.d = d
        self.packed = nnx.Param(0.3 * jax.random.normal(rngs.params(), (d * (d - 1) // 2,), jnp.float32))
        self.bias = nnx.Param(jnp.zeros(d, jnp.float32))

    def __call__(self, h: jax.Array) -> jax.Array:
        weight = rules.StrictlyLower(self.packed[...], self.d)
        return rules.volume_preserving_feedforward(h, weight, self.bias[...])


class Model(nnx.Module):
    def __init__(self, *, rngs: nnx.Rngs):
        # Linen's and NNX's default kernel initializer is off the manifold; start on it.
        self.embed = nnx.Linear(D_IN, D_HIDDEN, kernel_init=nnx.initializers.orthogonal(), rngs=rngs)
        self.mix = VolumePreserving(D_HIDDEN, rngs=rngs)
        self.head = nnx.Linear(D_HIDDEN, 1, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.head(self.mix(self.embed(x)))[:, 0]


def make_data(seed: int) -> tuple[jax.Array, jax.Array]:
    """Inputs ``(256, 16)`` and the outputs of a random teacher of the model's form."""
    teacher = Model(rngs=nnx.Rngs(seed + 1))
    x = jax.random.normal(jax.random.PRNGKey(seed), (N_SAMPLES, D_IN), jnp.float32)
    return x, teacher(x)


def orthonormality_error(model: Model) -> float:
    """``‖WᵀW − I‖_F`` of the constrained kernel."""
    w = model.embed.kernel[...]
    return float(jnp.linalg.norm(w.T @ w - jnp.eye(D_HIDDEN)))


@nnx.jit
def train_step(model: Model, optimizer: nnx.Optimizer, x: jax.Array, y: jax.Array) -> jax.Array:
    loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
    optimizer.update(model, grads)  # the geometric optimizer retracts onto St(16, 8)
    return loss


# -- command line --------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = _training.ArgumentParser(prog="python -m examples.nnx_orthogonal",
                                      description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=_training.positive_int, default=300, help="optimizer steps in all")
    parser.add_argument("--lr", type=_training.positive_float, default=1e-2, help="learning rate")
    parser.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default="riemannian_adam",
                        help="geometric optimizer")
    parser.add_argument("--seed", type=_training.nonnegative_int, default=0, help="data and initialisation")
    parser.add_argument("--checkpoint-dir", type=_training.directory, default="runs/nnx_orthogonal",
                        help="where Orbax keeps the last two checkpoints")
    parser.add_argument("--checkpoint-every", type=_training.positive_int, default=100,
                        help="save every N steps (and at the last one)")
    parser.add_argument("--log-every", type=_training.positive_int, default=50, help="print every N steps")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest readable checkpoint in --checkpoint-dir (none: start at step 0)")
    return parser


# -- training ------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train; returns the final step, the losses of the steps run, ``‖WᵀW − I‖`` and the model."""
    parser = build_parser()
    args = parser.parse_args(argv)
    directory = _training.make_directory(parser, args.checkpoint_dir.absolute(), "--checkpoint-dir")

    x, y = make_data(args.seed)
    model = Model(rngs=nnx.Rngs(args.seed))
    optimizer = nnx.Optimizer(model, OPTIMIZERS[args.optimizer](args.lr, MANIFOLDS), wrt=nnx.Param)

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
            target = {"model": nnx.state(model), "optimizer": nnx.state(optimizer)}
            found = _training.resume_orbax(manager, target, parser)
            if found is not None:
                start, restored = found
                nnx.update(model, restored["model"])
                nnx.update(optimizer, restored["optimizer"])
                print(f"resumed from step {start} in {args.checkpoint_dir}")

        losses: list[float] = []
        for step in range(start + 1, args.steps + 1):
            loss = float(train_step(model, optimizer, x, y))
            losses.append(loss)
            if not math.isfinite(loss):
                sys.exit(f"diverged at step {step}: the loss is {loss}; try a smaller --lr")
            if step % args.log_every == 0 or step in (start + 1, args.steps):
                print(f"step {step:5d}  loss {loss:.3e}  ‖WᵀW − I‖ {orthonormality_error(model):.1e}")
            if step % args.checkpoint_every == 0 or step == args.steps:
                _training.save_orbax(manager, step, {"model": nnx.state(model), "optimizer": nnx.state(optimizer)})
    if start >= args.steps:
        print(f"nothing to do: the checkpoint is at step {start} ≥ --steps {args.steps}")
    return {"step": max(start, args.steps), "losses": losses,
            "orthonormality_error": orthonormality_error(model), "model": model}


if __name__ == "__main__":
    main()
