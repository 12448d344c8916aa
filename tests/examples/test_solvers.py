"""The solver examples (``examples/solvers``): every problem with every solver reaches its known optimum.

Small sizes, float64. The optima are computed without the solvers (eigendecompositions, SVDs,
least squares, fixed-point iterations in NumPy); each reference is first checked to be a critical
point of the example's cost, so that a wrong reference cannot pass for a wrong solver.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geometric
from examples import solvers
from examples.solvers import __main__ as runner
from examples.solvers import _common, costs, karcher_mean_poincare, karcher_mean_spd
from examples.solvers import packing_on_the_sphere as packing

jax.config.update("jax_enable_x64", True)

SMALL = {
    "dominant_eigenvector": {"n": 20},
    "dominant_invariant_subspace": {"n": 20, "p": 3},
    "pca": {"dimension": 3, "samples": 200, "components": 2},
    "closest_unit_norm_column_approximation": {"m": 5, "n": 8},
    "optimal_rotations": {"n": 3, "m": 10, "k": 4},
    "multiple_linear_regression": {"samples": 50, "weights": 3},
    "packing_on_the_sphere": {"dimension": 3, "points": 6},
    "karcher_mean_spd": {"n": 3, "m": 10},
    "karcher_mean_poincare": {"n": 2, "m": 20},
}


def _data(name, seed=0):
    example = solvers.load(name).EXAMPLE
    return (example, *_common.make_data(example, SMALL[name], seed))


@pytest.mark.parametrize("name", [n for n in solvers.NAMES if n != "packing_on_the_sphere"])
def test_the_reference_is_a_critical_point_and_the_start_is_not(name):
    example, data, raw = _data(name)
    optimum = jnp.asarray(example.optimum(raw))
    assert _common.gradient_norm(example, data, optimum) < 1e-10
    assert example.error(example.optimum(raw), raw) < 1e-12
    assert example.error(raw["x0"], raw) > 1e-2


@pytest.mark.parametrize("solver", _common.SOLVERS)
@pytest.mark.parametrize("name", solvers.NAMES)
def test_every_solver_reaches_the_known_optimum(name, solver):
    example, data, raw = _data(name)
    result = jax.jit(functools.partial(_common.solve, example, solver=solver))(data)
    assert bool(result.converged), (int(result.iterations), float(result.gradient_norm),
                                    geometric.solvers.REASONS[int(result.reason)])
    point = np.asarray(result.point)
    assert example.error(point, raw) < 1e-6
    if name == "packing_on_the_sphere":  # the smooth maximum brackets the true one
        largest = packing.max_inner_product(point)
        pairs = SMALL[name]["points"] * (SMALL[name]["points"] - 1) / 2
        assert largest <= float(result.cost) <= largest + 0.005 * np.log(pairs)


def test_the_two_matrix_karcher_mean_is_the_geometric_mean():
    _, data, raw = _data("karcher_mean_spd")
    data = {"a": data["a"][:2], "x0": data["x0"]}
    result = jax.jit(karcher_mean_spd.solve)(data)
    expected = karcher_mean_spd.geometric_mean(raw["a"][0], raw["a"][1])
    assert karcher_mean_spd.distance(np.asarray(result.point), expected) < 1e-9


def test_the_frechet_mean_in_the_ball_averages_the_logarithms_to_zero():
    _, data, raw = _data("karcher_mean_poincare")
    result = jax.jit(karcher_mean_poincare.solve)(data)
    mean_log = karcher_mean_poincare.mean_logarithm(np.asarray(result.point), raw["points"])
    assert np.linalg.norm(mean_log) < 1e-9


def test_the_packing_of_24_points_is_the_snub_cube_at_best():
    """Pymanopt's size: no closed form; the largest inner product cannot beat the best packing known."""
    example = packing.EXAMPLE
    data, raw = _common.make_data(example, example.sizes, 0)
    result = jax.jit(packing.solve)(data)
    assert bool(result.converged)
    error = packing.error(np.asarray(result.point), raw)
    assert -1e-9 < error < 0.05


def test_a_batch_of_problems_is_one_vmapped_solve():
    example = solvers.load("dominant_eigenvector").EXAMPLE
    batch = [_common.make_data(example, SMALL["dominant_eigenvector"], seed) for seed in range(4)]
    stacked = jax.tree.map(lambda *a: jnp.stack(a), *[d for d, _ in batch])
    results = jax.jit(jax.vmap(functools.partial(_common.solve, example, solver="trust_region")))(
        stacked)
    assert bool(jnp.all(results.converged))
    for i, (_, raw) in enumerate(batch):
        assert example.error(np.asarray(results.point[i]), raw) < 1e-6


def test_the_costs_are_the_manifolds_distances():
    """The plain ``jnp`` distances of :mod:`costs` (which the Pymanopt side runs too) agree with
    the library's ``dist``."""
    _, data, _ = _data("karcher_mean_spd")
    spd = geometric.SPD(3)
    x = data["a"].mean(axis=0)
    np.testing.assert_allclose(costs.spd_distance_squared(x, data["a"]),
                               spd.dist(jnp.broadcast_to(x, data["a"].shape), data["a"]) ** 2,
                               rtol=1e-10)
    _, data, _ = _data("karcher_mean_poincare")
    ball = geometric.PoincareBall(2)
    x = jnp.array([0.3, -0.2])
    np.testing.assert_allclose(costs.poincare_distance(x, data["points"]),
                               ball.dist(jnp.broadcast_to(x, data["points"].shape),
                                         data["points"]), rtol=1e-10)


def test_main_solves_and_reports(capsys):
    summary = solvers.load("dominant_eigenvector").main(["--n", "6", "--solver", "trust_region"])
    out = capsys.readouterr().out
    assert summary["converged"] and summary["error"] < 1e-6
    assert "trust_region: converged" in out and "distance to ±v_max" in out


def test_the_runner_prints_a_table(capsys):
    rows = runner.main(["--only", "closest_unit_norm_column_approximation", "--solvers",
                        "conjugate_gradient"])
    assert len(rows) == 1 and rows[0]["converged"] and rows[0]["error"] < 1e-6
    assert "| closest_unit_norm_column_approximation | conjugate_gradient |" in capsys.readouterr().out


BAD = [
    ("dominant_eigenvector", ["--n", "0"], "--n"),
    ("dominant_eigenvector", ["--solver", "newton"], "--solver"),
    ("dominant_eigenvector", ["--dtype", "float16"], "--dtype"),
    ("dominant_eigenvector", ["--seed", "-1"], "--seed"),
    ("dominant_eigenvector", ["--scale", "0"], "--scale"),
    ("dominant_eigenvector", ["--gradient-tolerance", "0"], "--gradient-tolerance"),
    ("dominant_eigenvector", ["--max-iterations", "0"], "--max-iterations"),
    ("dominant_invariant_subspace", ["--n", "5", "--p", "6"], "--p"),
    ("pca", ["--components", "4"], "--components"),
    ("multiple_linear_regression", ["--samples", "2"], "--weights"),
    ("packing_on_the_sphere", ["--points", "1"], "--points"),
    ("packing_on_the_sphere", ["--dimension", "1"], "--dimension"),
    ("karcher_mean_spd", ["--m", "ten"], "--m"),
    ("optimal_rotations", ["--bogus"], "--bogus"),
]


@pytest.mark.parametrize("name, argv, flag", BAD + [(None, ["--only", "pcaa"], "--only"),
                                                    (None, ["--solvers", "bfgs"], "--solvers"),
                                                    (None, ["--scale", "-1"], "--scale")])
def test_a_bad_flag_is_one_line_naming_it(name, argv, flag, capsys):
    program = runner if name is None else solvers.load(name)
    with pytest.raises(SystemExit) as stop:
        program.main(argv)
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert not out and len(err.splitlines()) == 1, err
    assert err.startswith(f"{program.build_parser().prog}: error: ") and flag in err, err


@pytest.mark.parametrize("name", [*solvers.NAMES, None])
def test_help_shows_every_default(name):
    parser = (runner if name is None else solvers.load(name)).build_parser()
    text = " ".join(parser.format_help().split())
    for action in parser._actions:
        if action.option_strings and action.default not in (None, "==SUPPRESS=="):
            assert f"(default: {action.default})" in text, action.dest
