"""Benchmarks of the matrix functions JAX cannot (or can only partly) differentiate.

Three tables, float64 throughout (SciPy's precision):

* gradients where JAX has one: ``polar`` (JAX's ``method="svd"``) and ``expm_frechet``, ours
  against JAX's ``jax.grad`` of the same loss, alternated in one run;
* values against SciPy on the CPU at 64×64 and 256×256: ours jitted, SciPy's per call, with the
  largest relative difference between the two;
* the derivatives' overhead of ``sqrtm``, ``logm``, ``sqrtmh`` and ``logmh``: the gradient and the
  jvp of a loss beside the forward's own time (the issue's goal: at most 3× the forward) for a
  batch of 4096 3×3 matrices, 64×64 and 256×256.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

import rules

from ._harness import Table, fmt_time, interleaved, median_time

DTYPE = jnp.float64


def _rand(shape, seed):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), DTYPE)


def _eye(shape):
    return jnp.broadcast_to(jnp.eye(shape[-1], dtype=DTYPE), shape)


def _well_conditioned(shape, seed):
    """``I + G/(2√n)``: eigenvalues in the right half plane, away from the negative real axis."""
    return _eye(shape) + _rand(shape, seed) / (2 * np.sqrt(shape[-1]))


def _spd(shape, seed):
    g = _rand(shape, seed)
    return g @ jnp.swapaxes(g, -1, -2) / shape[-1] + _eye(shape)


def _loss(fn, weight):
    def loss(*args):
        out = jax.tree_util.tree_leaves(fn(*args))[0]
        return jnp.sum(weight * jnp.real(out))
    return loss


def _label(shape):
    return "×".join(map(str, shape))


def _rel(got, want) -> float:
    got, want = np.asarray(got), np.asarray(want)
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300))


def _gradient_table(quick: bool, budget: float) -> Table:
    table = Table("Matrix functions: gradients against JAX's",
                  ["function", "shape", "grad ours", "grad JAX", "ratio"],
                  notes=["JAX's `polar` is differentiable in reverse mode only with "
                         "`method=\"svd\"` (its default QDWH iteration is a `while_loop`); that "
                         "gradient is NaN at orthogonal input, ours is not.",
                         "`expm_frechet`: the gradient of a loss of `L(A, E)` in both `A` and `E`."])
    shapes = [(32, 32)] if quick else [(64, 64), (256, 256), (256, 64)]
    for shape in shapes:
        a = _rand(shape, 0)
        u_shape = jax.eval_shape(lambda a: rules.polar(a)[0], a).shape
        loss_ours = _loss(lambda a: rules.polar(a, method="svd"), _rand(u_shape, 1))
        loss_jax = _loss(lambda a: jax.scipy.linalg.polar(a, method="svd"), _rand(u_shape, 1))
        fns = [jax.jit(jax.grad(loss_ours)), jax.jit(jax.grad(loss_jax))]
        assert _rel(fns[0](a), fns[1](a)) < 1e-8, "polar: ours and JAX's gradients differ"
        (t_ours, t_jax), ratio = interleaved(fns, (a,), budget=budget)
        table.add(["polar (u)", _label(shape), fmt_time(t_ours), fmt_time(t_jax), f"{ratio:.2f}"])
    for shape in ([(32, 32)] if quick else [(4096, 3, 3), (64, 64), (256, 256)]):
        a, e = 0.5 * _well_conditioned(shape, 2), _rand(shape, 3)
        weight = _rand(shape, 4)

        def frechet(fn):
            return lambda a, e: fn(a, e, compute_expm=False)

        fns = [jax.jit(jax.grad(_loss(frechet(f), weight), (0, 1)))
               for f in (rules.expm_frechet, jax.scipy.linalg.expm_frechet)]
        assert max(map(_rel, fns[0](a, e), fns[1](a, e))) < 1e-8, "expm_frechet: gradients differ"
        (t_ours, t_jax), ratio = interleaved(fns, (a, e), budget=budget)
        table.add(["expm_frechet", _label(shape), fmt_time(t_ours), fmt_time(t_jax),
                   f"{ratio:.2f}"])
    return table


def _scipy_cases(shape):
    """name: (ours, SciPy's, arguments): well-conditioned problems of the given size."""
    a, spd = _well_conditioned(shape, 5), _spd(shape, 6)
    b, c = _spd(shape, 7), _rand(shape, 8)
    return {
        "sqrtm": (rules.sqrtm, scipy.linalg.sqrtm, (a,)),
        "logm": (rules.logm, scipy.linalg.logm, (a,)),
        "sqrtmh (SPD)": (rules.sqrtmh, lambda x: scipy.linalg.sqrtm(x).real, (spd,)),
        "polar": (lambda x: rules.polar(x)[0], lambda x: scipy.linalg.polar(x)[0], (c,)),
        "solve_sylvester": (rules.solve_sylvester, scipy.linalg.solve_sylvester, (spd, b, c)),
        "solve_continuous_lyapunov": (rules.solve_continuous_lyapunov,
                                      scipy.linalg.solve_continuous_lyapunov, (-spd, b)),
        "eigvals": (lambda x: jnp.sort_complex(rules.eigvals(x)),
                    lambda x: np.sort_complex(scipy.linalg.eigvals(x)), (a,)),
    }


def _scipy_table(quick: bool, budget: float) -> Table:
    table = Table("Matrix functions: values against SciPy",
                  ["function", "shape", "ours (jitted)", "SciPy", "ratio", "max relative difference"],
                  notes=["SciPy's functions are called per call on NumPy arrays (LAPACK, "
                         "OpenBLAS with one thread); ours are `jax.jit`-compiled XLA programs. "
                         "A ratio < 1 means ours is faster."])
    for shape in ([(32, 32)] if quick else [(64, 64), (256, 256)]):
        for name, (ours, theirs, args) in _scipy_cases(shape).items():
            np_args = tuple(np.asarray(x) for x in args)
            fn = jax.jit(ours)
            diff = _rel(fn(*args), theirs(*np_args))
            (t_ours, t_scipy), ratio = interleaved([fn, theirs], [args, np_args], budget=budget)
            table.add([name, _label(shape), fmt_time(t_ours), fmt_time(t_scipy), f"{ratio:.2f}",
                       f"{diff:.1e}"])
    return table


def _overhead_table(quick: bool, budget: float) -> Table:
    table = Table("Matrix functions: derivative overhead",
                  ["function", "shape", "forward", "grad", "grad / forward", "jvp", "jvp / forward"],
                  notes=["`grad` is the forward and the pullback of `Σ W ⊙ Re f(A)`, `jvp` the "
                         "forward and the pushforward; the goal is ≤ 3× the forward."])
    shapes = [(256, 3, 3), (32, 32)] if quick else [(4096, 3, 3), (64, 64), (256, 256)]
    for name, make in [("sqrtm", _well_conditioned), ("logm", _well_conditioned),
                       ("sqrtmh", _spd), ("logmh", _spd)]:
        fn = getattr(rules, name)
        for shape in shapes:
            a = make(shape, 9)
            weight = _rand(shape, 10)
            forward = jax.jit(fn)
            grad = jax.jit(jax.grad(_loss(fn, weight)))
            tangent = _rand(shape, 11)
            jvp = jax.jit(lambda a: jax.jvp(fn, (a,), (tangent,)))
            t_fwd = median_time(forward, a)
            (t_grad, t_jvp), _ = interleaved([grad, jvp], (a,), budget=budget)
            table.add([name, _label(shape), fmt_time(t_fwd), fmt_time(t_grad),
                       f"{t_grad / t_fwd:.2f}", fmt_time(t_jvp), f"{t_jvp / t_fwd:.2f}"])
    return table


def tables(quick: bool) -> list[Table]:
    budget = 0.1 if quick else 1.0
    return [_gradient_table(quick, budget), _scipy_table(quick, budget),
            _overhead_table(quick, budget)]
