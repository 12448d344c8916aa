"""What is particular to geometric/_manifolds/stiefel.py: the retractions and geodesics against their
dense formulas, the canonical metric, orthonormal rows, O(np²) memory, bad construction."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sla

import geometric
from tests.helpers import rand

SCALES = np.array([1e-3, 0.5, 4.0, 40.0])

retract = jax.jit(lambda m, x, v: m.retract(x, v), static_argnums=0)
exp = jax.jit(lambda m, x, v: m.exp(x, v), static_argnums=0)


def point_and_tangent(m, seed):
    x = m.project_point(rand(m.shape, seed))
    return x, m.project(x, rand(m.shape, seed + 1))


def scaled_steps(m, seed):
    """A point and the same tangent direction at the norms ``SCALES``, stacked: ``(4, n, p)``."""
    y, d = point_and_tangent(m, seed)
    return y, jnp.asarray(SCALES)[:, None, None] * (d / jnp.linalg.norm(d))[None]


def omega(y, delta):
    """The canonical horizontal lift (I - ½YYᵀ)ΔYᵀ - YΔᵀ(I - ½YYᵀ), as a dense n×n matrix."""
    q = np.eye(y.shape[0]) - 0.5 * y @ y.T
    return q @ delta @ y.T - y @ delta.T @ q


EXP = geometric.Stiefel(9, 3, metric="canonical", retraction="exp")
CAYLEY = geometric.Stiefel(9, 3, retraction="cayley")


def test_exp_is_expm_of_the_lift_and_edelmans_canonical_geodesic():
    """exp(Ω)Y as a dense n×n exponential, and Edelman et al.'s closed form of the canonical
    geodesic Y(t) = [Y, Q] exp(t[[A, -Rᵀ], [R, 0]]) [I; 0], with QR = (I - YYᵀ)Δ."""
    y, ds = scaled_steps(EXP, 3)
    got = retract(EXP, jnp.broadcast_to(y, ds.shape), ds)
    np.testing.assert_array_equal(got, exp(EXP, jnp.broadcast_to(y, ds.shape), ds))
    y = np.asarray(y)
    for g, d, scale in zip(got, np.asarray(ds), SCALES):
        np.testing.assert_allclose(g, sla.expm(omega(y, d)) @ y, atol=1e-12 * max(1.0, scale))
        a = y.T @ d
        q, r = np.linalg.qr(d - y @ a)
        block = np.block([[a, -r.T], [r, np.zeros((3, 3))]])
        edelman = np.hstack([y, q]) @ sla.expm(block)[:, :3]
        np.testing.assert_allclose(g, edelman, atol=1e-12 * max(1.0, scale))


def test_cayley_retraction_matches_dense_formula():
    y, ds = scaled_steps(CAYLEY, 4)
    got = retract(CAYLEY, jnp.broadcast_to(y, ds.shape), ds)
    eye = np.eye(9)
    for g, d, scale in zip(got, ds, SCALES):
        w = omega(np.asarray(y), np.asarray(d))
        want = np.linalg.solve(eye - 0.5 * w, (eye + 0.5 * w) @ np.asarray(y))
        np.testing.assert_allclose(g, want, atol=1e-13 * max(1.0, scale))


def test_qr_retraction_is_householders_q_factor():
    """qf(Y + V) with diag(R) ≥ 0 at every step size (the Cholesky passes for small steps,
    Householder QR for the largest), as NumPy's Householder QR."""
    m = geometric.Stiefel(9, 3)
    y, ds = scaled_steps(m, 5)
    got = retract(m, jnp.broadcast_to(y, ds.shape), ds)
    for g, d, scale in zip(got, np.asarray(ds), SCALES):
        q, r = np.linalg.qr(np.asarray(y) + d)
        np.testing.assert_allclose(g, q * np.sign(np.diag(r)), atol=1e-14 * max(1.0, scale))


def test_cayley_and_exp_agree_to_third_order():
    y, d = point_and_tangent(CAYLEY, 7)
    steps = jnp.asarray([0.1, 0.05, 0.025, 0.0125])[:, None, None] * d[None]  # the shape above
    ys = jnp.broadcast_to(y, steps.shape)
    errs = jnp.linalg.norm(retract(CAYLEY, ys, steps) - retract(EXP, ys, steps), axis=(-2, -1))
    np.testing.assert_allclose(np.log2(errs[:-1] / errs[1:]), 3.0, atol=0.1)


def test_euclidean_exp_solves_the_geodesic_equation():
    """Y'' + Y Y'ᵀY' = 0 (Edelman et al. (2.7)) along t ↦ exp(y, tΔ), by central differences."""
    t, h = 0.7, 1e-3
    m = geometric.Stiefel(8, 3)
    y, d = point_and_tangent(m, 8)
    d = d / jnp.linalg.norm(d)
    ts = jnp.asarray([t - h, t, t + h])[:, None, None]
    curve = np.asarray(exp(m, jnp.broadcast_to(y, (3, 8, 3)), ts * d[None]))
    velocity = (curve[2] - curve[0]) / (2 * h)
    acceleration = (curve[2] - 2 * curve[1] + curve[0]) / h**2
    residual = acceleration + curve[1] @ velocity.T @ velocity
    assert np.abs(residual).max() < 1e-5 * np.abs(acceleration).max()
    np.testing.assert_allclose(m.manifold_error(curve[1]), 0, atol=1e-13)


def test_canonical_gradient_is_not_the_projection():
    m = geometric.Stiefel(7, 3, metric="canonical", retraction="exp")
    x, _ = point_and_tangent(m, 0)
    g = rand(m.shape, 9)
    r = m.egrad_to_rgrad(x, g)
    np.testing.assert_allclose(r, g - x @ g.T @ x, atol=1e-14)
    assert float(jnp.abs(r - m.project(x, g)).max()) > 1e-2
    assert float(jnp.abs(m.egrad_to_rgrad(x, r) - r).max()) > 1e-2  # not idempotent


# ----------------------------------------------------------------------------------------------
# Orthonormal rows: every method is the column method on the transpose


def test_rows_are_transposed_columns():
    """With the canonical metric (the law suite has rows with the Euclidean one)."""
    cols = geometric.Stiefel(7, 3, metric="canonical", retraction="cayley")
    rows = geometric.Stiefel(7, 3, metric="canonical", retraction="cayley", rows=True)
    assert rows.shape == (3, 7)
    y, d = point_and_tangent(cols, 10)
    g = rand(cols.shape, 12)

    @functools.partial(jax.jit, static_argnums=0)
    def methods(m, y, d, g):
        return (m.project(y, g), m.egrad_to_rgrad(y, g), m.retract(y, d), m.exp(y, d),
                m.transport(y, m.retract(y, d), d), m.inner(y, d, g))

    *got, inner_rows = methods(rows, y.T, d.T, g.T)
    *want, inner_cols = methods(cols, y, d, g)
    np.testing.assert_allclose(inner_rows, inner_cols, rtol=1e-14)
    for got, want in zip(got, want):
        np.testing.assert_allclose(got, want.T, atol=1e-14)
    np.testing.assert_allclose(rows.to_frame(y.T), y)  # manifold_adam sees the column frame
    np.testing.assert_allclose(rows.from_frame(y), y.T)


def test_construction():
    with pytest.raises(ValueError, match=r"^Stiefel: `p` must satisfy p ≤ n = 4; got p = 8\. A \(4, 8\) "
                                         r"array with orthonormal rows is Stiefel\(8, 4, rows=True\)\.$"):
        geometric.Stiefel(4, 8)  # eqx.nn.Linear(8, 4).weight is 4×8
    with pytest.raises(ValueError, match=r"A \(8, 4\) array with orthonormal columns is Stiefel\(8, 4\)\.$"):
        geometric.Stiefel(4, 8, rows=True)
    with pytest.raises(ValueError, match=r"Stiefel: `metric` must be one of 'euclidean', 'canonical'"):
        geometric.Stiefel(5, 2, metric="riemann")
    with pytest.raises(ValueError, match=r"`retraction` must be one of 'qr', 'polar', 'cayley', 'exp'"):
        geometric.Stiefel(5, 2, retraction="svd")
    with pytest.raises(TypeError, match=r"Stiefel: `n` must be an int; got float"):
        geometric.Stiefel(5.0, 2)
    with pytest.raises(TypeError, match=r"Stiefel: `rows` must be True or False; got 1"):
        geometric.Stiefel(5, 2, rows=1)
    with pytest.raises(TypeError, match=r"positional"):
        geometric.Stiefel(5, 2, "euclidean", "qr", True)  # rows is keyword-only
    assert geometric.Stiefel(np.int64(5), 2) == geometric.Stiefel(5, 2)
    assert geometric.Stiefel(5, 2, rows=True) != geometric.Stiefel(5, 2)


# ----------------------------------------------------------------------------------------------
# O(np²): no n×n array anywhere


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
    x = jax.ShapeDtypeStruct(m.shape, jnp.float32)

    def everything(x, g):
        r = m.egrad_to_rgrad(x, g)
        y = m.retract(x, -0.1 * r)
        return (m.transport(x, y, r), m.inner(x, r, r), m.manifold_error(y), m.project_point(y),
                m.exp(x, r))

    shapes = _shapes_in_jaxpr(jax.make_jaxpr(everything)(x, x).jaxpr)
    assert not [s for s in shapes if sum(d >= 64 for d in s) >= 2]
