"""geometric/solvers/_conjugate_gradient.py: every β rule, and the rules' formulas."""
import jax.numpy as jnp
import numpy as np
import pytest

import geometric
from geometric.solvers._conjugate_gradient import BETAS, _beta
from tests.geometric.solvers.problems import SPECTRUM, SPHERE, rayleigh, starts


@pytest.mark.parametrize("beta", BETAS)
def test_every_rule_converges(beta):
    res = geometric.solvers.conjugate_gradient(rayleigh, SPHERE, starts(SPHERE, 1)[0], beta=beta,
                                               gradient_tolerance=1e-10)
    assert bool(res.converged) and res.gradient_norm <= 1e-10
    np.testing.assert_allclose(-res.cost, SPECTRUM.max(), rtol=1e-15)


def test_the_rules():
    rng = np.random.default_rng(0)
    g, y, d = (jnp.asarray(rng.standard_normal(5)) for _ in range(3))
    gn_old = 0.7

    def dot(u, v):
        return jnp.sum(u * v)

    expected = {
        "fletcher_reeves": g @ g / gn_old ** 2,
        "polak_ribiere": max(0.0, g @ y / gn_old ** 2),
        "hestenes_stiefel": max(0.0, g @ y / (y @ d)),
        "hager_zhang": max((y @ g - 2 * (y @ y) * (d @ g) / (y @ d)) / (y @ d),
                           -1 / (np.linalg.norm(d) * min(0.01, gn_old))),
    }
    for rule, value in expected.items():
        np.testing.assert_allclose(_beta(rule, y, g, d, jnp.asarray(gn_old), dot), value,
                                   rtol=1e-14, err_msg=rule)
    # A zero denominator restarts (β = 0) instead of dividing by zero.
    assert _beta("hestenes_stiefel", y, g, jnp.zeros(5), jnp.asarray(gn_old), dot) == 0


def test_unknown_rule():
    with pytest.raises(ValueError, match="conjugate_gradient: `beta` must be one of "
                                         "'hestenes_stiefel', .*; got 'HS'"):
        geometric.solvers.conjugate_gradient(rayleigh, SPHERE, starts(SPHERE, 1)[0], beta="HS")
