"""Laws of the Riemannian Hessian (``ehess_to_rhess``) of every manifold and metric, and ``dim``.

The acceptance test, :func:`geometric.check_hessian`, runs for the law suite's manifolds in
test_manifolds.py (with the float32 and batched-versus-sliced laws of ``ehess_to_rhess``), and
here for the hyperbolic ones. Here, at a batch of float64 points and for a cost that is not
quadratic: the Hessian is tangent, self-adjoint in the metric, linear in the direction, and equal
to the Levi-Civita derivative of the gradient field written independently of the closed forms:
for the Euclidean metric the base class's generic ``P_x(ehess + D P_x[v] egrad)``, for the
hyperboloid its Minkowski analogue, and for every other metric the Koszul formula of the metric
written from ``inner`` alone by automatic differentiation (:func:`koszul`).
"""
import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geometric
from tests.geometric.test_manifolds import MANIFOLDS, UNOPTIMIZED, hessian_cost
from tests.geometric.test_optim import Circle

# The law suite's manifolds but two whose Hessians are others' code (the retraction does not
# enter the Hessian): stiefel-cayley is stiefel-qr's, stiefel-square-canonical-cayley
# stiefel-canonical-exp's.
ALL = {**{name: m for name, m in MANIFOLDS.items()
          if not isinstance(m, (geometric.SPD, geometric.SymplecticStiefel))
          and name not in ("stiefel-cayley", "stiefel-square-canonical-cayley")},
       # Sizes above 4: matrix products of sizes ≤ 4 are unrolled, which makes the second
       # derivatives of koszul() slow to compile.
       **{f"spd-{metric}": geometric.SPD(5, metric=metric)
          for metric in ("affine", "log_euclidean", "bures_wasserstein")},
       "symplectic_stiefel": geometric.SymplecticStiefel(5, 3),
       "poincare_ball": geometric.PoincareBall(4, curvature=0.7),
       "lorentz": geometric.Lorentz(4, curvature=1.3)}
HYPERBOLIC = ["poincare_ball", "lorentz"]
# The ambient metric is constant (Euclidean; Minkowski for the hyperboloid): Riemannian
# submanifolds, whose Hessian is the projection of the derivative of the gradient field.
FLAT = [name for name, m in ALL.items()
        if type(m)._egrad_to_rgrad is geometric.AbstractManifold._egrad_to_rgrad
        or getattr(m, "metric", None) == "euclidean" or isinstance(m, geometric.Lorentz)]
BATCH = 3
TOL = 1e-11  # float64, relative to the largest entry

every = pytest.mark.parametrize("name", list(ALL))
hyperbolic = pytest.mark.parametrize("name", HYPERBOLIC)


def koszul(m, x, g, h, v):
    r"""``Hess f(x)[v]`` from the metric alone: ``F(y, p, q)``, the formula of ``inner``, defines
    the metric operator ``𝒢(y)q = ∇_p F(y, p, q)`` on the ambient space, and the Levi-Civita
    connection of the manifold is the tangential part of the ambient one (Koszul):

    .. math::
        \operatorname{Hess} f(x)[v] = \mathrm{rgrad}\big(𝒢\,D r[v] + \tfrac12(D𝒢[v]r + D𝒢[r]v
            - \nabla_y F(y, v, r))\big), \qquad r = \mathrm{egrad\_to\_rgrad}(x, g)

    (the Riesz map of the metric applied to ``𝒢`` of the ambient covariant derivative). Batched
    points are independent, so sums over the batch give each point's derivatives."""
    def inner(y, p, q):
        return 0.5 * jnp.sum(m.inner(y, p, q) + m.inner(y, q, p))

    def metric(y, q):
        return jax.grad(lambda p: inner(y, p, q))(jnp.zeros_like(q))

    r, dr = jax.jvp(m.egrad_to_rgrad, (x, g), (v, h))
    covector = metric(x, dr) + 0.5 * (jax.jvp(lambda y: metric(y, r), (x,), (v,))[1]
                                      + jax.jvp(lambda y: metric(y, v), (x,), (r,))[1]
                                      - jax.grad(lambda y: inner(y, v, r))(x))
    return m.egrad_to_rgrad(x, covector)


@functools.partial(jax.jit, static_argnums=(0, 1), compiler_options=UNOPTIMIZED)
def points(m, n):
    keys = jax.random.split(jax.random.PRNGKey(0), n)
    return jax.vmap(lambda k: m.random_point(k, jnp.float64))(keys)


@functools.partial(jax.jit, static_argnums=0, compiler_options=UNOPTIMIZED)
def hessian_laws(m, x, key):
    """The Hessians at ``x`` (a batch) along ``u``, ``w`` and ``2u - 3w``, and what the laws
    compare them with."""
    cost = hessian_cost(m)

    def total(x):
        return jnp.sum(jax.vmap(cost)(x))

    ku, kw = jax.random.split(key)
    u, w = m.random_tangent(ku, x), m.random_tangent(kw, x)
    g = jax.grad(total)(x)
    hu, hw = (jax.jvp(jax.grad(total), (x,), (d,))[1] for d in (u, w))
    directions = jnp.stack([u, w, 2 * u - 3 * w])
    xs, gs = jnp.broadcast_to(x, directions.shape), jnp.broadcast_to(g, directions.shape)
    rhess = m.ehess_to_rhess(xs, gs, jnp.stack([hu, hw, 2 * hu - 3 * hw]), directions)
    return {"rhess": rhess, "projected": m.project(xs, rhess),
            "hu_w": m.inner(x, rhess[0], w), "u_hw": m.inner(x, u, rhess[1]),
            "x": x, "g": g, "ehess": hu, "u": u}


jit_koszul = jax.jit(koszul, static_argnums=0, compiler_options=UNOPTIMIZED)


@functools.cache
def results(name):
    m = ALL[name]
    r = hessian_laws(m, points(m, BATCH), jax.random.PRNGKey(1))
    if name not in FLAT:
        r["koszul"] = jit_koszul(m, r["x"], r["g"], r["ehess"], r["u"])
    return m, jax.tree.map(np.asarray, r)


def close(got, want, tol=TOL):
    scale = max(float(np.max(np.abs(want))), 1.0)
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * scale)


@every
def test_hessian_is_tangent(name):
    _, r = results(name)
    close(r["projected"], r["rhess"])


@every
def test_hessian_is_self_adjoint(name):
    _, r = results(name)
    close(r["hu_w"], r["u_hw"])


@every
def test_hessian_is_linear_in_the_direction(name):
    _, r = results(name)
    hu, hw, combination = r["rhess"]
    close(combination, 2 * hu - 3 * hw)


@pytest.mark.parametrize("name", [name for name in ALL if name not in FLAT])
def test_hessian_is_the_koszul_formula_of_the_metric(name):
    _, r = results(name)
    close(r["rhess"][0], r["koszul"])


@pytest.mark.parametrize("name", [name for name in FLAT if name != "lorentz"])
def test_euclidean_metric_hessian_is_the_generic_formula(name):
    """The base class's default for the Euclidean metric, ``P_x(ehess + D P_x[v] egrad)``."""
    m, r = results(name)
    x, g, h, u = r["x"], r["g"], r["ehess"], r["u"]
    weingarten = jax.jvp(lambda y: m.project(y, g), (x,), (u,))[1]
    close(r["rhess"][0], m.project(x, h + weingarten))


def test_hyperboloid_hessian_is_the_projected_derivative_of_the_gradient():
    """A submanifold of the flat Minkowski space: ``P_x(D grad f(x)[v])``, ``P_x`` orthogonal in
    the Minkowski product."""
    m, r = results("lorentz")
    x, g, h, u = r["x"], r["g"], r["ehess"], r["u"]
    close(r["rhess"][0], m.project(x, jax.jvp(m.egrad_to_rgrad, (x, g), (u, h))[1]))


@hyperbolic
def test_check_hessian(name):
    m = ALL[name]
    x = points(m, 1)[0]
    result = geometric.check_hessian(hessian_cost(m), m, x, key=jax.random.PRNGKey(7))
    assert result, result


@hyperbolic
def test_float32_and_unbatched(name):
    """float32 in, float32 out; the unbatched float32 Hessian is the batched float64 one's slice."""
    m, r = results(name)
    args = [jnp.asarray(r[k][0], jnp.float32) for k in ("x", "g", "ehess", "u")]
    got = m.ehess_to_rhess(*args)
    assert got.dtype == jnp.float32
    np.testing.assert_allclose(got, r["rhess"][0][0], rtol=2e-4, atol=2e-4)


@hyperbolic
def test_dim_is_the_rank_of_the_tangent_projection(name):
    m, r = results(name)
    size = m.shape[0]
    projection = jax.vmap(lambda e: m.project(r["x"][0], e))(jnp.eye(size))
    assert type(m.dim) is int and m.dim == np.linalg.matrix_rank(np.asarray(projection), tol=1e-8)


@pytest.mark.parametrize("metric", ["affine", "log_euclidean", "bures_wasserstein"])
def test_spd_hessian_at_repeated_eigenvalues(metric):
    """Every metric's Hessian is finite and self-adjoint at the identity (all eigenvalues equal),
    where derivatives through an eigendecomposition would divide by zero."""
    m = geometric.SPD(3, metric=metric)
    cost = hessian_cost(m)

    @jax.jit
    def laws(x):
        u, w = (m.random_tangent(jax.random.PRNGKey(k), x) for k in (0, 1))
        hu, hw = (m.ehess_to_rhess(x, *jax.jvp(jax.grad(cost), (x,), (d,)), d) for d in (u, w))
        return hu, m.inner(x, hu, w), m.inner(x, u, hw)

    hu, hu_w, u_hw = laws(jnp.eye(3))
    assert np.isfinite(hu).all()
    np.testing.assert_allclose(hu_w, u_hw, rtol=1e-12)


def test_log_euclidean_check_hessian_at_a_repeated_eigenvalue():
    m = geometric.SPD(3, metric="log_euclidean")
    x = jnp.diag(jnp.array([1.0, 1.0, 2.0]))
    result = geometric.check_hessian(hessian_cost(m), m, x, key=jax.random.PRNGKey(3))
    assert result, result


# ----------------------------------------------------------------------------------------------
# The base class: user manifolds


@dataclasses.dataclass(frozen=True)
class ScaledCircle(Circle):
    """The circle with the metric 4 uᵀv: a metric of its own, and no Hessian for it."""

    def _egrad_to_rgrad(self, x, g):
        return self._project(x, g) / 4

    def _inner(self, x, u, v):
        return 4 * jnp.sum(u * v, axis=-1)


def test_user_manifold_with_the_euclidean_metric_has_the_generic_hessian():
    x, g, h, v = (jnp.array(a) for a in ([0.6, 0.8], [1.0, 2.0], [3.0, -1.0], [-0.8, 0.6]))
    want = Circle().project(x, h) - jnp.dot(x, g) * v  # the circle's Weingarten map
    np.testing.assert_allclose(Circle().ehess_to_rhess(x, g, h, v), want, rtol=1e-14)


def test_user_manifold_with_its_own_metric_and_no_hessian_raises():
    x = jnp.array([1.0, 0.0])
    with pytest.raises(NotImplementedError, match=r"ScaledCircle\(\)\.ehess_to_rhess: ScaledCircle "
                                                  r"has its own metric .* define `_ehess_to_rhess"):
        ScaledCircle().ehess_to_rhess(x, x, x, x)


def test_dim_of_a_user_manifold_that_does_not_define_it_raises():
    with pytest.raises(NotImplementedError, match=r"^Circle does not define `dim`: define the "
                                                  r"property `dim`"):
        _ = Circle().dim


def test_ehess_to_rhess_input_checks():
    st = geometric.Stiefel(5, 2)
    x = st.random_point(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"ehess_to_rhess: `ehess` must have the shape of `x`, "
                                         r"\(5, 2\); got \(2, 5\)"):
        st.ehess_to_rhess(x, x, x.T, x)
    with pytest.raises(TypeError, match=r"ehess_to_rhess: `v` must have dtype float32, float64"):
        st.ehess_to_rhess(x, x, x, x.astype(jnp.int32))
