"""geometric/solvers/_steepest_descent.py: Manopt's step rule, and convergence past √ε."""
import numpy as np

import geometric
from tests.geometric.solvers.problems import SPECTRUM, SPHERE, rayleigh, starts


def test_first_step_has_length_one_and_the_gradient_falls_past_sqrt_eps():
    """A plain Armijo search compares costs that differ only by rounding once
    ‖grad f‖ ≲ √(ε|f|L) ≈ 1e-7 here, and stalls; the slope test carries on to 1e-12."""
    res = geometric.solvers.steepest_descent(rayleigh, SPHERE, starts(SPHERE, 1)[0],
                                             gradient_tolerance=1e-12, history=200)
    assert bool(res.converged) and res.gradient_norm <= 1e-12
    np.testing.assert_allclose(-res.cost, SPECTRUM.max(), rtol=1e-15)
    steps = np.asarray(res.history["step_size"])
    assert np.log2(steps[1]) == round(np.log2(steps[1])) <= 0  # 1, halved until Armijo holds
    costs = np.asarray(res.history["cost"])[:int(res.iterations) + 1]
    assert np.all(np.diff(costs) <= 4 * np.finfo(np.float64).eps * SPECTRUM.max())
