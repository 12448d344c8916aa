"""Every benchmarked function: our rule and the plain-JAX function it is compared with.

Only ``rules``' public API is used here, so the same cases run against another revision of the
library (``python -m benchmarks.revisions``): this module imports nothing else of the benchmarks.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

import rules

DTYPE = jnp.float32


@dataclass(frozen=True)
class Case:
    """One row: ``ours(*args)`` and ``theirs(*args)`` compute the same outputs."""

    family: str
    label: str
    ours: Callable
    theirs: Callable
    args: tuple

    def weights(self) -> list:
        """Fixed weights ``W_k``, one per output, for the scalar loss of :meth:`grad`."""
        outs = jax.tree_util.tree_leaves(jax.eval_shape(self.ours, *self.args))
        return [rand(y.shape, 100 + i) for i, y in enumerate(outs)]

    def grad(self, fn: Callable) -> Callable:
        """``(weights, *args) ↦ ∇ Σ_k <W_k, fn(args)_k>`` with respect to every argument.

        The weights are arguments, not constants: XLA would fold their transposes into the
        compiled program, which a cotangent computed upstream never allows.
        """
        def loss(weights, *args):
            ys = jax.tree_util.tree_leaves(fn(*args))
            return sum(jnp.sum(w * y) for w, y in zip(weights, ys))

        return jax.grad(loss, argnums=tuple(range(1, len(self.args) + 1)))

    def grad_args(self) -> tuple:
        return (self.weights(), *self.args)

    def tangents(self) -> tuple:
        return tuple(rand(x.shape, 200 + i) for i, x in enumerate(self.args))

    def jvp(self, fn: Callable) -> Callable:
        """``(args, tangents) ↦ jax.jvp(fn, args, tangents)``: forward mode, outputs included."""
        return lambda args, tangents: jax.jvp(fn, args, tangents)

    def jvp_args(self) -> tuple:
        return (self.args, self.tangents())


def rand(shape, seed, dtype=DTYPE):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def _mT(x):
    return jnp.swapaxes(x, -1, -2)


def _shape_label(shape):
    return "×".join(map(str, shape))


# ==============================================================================================
# Dense linear algebra


def _well_conditioned(shape):
    n = shape[-1]
    return rand(shape, 0) + 2 * math.sqrt(n) * jnp.eye(n, dtype=DTYPE)


def lq_with_jax(a):
    """JAX has no LQ: the transposed QR of ``Aᵀ``, as a user would write it."""
    q, r = jnp.linalg.qr(_mT(a))
    return _mT(r), _mT(q)


def plain_cayley(c):
    """``(I - C)(I + C)⁻¹`` written with jnp (one inverse and one product)."""
    eye = jnp.broadcast_to(jnp.eye(c.shape[-1], dtype=c.dtype), c.shape)
    return (eye - c) @ jnp.linalg.inv(eye + c)


def inv_cases(quick: bool) -> list[Case]:
    shapes = [(16, 16), (4096, 4, 4)] if quick else [(64, 64), (256, 256), (1024, 1024),
                                                      (4096, 4, 4)]
    return [Case("inv", _shape_label(s), rules.inv, jnp.linalg.inv, (_well_conditioned(s),))
            for s in shapes]


QR_SHAPES = [(512, 64), (256, 256), (64, 512), (1024, 8, 8)]


def qr_cases(quick: bool) -> list[Case]:
    shapes = [(64, 16), (1024, 8, 8)] if quick else QR_SHAPES
    return [Case("qr", _shape_label(s), rules.qr, jnp.linalg.qr, (rand(s, 0),)) for s in shapes]


def lq_cases(quick: bool) -> list[Case]:
    shapes = [(16, 64), (1024, 8, 8)] if quick else QR_SHAPES
    return [Case("lq", _shape_label(s), rules.lq, lq_with_jax, (rand(s, 0),)) for s in shapes]


def cayley_cases(quick: bool) -> list[Case]:
    shapes = [(16, 16), (4096, 4, 4)] if quick else [(64, 64), (256, 256), (4096, 4, 4)]
    # A skew-symmetric C (the layers' use): I + C is always invertible.
    return [Case("cayley", _shape_label(s), rules.cayley, plain_cayley,
                 ((rand(s, 0) - _mT(rand(s, 0))) / (2 * math.sqrt(s[-1])),)) for s in shapes]


# ==============================================================================================
# Volume-preserving layers


def plain_attention(x, a, weighting):
    """The attention layer written with plain jnp ops, as a user would (JAX differentiates it)."""
    t, d = x.shape[-2:]
    if weighting == "skew":
        c = x @ ((a - a.T) / 2) @ _mT(x)
    else:
        p = jnp.tril(x @ a @ _mT(x), -1) / math.sqrt(d)
        c = p - _mT(p)
    eye = jnp.broadcast_to(jnp.eye(t, dtype=x.dtype), c.shape)
    return _mT((eye - c) @ jnp.linalg.inv(eye + c)) @ x


ATTENTION_SIZES = [(16384, 3, 3), (256, 32, 16), (16, 256, 64)]


def attention_cases(quick: bool) -> list[Case]:
    sizes = [(1024, 3, 3), (32, 16, 8)] if quick else ATTENTION_SIZES
    cases = []
    for batch, t, d in sizes:
        x, a = rand((batch, t, d), 0) / 2, rand((d, d), 1)
        for weighting in ("skew", "arbitrary"):
            cases.append(Case(
                f"attention {weighting}", str((batch, t, d)),
                lambda x, a, w=weighting: rules.volume_preserving_attention(x, a, weighting=w),
                lambda x, a, w=weighting: plain_attention(x, a, w), (x, a)))
    return cases


def _dense_triangle(packed, n, upper=False):
    """Strictly lower (or upper) packed (row-major tril) → dense, with JAX's autodiff."""
    rows, cols = np.tril_indices(n, -1)
    if upper:
        rows, cols = cols, rows
    return jnp.zeros((n, n), packed.dtype).at[rows, cols].set(packed)


def feedforward_cases(quick: bool) -> list[Case]:
    """A block of the paper's network: a lower layer, then an upper one.

    One layer alone is too small a program to compare: its jvp compiles to 8 thunks, which
    XLA:CPU runs one after another (``execute_sequential_num_thunks_threshold``, 8 in jax 0.10),
    while JAX's scatter-built weight adds 3 and gets the concurrent executor; in any model (two
    layers already) both sides run concurrently. Measured: ``docs/rules.md#small-programs``.
    """
    sizes = [(1024, 3, 3)] if quick else ATTENTION_SIZES
    cases = []
    for batch, t, d in sizes:
        size = d * (d - 1) // 2
        x = rand((batch, t, d), 0)
        lower, upper, b_lower, b_upper = rand((size,), 1), rand((size,), 3), rand((d,), 2), rand(
            (d,), 4)

        def ours(x, lower, b_lower, upper, b_upper, d=d):
            y = rules.volume_preserving_feedforward(x, rules.StrictlyLower(lower, d), b_lower)
            return rules.volume_preserving_feedforward(y, rules.StrictlyUpper(upper, d), b_upper)

        def theirs(x, lower, b_lower, upper, b_upper, d=d):
            y = x + jnp.tanh(x @ _dense_triangle(lower, d).T + b_lower)
            return y + jnp.tanh(y @ _dense_triangle(upper, d, upper=True).T + b_upper)

        cases.append(Case("feedforward", str((batch, t, d)), ours, theirs,
                          (x, lower, b_lower, upper, b_upper)))
    return cases


# ==============================================================================================
# Tensor products

# name: (rule, plain-jnp reference, operand shapes from (batch, m, k, n))
PRODUCTS = {
    "tensor_tensor_mul": (lambda: rules.tensor_tensor_mul, jnp.matmul,
                          lambda b, m, k, n: ((b, m, k), (b, k, n))),
    "tensor_transpose_tensor_mul": (lambda: rules.tensor_transpose_tensor_mul,
                                    lambda a, b: jnp.einsum("bkm,bkn->bmn", a, b),
                                    lambda b, m, k, n: ((b, k, m), (b, k, n))),
    "mat_tensor_mul": (lambda: rules.mat_tensor_mul, jnp.matmul,
                       lambda b, m, k, n: ((m, k), (b, k, n))),
    "tensor_mat_mul": (lambda: rules.tensor_mat_mul, jnp.matmul,
                       lambda b, m, k, n: ((b, m, k), (k, n))),
    "tensor_transpose_mat_mul": (lambda: rules.tensor_transpose_mat_mul,
                                 lambda a, w: jnp.einsum("bkm,kn->bmn", a, w),
                                 lambda b, m, k, n: ((b, k, m), (k, n))),
    "tensor_transpose": (lambda: rules.tensor_transpose, _mT, lambda b, m, k, n: ((b, m, k),)),
}

PRODUCT_SIZES = [(16384, 3, 3, 3), (1024, 32, 32, 32), (64, 128, 128, 128)]


def product_cases(quick: bool) -> list[Case]:
    sizes = [(256, 3, 3, 3), (16, 16, 16, 16)] if quick else PRODUCT_SIZES
    cases = []
    for size in sizes:
        for name, (rule, ref, shapes) in PRODUCTS.items():
            args = tuple(rand(s, i) for i, s in enumerate(shapes(*size)))
            cases.append(Case(name, str(size), rule(), ref, args))
    return cases


def gradient_cases(quick: bool) -> list[Case]:
    """Every row of RESULTS.md whose gradient is compared with JAX's."""
    return (inv_cases(quick) + qr_cases(quick) + lq_cases(quick) + cayley_cases(quick)
            + attention_cases(quick) + feedforward_cases(quick) + product_cases(quick))
