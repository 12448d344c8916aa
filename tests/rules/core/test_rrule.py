"""Tests of rules/_rrule.py: the rrule decorator (custom_vjp from a ChainRules-style rule) and frule."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rules
from rules.testing import check_rrule


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Multiplier:
    """The ChainRules documentation's callable struct: ``m(y) = m.x * y``, with ``∂self``."""

    x: jax.Array

    @rules.rrule
    def __call__(self, y):
        def multiplier_pullback(z_bar):
            return Multiplier(x=jnp.sum(z_bar * y)), z_bar * self.x

        return self.x * y, multiplier_pullback


def test_callable_pytree_gets_dself():
    m, y = Multiplier(jnp.array(3.0)), jnp.array([1.0, 2.0])
    np.testing.assert_allclose(m(y), [3.0, 6.0])
    m_bar, y_bar = jax.grad(lambda m, y: jnp.sum(m(y) ** 2), argnums=(0, 1))(m, y)
    assert isinstance(m_bar, Multiplier)
    np.testing.assert_allclose(m_bar.x, 2 * 3 * (1 + 4))
    np.testing.assert_allclose(y_bar, 2 * 3 * 3 * y)
    check_rrule(lambda m, y: m(y), m, y)


def test_closure_residuals_and_no_recomputation():
    calls = []

    @rules.rrule
    def softplus(x):
        calls.append(1)
        e = jnp.exp(-jnp.abs(x))  # closed over by the pullback: a residual
        y = jnp.maximum(x, 0) + jnp.log1p(e)

        def softplus_pullback(y_bar):
            return (y_bar * jnp.where(x > 0, 1 / (1 + e), e / (1 + e)),)

        return y, softplus_pullback

    x = jnp.array([-2.0, 0.5, 3.0])
    _, pullback = jax.vjp(softplus, x)
    pullback(jnp.ones(3))
    assert len(calls) == 1  # the backward pass reuses the residuals, it does not rerun the forward
    np.testing.assert_allclose(jax.grad(lambda x: softplus(x).sum())(x), jax.nn.sigmoid(x), rtol=1e-12)
    check_rrule(softplus, x)


def test_jit_vmap_grad_of_grad():
    @rules.rrule
    def cube(x):
        def cube_pullback(y_bar):
            return (3 * x**2 * y_bar,)

        return x**3, cube_pullback

    x = jnp.array([0.5, -1.5])
    np.testing.assert_allclose(jax.jit(jax.grad(lambda x: cube(x).sum()))(x), 3 * x**2)
    np.testing.assert_allclose(jax.vmap(jax.grad(lambda x: cube(x)))(x), 3 * x**2)
    np.testing.assert_allclose(jax.grad(jax.grad(lambda x: cube(x)))(0.5), 6 * 0.5)
    np.testing.assert_allclose(jax.hessian(lambda x: cube(x).sum())(x), jnp.diag(6 * x), atol=1e-12)


def test_integer_closure_is_a_residual_under_jit():
    @rules.rrule
    def take_max(x):
        i = jnp.argmax(x)

        def take_max_pullback(y_bar):
            return (jnp.zeros_like(x).at[i].set(y_bar),)

        return x[i], take_max_pullback

    x = jnp.array([1.0, 5.0, 2.0])
    np.testing.assert_allclose(jax.jit(jax.grad(take_max))(x), [0.0, 1.0, 0.0])


def test_nondiff_argnums_and_none_cotangents():
    @rules.rrule(nondiff_argnums=(1,))
    def power(x, k):
        def power_pullback(y_bar):
            return y_bar * k * x ** (k - 1), None  # one per argument, None at the static one

        return x**k, power_pullback

    @rules.rrule(nondiff_argnums=(0,))
    def scaled(k, x):
        def scaled_pullback(y_bar):
            return (k * y_bar,)  # or only the differentiable ones

        return k * x, scaled_pullback

    np.testing.assert_allclose(jax.grad(power)(2.0, 3), 12.0)
    np.testing.assert_allclose(jax.jit(jax.grad(power), static_argnums=1)(2.0, 3), 12.0)
    np.testing.assert_allclose(jax.grad(scaled, argnums=1)(4, 2.0), 4.0)

    @rules.rrule
    def first(x, y):
        def first_pullback(z_bar):
            return z_bar, None

        return x + 0 * y, first_pullback

    assert jax.grad(first, argnums=1)(1.0, 2.0) == 0.0


def test_cotangent_projection():
    @rules.rrule
    def double(x, n):
        def double_pullback(y_bar):
            # float64 and complex cotangents for a float32 argument, anything for an int one
            return (2 * y_bar).astype(jnp.complex128), jnp.ones(3)

        return 2 * x, double_pullback

    x = jnp.ones(3, jnp.float32)
    g = jax.grad(lambda x: double(x, jnp.arange(3)).sum())(x)
    assert g.dtype == jnp.float32
    np.testing.assert_allclose(g, 2.0)


def test_pullback_errors_name_the_problem():
    @rules.rrule
    def wrong_count(x, y):
        return x * y, lambda z_bar: (z_bar,)

    @rules.rrule
    def wrong_shape(x):
        return x * 2, lambda z_bar: (jnp.ones(5),)

    @rules.rrule
    def wrong_structure(m):
        return m.x * 2, lambda z_bar: ((z_bar, z_bar),)

    with pytest.raises(ValueError, match="must return one cotangent per argument"):
        jax.grad(wrong_count)(1.0, 2.0)
    with pytest.raises(ValueError, match=r"cotangent for `argument 0` must have shape \(3,\); got \(5,\)"):
        jax.grad(lambda x: wrong_shape(x).sum())(jnp.ones(3))
    with pytest.raises(ValueError, match="must have the structure of the argument"):
        jax.grad(lambda m: wrong_structure(m).sum())(Multiplier(jnp.ones(2)))


def test_frule_registry():
    @rules.rrule
    def scale(x, y):
        return x * y, lambda z_bar: (z_bar * y, z_bar * x)

    with pytest.raises(TypeError, match=r"(?s)frule: scale is a rules.rrule with a pullback only, "
                                        r"so it has no forward mode .*@rules.register_frule\(scale\)"):
        rules.frule(scale, (1.0, 2.0), (1.0, 0.0))

    @rules.register_frule(scale)
    def scale_pushforward(primals, tangents):
        (x, y), (x_dot, y_dot) = primals, tangents
        return x * y, x_dot * y + x * y_dot

    out, out_dot = rules.frule(scale, (jnp.array(2.0), jnp.array(3.0)), (jnp.array(1.0), jnp.array(0.5)))
    assert out == 6.0 and out_dot == 3.0 + 1.0
    check_rrule(scale, jnp.array([1.0, 2.0]), jnp.array([3.0, -1.0]))  # checks the pushforward too
    with pytest.raises(ValueError, match="got 2 primals but 1 tangents"):
        rules.frule(scale, (1.0, 2.0), (1.0,))


def test_registered_pushforward_gives_forward_mode_and_keeps_the_pullback():
    calls = {"pullback": 0, "pushforward": 0}

    @rules.rrule
    def cube(x):
        def cube_pullback(y_bar):
            calls["pullback"] += 1
            return (3 * x**2 * y_bar,)

        return x**3, cube_pullback

    x = jnp.array([0.5, -1.5, 2.0])
    with pytest.raises(TypeError, match=r"cube is a rules.rrule with a pullback only, so it has no "
                                        r"forward mode(.|\n)*@rules.register_frule\(cube\)"):
        jax.jvp(cube, (x,), (x,))

    @rules.register_frule(cube)
    def cube_pushforward(primals, tangents):
        calls["pushforward"] += 1
        (x,), (x_dot,) = primals, tangents
        return x**3, 3 * x**2 * x_dot

    np.testing.assert_allclose(jax.jvp(cube, (x,), (x,))[1], 3 * x**3)
    np.testing.assert_allclose(jax.jacfwd(cube)(x), jnp.diag(3 * x**2))
    np.testing.assert_allclose(jax.linearize(cube, x)[1](x), 3 * x**3)
    np.testing.assert_allclose(jax.hessian(lambda x: cube(x).sum())(x), jnp.diag(6 * x), atol=1e-12)
    np.testing.assert_allclose(jax.jacrev(jax.jacfwd(lambda x: cube(x).sum()))(x), jnp.diag(6 * x),
                               atol=1e-12)
    assert calls["pushforward"] > 0
    before = calls["pullback"]
    np.testing.assert_allclose(jax.grad(lambda x: cube(x).sum())(x), 3 * x**2)
    assert calls["pullback"] > before  # reverse mode still runs the pullback
    check_rrule(cube, x)


def test_keyword_arguments():
    @rules.rrule(nondiff_argnums=(0,))
    def scaled(k, x, alpha=1.0):
        return alpha * k * x, lambda y_bar: (alpha * k * y_bar, jnp.sum(k * x * y_bar))

    np.testing.assert_allclose(scaled(2, jnp.array(3.0), alpha=0.5), 3.0)
    np.testing.assert_allclose(scaled(2, x=jnp.array(3.0)), 6.0)
    np.testing.assert_allclose(jax.grad(lambda a: scaled(k=4, x=jnp.array(2.0), alpha=a))(1.0), 8.0)
    with pytest.raises(TypeError, match="scaled: got an unexpected keyword argument 'beta'"):
        scaled(2, jnp.array(3.0), beta=1.0)


def test_a_rule_that_returns_no_pullback_is_an_error():
    """A function that forgets its pullback (or returns something else) is an error at trace time,
    eagerly, under jit and under grad, naming the function: never its output's first entry."""
    @rules.rrule
    def no_pullback(x):
        return 2 * x

    @rules.rrule
    def not_callable(x):
        return 2 * x, 2.0

    @rules.rrule
    def three(x):
        return 2 * x, lambda y_bar: (2 * y_bar,), None

    x = jnp.ones(3)
    for f, got in [(no_pullback, "ArrayImpl|JitTracer|DynamicJaxprTracer"),
                   (not_callable, "a pair whose second element is a float"),
                   (three, "a tuple of 3")]:
        for call in (f, jax.jit(f), jax.grad(lambda x, f=f: f(x).sum())):
            with pytest.raises(TypeError, match=rf"rrule: {f.__name__} must return `\(output, "
                                                rf"pullback\)`.*; got ({got})"):
                call(x)
