"""geometric/solvers/_line_search.py: Armijo backtracking, rejection, and the rounding regime."""
import jax
import jax.numpy as jnp
import numpy as np

from geometric.solvers._line_search import backtracking
from geometric.solvers._problem import Problem, scale
from tests.geometric.solvers.problems import SPHERE, A, rayleigh, starts


def _search(x, d, alpha0, c=1e-4):
    problem = Problem("test", rayleigh, SPHERE, x)
    f0, g0 = problem.value_and_rgrad(x)
    return f0, backtracking(problem, x, d, f0, g0, problem.inner(x, g0, d), jnp.asarray(alpha0),
                            sufficient_decrease=c, max_evaluations=25, active=jnp.bool_(True))


def test_backtracks_until_armijo_and_reports_the_slope():
    x = starts(SPHERE, 1)[0]
    g = SPHERE.egrad_to_rgrad(x, jax.grad(rayleigh)(x))
    f0, ls = _search(x, -g, 64.0)  # far too long: halved until the cost falls enough
    assert 1 < int(ls.evaluations) <= 25 and ls.alpha == 64.0 / 2 ** (int(ls.evaluations) - 1)
    assert ls.cost <= f0 - 1e-4 * ls.alpha * (g @ g)
    np.testing.assert_allclose(ls.point, SPHERE.retract(x, ls.alpha * -g))
    slope = jax.grad(lambda t: rayleigh(SPHERE.retract(x, t * -g)))(ls.alpha)
    np.testing.assert_allclose(ls.slope, slope, rtol=1e-12)
    np.testing.assert_allclose(ls.grad, SPHERE.egrad_to_rgrad(ls.point,
                                                              jax.grad(rayleigh)(ls.point)))


def test_an_ascent_direction_is_rejected():
    x = starts(SPHERE, 1)[0]
    g = SPHERE.egrad_to_rgrad(x, jax.grad(rayleigh)(x))
    f0, ls = _search(x, g, 1.0)
    assert ls.alpha == 0 and ls.cost == f0 and int(ls.evaluations) == 25
    np.testing.assert_array_equal(ls.point, x)


def test_a_step_whose_decrease_is_rounding_is_judged_by_its_slope():
    """At ‖grad f‖ ≈ 1e-9 the best step lowers f by ≈ 1e-19, far below f's rounding (1e-16):
    the search must still take a step that does not overshoot, and reject one that does."""
    vectors = np.linalg.eigh(np.asarray(A))[1]  # for the eigenvalues 4 and 2 last
    x = SPHERE.project_point(jnp.asarray(vectors[:, -1] + 1e-9 * vectors[:, -2]))
    g = SPHERE.egrad_to_rgrad(x, jax.grad(rayleigh)(x))
    assert 1e-10 < jnp.linalg.norm(g) < 1e-8
    newton = 1 / (2 * (4.0 - 2.0))  # the minimising multiplier along -g: 1/(2 gap)
    _, good = _search(x, scale(jnp.asarray(-1.0), g), newton)
    assert good.alpha == newton
    g_new = SPHERE.egrad_to_rgrad(good.point, jax.grad(rayleigh)(good.point))
    assert jnp.linalg.norm(g_new) < 0.8 * jnp.linalg.norm(g)
    _, long = _search(x, scale(jnp.asarray(-1.0), g), 8 * newton)  # overshoots: halved
    assert long.alpha < 8 * newton
