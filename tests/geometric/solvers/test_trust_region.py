"""geometric/solvers/_trust_region.py: truncated CG, the quadratic convergence of RTR, options."""
import jax.numpy as jnp
import numpy as np
import pytest

import geometric
from geometric.solvers._problem import Problem
from geometric.solvers._trust_region import (
    EXCEEDED_RADIUS,
    LINEAR,
    NEGATIVE_CURVATURE,
    SUPERLINEAR,
    _truncated_cg,
)
from tests.geometric.solvers.problems import SPHERE, rayleigh, starts
from tests.helpers import symmetric_with_spectrum


def _tcg(spectrum, radius, g):
    """tCG on the quadratic model of ``xᵀHx/2`` in ℝⁿ, at a point whose gradient is ``g``."""
    h = symmetric_with_spectrum(np.asarray(spectrum), 1)
    problem = Problem("test", lambda x: x @ h @ x / 2, None, jnp.zeros(len(spectrum)))
    t = _truncated_cg(problem, jnp.zeros(len(spectrum)), g, lambda v: h @ v,
                      jnp.asarray(radius), kappa=0.1, theta=1.0, max_inner=len(spectrum),
                      active=jnp.bool_(True))
    return h, t


def test_truncated_cg_stops_inside_on_the_boundary_or_at_negative_curvature():
    g = jnp.asarray([1.0, -2.0, 0.5, 1.0]) * 1e-3
    h, t = _tcg([1.0, 2.0, 3.0, 4.0], 10.0, g)  # inside: the Newton step, to the target
    assert int(t.stop) in (LINEAR, SUPERLINEAR)
    newton = -np.linalg.solve(h, g)
    assert np.linalg.norm(t.eta - newton) <= 1e-6 * np.linalg.norm(newton)
    np.testing.assert_allclose(t.h_eta, h @ t.eta, rtol=1e-12)
    _, t = _tcg([1.0, 2.0, 3.0, 4.0], 1e-4, g)
    assert int(t.stop) == EXCEEDED_RADIUS
    np.testing.assert_allclose(jnp.linalg.norm(t.eta), 1e-4, rtol=1e-12)
    _, t = _tcg([-1.0, 2.0, 3.0, 4.0], 10.0, jnp.asarray([1.0, 0.0, 0.0, 0.0]))
    assert int(t.stop) == NEGATIVE_CURVATURE
    np.testing.assert_allclose(jnp.linalg.norm(t.eta), 10.0, rtol=1e-12)


def test_invariant_subspace_converges_quadratically():
    a = symmetric_with_spectrum(np.arange(8.0), 2)
    gr = geometric.Grassmann(8, 3)
    res = geometric.solvers.trust_region(lambda x: -jnp.trace(x.T @ a @ x), gr, starts(gr, 1)[0],
                                         gradient_tolerance=1e-13, history=30)
    assert bool(res.converged)
    np.testing.assert_allclose(-res.cost, 5.0 + 6.0 + 7.0, rtol=1e-15)
    g = np.asarray(res.history["gradient_norm"])[:int(res.iterations) + 1]
    tail = g[g < 1e-2]  # the last iterations: g_{k+1} ≤ C g_k² (C ~ ‖Hess‖/gap), to rounding
    assert len(tail) >= 2 and np.all(tail[1:] <= np.maximum(10 * tail[:-1] ** 2, 1e-13))


def test_options():
    x0 = starts(SPHERE, 1)[0]
    tr = geometric.solvers.trust_region
    for option, value, message in [
            ("kappa", 1.0, r"`kappa` must be > 0 and < 1; got 1.0"),
            ("theta", 0.0, r"`theta` must be > 0; got 0.0"),
            ("rho_prime", 0.25, r"`rho_prime` must be ≥ 0 and < 0.25; got 0.25"),
            ("max_radius", -1.0, r"`max_radius` must be > 0; got -1.0"),
            ("initial_radius", 0, r"`initial_radius` must be > 0; got 0"),
            ("max_inner_iterations", 0, r"`max_inner_iterations` must be ≥ 1; got 0")]:
        with pytest.raises(ValueError, match=f"trust_region: {message}"):
            tr(rayleigh, SPHERE, x0, **{option: value})
    res = tr(rayleigh, SPHERE, x0, max_radius=0.5, initial_radius=0.5, max_inner_iterations=1,
             rho_prime=0.0)
    assert bool(res.converged)
