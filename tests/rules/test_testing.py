"""Tests of rules/testing.py: the kit passes correct rules and catches wrong ones, saying where."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rules
from rules.testing import check_frule, check_rrule


def rand(shape, seed=0, dtype=jnp.float64):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return jnp.asarray(x, dtype)


def make_matmul_rule(pullback):
    @rules.rrule
    def matmul(a, b):
        return a @ b, lambda c_bar: pullback(a, b, c_bar)

    return matmul


def test_passes_correct_rules_and_plain_functions():
    good = make_matmul_rule(lambda a, b, c: (c @ b.T, a.T @ c))
    check_rrule(good, rand((3, 4), 1), rand((4, 2), 2))
    check_rrule(lambda x: jnp.sin(x) * x, rand((5,), 3))  # any differentiable JAX function


def test_catches_wrong_pullback_and_names_argument_and_index():
    transposed = make_matmul_rule(lambda a, b, c: (c @ b.T, (a.T @ c) * jnp.array([[1.0, 1.0001]])))
    with pytest.raises(AssertionError, match=r"pullback of argument \[1\] \(shape \(4, 2\)\).*worst index \(\d, 1\)"):
        check_rrule(transposed, rand((3, 4), 1), rand((4, 2), 2))


def test_catches_wrong_complex_convention():
    @rules.rrule
    def square(z):
        return z * z, lambda w_bar: (2 * jnp.conj(z) * w_bar,)  # the conj is wrong in JAX's convention

    with pytest.raises(AssertionError, match="pullback"):
        check_rrule(square, rand((3,), 4, jnp.complex128))

    @rules.rrule
    def square_ok(z):
        return z * z, lambda w_bar: (2 * z * w_bar,)

    check_rrule(square_ok, rand((3,), 4, jnp.complex128))


def test_catches_wrong_pushforward():
    @rules.rrule
    def cube(x):
        return x**3, lambda y_bar: (3 * x**2 * y_bar,)

    @rules.register_frule(cube)
    def cube_pushforward(primals, tangents):
        (x,), (x_dot,) = primals, tangents
        return x**3, 3 * x * x_dot  # should be 3x²ẋ

    x = rand((4,), 5)
    with pytest.raises(AssertionError, match="pushforward"):
        check_frule(cube, x)
    with pytest.raises(AssertionError, match="pushforward"):
        check_rrule(cube, x)


def test_casts_to_float64_and_checks_pytrees():
    good = make_matmul_rule(lambda a, b, c: (c @ b.T, a.T @ c))
    check_rrule(good, rand((2, 3), 6, jnp.float32), rand((3, 2), 7, jnp.float32))
    check_rrule(lambda p: p["w"] @ p["v"], {"w": rand((2, 3), 8), "v": rand((3,), 9)})


def test_samples_entries_of_large_arguments():
    check_rrule(lambda x: jnp.tanh(x) @ x.T, rand((30, 30), 10), max_entries=20)


def test_static_and_integer_arguments_pass_through():
    def pick(x, idx, mode):
        assert mode == "rows"
        return x[idx] * 2

    check_rrule(pick, rand((4, 3), 11), jnp.array([2, 0]), "rows")


def test_wrong_dtype_of_cotangent_is_caught():
    @jax.custom_vjp
    def f(x):
        return 2 * x

    f.defvjp(lambda x: (2 * x, None), lambda _, g: (2 * g,))
    check_rrule(f, rand((3,), 12))

    with pytest.raises(ValueError, match="no argument has a float or complex array"):
        check_rrule(lambda i: i * 2, jnp.arange(3))


def test_catches_a_wrong_pushforward_of_a_library_rule(monkeypatch):
    from rules._linalg.dense import _inv

    monkeypatch.setattr(_inv, "pushforward", lambda b, a_dot: -(b @ a_dot @ b).mT)  # transposed
    a = rand((3, 3), 10) + 3 * jnp.eye(3)
    with pytest.raises(AssertionError, match="pushforward"):
        check_frule(rules.inv, a)
    with pytest.raises(AssertionError, match="pushforward"):
        check_rrule(rules.inv, a)
