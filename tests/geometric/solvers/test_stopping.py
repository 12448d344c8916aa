"""geometric/solvers/_stopping.py and _result.py: option checks, the order of the criteria,
the history."""
import jax.numpy as jnp
import numpy as np
import pytest

from geometric.solvers import REASONS
from geometric.solvers._result import empty_history, record
from geometric.solvers._stopping import Criteria, check_count, check_real, stop_reason


def test_option_checks_name_the_function_and_the_option():
    with pytest.raises(TypeError, match=r"f: `tol` must be a real number or None; got str"):
        check_real("f", "tol", "1e-3", allow_none=True)
    with pytest.raises(TypeError, match=r"f: `tol` must be a real number; got bool"):
        check_real("f", "tol", True)
    with pytest.raises(ValueError, match=r"f: `tol` must be > 0 and < 1; got 1"):
        check_real("f", "tol", 1, strict=True, maximum=1.0)
    check_real("f", "tol", np.float32(0.5), strict=True, maximum=1.0)
    with pytest.raises(TypeError, match=r"f: `n` must be an int or None; got float"):
        check_count("f", "n", 1.0, allow_none=True)
    check_count("f", "n", np.int64(3), minimum=1)


def test_criteria_in_order():
    c = Criteria(jnp.asarray(1e-6), jnp.asarray(1e-3), jnp.asarray(1e-9), 10)

    def reason(cost=1.0, gradient_norm=1.0, iteration=1, step_small=False, cost_change=1.0):
        return REASONS[stop_reason(c, cost=jnp.asarray(cost), gradient_norm=jnp.asarray(
            gradient_norm), iteration=jnp.asarray(iteration), step_small=jnp.asarray(step_small),
            cost_change=jnp.asarray(cost_change))]

    assert stop_reason(c, cost=jnp.asarray(1.0), gradient_norm=jnp.asarray(1.0),
                       iteration=jnp.asarray(1), step_small=jnp.asarray(False),
                       cost_change=jnp.asarray(1.0)) == -1
    assert reason(cost=jnp.inf, gradient_norm=0.0) == "non_finite"
    assert reason(gradient_norm=jnp.nan) == "non_finite"
    assert reason(gradient_norm=1e-7, step_small=True, iteration=10) == "gradient_tolerance"
    assert reason(step_small=True, cost_change=0.0, iteration=10) == "step_tolerance"
    assert reason(cost_change=1e-4, iteration=10) == "cost_tolerance"
    assert reason(cost_change=jnp.inf, iteration=10) == "max_iterations"


def test_history_records_until_full():
    h = empty_history(2, jnp.float32)
    h = record(h, jnp.int32(1), cost=jnp.asarray(3.0), gradient_norm=jnp.asarray(2.0),
               step_size=jnp.asarray(1.0))
    h = record(h, jnp.int32(2), cost=jnp.asarray(9.0), gradient_norm=jnp.asarray(9.0),
               step_size=jnp.asarray(9.0))  # past the end: dropped
    np.testing.assert_array_equal(h["cost"], [np.nan, 3.0])
    assert h["cost"].dtype == jnp.float32
    assert empty_history(0, jnp.float32) is None and record(None, 0) is None
