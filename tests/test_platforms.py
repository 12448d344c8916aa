"""Every rule and every optimizer step lowers for GPU and TPU, with no CPU-only code in it.

``jax.export`` lowers for a platform that is not present, so this runs on the CPU machine CI has.
For every public rule, on a small shape (the closed forms) and a large one (beyond every size
cut-off of ``rules/_kernels/routes.py``), ``jit`` of ``grad``, ``jvp`` and ``vmap(grad)`` is
exported for ``cuda`` and for ``tpu``; so is one step of every optimizer on every manifold. Each
module must lower, call no LAPACK or other CPU custom call, and hold no operation of a CPU route
(the named scope ``cpu_route.<name>`` each carries). The optimizers' point checks
(``check_points``) report a failure by a host callback, which lowers only for the platform the
process runs on: for the steps below it is replaced by its condition alone. Where a module does not lower and the same
transformation of JAX's own function does not lower either, the case is an expected failure
whose reason names the op: the list of what JAX itself cannot lower for a platform, in the test
summary (``-ra``).
"""
from __future__ import annotations

import re
from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax
import pytest

import geometric
import rules
from geometric import optim
from geometric.optim import _placement

PLATFORMS = ("cuda", "tpu")
CPU_ROUTE = re.compile(r"cpu_route\.(\w+)")
CPU_CUSTOM_CALL = re.compile(r"lapack|ducc|\bcpu", re.IGNORECASE)
F32 = jnp.float32


def _spec(*shape, dtype=F32):
    return jax.ShapeDtypeStruct(shape, dtype)


def _packed(cls, n):
    return lambda p: cls(p, n).dense()


# name: (our function, JAX's function or None, small argument shapes, large argument shapes)
SQUARE, LARGE = (2, 3, 3), (520, 520)
RULES: dict[str, tuple[Callable, Callable | None, tuple, tuple]] = {
    "inv": (rules.inv, jnp.linalg.inv, (SQUARE,), (LARGE,)),
    "solve": (rules.solve, jnp.linalg.solve, (SQUARE, (2, 3, 2)), (LARGE, (520, 4))),
    "det": (rules.det, jnp.linalg.det, (SQUARE,), (LARGE,)),
    "slogdet": (lambda a: rules.slogdet(a).logabsdet, lambda a: jnp.linalg.slogdet(a).logabsdet,
                (SQUARE,), (LARGE,)),
    "cholesky": (rules.cholesky, jnp.linalg.cholesky, (SQUARE,), (LARGE,)),
    "cho_solve": (lambda c, b: rules.cho_solve((c, True), b),
                  lambda c, b: jax.scipy.linalg.cho_solve((c, True), b),
                  (SQUARE, (2, 3, 2)), (LARGE, (520, 4))),
    "qr": (rules.qr, jnp.linalg.qr, ((2, 5, 3),), ((600, 520),)),
    "qr complete": (lambda a: rules.qr(a, mode="complete"),
                    lambda a: jnp.linalg.qr(a, mode="complete"), ((2, 5, 3),), ((600, 330),)),
    "qr wide": (rules.qr, jnp.linalg.qr, ((2, 3, 5),), ((330, 600),)),
    "lq": (rules.lq, None, ((2, 3, 5),), ((520, 600),)),
    "lq tall": (rules.lq, None, ((2, 5, 3),), ((600, 520),)),
    "eigh": (rules.eigh, jnp.linalg.eigh, (SQUARE,), (LARGE,)),
    "svd": (rules.svd, jnp.linalg.svd, ((2, 3, 3),), ((520, 520),)),
    "svd thin": (lambda a: rules.svd(a, full_matrices=False),
                 lambda a: jnp.linalg.svd(a, full_matrices=False), ((2, 5, 3),), ((600, 520),)),
    "svd full": (rules.svd, None, ((2, 3, 5),), ((330, 600),)),
    "svd hermitian": (lambda a: rules.svd(a, hermitian=True),
                      lambda a: jnp.linalg.svd(a, hermitian=True), (SQUARE,), (LARGE,)),
    "eig": (rules.eig, lambda a: tuple(jax.lax.linalg.eig(a, compute_left_eigenvectors=False,
                                                          enable_eigvec_derivs=True)),
            (SQUARE,), (LARGE,)),
    "eigvals": (rules.eigvals, jnp.linalg.eigvals, (SQUARE,), (LARGE,)),
    "expm": (rules.expm, jax.scipy.linalg.expm, (SQUARE,), (LARGE,)),
    "polar": (rules.polar, lambda a: jax.scipy.linalg.polar(a, method="svd"), ((2, 3, 3),),
              ((520, 520),)),
    "polar left": (lambda a: rules.polar(a, "left"),
                   lambda a: jax.scipy.linalg.polar(a, "left", method="svd"), ((2, 5, 3),),
                   ((600, 520),)),
    "polar wide": (rules.polar, lambda a: jax.scipy.linalg.polar(a, method="svd"), ((2, 3, 5),),
                   ((330, 600),)),
    "solve_sylvester": (rules.solve_sylvester, jax.scipy.linalg.solve_sylvester,
                        (SQUARE, (2, 2, 2), (2, 3, 2)), (LARGE, LARGE, LARGE)),
    "solve_continuous_lyapunov": (rules.solve_continuous_lyapunov, None, (SQUARE, SQUARE),
                                  (LARGE, LARGE)),
    "sqrtm": (rules.sqrtm, jax.scipy.linalg.sqrtm, (SQUARE,), (LARGE,)),
    "logm": (rules.logm, None, (SQUARE,), (LARGE,)),
    "sqrtmh": (rules.sqrtmh, None, (SQUARE,), (LARGE,)),
    "logmh": (rules.logmh, None, (SQUARE,), (LARGE,)),
    "powmh": (lambda a: rules.powmh(a, 0.5), None, (SQUARE,), (LARGE,)),
    "hermitian_function": (lambda a: rules.hermitian_function(a, jnp.tanh), None, (SQUARE,),
                           (LARGE,)),
    "expm_frechet": (rules.expm_frechet, jax.scipy.linalg.expm_frechet, (SQUARE, SQUARE),
                     (LARGE, LARGE)),
    "cayley": (rules.cayley, None, (SQUARE,), (LARGE,)),
    "tensor_tensor_mul": (rules.tensor_tensor_mul, jnp.matmul, ((4, 3, 3), (4, 3, 2)),
                          ((8, 64, 40), (8, 40, 48))),
    "tensor_transpose_tensor_mul": (rules.tensor_transpose_tensor_mul, None,
                                    ((4, 3, 3), (4, 3, 2)), ((8, 40, 64), (8, 40, 48))),
    "mat_tensor_mul": (rules.mat_tensor_mul, jnp.matmul, ((3, 3), (4, 3, 2)),
                       ((20, 24), (8, 24, 30))),
    "tensor_mat_mul": (rules.tensor_mat_mul, jnp.matmul, ((4, 3, 3), (3, 2)),
                       ((8, 64, 40), (40, 48))),
    "tensor_transpose_mat_mul": (rules.tensor_transpose_mat_mul, None, ((4, 3, 3), (3, 2)),
                                 ((8, 40, 64), (40, 48))),
    "tensor_transpose": (rules.tensor_transpose, None, ((4, 3, 2),), ((8, 40, 64),)),
    "volume_preserving_attention": (rules.volume_preserving_attention, None,
                                    ((4, 3, 3), (3, 3)), ((8, 64, 40), (40, 40))),
    "volume_preserving_attention arbitrary": (
        lambda x, a: rules.volume_preserving_attention(x, a, weighting="arbitrary"), None,
        ((4, 3, 3), (3, 3)), ((8, 40, 64), (64, 64))),
    "volume_preserving_feedforward": (
        lambda x, p: rules.volume_preserving_feedforward(x, rules.StrictlyLower(p, x.shape[-1])),
        None, ((4, 3, 3), (3,)), ((8, 64, 40), (780,))),
    "SkewSymmetric": (_packed(rules.SkewSymmetric, 3), None, ((3,),), ((780,),)),
    "StrictlyLower": (_packed(rules.StrictlyLower, 3), None, ((3,),), ((780,),)),
    "StrictlyUpper": (_packed(rules.StrictlyUpper, 3), None, ((3,),), ((780,),)),
    "Symmetric": (_packed(rules.Symmetric, 3), None, ((6,),), ((820,),)),
}
# The packed weights' sizes: n(n - 1)/2 = 780 and n(n + 1)/2 = 820 for n = 40.
_LARGE_PACKED = {"SkewSymmetric": 40, "StrictlyLower": 40, "StrictlyUpper": 40, "Symmetric": 40}


def _rule(name, size):
    f, reference, small, large = RULES[name]
    if size == "large" and name in _LARGE_PACKED:
        f = _packed(getattr(rules, name), _LARGE_PACKED[name])
    return f, reference, small if size == "small" else large


def _loss(f):
    return lambda *args: sum(jnp.sum(jnp.real(y)) for y in jax.tree.leaves(f(*args)))


def _transform(f, how, n_args):
    argnums = tuple(range(n_args))
    if how == "grad":
        return jax.grad(_loss(f), argnums)
    if how == "jvp":
        return lambda *args: jax.jvp(f, args, args)
    return jax.vmap(jax.grad(_loss(f), argnums))


def _lower(fun, specs, platform):
    """The exported module's text, or the exception that stopped the lowering."""
    try:
        return jax.export.export(jax.jit(fun), platforms=[platform])(*specs).mlir_module()
    except Exception as e:  # noqa: BLE001 — what failed is reported below
        return e


def _check_module(text):
    routes = sorted(set(CPU_ROUTE.findall(text)))
    assert not routes, f"CPU routes in the module: {routes}"
    calls = re.findall(r"custom_call @(\w+)", text)
    cpu_calls = sorted({c for c in calls if CPU_CUSTOM_CALL.search(c)})
    assert not cpu_calls, f"CPU-only custom calls in the module: {cpu_calls}"


def _check_lowers(fun, specs, platform, reference=None):
    text = _lower(fun, specs, platform)
    if isinstance(text, Exception):
        if reference is not None and isinstance(_lower(reference, specs, platform), Exception):
            pytest.xfail(f"JAX itself cannot lower this for {platform}: "
                         f"{type(text).__name__}: {str(text).splitlines()[0]}")
        raise text
    _check_module(text)


def test_every_public_rule_has_a_case():
    functions = {n for n in rules.__all__ if callable(getattr(rules, n)) and n[0].islower()}
    users = {"rrule", "frule", "register_frule"}  # the machinery for users' own rules
    classes = {n for n in rules.__all__ if n[0].isupper() and n != "LQResult"}
    assert functions - users | classes <= {name.split()[0] for name in RULES}


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("how", ["grad", "jvp", "vmap grad"])
@pytest.mark.parametrize("size", ["small", "large"])
@pytest.mark.parametrize("name", RULES)
def test_rule_lowers(name, size, how, platform):
    f, reference, shapes = _rule(name, size)
    batch = (2,) if how == "vmap grad" else ()
    specs = [_spec(*batch, *shape) for shape in shapes]
    fun = _transform(f, how, len(specs))
    _check_lowers(fun, specs, platform,
                  None if reference is None else _transform(reference, how, len(specs)))


def test_cpu_modules_carry_the_cpu_routes():
    """The scan above finds what it looks for: CPU modules of the same programs name routes."""
    f, _, shapes = _rule("solve", "small")
    specs = [_spec(8, 8), _spec(8, 2)]
    text = jax.export.export(jax.jit(_transform(f, "grad", 2)), platforms=["cpu"])(*specs)
    assert "lu_with_rhs" in CPU_ROUTE.findall(text.mlir_module())


MANIFOLDS = [
    geometric.Sphere(5), geometric.Stiefel(8, 3), geometric.Stiefel(8, 3, retraction="polar"),
    geometric.Stiefel(8, 3, retraction="cayley", metric="canonical"),
    geometric.Stiefel(40, 20, retraction="exp", rows=True), geometric.Grassmann(8, 3),
    geometric.Orthogonal(4), geometric.Oblique(5, 3), geometric.SPD(3),
    geometric.SPD(3, metric="log_euclidean"), geometric.SPD(3, metric="bures_wasserstein"),
    geometric.PoincareBall(3), geometric.Lorentz(3), geometric.SymplecticStiefel(3, 2),
]
OPTIMIZERS = {
    "riemannian(adam)": lambda m: optim.riemannian(optax.adam(1e-2), m),
    "riemannian_sgd": lambda m: optim.riemannian_sgd(1e-2, m, momentum=0.9),
    "riemannian_adam": lambda m: optim.riemannian_adam(1e-2, m),
    "manifold_adam": lambda m: optim.manifold_adam(1e-2, m),
    "global_tangent_adam": lambda m: optim.global_tangent_adam(1e-2, m, retraction="exp"),
}
_FRAME_ONLY = {"manifold_adam", "global_tangent_adam"}


def _condition_only(failed, report, *values):
    """``_placement._when`` without the host callback: the condition and what it reads."""
    zero = lambda *v: jnp.zeros([], jnp.int32)  # noqa: E731
    return jax.lax.cond(failed, zero, zero, *values)


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("m", MANIFOLDS, ids=repr)
def test_optimizer_step_lowers(m, optimizer, platform, monkeypatch):
    monkeypatch.setattr(_placement, "_when", _condition_only)
    if optimizer in _FRAME_ONLY and "frame" not in m.capabilities:
        pytest.skip(f"{optimizer} takes manifolds of orthonormal frames")
    opt = OPTIMIZERS[optimizer](m)
    x = _spec(*m.shape)
    state = jax.eval_shape(opt.init, x)

    def step(x, g, state):
        updates, state = opt.update(g, state, x)
        return optax.apply_updates(x, updates), state

    _check_lowers(step, [x, x, state], platform)


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("m", MANIFOLDS, ids=repr)
def test_hessian_vector_product_lowers(m, platform):
    def hvp(x, v):
        g, h = jax.jvp(jax.grad(lambda x: jnp.sum(jnp.sin(x))), (x,), (v,))
        return m.ehess_to_rhess(x, g, h, v)
    x = _spec(*m.shape)
    _check_lowers(hvp, [x, x], platform)
