"""geometric.check_gradient and geometric.check_hessian: right derivatives pass with the expected
slope, wrong ones (a cost's derivative rule, a manifold's Hessian) fail with a slope far from it,
products and spec pytrees, the second-order curve of manifolds without ``exp``, input errors."""
import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geometric
import geometric._diagnostics as diagnostics
from tests.geometric.test_hessian import Circle, ScaledCircle
from tests.helpers import rand

SPHERE = geometric.Sphere(5)
X = SPHERE.random_point(jax.random.PRNGKey(0), jnp.float64)
A = jnp.diag(jnp.arange(1.0, 6.0))
KEY = jax.random.PRNGKey(1)


def rayleigh_plus_cubic(x):
    return x @ A @ x + jnp.sum(x ** 3)


def test_passes_with_the_slopes_and_the_range():
    st = geometric.Stiefel(6, 2)
    x = st.random_point(jax.random.PRNGKey(5), jnp.float64)
    a = rand((6, 6), seed=4)

    def cost(x):
        return jnp.trace(x.T @ a @ x @ jnp.diag(jnp.array([1.0, 2.0]))) + jnp.sum(jnp.sin(x))

    gradient, hessian = (check(cost, st, x, key=KEY)
                         for check in (geometric.check_gradient, geometric.check_hessian))
    for result, expected in ((gradient, 2), (hessian, 3)):
        assert result and result.passed
        assert result.expected_slope == expected and abs(result.slope - expected) < 0.05
        lo, hi = result.t_range
        assert 1e-8 <= lo < hi <= 1 and hi / lo == pytest.approx(10 ** 1.5)
        assert result.tangency_error < 1e-12
        assert result.t.shape == result.remainder.shape == (65,)
    assert gradient.symmetry_error is None and abs(hessian.symmetry_error) < 1e-12
    assert re.fullmatch(r"CheckResult\(passed=True, slope=\d\.\d{3}, expected_slope=3, "
                        r"t_range=\(\S+, \S+\), tangency_error=\S+, symmetry_error=\S+, "
                        r"reason='slope \d\.\d{3} on t in \[\S+, \S+\], within 0\.1 of 3'\)",
                        repr(hessian)), repr(hessian)


@jax.custom_jvp
def sin_sum_wrong_derivative(x):
    return jnp.sum(jnp.sin(x))


@sin_sum_wrong_derivative.defjvp
def _(primals, tangents):
    (x,), (dx,) = primals, tangents
    return sin_sum_wrong_derivative(x), jnp.sum(1.1 * jnp.cos(x) * dx)  # 10% off


@jax.custom_jvp
def cos_wrong_derivative(x):
    return jnp.cos(x)


@cos_wrong_derivative.defjvp
def _(primals, tangents):
    (x,), (dx,) = primals, tangents
    return jnp.cos(x), jnp.sin(x) * dx  # the sign is wrong


@jax.custom_jvp
def sin_sum_wrong_second_derivative(x):
    return jnp.sum(jnp.sin(x))


@sin_sum_wrong_second_derivative.defjvp
def _(primals, tangents):
    (x,), (dx,) = primals, tangents
    return sin_sum_wrong_second_derivative(x), jnp.sum(cos_wrong_derivative(x) * dx)


def test_a_wrong_gradient_fails_with_slope_one():
    for check in (geometric.check_gradient, geometric.check_hessian):
        result = check(sin_sum_wrong_derivative, SPHERE, X, key=KEY)
        assert not result and abs(result.slope - 1) < 0.1, result
        assert "not within 0.1" in result.reason


def test_a_wrong_second_derivative_fails_with_slope_two():
    assert geometric.check_gradient(sin_sum_wrong_second_derivative, SPHERE, X, key=KEY)
    result = geometric.check_hessian(sin_sum_wrong_second_derivative, SPHERE, X, key=KEY)
    assert not result and abs(result.slope - 2) < 0.1, result


@dataclasses.dataclass(frozen=True)
class SphereWithoutWeingarten(geometric.Sphere):
    def _ehess_to_rhess(self, x, egrad, ehess, v):
        return self._project(x, ehess)


@dataclasses.dataclass(frozen=True)
class SphereWithNormalHessian(geometric.Sphere):
    def _ehess_to_rhess(self, x, egrad, ehess, v):
        return ehess - jnp.sum(x * egrad, axis=-1, keepdims=True) * v


def test_a_wrong_manifold_hessian_fails():
    result = geometric.check_hessian(rayleigh_plus_cubic, SphereWithoutWeingarten(5), X, key=KEY)
    assert not result and abs(result.slope - 2) < 0.1, result
    # right along v, but not tangent
    result = geometric.check_hessian(rayleigh_plus_cubic, SphereWithNormalHessian(5), X, key=KEY)
    assert not result and abs(result.slope - 3) < 0.1 and result.tangency_error > 1e-3, result
    assert "not tangent" in result.reason


def test_grassmann_needs_a_cost_of_the_subspace():
    """A cost that depends on the basis has a gradient and Hessian of the same formula along the
    geodesic, but its Hessian is not self-adjoint: the check says so."""
    gr = geometric.Grassmann(5, 2)
    y = gr.random_point(jax.random.PRNGKey(2), jnp.float64)
    result = geometric.check_hessian(lambda y: jnp.sum(y ** 3), gr, y, key=KEY)
    assert not result and abs(result.slope - 3) < 0.1 and "not self-adjoint" in result.reason
    assert abs(result.symmetry_error) > 1e-3
    assert geometric.check_hessian(lambda y: jnp.sum((y @ y.T) ** 3), gr, y, key=KEY)


def test_an_exact_model_passes_with_no_slope():
    x = jnp.arange(3.0)
    for check, cost in ((geometric.check_gradient, lambda x: jnp.sum(2 * x)),
                        (geometric.check_hessian, lambda x: x @ x)):
        result = check(cost, None, x, key=KEY)
        assert result and np.isnan(result.slope) and "exact" in result.reason, result


def test_products_specs_and_batched_points():
    st = geometric.Stiefel(5, 2, metric="canonical")
    x = {"s": X, "st": st.random_point(jax.random.PRNGKey(4), jnp.float64), "e": jnp.ones(3),
         "spheres": jax.vmap(lambda k: SPHERE.random_point(k, jnp.float64))(
             jax.random.split(jax.random.PRNGKey(3), 3))}

    def cost(p):
        return (jnp.sum(jnp.sin(p["s"])) * jnp.sum(p["st"] ** 3) + jnp.sum(p["e"] ** 3) * p["s"][0]
                + jnp.sum(jnp.cos(p["spheres"] @ A @ p["spheres"].T)))

    mirror = {"s": SPHERE, "st": st, "e": None, "spheres": SPHERE}
    assert geometric.check_gradient(cost, mirror, x, key=KEY)
    result = geometric.check_hessian(
        cost, lambda p: {"s": SPHERE, "st": st, "e": geometric.optim.EUCLIDEAN, "spheres": SPHERE},
        x, key=KEY)
    assert result, result


def test_the_retraction_corrected_to_second_order():
    """``R_x(tv - ½t²a)`` with ``a`` the covariant acceleration of ``R_x(tv)``: ``a`` vanishes for
    a second-order retraction (the sphere's), and the corrected QR curve of the canonical Stiefel
    manifold follows its geodesic (``exp``, a rotation) to O(t³), the uncorrected one to O(t²)."""
    st = geometric.Stiefel(5, 2, metric="canonical")
    steps = jnp.array([0.02, 0.01, 0.005])

    @jax.jit
    def accelerations_and_gaps(x, y, keys):
        sphere = diagnostics._retraction_acceleration(SPHERE, x, SPHERE.random_tangent(keys[0], x))
        v = st.random_tangent(keys[1], y)
        a = diagnostics._retraction_acceleration(st, y, v)

        def gap(c):
            return jax.vmap(lambda t: jnp.linalg.norm(c(t) - st.exp(y, t * v)))(steps)
        return (SPHERE.norm(x, sphere), st.norm(y, a),
                gap(lambda t: st.retract(y, t * v - 0.5 * t * t * a)),
                gap(lambda t: st.retract(y, t * v)))

    sphere, qr, corrected, first_order = accelerations_and_gaps(
        X, st.random_point(KEY, jnp.float64), jax.random.split(jax.random.PRNGKey(9), 2))
    assert sphere < 1e-7 and qr > 0.1  # (x + v)/‖x + v‖ is second order, QR first order
    np.testing.assert_allclose(np.log2(corrected[:-1] / corrected[1:]), 3, atol=0.1)
    np.testing.assert_allclose(np.log2(first_order[:-1] / first_order[1:]), 2, atol=0.1)


def test_a_user_manifold_without_exp():
    """The base class's Hessian, checked along the retraction corrected to second order."""
    circle = Circle()
    x = circle.random_point(KEY, jnp.float64)
    result = geometric.check_hessian(lambda x: jnp.sin(3 * x[0]) * x[1] + x[1] ** 3, circle, x,
                                     key=KEY)
    assert result, result


# ----------------------------------------------------------------------------------------------
# Input errors, raised before anything runs, naming the argument

ERRORS = {
    "cost not callable": (
        lambda: geometric.check_gradient(1.0, SPHERE, X, key=KEY), TypeError,
        r"^check_gradient: `cost` must be a function of the point; got float\.$"),
    "cost not scalar": (
        lambda: geometric.check_hessian(lambda x: x, SPHERE, X, key=KEY), TypeError,
        (r"^check_hessian: `cost` must return a real float64 scalar; got shape \(5,\), dtype "
         r"float64\.$")),
    "cost in float32": (
        lambda: geometric.check_hessian(lambda x: jnp.sum(x).astype(jnp.float32), SPHERE, X,
                                        key=KEY), TypeError,
        r"`cost` must return a real float64 scalar; got shape \(\), dtype float32"),
    "key": (
        lambda: geometric.check_gradient(jnp.sum, SPHERE, X, key=1), TypeError,
        r"^check_gradient: `key` must be a JAX PRNG key .*; got int\.$"),
    "float32 point": (
        lambda: geometric.check_hessian(jnp.sum, SPHERE, X.astype(jnp.float32), key=KEY),
        TypeError,
        (r"^check_hessian: `x` must be a float64 array .*; got ArrayImpl of dtype float32 and "
         r"shape \(5,\)\.")),
    "shape": (
        lambda: geometric.check_gradient(lambda p: jnp.sum(p["a"]), {"a": SPHERE},
                                         {"a": jnp.ones(4)}, key=KEY), ValueError,
        r"^check_gradient: `x\['a'\]` must have shape \(\.\.\., 5\); got \(4,\)\.$"),
    "off the manifold": (
        lambda: geometric.check_gradient(jnp.sum, SPHERE, 2 * X, key=KEY), ValueError,
        r"^check_gradient: `x` is not a point of Sphere\(n=5\): \|xᵀx − 1\| = 3 > atol = \S+\.$"),
    "structure": (
        lambda: geometric.check_gradient(jnp.sum, {"a": SPHERE}, {"b": X}, key=KEY), ValueError,
        (r"^check_gradient: `manifold` must have the structure of `x` .*nothing in `manifold` "
         r"covers the leaf 'b' of `x`")),
    "no Hessian": (
        lambda: geometric.check_hessian(jnp.sum, ScaledCircle(), jnp.array([0.6, 0.8]), key=KEY),
        NotImplementedError, r"ehess_to_rhess: ScaledCircle has its own metric"),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_input_errors(case):
    call, error, message = ERRORS[case]
    with pytest.raises(error, match=message):
        call()


def test_traced_points_and_float32_mode_are_refused():
    with pytest.raises(TypeError, match=r"^check_gradient: `x` must be a concrete array; got a "
                                        r"tracer"):
        jax.jit(lambda x: geometric.check_gradient(jnp.sum, SPHERE, x, key=KEY).slope)(X)
    with jax.enable_x64(False), pytest.raises(
            TypeError, match=r"^check_hessian runs in float64, which is off: enable it with "
                             r"jax.config.update"):
        geometric.check_hessian(jnp.sum, SPHERE, np.asarray(X), key=KEY)
