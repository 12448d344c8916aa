"""Laws every manifold obeys (one MANIFOLDS registry, as geoopt's test_manifold_basic), plus the
Stiefel retractions against their dense formulas."""
import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sla

import geometric

MANIFOLDS = {
    "stiefel-qr": geometric.Stiefel(7, 3),
    "stiefel-polar": geometric.Stiefel(7, 3, retraction="polar"),
    "stiefel-cayley": geometric.Stiefel(7, 3, retraction="cayley"),
    "stiefel-canonical-exp": geometric.Stiefel(7, 3, metric="canonical", retraction="exp"),
    "stiefel-square-cayley": geometric.Stiefel(4, 4, metric="canonical", retraction="cayley"),
    "grassmann": geometric.Grassmann(7, 3),
    "sphere": geometric.Sphere(5),
    "orthogonal": geometric.Orthogonal(4),
}
parametrize = pytest.mark.parametrize("m", list(MANIFOLDS.values()), ids=list(MANIFOLDS))
HAAR_SAMPLES = 4000


def sample(m, seed=0, dtype=jnp.float64, batch=None):
    """A point, an ambient vector and two tangent vectors, with an optional leading batch axis."""
    keys = jax.random.split(jax.random.PRNGKey(seed), 4)
    if batch is None:
        x = m.random_point(keys[0], dtype)
    else:
        x = jax.vmap(lambda k: m.random_point(k, dtype))(jax.random.split(keys[0], batch))
    g = jax.random.normal(keys[1], x.shape, dtype)
    return x, g, m.random_tangent(keys[2], x), m.random_tangent(keys[3], x)


@functools.partial(jax.jit, static_argnums=0)
def every_method(m, x, g, v):
    """Every method once, on a point ``x`` (any batch shape), an ambient ``g`` and a tangent ``v``."""
    u = m.project(x, g)
    y = m.retract(x, 0.2 * v)
    return {"project": u, "egrad_to_rgrad": m.egrad_to_rgrad(x, g), "inner": m.inner(x, u, v),
            "retract": y, "transport": m.transport(x, y, u), "manifold_error": m.manifold_error(y),
            "project_point": m.project_point(x + 1e-2 * g)}


@functools.partial(jax.jit, static_argnums=0)
def haar_samples(m, key):
    xs = jax.vmap(lambda k: m.random_point(k, jnp.float64))(jax.random.split(key, HAAR_SAMPLES))
    return xs.reshape(HAAR_SAMPLES, m.shape[0], -1)


@parametrize
def test_random_point_is_on_the_manifold(m):
    x = m.random_point(jax.random.PRNGKey(0), jnp.float64)
    assert x.shape == m.shape and x.dtype == jnp.float64
    assert float(m.manifold_error(x)) < 1e-13


@pytest.mark.parametrize("m", [MANIFOLDS[k] for k in ("stiefel-qr", "grassmann", "sphere", "orthogonal")],
                         ids=["stiefel", "grassmann", "sphere", "orthogonal"])  # each random_point once
def test_random_point_is_haar(m):
    """Mean ≈ 0 and E[x xᵀ] ≈ (p/n) I; an unsigned QR fails the first (LAPACK's sign gauge)."""
    xs = np.asarray(haar_samples(m, jax.random.PRNGKey(1)))
    n, p = xs.shape[1:]
    np.testing.assert_allclose(xs.mean(0), 0, atol=6 * np.sqrt(1 / n / HAAR_SAMPLES))
    second = np.einsum("bip,bjp->ij", xs, xs) / HAAR_SAMPLES
    np.testing.assert_allclose(second, p / n * np.eye(n), atol=6 * np.sqrt(2 / HAAR_SAMPLES) * p / n)


@parametrize
def test_projection_is_idempotent_and_fixes_tangents(m):
    x, g, v, _ = sample(m)
    pg = m.project(x, g)
    np.testing.assert_allclose(m.project(x, pg), pg, atol=1e-13)
    np.testing.assert_allclose(m.project(x, v), v, atol=1e-13)
    # the removed part is normal: orthogonal (Euclidean inner product) to every tangent vector
    np.testing.assert_allclose(jnp.vdot(g - pg, v), 0, atol=1e-12)


@parametrize
def test_riemannian_gradient_is_the_riesz_representative(m):
    x, g, _, xi = sample(m)
    r = m.egrad_to_rgrad(x, g)
    np.testing.assert_allclose(m.project(x, r), r, atol=1e-13)
    np.testing.assert_allclose(m.inner(x, r, xi), jnp.vdot(g, xi), rtol=1e-12)


@parametrize
def test_inner_is_symmetric_and_positive(m):
    x, _, u, v = sample(m)
    np.testing.assert_allclose(m.inner(x, u, v), m.inner(x, v, u), rtol=1e-13)
    assert float(m.inner(x, u, u)) > 0


@parametrize
def test_retraction_lands_on_manifold_and_is_first_order(m):
    x, _, v, _ = sample(m)
    np.testing.assert_allclose(m.retract(x, jnp.zeros_like(v)), x, atol=1e-14)
    assert float(m.manifold_error(m.retract(x, v))) < 1e-12
    ts = 1e-2 * 0.5 ** np.arange(4)
    errs = np.array([float(jnp.linalg.norm(m.retract(x, t * v) - x - t * v)) for t in ts])
    np.testing.assert_allclose(np.log2(errs[:-1] / errs[1:]), 2.0, atol=0.05)  # O(t²)


@parametrize
def test_transport_lands_in_the_new_tangent_space(m):
    x, _, v, u = sample(m)
    y = m.retract(x, 0.3 * v)
    t = m.transport(x, y, u)
    np.testing.assert_allclose(m.project(y, t), t, atol=1e-13)
    np.testing.assert_allclose(m.transport(x, x, u), u, atol=1e-13)


@parametrize
def test_project_point(m):
    x, g, _, _ = sample(m)
    np.testing.assert_allclose(m.project_point(x), x, atol=1e-13)
    assert float(m.manifold_error(m.project_point(x + 1e-2 * g))) < 1e-13


@parametrize
def test_batched_equals_per_slice(m):
    x, g, v, _ = sample(m, batch=3)
    batched = every_method(m, x, g, v)
    assert batched["inner"].shape == (3,)
    for i in range(3):
        for name, value in every_method(m, x[i], g[i], v[i]).items():
            np.testing.assert_allclose(batched[name][i], value, atol=1e-13, err_msg=name)


@parametrize
def test_float32_in_float32_out(m):
    x, g, v, _ = sample(m, dtype=jnp.float32)
    out = every_method(m, x, g, v)
    assert {a.dtype for a in out.values()} == {jnp.dtype(jnp.float32)}
    assert float(out["manifold_error"]) < 1e-5


def test_canonical_gradient_is_not_the_projection():
    m = MANIFOLDS["stiefel-canonical-exp"]
    x, g, _, _ = sample(m)
    r = m.egrad_to_rgrad(x, g)
    np.testing.assert_allclose(r, g - x @ g.T @ x, atol=1e-14)
    assert float(jnp.abs(r - m.project(x, g)).max()) > 1e-2
    assert float(jnp.abs(m.egrad_to_rgrad(x, r) - r).max()) > 1e-2  # not idempotent


@parametrize
def test_hashable_and_frozen(m):
    same = dataclasses.replace(m)
    assert same == m and hash(same) == hash(m) and same is not m
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.n = 9


# ----------------------------------------------------------------------------------------------
# Stiefel retractions against the dense n×n formulas (float64, small n)


retract = jax.jit(lambda m, x, v: m.retract(x, v), static_argnums=0)


def point_and_tangent(m, seed):
    x = m.random_point(jax.random.PRNGKey(seed), jnp.float64)
    return x, m.random_tangent(jax.random.PRNGKey(seed + 1), x)


def omega(y, delta):
    """The canonical horizontal lift (I - ½YYᵀ)ΔYᵀ - YΔᵀ(I - ½YYᵀ), as a dense n×n matrix."""
    q = np.eye(y.shape[0]) - 0.5 * y @ y.T
    return q @ delta @ y.T - y @ delta.T @ q


@pytest.mark.parametrize("scale", [1e-3, 0.5, 4.0, 40.0])
def test_exp_retraction_matches_expm(scale):
    m = geometric.Stiefel(9, 3, retraction="exp")
    y, d = point_and_tangent(m, 3)
    d = scale * d / jnp.linalg.norm(d)
    want = jax.jit(jax.scipy.linalg.expm)(omega(np.asarray(y), np.asarray(d))) @ y
    np.testing.assert_allclose(retract(m, y, d), want, atol=1e-12 * max(1.0, scale))


@pytest.mark.parametrize("scale", [1e-3, 0.5, 4.0, 40.0])
def test_cayley_retraction_matches_dense_formula(scale):
    m = geometric.Stiefel(9, 3, retraction="cayley")
    y, d = point_and_tangent(m, 4)
    d = scale * d / jnp.linalg.norm(d)
    w = omega(np.asarray(y), np.asarray(d))
    eye = np.eye(9)
    want = np.linalg.solve(eye - 0.5 * w, (eye + 0.5 * w) @ np.asarray(y))
    np.testing.assert_allclose(retract(m, y, d), want, atol=1e-13 * max(1.0, scale))


def test_exp_is_the_canonical_geodesic():
    """d²/dt² Y(t) is normal for the canonical metric along exp: compare with Edelman et al.'s
    closed form Y(t) = [Y, Q] exp(t[[A, -Rᵀ], [R, 0]]) [I; 0]."""
    m = geometric.Stiefel(8, 2, retraction="exp")
    y, d = map(np.asarray, point_and_tangent(m, 6))
    a = y.T @ d
    q, r = np.linalg.qr(d - y @ a)
    block = np.block([[a, -r.T], [r, np.zeros((2, 2))]])
    want = np.hstack([y, q]) @ sla.expm(block)[:, :2]
    np.testing.assert_allclose(retract(m, jnp.asarray(y), jnp.asarray(d)), want, atol=1e-13)


def test_cayley_and_exp_agree_to_third_order():
    y, d = point_and_tangent(geometric.Stiefel(9, 3), 7)
    cay, ex = geometric.Stiefel(9, 3, retraction="cayley"), geometric.Stiefel(9, 3, retraction="exp")
    errs = [float(jnp.linalg.norm(retract(cay, y, t * d) - retract(ex, y, t * d))) for t in (1e-1, 5e-2)]
    np.testing.assert_allclose(np.log2(errs[0] / errs[1]), 3.0, atol=0.1)


def _shapes_in_jaxpr(jaxpr):
    shapes = []
    for eqn in jaxpr.eqns:
        shapes += [tuple(v.aval.shape) for v in eqn.outvars]
        for param in eqn.params.values():
            for sub in param if isinstance(param, (list, tuple)) else [param]:
                inner = getattr(sub, "jaxpr", None)
                if inner is not None:
                    shapes += _shapes_in_jaxpr(getattr(inner, "jaxpr", inner))
    return shapes


@pytest.mark.parametrize("retraction", ["qr", "polar", "cayley", "exp"])
@pytest.mark.parametrize("metric", ["euclidean", "canonical"])
def test_no_n_by_n_array(retraction, metric):
    m = geometric.Stiefel(64, 4, metric=metric, retraction=retraction)
    x = m.random_point(jax.random.PRNGKey(0))

    def everything(x, g):
        r = m.egrad_to_rgrad(x, g)
        y = m.retract(x, -0.1 * r)
        return m.transport(x, y, r), m.inner(x, r, r), m.manifold_error(y), m.project_point(y)

    shapes = _shapes_in_jaxpr(jax.make_jaxpr(everything)(x, x).jaxpr)
    assert not [s for s in shapes if sum(d >= 64 for d in s) >= 2]


# ----------------------------------------------------------------------------------------------
# Bad input


def test_bad_construction():
    with pytest.raises(ValueError, match=r"Stiefel: `p` must satisfy p ≤ n = 3; got p = 4"):
        geometric.Stiefel(3, 4)
    with pytest.raises(ValueError, match=r"Stiefel: `metric` must be one of 'euclidean', 'canonical'"):
        geometric.Stiefel(5, 2, metric="riemann")
    with pytest.raises(ValueError, match=r"`retraction` must be one of 'qr', 'polar', 'cayley', 'exp'"):
        geometric.Stiefel(5, 2, retraction="svd")
    with pytest.raises(TypeError, match=r"Stiefel: `n` must be an int; got float"):
        geometric.Stiefel(5.0, 2)
    with pytest.raises(ValueError, match=r"Sphere: `n` must be ≥ 1; got 0"):
        geometric.Sphere(0)
    with pytest.raises(ValueError, match=r"Grassmann: `p` must satisfy p ≤ n"):
        geometric.Grassmann(2, 3)
    with pytest.raises(TypeError, match=r"Orthogonal: `n` must be an int"):
        geometric.Orthogonal(True)
    assert geometric.Stiefel(np.int64(5), 2) == geometric.Stiefel(5, 2)


def test_bad_arrays():
    st = geometric.Stiefel(5, 2)
    x = st.random_point(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"project: `x` must have shape \(\.\.\., 5, 2\); got \(5, 3\)"):
        st.project(jnp.zeros((5, 3)), jnp.zeros((5, 3)))
    with pytest.raises(ValueError, match=r"retract: `v` must have the shape of `x`, \(5, 2\); got \(3, 5, 2\)"):
        st.retract(x, jnp.zeros((3, 5, 2)))
    with pytest.raises(TypeError, match=r"inner: `u` must have dtype float32, float64; got int32"):
        st.inner(x, jnp.zeros((5, 2), jnp.int32), x)
    with pytest.raises(TypeError, match=r"random_point: `dtype` must be float32 or float64; got int32"):
        st.random_point(jax.random.PRNGKey(0), jnp.int32)
    with pytest.raises(ValueError, match=r"Sphere\(n=3\)\.manifold_error: `x` must have shape \(\.\.\., 3\)"):
        geometric.Sphere(3).manifold_error(jnp.ones((3, 1)))
    with pytest.raises(TypeError, match=r"must be a JAX or NumPy array; got list"):
        st.project_point([[1.0, 0.0]] * 5)
