"""Tests of rules/_kernels/routes.py: every CPU route against the default route that GPUs and TPUs
run, on this CPU (``routes.default_everywhere``).

The cut-offs are lowered so that every CPU route is taken at small sizes. Each case's value, jvp
and vjp (float64 or complex128) must agree between the two routes to rounding; the CPU program
must carry CPU routes and the default one none; and together the cases must take every route the
sources define (a new route without a case here fails).
"""
from __future__ import annotations

import pathlib
import re

import jax
import jax.numpy as jnp
import optax
import pytest

import geometric
import rules
from rules.internal import mm_thin, polar_factor, qr_factor, routes
from tests.helpers import rand, rel_err

ROOT = pathlib.Path(__file__).resolve().parents[3]
SCOPE = re.compile(r"cpu_route\.(\w+)")


DEFAULTS = {name: value for name, value in vars(routes).items()
            if name.isupper() and isinstance(value, int)}
SMALL = {"BLOCKED_TRIANGULAR_MIN_N": 4, "BLOCKED_QR_GRAM_MIN_N": 4, "THIN_MIN_SIZE": 1}
"""The cut-offs under which every CPU route is taken at the sizes below (n ≥ 5)."""


def _spread(shape, seed, dtype=jnp.float64):
    n = shape[-1]
    return rand(shape, seed, dtype) + 2 * n**0.5 * jnp.broadcast_to(jnp.eye(n, dtype=dtype), shape)


def _spd(shape, seed):
    a = rand(shape, seed)
    return a @ a.mT + shape[-1] * jnp.broadcast_to(jnp.eye(shape[-1]), shape)


def _manifold_adam_step(m):
    opt = geometric.optim.manifold_adam(0.05, m)

    def step(x, g):
        updates, _ = opt.update(g, opt.init(x), x)
        return optax.apply_updates(x, updates)

    return step


def _frame(m, seed):
    return m.random_point(jax.random.PRNGKey(seed), jnp.float64)


C = jnp.complex128
CASES = {
    "solve_sylvester": (rules.solve_sylvester,
                        (_spread((2, 6, 6), 70), _spread((2, 5, 5), 71), rand((2, 6, 5), 72))),
    "solve_sylvester eigen complex": (
        lambda a, b, c: rules.solve_sylvester(a, b, c, method="eigen"),
        (_spread((6, 6), 73, C), _spread((5, 5), 74, C), rand((6, 5), 75, C))),
    "solve_continuous_lyapunov": (rules.solve_continuous_lyapunov,
                                  (-_spread((2, 6, 6), 76), rand((2, 6, 6), 77))),
    "inv": (rules.inv, (_spread((2, 6, 6), 1),)),
    "inv complex": (rules.inv, (_spread((6, 6), 2, C),)),
    "solve": (rules.solve, (_spread((2, 6, 6), 3), rand((2, 6, 3), 4))),
    "solve complex": (rules.solve, (_spread((6, 6), 5, C), rand((6, 2), 6, C))),
    "solve, LU of A": (rules.solve, (_spread((2, 6, 6), 3), rand((2, 6, 3), 4)),
                       {"LU_WITH_RHS_MAX_N": 0}),
    "det": (rules.det, (_spread((2, 6, 6), 7),)),
    "slogdet complex": (lambda a: tuple(rules.slogdet(a)), (_spread((6, 6), 8, C),)),
    "cholesky": (rules.cholesky, (_spd((2, 6, 6), 9),)),
    "cho_solve": (lambda a, b: rules.cho_solve((rules.cholesky(a), True), b),
                  (_spd((6, 6), 10), rand((6, 2), 11))),
    "qr tall": (rules.qr, (rand((2, 7, 6), 12),)),
    "qr wide complex": (rules.qr, (rand((5, 9), 13, C),)),
    "qr complete": (lambda a: rules.qr(a, mode="complete"), (rand((8, 5), 14),)),
    "lq wide": (rules.lq, (rand((6, 9), 15),)),
    "lq tall": (rules.lq, (rand((9, 6), 16),)),
    "eigh": (lambda a: rules.eigh(a).eigenvalues, (rand((2, 6, 6), 17),)),
    "svd": (lambda a: rules.svd(a, compute_uv=False), (rand((7, 5), 18),)),
    "expm": (rules.expm, (0.5 * rand((2, 6, 6), 19),)),
    "expm complex": (rules.expm, (0.5 * rand((6, 6), 20, C),)),
    "expm_frechet": (rules.expm_frechet, (0.5 * rand((2, 6, 6), 78), rand((2, 6, 6), 79))),
    "expm_frechet complex": (lambda a, e: rules.expm_frechet(a, e, compute_expm=False),
                             (3 * rand((6, 6), 80, C), rand((6, 6), 81, C))),
    "cayley": (rules.cayley, (0.3 * rand((6, 6), 21),)),
    "mat_tensor_mul": (rules.mat_tensor_mul, (rand((5, 6), 22), rand((3, 6, 7), 23))),
    "tensor_transpose_mat_mul": (rules.tensor_transpose_mat_mul,
                                 (rand((3, 6, 5), 24), rand((6, 7), 25))),
    "tensor_tensor_mul": (rules.tensor_tensor_mul, (rand((3, 6, 5), 26), rand((3, 5, 7), 27))),
    "tensor_transpose_tensor_mul": (rules.tensor_transpose_tensor_mul,
                                    (rand((3, 5, 6), 28), rand((3, 5, 7), 29))),
    "attention skew T>d": (rules.volume_preserving_attention,
                           (rand((2, 9, 5), 30, scale=0.3), rand((5, 5), 31))),
    "attention arbitrary": (lambda x, a: rules.volume_preserving_attention(
        x, a, weighting="arbitrary"), (rand((2, 6, 6), 32, scale=0.3), rand((6, 6), 33))),
    "mm_thin": (mm_thin, (rand((3, 9, 5), 34), rand((3, 5, 6), 35))),
    "qr_factor": (qr_factor, (rand((2, 9, 5), 36),)),
    "polar_factor": (polar_factor, (rand((9, 5), 37),)),
    "manifold_adam thin": (_manifold_adam_step(geometric.Stiefel(9, 3)),
                           (_frame(geometric.Stiefel(9, 3), 38), rand((9, 3), 39))),
    "manifold_adam split": (_manifold_adam_step(geometric.Stiefel(40, 20)),
                            (_frame(geometric.Stiefel(40, 20), 40), rand((40, 20), 41))),
}


def _derivatives(f, args):
    """``run(*args) -> (value, jvp, vjp)`` with fixed tangents and cotangents."""
    tangents = tuple(rand(x.shape, 50 + i, x.dtype) for i, x in enumerate(args))
    out = jax.eval_shape(f, *args)
    cotangents = jax.tree.unflatten(jax.tree.structure(out), [
        rand(y.shape, 60 + i, y.dtype) for i, y in enumerate(jax.tree.leaves(out))])

    def run(*args):
        value, tangent = jax.jvp(f, args, tangents)
        return value, tangent, jax.vjp(f, *args)[1](cotangents)

    return run


def _routes_taken(run, args):
    return set(SCOPE.findall(jax.jit(run).lower(*args).as_text(debug_info=True)))


def _case(name, cutoffs):
    """``(run, args)`` of a case, its cut-offs set."""
    f, args, *own = CASES[name]
    cutoffs(**{**DEFAULTS, **SMALL, **(own[0] if own else {})})
    return _derivatives(f, args), args


# geometric's optimizers run optax, which promotes dtypes implicitly.
NAMES = [pytest.param(name, marks=pytest.mark.standard_promotion)
         if name.startswith("manifold_adam") else name for name in CASES]


@pytest.mark.parametrize("name", NAMES)
def test_cpu_routes_match_the_default(name, cutoffs):
    run, args = _case(name, cutoffs)
    assert _routes_taken(run, args), "the case takes no CPU route"
    on_cpu = jax.jit(run)(*args)
    with routes.default_everywhere():
        assert not _routes_taken(run, args)
        default = jax.jit(run)(*args)
    assert jax.tree.structure(on_cpu) == jax.tree.structure(default)
    assert rel_err(on_cpu, default) < 1e-10


@pytest.mark.standard_promotion  # the manifold_adam cases
def test_every_cpu_route_has_a_case(cutoffs):
    defined = set()
    for path in [*(ROOT / "rules").rglob("*.py"), *(ROOT / "geometric").rglob("*.py")]:
        defined |= set(re.findall(r'cpu_route\(\s*"(\w+)"', path.read_text()))
    taken = set()
    for name in CASES:
        taken |= _routes_taken(*_case(name, cutoffs))
    assert defined and defined <= taken, sorted(defined - taken)
