"""Tests of rules/_core/rule.py: forward mode runs the pushforward, reverse mode the pullback.

Also: every public rule is defined through a Rule; symbolic zeros; vmap of unbatched operands;
every rule at every empty shape.
"""
import importlib
import inspect
import pkgutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rules
from rules.internal import Rule
from tests.helpers import rand


def _library_rules() -> dict[str, Rule]:
    found = {}
    for info in pkgutil.walk_packages(rules.__path__, "rules."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, Rule):
                found[value.name] = value
    return found


LIBRARY_RULES = _library_rules()

_W3 = rand((3, 3), 1)
_T = rand((2, 3, 3), 2)
_SPD = _W3 @ _W3.T + 3 * jnp.eye(3)
_L = jnp.linalg.cholesky(_SPD)
# Every public function that is a rule: its arguments, and the Rule(s) it is defined through.
PUBLIC_RULES = {
    "inv": ((rand((3, 3), 3) + 3 * jnp.eye(3),), ["inv"]),
    "qr": ((rand((4, 3), 4),), ["qr"]),
    "lq": ((rand((3, 4), 5),), ["lq"]),
    "cayley": ((_W3 - _W3.T,), ["cayley"]),
    "tensor_tensor_mul": ((_T, _T), ["batched_product"]),
    "tensor_transpose_tensor_mul": ((_T, _T), ["batched_product"]),
    "mat_tensor_mul": ((_W3, _T), ["batched_product"]),
    "tensor_mat_mul": ((_T, _W3), ["batched_product"]),
    "tensor_transpose_mat_mul": ((_T, _W3), ["batched_product"]),
    "tensor_transpose": ((_T,), ["tensor_transpose"]),
    "volume_preserving_attention": ((0.5 * _T, _W3), ["volume_preserving_attention"]),
    "volume_preserving_feedforward": ((_T, rules.StrictlyLower(rand((3,), 6), 3)),
                                      ["batched_product", "unpack"]),
    "solve": ((_SPD, rand((3, 2), 7)), ["solve"]),
    "det": ((rand((5, 5), 8),), ["det"]),
    "slogdet": ((rand((5, 5), 9),), ["slogdet"]),
    "cholesky": ((_SPD,), ["cholesky"]),
    "cho_solve": ((_L, rand((3, 2), 10)), ["cho_solve"]),
    "eigh": ((_SPD,), ["eigh"]),
    "svd": ((rand((4, 3), 11),), ["svd"]),
    "expm": ((0.5 * _W3,), ["expm"]),
    "expm_frechet": ((0.5 * _W3, _W3), ["expm_frechet"]),
    "polar": ((rand((4, 3), 13),), ["polar_unitary", "polar_positive"]),
    "solve_sylvester": ((_SPD, _SPD + jnp.eye(3), rand((3, 3), 15)), ["solve_sylvester"]),
    "solve_continuous_lyapunov": ((-_SPD, rand((3, 3), 16)), ["solve_continuous_lyapunov"]),
    "sqrtm": ((_SPD,), ["sqrtm"]),
    "logm": ((_SPD,), ["logm"]),
    "sqrtmh": ((_SPD,), ["hermitian_function"]),
    "logmh": ((_SPD,), ["hermitian_function"]),
    "powmh": ((_SPD,), ["hermitian_function"]),
    "hermitian_function": ((_SPD,), ["hermitian_function"]),
    "eig": ((rand((3, 3), 12),), ["eig"]),
    "eigvals": ((rand((3, 3), 12),), ["eigvals"]),
}
# Rules whose signature is not a function of arrays alone, called through a wrapper.
CALLS = {"cho_solve": lambda c, b: rules.cho_solve((c, True), b),
         "powmh": lambda a: rules.powmh(a, 0.5),
         "hermitian_function": lambda a: rules.hermitian_function(a, jnp.tanh)}
NOT_RULES = {"rrule", "frule", "register_frule", "testing", "internal", "QRResult", "LQResult",
             "StrictlyLower", "StrictlyUpper", "SkewSymmetric", "Symmetric"}


def test_every_public_rule_is_listed():
    assert set(rules.__all__) - NOT_RULES == set(PUBLIC_RULES)


def _primitive_names(closed_jaxpr) -> set[str]:
    names = set()

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            names.add(eqn.primitive.name)
            for param in eqn.params.values():
                for inner in param if isinstance(param, (list, tuple)) else [param]:
                    if hasattr(inner, "jaxpr"):
                        walk(getattr(inner.jaxpr, "jaxpr", inner.jaxpr))

    walk(closed_jaxpr.jaxpr)
    return names


def _spy(monkeypatch, rule, attribute):
    calls = []
    original = getattr(rule, attribute)

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(rule, attribute, spy)
    return calls


@pytest.mark.parametrize("name", sorted(PUBLIC_RULES))
def test_forward_mode_runs_the_pushforward_and_reverse_mode_the_pullback(name, monkeypatch):
    fn = CALLS.get(name, getattr(rules, name))
    args, rule_names = PUBLIC_RULES[name]
    used = [LIBRARY_RULES[r] for r in rule_names]
    tangents = jax.tree.map(jnp.ones_like, args)

    jvp_jaxpr = jax.make_jaxpr(lambda *a: jax.jvp(fn, a, tangents))(*args)
    assert {r.primitive.name for r in used} <= _primitive_names(jvp_jaxpr)

    pullback_calls = [_spy(monkeypatch, r, "pullback") for r in used]
    # A vjp of these shapes traced by an earlier test would be served from JAX's caches,
    # without calling the (spied) pullback again.
    jax.clear_caches()
    out, vjp = jax.vjp(fn, *args)
    backward = jax.make_jaxpr(vjp)(jax.tree.map(jnp.ones_like, out))
    assert all(calls for calls in pullback_calls), "reverse mode did not call the pullback"
    # The backward pass is the pullback's own code: the pushforward primitive was transposed away.
    assert not {r.primitive.name for r in used} & _primitive_names(backward)

    pushforward_calls = [_spy(monkeypatch, r, "pushforward") for r in used]
    jax.jvp(fn, args, tangents)  # eager: the primitive is evaluated
    assert all(calls for calls in pushforward_calls), "forward mode did not call the pushforward"


def test_inverse_backward_pass_has_no_factorisation():
    """The pullback of inv is two products: no LU, no solve (it reuses B = A⁻¹)."""
    a = rand((6, 6), 7) + 4 * jnp.eye(6)
    _, vjp = jax.vjp(rules.inv, a)
    names = _primitive_names(jax.make_jaxpr(vjp)(jnp.ones((6, 6))))
    assert "dot_general" in names
    assert not {"lu", "triangular_solve", "custom_linear_solve", "lu_pivots_to_permutation"} & names


def test_symbolic_zero_tangents_skip_terms():
    x, w = rand((4, 3, 2), 8), rand((2, 5), 9)
    tensor_mat_mul = inspect.unwrap(rules.tensor_mat_mul)  # without the dispatching jit
    jaxpr = jax.make_jaxpr(lambda x: jax.jvp(lambda x: tensor_mat_mul(x, w), (x,), (x,)))(x)
    eqn = next(e for e in jaxpr.jaxpr.eqns if e.primitive.name == "batched_product_pushforward")
    assert len(eqn.invars) == 2 + 1  # residuals x, w; only x's tangent
    # Every tangent symbolically zero: the pushforward is not evaluated at all.
    jaxpr = jax.make_jaxpr(lambda x: jax.jvp(
        lambda x: rules.tensor_mat_mul(jax.lax.stop_gradient(x), w), (x,), (x,)))(x)
    assert "batched_product_pushforward" not in _primitive_names(jaxpr)


def test_jacfwd_of_shared_weight_does_not_copy_residuals():
    """vmap over the tangent only: the residuals stay unbatched inside the primitive."""
    x, w = rand((8, 3, 4), 10), rand((4, 4), 11)
    jac = jax.jacfwd(rules.tensor_mat_mul, argnums=1)(x, w)
    np.testing.assert_allclose(jac, jax.jacfwd(jnp.matmul, argnums=1)(x, w), rtol=1e-12)
    jaxpr = jax.make_jaxpr(jax.jacfwd(inspect.unwrap(rules.tensor_mat_mul), argnums=1))(x, w)
    eqn = next(e for e in jaxpr.jaxpr.eqns if e.primitive.name == "batched_product_pushforward")
    assert eqn.params["batch"] == ((None, None, 0),)  # x and w shared by the 16 tangents


def test_rule_with_none_cotangent_and_pytree_argument():
    def forward(pair, *, scale):
        x, y = pair
        return scale * x * y, (x, y)

    def pushforward(res, pair_dot, *, scale):
        (x, y), (x_dot, y_dot) = res, pair_dot
        return scale * (x_dot * y + x * y_dot)

    def pullback(res, z_bar, *, scale):
        x, y = res
        return ((scale * z_bar * y, None),)  # no cotangent for y: the rule says it is zero

    rule = Rule("scaled_product", forward, pushforward, pullback)
    x, y = rand((3,), 12), rand((3,), 13)
    g = jax.grad(lambda p: jnp.sum(rule(p, scale=2.0)))((x, y))
    np.testing.assert_allclose(g[0], 2 * y)
    np.testing.assert_array_equal(g[1], jnp.zeros(3))
    _, t = jax.jvp(lambda p: rule(p, scale=2.0), ((x, y),), ((jnp.ones(3), jnp.zeros(3)),))
    np.testing.assert_allclose(t, 2 * y)


def test_pullback_with_wrong_number_of_cotangents_is_named():
    rule = Rule("bad", lambda x: (2 * x, ()), lambda _, x_dot: 2 * x_dot, lambda _, y_bar: 2 * y_bar)
    with pytest.raises(ValueError, match="bad: the pullback must return a tuple with one cotangent "
                                         "per argument"):
        jax.grad(lambda x: rule(x).sum())(jnp.ones(3))


def test_disable_jit():
    a = rand((3, 3), 14) + 3 * jnp.eye(3)
    with jax.disable_jit():
        _, t = jax.jvp(rules.inv, (a,), (a,))
    np.testing.assert_allclose(t, -jnp.linalg.inv(a), rtol=1e-12)


# ----------------------------------------------------------------------------------------------
# Empty shapes: every rule, forward, pushforward and pullback, as JAX's ops handle them.


def _empty_cases():
    z = jnp.zeros
    cases = [
        ("inv (0, 0)", rules.inv, (z((0, 0)),), jnp.linalg.inv),
        ("inv (2, 0, 0)", rules.inv, (z((2, 0, 0)),), jnp.linalg.inv),
        ("inv (0, 3, 3)", rules.inv, (z((0, 3, 3)),), jnp.linalg.inv),
        ("cayley (0, 0)", rules.cayley, (z((0, 0)),), None),
        ("eig (0, 3, 3)", rules.eig, (z((0, 3, 3)),), jnp.linalg.eig),
        ("sqrtmh (0, 0)", rules.sqrtmh, (z((0, 0)),), None),
        ("hermitian_function (2, 0, 0)", lambda a: rules.hermitian_function(a, jnp.tanh),
         (z((2, 0, 0)),), None),
        ("eigvals (2, 0, 0)", rules.eigvals, (z((2, 0, 0)),), jnp.linalg.eigvals),
        ("lq (0, 2)", rules.lq, (z((0, 2)),), None),
        ("lq (2, 0)", rules.lq, (z((2, 0)),), None),
        ("tensor_mat_mul k=0", rules.tensor_mat_mul, (z((3, 2, 0)), z((0, 4))), jnp.matmul),
        ("tensor_tensor_mul k=0", rules.tensor_tensor_mul, (z((3, 2, 0)), z((3, 0, 4))), jnp.matmul),
        ("mat_tensor_mul batch 0", rules.mat_tensor_mul, (rand((2, 3), 1), z((0, 3, 4))), jnp.matmul),
        ("tensor_transpose (0, 2, 3)", rules.tensor_transpose, (z((0, 2, 3)),), lambda a: a.mT),
        ("attention T=0", rules.volume_preserving_attention, (z((2, 0, 3)), rand((3, 3), 2)), None),
        ("attention d=0", rules.volume_preserving_attention, (z((2, 3, 0)), z((0, 0))), None),
    ]
    for shape in [(0, 0), (0, 2), (2, 0)]:
        for mode in ["reduced", "complete", "r"]:
            cases.append((f"qr {shape} {mode}", lambda a, mode=mode: rules.qr(a, mode=mode),
                          (z(shape),), lambda a, mode=mode: jnp.linalg.qr(a, mode=mode)))
    return cases


EMPTY = _empty_cases()


@pytest.mark.parametrize("name,fn,args,reference", EMPTY, ids=[c[0] for c in EMPTY])
def test_empty_shapes(name, fn, args, reference):
    out = fn(*args)
    if reference is not None:
        for y, r in zip(jax.tree.leaves(out), jax.tree.leaves(reference(*args))):
            assert y.shape == r.shape and y.dtype == r.dtype
            np.testing.assert_array_equal(y, r)
    assert all(isinstance(y, jax.Array) for y in jax.tree.leaves(out))
    _, out_dot = jax.jvp(fn, args, jax.tree.map(jnp.ones_like, args))
    for y, t in zip(jax.tree.leaves(out), jax.tree.leaves(out_dot)):
        assert t.shape == y.shape
        np.testing.assert_array_equal(t, jnp.zeros_like(y))  # no input entry moves it
    _, vjp = jax.vjp(fn, *args)
    cts = vjp(jax.tree.map(jnp.ones_like, out))
    for x, c in zip(args, cts):
        assert c.shape == x.shape and c.dtype == x.dtype
