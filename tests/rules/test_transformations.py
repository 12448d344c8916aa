"""Every rule under every JAX transformation, against JAX's own autodiff of the plain-jnp function.

Each case is a rule and a reference written with ``jax.numpy`` only (LQ, which JAX lacks, through
the QR of the transpose). Forward mode (``jvp``, ``linearize``, ``jacfwd``), reverse mode (``grad``,
``vjp``), the second order (``hessian``, which is ``jacfwd`` of ``jacrev`` — for a scalar loss
exactly ``jacfwd(grad)`` —, ``jacrev(jacfwd)``, ``grad(grad)``) and ``vmap`` of ``jvp`` and of
``grad`` all run inside ONE jitted function per case and side, so each case costs two compilations
(at XLA's lowest optimisation level: these programs run once). Float64, ~1e-10 relative.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rules
from tests.helpers import rand, rel_err


@dataclasses.dataclass
class Case:
    name: str
    ours: Callable
    reference: Callable
    args: tuple
    real: bool = True  # jacfwd/hessian need real inputs (complex ones: jvp, grad, grad of grad)


def _eye(n, dtype=jnp.float64):
    return jnp.eye(n, dtype=dtype)


def _lq_reference(a):
    q, r = jnp.linalg.qr(jnp.conj(a.mT))
    return rules.LQResult(jnp.conj(r.mT), jnp.conj(q.mT))


def _cayley_reference(c):
    eye = jnp.broadcast_to(_eye(c.shape[-1], c.dtype), c.shape)
    return (eye - c) @ jnp.linalg.inv(eye + c)


def _attention_reference(weighting):
    def reference(x, a):
        d = x.shape[-1]
        if weighting == "skew":
            c = x @ ((a - a.T) / 2) @ x.mT
        else:
            p = jnp.tril(x @ a @ x.mT, -1) / math.sqrt(d)
            c = p - p.mT
        return _cayley_reference(c).mT @ x
    return reference


def _attention(weighting):
    return lambda x, a: rules.volume_preserving_attention(x, a, weighting=weighting)


def _dense_lower(p, n=3):
    rows, cols = np.tril_indices(n, -1)
    return jnp.zeros((n, n), p.dtype).at[rows, cols].set(p)


def _dense_skew(p, n=3):
    low = _dense_lower(p, n)
    return low - low.T


def _qr(mode):
    return lambda a: rules.qr(a, mode=mode)


def _jnp_qr(mode):
    return lambda a: jnp.linalg.qr(a, mode=mode)


def _spread(shape, seed):  # well-conditioned square batches
    n = shape[-1]
    return rand(shape, seed) + 2 * n**0.5 * jnp.broadcast_to(_eye(n), shape)


def _cases() -> list[Case]:
    skew = rand((4, 4), 3) - rand((4, 4), 3).T
    x_attn, a_attn = rand((2, 3, 3), 4, scale=0.5), rand((3, 3), 5)
    x_long, a_long = rand((5, 3), 6, scale=0.5), rand((3, 3), 7)
    t, w = rand((2, 3, 4), 8), rand((4, 2), 9)
    return [
        Case("inv small", rules.inv, jnp.linalg.inv, (_spread((2, 3, 3), 1),)),
        Case("inv LU", rules.inv, jnp.linalg.inv, (_spread((5, 5), 2),)),
        Case("inv complex", rules.inv, jnp.linalg.inv,
             (rand((3, 3), 10, jnp.complex128) + 3 * _eye(3, jnp.complex128),), real=False),
        Case("qr tall", _qr("reduced"), _jnp_qr("reduced"), (rand((2, 5, 3), 11),)),
        Case("qr wide", _qr("reduced"), _jnp_qr("reduced"), (rand((3, 5), 12),)),
        Case("qr complete", _qr("complete"), _jnp_qr("complete"), (rand((5, 3), 13),)),
        Case("qr r", _qr("r"), _jnp_qr("r"), (rand((4, 4), 14),)),
        Case("qr complex", _qr("reduced"), _jnp_qr("reduced"),
             (rand((4, 3), 15, jnp.complex128),), real=False),
        Case("lq wide", rules.lq, _lq_reference, (rand((2, 3, 5), 16),)),
        Case("lq tall", rules.lq, _lq_reference, (rand((5, 3), 17),)),
        Case("cayley", rules.cayley, _cayley_reference, (skew,)),
        Case("cayley complex", rules.cayley, _cayley_reference,
             (0.3 * rand((3, 3), 18, jnp.complex128),), real=False),
        Case("attention skew", _attention("skew"), _attention_reference("skew"), (x_attn, a_attn)),
        Case("attention skew T>d", _attention("skew"), _attention_reference("skew"),
             (x_long, a_long)),
        Case("attention arbitrary", _attention("arbitrary"), _attention_reference("arbitrary"),
             (x_attn, a_attn)),
        Case("feedforward",
             lambda x, p, b: rules.volume_preserving_feedforward(x, rules.StrictlyLower(p, 3), b),
             lambda x, p, b: x + jnp.tanh(x @ _dense_lower(p).T + b.reshape(1, 1, -1)),
             (rand((2, 4, 3), 19), rand((3,), 20), rand((3,), 21))),
        Case("tensor_tensor_mul", rules.tensor_tensor_mul, jnp.matmul, (t, rand((2, 4, 2), 22))),
        Case("tensor_transpose_tensor_mul", rules.tensor_transpose_tensor_mul,
             lambda a, b: a.mT @ b, (t, rand((2, 3, 2), 23))),
        Case("mat_tensor_mul", rules.mat_tensor_mul, jnp.matmul, (rand((2, 3), 24), t)),
        Case("tensor_mat_mul", rules.tensor_mat_mul, jnp.matmul, (t, w)),
        Case("tensor_transpose_mat_mul", rules.tensor_transpose_mat_mul,
             lambda a, w: a.mT @ w, (t, rand((3, 2), 25))),
        Case("tensor_mat_mul tiny", rules.tensor_mat_mul, jnp.matmul,
             (rand((3, 2, 2), 26), rand((2, 2), 27))),
        Case("tensor_mat_mul complex", rules.tensor_mat_mul, jnp.matmul,
             (rand((2, 3, 4), 28, jnp.complex128), rand((4, 5), 29, jnp.complex128)), real=False),
        Case("tensor_transpose", rules.tensor_transpose, lambda a: a.mT, (t,)),
        Case("packed skew weight",
             lambda p, a: rules.mat_tensor_mul(rules.SkewSymmetric(p, 3), a),
             lambda p, a: _dense_skew(p) @ a, (rand((3,), 30), t[..., :3, :])),
    ]


CASES = _cases()


def _loss(f, weights):
    """A nonlinear scalar of every output, so second derivatives are not trivially zero."""
    def loss(*args):
        leaves = jax.tree.leaves(f(*args))
        return sum(jnp.sum(jnp.real(w * jnp.sin(y))) for y, w in zip(leaves, weights))
    return loss


def _transformations(case: Case, f: Callable):
    """Everything the issue lists, for ``f`` (ours or the reference), as one function of the args."""
    out_shapes = jax.eval_shape(case.ours, *case.args)
    weights = [rand(y.shape, 40 + i, y.dtype) for i, y in enumerate(jax.tree.leaves(out_shapes))]
    tangents = tuple(rand(x.shape, 50 + i, x.dtype) for i, x in enumerate(case.args))
    argnums = tuple(range(len(case.args)))
    loss = _loss(f, weights)
    grad = jax.grad(loss, argnums)

    def run(*args):
        stacked = tuple(jnp.stack([x, 1.01 * x]) for x in args)
        stacked_tangents = tuple(jnp.stack([t, -t]) for t in tangents)
        out = {
            "value": f(*args),
            "jvp": jax.jvp(f, args, tangents),
            "linearize": jax.linearize(f, *args)[1](*tangents),
            "grad": grad(*args),
            "vjp": jax.vjp(f, *args)[1](jax.tree.map(jnp.ones_like, f(*args))),
            "grad of grad": jax.grad(lambda *a: sum(jnp.sum(jnp.abs(g) ** 2)
                                                    for g in grad(*a)), argnums)(*args),
            "vmap jvp": jax.vmap(lambda a, t: jax.jvp(f, a, t))(stacked, stacked_tangents),
            "vmap grad": jax.vmap(grad)(*stacked),
        }
        if case.real:
            out["jacfwd"] = jax.jacfwd(f, argnums)(*args)
            out["hessian"] = jax.hessian(loss, argnums)(*args)
            out["jacrev of jacfwd"] = jax.jacrev(jax.jacfwd(loss, argnums), argnums)(*args)
        return out

    return jax.jit(run, compiler_options={"xla_backend_optimization_level": 0})(*case.args)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_transformation_matches_jax(case):
    ours, reference = _transformations(case, case.ours), _transformations(case, case.reference)
    assert ours.keys() == reference.keys()
    for what in ours:
        assert jax.tree.structure(ours[what]) == jax.tree.structure(reference[what]), what
        assert rel_err(ours[what], reference[what]) < 1e-10, (what, rel_err(ours[what],
                                                                             reference[what]))


@pytest.mark.parametrize("case", [c for c in CASES if c.name in ("inv small", "qr tall",
                                                                 "attention skew", "tensor_mat_mul")],
                         ids=lambda c: c.name)
def test_float32(case):
    args32 = tuple(x.astype(jnp.float32) for x in case.args)
    tangents = tuple(jnp.ones_like(x) for x in args32)
    out, out_dot = jax.jit(lambda *a: jax.jvp(case.ours, a, tangents))(*args32)
    ref, ref_dot = jax.jvp(case.reference, case.args, tuple(t.astype(jnp.float64) for t in tangents))
    assert all(y.dtype == jnp.float32 for y in jax.tree.leaves((out, out_dot)))
    assert rel_err(out_dot, ref_dot) < 1e-4
    grads = jax.grad(lambda *a: sum(jnp.sum(y) for y in jax.tree.leaves(case.ours(*a))),
                     tuple(range(len(a := args32))))(*a)
    assert all(g.dtype == jnp.float32 for g in grads)


@pytest.mark.parametrize("shape", [(3, 3), (2, 5), (6, 2)])
def test_skew_attention_preserves_volume_under_jacfwd(shape):
    """``det(jacfwd(layer)(x)) = 1``: what users of volume-preserving layers write first."""
    x, a = rand(shape, 60, scale=0.5), rand((shape[1], shape[1]), 61)
    jac = jax.jacfwd(lambda x: rules.volume_preserving_attention(x, a))(x)
    n = x.size
    assert abs(float(jnp.linalg.det(jac.reshape(n, n))) - 1) < 1e-12


def test_jacfwd_of_batched_attention_is_block_diagonal():
    x, a = rand((4, 3, 3), 62, scale=0.5), rand((3, 3), 63)
    jac = jax.jacfwd(lambda x: rules.volume_preserving_attention(x, a))(x)  # (4, 3, 3, 4, 3, 3)
    off = jac.at[jnp.arange(4), :, :, jnp.arange(4)].set(0)
    assert float(jnp.max(jnp.abs(off))) == 0.0
