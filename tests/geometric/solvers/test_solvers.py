"""What every solver shares: batches under vmap, float32, export, product manifolds, stopping
reasons, history and the checks of its inputs."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geometric
from geometric.solvers import REASONS
from tests.geometric.solvers.problems import (
    SOLVERS,
    SPECTRUM,
    SPHERE,
    rayleigh,
    solver,
    starts,
)


@pytest.mark.parametrize("name", SOLVERS)
def test_a_batch_stops_each_problem_on_its_own(name):
    """vmap of the solve: each problem takes the iterations it takes alone (not the batch's
    maximum), and all reach the optimum.

    A batched product rounds differently from an unbatched one (the costs at the start differ in
    the last bit), and steepest descent's first trials (twice the last decrease, a
    Barzilai–Borwein-like rule) amplify such differences step by step: its paths agree only for
    its first dozen or so steps, hence its looser tolerance here.
    """
    tol = 1e-3 if name == "steepest_descent" else 1e-9
    solve = jax.jit(lambda x0: solver(name)(rayleigh, SPHERE, x0, gradient_tolerance=tol))
    x0s = starts(SPHERE, 3)
    batched = jax.jit(jax.vmap(solve))(x0s)
    alone = [solve(x0) for x0 in x0s]
    np.testing.assert_array_equal(batched.iterations, [r.iterations for r in alone])
    assert len(set(np.asarray(batched.iterations).tolist())) > 1
    assert np.all(batched.converged) and np.all(batched.gradient_norm <= tol)
    np.testing.assert_allclose(-batched.cost, SPECTRUM.max(), rtol=max(tol ** 2, 1e-15))
    for r, b in zip(alone, batched.point):
        np.testing.assert_allclose(b, r.point, atol=tol)


@pytest.mark.parametrize("name", SOLVERS)
def test_float32_reaches_the_optimum_to_its_precision(name):
    res = solver(name)(rayleigh, SPHERE, starts(SPHERE, 1, jnp.float32)[0])
    assert res.point.dtype == res.cost.dtype == jnp.float32
    assert bool(res.converged), REASONS[res.reason]
    np.testing.assert_allclose(-res.cost, SPECTRUM.max(), rtol=1e-6)


@pytest.mark.parametrize("platform", ["cuda", "tpu"])
@pytest.mark.parametrize("name", SOLVERS)
def test_lowers_for_gpu_and_tpu_without_callbacks(name, platform):
    solve = jax.jit(lambda x0: solver(name)(rayleigh, SPHERE, x0, history=4))
    text = jax.export.export(solve, platforms=[platform])(
        jax.ShapeDtypeStruct((6,), jnp.float32)).mlir_module()
    assert "while" in text
    assert not re.findall(r"custom_call @(\w+)", text)  # no LAPACK, no host callback


@pytest.mark.parametrize("name", SOLVERS)
def test_product_of_manifolds_with_a_euclidean_leaf(name):
    """A pytree point: a sphere, a Stiefel frame, a stack of two circles' worth of spheres and an
    unconstrained vector; the optimum is the sum of the parts'."""
    b = jnp.asarray(np.diag([3.0, 2.0, 1.0, 0.0]))
    c = jnp.asarray([1.0, -2.0])
    spec = {"u": SPHERE, "v": geometric.Stiefel(4, 2), "w": geometric.Sphere(3), "b": None}

    def cost(p):
        return (rayleigh(p["u"]) - jnp.trace(p["v"].T @ b @ p["v"]) - jnp.sum(p["w"][:, 0])
                + jnp.sum((p["b"] - c) ** 2))

    keys = jax.random.split(jax.random.PRNGKey(1), 4)
    x0 = {"u": SPHERE.random_point(keys[0], jnp.float64),
          "v": geometric.Stiefel(4, 2).random_point(keys[1], jnp.float64),
          "w": jax.vmap(lambda k: geometric.Sphere(3).random_point(k, jnp.float64))(keys[2:]),
          "b": jnp.zeros(2)}
    res = solver(name)(cost, spec, x0)
    assert bool(res.converged), REASONS[res.reason]
    np.testing.assert_allclose(res.cost, -SPECTRUM.max() - 5.0 - 2.0, rtol=1e-12)
    np.testing.assert_allclose(res.point["b"], c, atol=1e-6)
    np.testing.assert_allclose(res.point["w"][:, 0], [1.0, 1.0], atol=1e-6)


@pytest.mark.parametrize("name", SOLVERS)
def test_history_and_the_iteration_budget(name):
    res = solver(name)(rayleigh, SPHERE, starts(SPHERE, 1)[0], max_iterations=3, history=5)
    assert REASONS[res.reason] == "max_iterations" and int(res.iterations) == 3
    assert not bool(res.converged)
    h = res.history
    assert set(h) == {"cost", "gradient_norm", "step_size"}
    assert all(v.shape == (5,) for v in h.values())
    assert np.all(np.isfinite(h["cost"][:4])) and np.all(np.isnan(h["cost"][4:]))
    assert np.isnan(h["step_size"][0]) and np.all(h["step_size"][1:4] >= 0)
    assert h["cost"][3] == res.cost and h["gradient_norm"][3] == res.gradient_norm
    assert np.all(np.diff(h["cost"][:4]) <= 1e-15)  # every solver here is monotone
    assert solver(name)(rayleigh, SPHERE, starts(SPHERE, 1)[0], max_iterations=0).history is None


@pytest.mark.parametrize("name", SOLVERS)
def test_bad_input_is_named_at_the_call(name):
    f = solver(name)
    x0 = starts(SPHERE, 1)[0]
    with pytest.raises(ValueError, match=rf"{name}: `x0` must have shape \(\.\.\., 6\); got \(5,\)"):
        f(rayleigh, SPHERE, x0[:5])
    with pytest.raises(TypeError, match=rf"{name}: `x0` must have dtype float32, float64"):
        f(rayleigh, SPHERE, jnp.ones(6, jnp.int32))
    with pytest.raises(ValueError, match=rf"{name}: `x0` is not a point of Sphere\(n=6\)"):
        f(rayleigh, SPHERE, 2 * x0)
    with pytest.raises(ValueError, match=rf"{name}: `cost` must return a scalar, shape \(\); got "
                                         r"shape \(6,\)"):
        f(lambda x: x, SPHERE, x0)
    with pytest.raises(TypeError, match=rf"{name}: `cost` must be a function"):
        f(3.0, SPHERE, x0)
    with pytest.raises(ValueError, match=rf"{name}: `gradient_tolerance` must be ≥ 0; got -1"):
        f(rayleigh, SPHERE, x0, gradient_tolerance=-1.0)
    with pytest.raises(ValueError, match=rf"{name}: `step_tolerance` must be ≥ 0; got nan"):
        f(rayleigh, SPHERE, x0, step_tolerance=float("nan"))
    with pytest.raises(TypeError, match=rf"{name}: `max_iterations` must be an int; got float"):
        f(rayleigh, SPHERE, x0, max_iterations=10.0)
    with pytest.raises(ValueError, match=rf"{name}: `history` must be ≥ 0; got -1"):
        f(rayleigh, SPHERE, x0, history=-1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'tolerance'"):
        f(rayleigh, SPHERE, x0, tolerance=1e-3)


def test_stopping_reasons():
    f = geometric.solvers.conjugate_gradient
    x0 = starts(SPHERE, 1)[0]
    assert REASONS[f(rayleigh, SPHERE, x0, cost_tolerance=1e-2).reason] == "cost_tolerance"
    assert REASONS[f(rayleigh, SPHERE, x0, step_tolerance=10.0).reason] == "step_tolerance"
    # An unreachable tolerance: the line search ends up finding no decrease, and steps by 0.
    res = f(rayleigh, SPHERE, x0, gradient_tolerance=0.0)
    assert REASONS[res.reason] == "step_tolerance" and bool(res.gradient_norm < 1e-13)
    res = f(lambda x: rayleigh(x) / jnp.sum(x[:0]), SPHERE, x0)  # 1/0 at every point
    assert REASONS[res.reason] == "non_finite" and int(res.iterations) == 0
    assert REASONS[f(rayleigh, SPHERE, x0, gradient_tolerance=np.inf).reason] == \
        "gradient_tolerance"


def test_default_tolerance_is_relative_to_the_start():
    """√ε‖grad f(x₀)‖: a cost scaled by 10⁻⁶ is solved as far as the original."""
    x0 = starts(SPHERE, 1)[0]
    g0 = jnp.linalg.norm(SPHERE.egrad_to_rgrad(x0, jax.grad(rayleigh)(x0)))
    for scale in [1e-6, 1.0, 1e6]:
        res = geometric.solvers.trust_region(lambda x, s=scale: s * rayleigh(x), SPHERE, x0)
        assert bool(res.converged) and int(res.iterations) > 3
        assert res.gradient_norm <= np.sqrt(np.finfo(np.float64).eps) * scale * g0
        np.testing.assert_allclose(-res.cost / scale, SPECTRUM.max(), rtol=1e-15)


def test_public_names():
    assert set(geometric.solvers.__all__) == {*SOLVERS, "REASONS", "SolverResult"}
    assert REASONS == ("gradient_tolerance", "max_iterations", "step_tolerance",
                       "cost_tolerance", "non_finite")
    assert geometric.solvers.SolverResult._fields == (
        "point", "cost", "gradient_norm", "iterations", "converged", "reason", "history")
