"""Laws every manifold obeys (geoopt's test_manifold_basic), and the template of
geometric/_core/manifold.py that enforces them.

One ``MANIFOLDS`` registry; a new manifold is one more entry. For each manifold one jitted
function (:func:`laws`) evaluates every public method on a batch of float64 points and returns
what the laws compare; each test then checks one law on those numbers. A second compiled call
evaluates the methods in float32 on one slice of the batch: dtypes are kept, points land on the
manifold, and the batched results equal the per-slice ones. Optional methods (exp, log, dist,
frames) are checked where the manifold declares them and must raise ``NotImplementedError``
where it does not: a missing method never passes silently.
"""
import dataclasses
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sla

import geometric
from tests.helpers import rand, spd_reference_dist

MANIFOLDS = {
    "stiefel-qr": geometric.Stiefel(7, 3),
    "stiefel-rows-polar": geometric.Stiefel(7, 3, retraction="polar", rows=True),
    "stiefel-cayley": geometric.Stiefel(7, 3, retraction="cayley"),
    "stiefel-canonical-exp": geometric.Stiefel(7, 3, metric="canonical", retraction="exp"),
    "stiefel-square-canonical-cayley": geometric.Stiefel(4, 4, metric="canonical",
                                                         retraction="cayley"),
    "grassmann": geometric.Grassmann(7, 3),
    "sphere": geometric.Sphere(5),
    "orthogonal": geometric.Orthogonal(5),
    "spd-affine": geometric.SPD(4),
    "spd-log_euclidean": geometric.SPD(4, metric="log_euclidean"),
    "spd-bures_wasserstein": geometric.SPD(4, metric="bures_wasserstein"),
    "oblique": geometric.Oblique(6, 3),
    "symplectic_stiefel": geometric.SymplecticStiefel(3, 2),
}
# Manifolds whose project_point is defined only near the manifold (a Gaussian matrix is far from
# SPD(n) or SpSt(2n, 2k)): the laws run at their random points instead.
RANDOM_POINTS = (geometric.SPD, geometric.SymplecticStiefel)
DTYPES = ("float32", "float64")
TOL = 1e-12  # float64, absolute, for quantities of order one
BATCH = 3
STEPS = (1e-2, 5e-3, 2.5e-3, 1.25e-3)  # t in R_x(tv) - x - tv = O(t²)
DIST_LENGTHS = (0.2, 0.45, 0.6)  # well inside every injectivity radius (Grassmann: π/2)


# Distances in closed form from NumPy/SciPy, one point pair (in the public layout) at a time.
REFERENCE_DIST = {
    geometric.SPD: spd_reference_dist,
    geometric.Oblique: lambda m, x, y: np.linalg.norm(np.arccos(np.clip(np.sum(x * y, 0), -1, 1))),
    geometric.Sphere: lambda m, x, y: np.arccos(np.clip(x @ y, -1, 1)),
    geometric.Grassmann: lambda m, x, y: np.linalg.norm(
        sla.subspace_angles(*((x.T, y.T) if m.rows else (x, y)))),
    geometric.Orthogonal: lambda m, x, y: np.linalg.norm(sla.logm(x.T @ y).real),
}

cases = pytest.mark.parametrize("dtype", DTYPES)
every = pytest.mark.parametrize("name", list(MANIFOLDS))


def point_axes(m):
    return tuple(range(-len(m.shape), 0))


def euclidean(m, a, b):
    """The ambient inner product ``<a, b>`` per point."""
    return jnp.sum(a * b, axis=point_axes(m))


def scaled(m, x, v, length):
    """``v`` rescaled to Riemannian norm ``length`` at ``x``."""
    n = m.norm(x, v)
    return length * v / n.reshape(n.shape + (1,) * len(m.shape))


def methods(m, x, g, u, v):
    """Every public method on a point ``x`` (any batch shape), ambient ``g``, tangents ``u, v``."""
    y = m.retract(x, 0.3 * v)
    near = m.retract(x, 0.1 * v)
    out = {"project": m.project(x, g), "egrad_to_rgrad": m.egrad_to_rgrad(x, g),
           "ehess_to_rhess": m.ehess_to_rhess(x, g, g - u, v), "inner": m.inner(x, u, v),
           "norm": m.norm(x, u), "retract": y,
           "transport": m.transport(x, y, u), "retract_transport": m.retract_transport(x, 0.3 * v, u),
           "manifold_error": m.manifold_error(y), "project_point": m.project_point(x + 1e-2 * g)}
    if "exp" in m.capabilities:
        out["exp"] = m.exp(x, scaled(m, x, v, 0.4))
    if "log" in m.capabilities:
        out["log"] = m.log(x, near)
    if "dist" in m.capabilities:
        out["dist"] = m.dist(x, near)
    if "frame" in m.capabilities:
        out["to_frame"] = m.to_frame(x)
    return out


# The compiled laws run once: optimising their machine code costs more time than it saves.
UNOPTIMIZED = {"xla_backend_optimization_level": 0}
jit_methods = jax.jit(methods, static_argnums=0, compiler_options=UNOPTIMIZED)


def stacked(x, n):
    return jnp.broadcast_to(x, (n, *x.shape))


@functools.partial(jax.jit, static_argnums=0, compiler_options=UNOPTIMIZED)
def laws(m, x, h):
    """The quantities every law compares, at ``BATCH`` points ``x`` with ambient vectors ``h``.

    Each method is traced once or twice (batched, and on one slice); cases are stacked along a
    leading axis instead of traced again, which keeps compilation short.
    """
    g = h[0]
    u, v, *sides = m.project(stacked(x, 5), h[1:])
    got = methods(m, x, g, u, v)
    pg, r, y = got["project"], got["egrad_to_rgrad"], got["retract"]
    steps = jnp.asarray(STEPS, x.dtype).reshape(-1, *(1,) * x.ndim) * v[None]  # (4, B, ...)
    triangle = jnp.stack([scaled(m, x, d, s) for d, s in zip(sides, DIST_LENGTHS)])
    retracted = m.retract(stacked(x, 8), jnp.concatenate([jnp.zeros_like(v)[None], steps, triangle]))
    a, b, c = retracted[5:]
    projected = m.project(jnp.stack([x, x, x, y]), jnp.stack([pg, u, r, got["transport"]]))
    inners = m.inner(stacked(x, 3), jnp.stack([r, v, u]), jnp.stack([v, u, u]))
    out = {
        "x": x, "g": g, "u": u, "v": v, "a": a, "b": b, "batched": got,
        "project_twice": projected[0], "project_tangent": projected[1],
        "normal_part": euclidean(m, g - pg, u),
        "rgrad_projected": projected[2], "riesz": (inners[0], euclidean(m, g, v)),
        "inner_swapped": inners[1], "inner_uu": inners[2],
        "retract_zero": retracted[0],
        "retract_steps": jnp.sqrt(euclidean(m, *2 * (retracted[1:5] - x[None] - steps,))),
        "transport_projected": projected[3],
        "transport_to_self": m.transport(x, x, u),
        "project_point_of_point": m.project_point(x),
    }
    if "exp" in m.capabilities:
        w = scaled(m, x, u, 0.4)
        exps = m.exp(stacked(x, 6), jnp.concatenate([jnp.zeros_like(u)[None], steps, w[None]]))
        out |= {"exp_zero": exps[0], "exp_w": exps[5], "w": w,
                "exp_steps": jnp.sqrt(euclidean(m, *2 * (exps[1:5] - x[None] - steps,)))}
    if "log" in m.capabilities:
        ends = [a, out["exp_w"]] if "exp" in m.capabilities else [a]
        logs = m.log(stacked(x, len(ends)), jnp.stack(ends))
        out |= {"log_a": logs[0], "log_a_projected": m.project(x, logs[0]),
                "log_a_norm": m.norm(x, logs[0]), "log_exp": logs[1:]}
    if "dist" in m.capabilities:
        pairs = [(a, b), (b, a), (b, c), (a, c), (x, a), (x, x)]
        if "exp" in m.capabilities:
            pairs.append((x, out["exp_w"]))
        dists = m.dist(*map(jnp.stack, zip(*pairs)))
        x0 = x[0]
        gradient = jax.grad(lambda p: m.dist(x0, p) ** 2)(x0)
        out |= dict(zip(["dist_ab", "dist_ba", "dist_bc", "dist_ac", "dist_xa", "dist_self",
                         "dist_exp"], dists))
        out |= {"dist_sq_gradient": gradient, "dist_sq_rgrad": m.egrad_to_rgrad(x0, gradient)}
    if "frame" in m.capabilities:
        f = got["to_frame"]
        out |= {"frame_gram": f.mT @ f, "frame_back": m.from_frame(f),
                "frame_tangent_gram": f.mT @ m.to_frame(u)}
    return out


@functools.cache
def results(name):
    """``laws`` in float64, as NumPy arrays."""
    m = MANIFOLDS[name]
    shape = (BATCH, *m.shape)
    if isinstance(m, RANDOM_POINTS):
        keys = jax.random.split(jax.random.PRNGKey(0), BATCH)
        x = jax.vmap(lambda k: m.random_point(k, jnp.float64))(keys)
    else:
        x = m.project_point(rand(shape, seed=0))
    return m, jax.tree.map(np.asarray, laws(m, x, rand((6, *shape), seed=1))), TOL


def close(got, want, tol, err_msg=""):
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=err_msg)


@every
@cases
def test_random_point_and_tangent(name, dtype):
    m = MANIFOLDS[name]
    x = m.random_point(jax.random.PRNGKey(0), dtype)
    assert x.shape == m.shape and x.dtype == dtype
    assert m.manifold_error(x) < 10 * np.finfo(dtype).eps
    v = m.random_tangent(jax.random.PRNGKey(1), x)
    assert v.dtype == dtype
    close(m.project(x, v), v, 10 * np.finfo(dtype).eps)


@every
def test_projection_is_idempotent_orthogonal_and_fixes_tangents(name):
    m, r, tol = results(name)
    close(r["project_twice"], r["batched"]["project"], tol)
    close(r["project_tangent"], r["u"], tol)  # random_tangent is tangent
    close(r["normal_part"], 0, 10 * tol)      # what project removes is normal


@every
def test_riemannian_gradient_is_the_riesz_representative(name):
    m, r, tol = results(name)
    close(r["rgrad_projected"], r["batched"]["egrad_to_rgrad"], tol)
    close(*r["riesz"], 10 * tol)  # inner(x, rgrad, ξ) = <g, ξ>


@every
def test_inner_is_symmetric_positive_and_gives_the_norm(name):
    m, r, tol = results(name)
    close(r["inner_swapped"], r["batched"]["inner"], 10 * tol)
    assert r["inner_uu"].min() > 0
    close(r["batched"]["norm"] ** 2, r["inner_uu"], 10 * tol)


@every
def test_retraction_lands_on_the_manifold_and_is_first_order(name):
    m, r, tol = results(name)
    close(r["retract_zero"], r["x"], tol)
    assert r["batched"]["manifold_error"].max() < tol
    errors = r["retract_steps"]  # ‖R_x(tv) - x - tv‖ for halving t
    v_sq = np.sum(r["v"] ** 2, axis=point_axes(m))
    assert (errors[0] < 10 * STEPS[0] ** 2 * v_sq + tol).all()
    np.testing.assert_allclose(np.log2(errors[:-1] / errors[1:]), 2.0, atol=0.05)


@every
def test_transport_lands_in_the_new_tangent_space(name):
    m, r, tol = results(name)
    got = r["batched"]
    close(r["transport_projected"], got["transport"], tol)
    close(r["transport_to_self"], r["u"], tol)
    close(got["retract_transport"][0], got["retract"], tol)
    close(got["retract_transport"][1], got["transport"], tol)


@every
def test_project_point(name):
    m, r, tol = results(name)
    close(r["project_point_of_point"], r["x"], tol)
    assert m.manifold_error(r["batched"]["project_point"]).max() < tol


@functools.cache
def float32_first_slice(name):
    """Every method on the first point of ``results(name)``, unbatched and in float32."""
    m, r, _ = results(name)
    x, g, u, v = (jnp.asarray(r[k][0], jnp.float32) for k in ("x", "g", "u", "v"))
    return m, jax.tree.map(np.asarray, jit_methods(m, x, g, u, v))


@every
def test_float32_in_float32_out(name):
    """Every method keeps float32 (with x64 on) and lands on the manifold to float32 rounding."""
    m, got = float32_first_slice(name)
    assert {a.dtype for a in jax.tree.leaves(got)} == {np.dtype(np.float32)}
    assert got["manifold_error"] < 1e-5
    for key in ("retract", "project_point", "exp"):
        if key in got:
            assert m.manifold_error(got[key]) < 1e-5, key


@every
def test_batched_equals_per_slice(name):
    """The batched float64 results, slice by slice, are the unbatched float32 ones (to float32
    precision: a mix-up of batch axes shows as an error of order one)."""
    m, r, _ = results(name)
    _, first = float32_first_slice(name)
    assert r["batched"]["inner"].shape == (BATCH,)
    for key, value in first.items():
        batched = jax.tree.map(lambda a: a[0], r["batched"][key])
        for got, want in zip(jax.tree.leaves(batched), jax.tree.leaves(value)):
            close(got, want, 2e-5, err_msg=key)


@every
def test_exp_is_a_second_retraction(name):
    m, r, tol = results(name)
    if "exp" not in m.capabilities:
        with pytest.raises(NotImplementedError, match=rf"\.exp: {type(m).__name__} has no `exp`"):
            m.exp(r["x"], r["u"])
        return
    close(r["exp_zero"], r["x"], tol)
    assert m.manifold_error(r["exp_w"]).max() < tol
    errors = r["exp_steps"]
    np.testing.assert_allclose(np.log2(errors[:-1] / errors[1:]), 2.0, atol=0.05)


@every
def test_log_inverts_exp(name):
    m, r, tol = results(name)
    if "log" not in m.capabilities:
        with pytest.raises(NotImplementedError, match=rf"\.log: {type(m).__name__} has no `log`"):
            m.log(r["x"], r["x"])
        return
    if "w" in r:
        close(r["log_exp"][0], r["w"], 10 * tol)
    close(r["log_a_projected"], r["log_a"], tol)  # a tangent vector


@every
def test_dist_laws(name):
    """dist(x, exp(x, w)) = ‖w‖, = ‖log(x, y)‖, symmetry, the triangle inequality, dist(x, x) = 0
    with the gradient of dist² there finite and 0."""
    m, r, tol = results(name)
    if "dist" not in m.capabilities:
        with pytest.raises(NotImplementedError, match=rf"\.dist: {type(m).__name__} has no `dist`"):
            m.dist(r["x"], r["x"])
        return
    if "dist_exp" in r:
        close(r["dist_exp"], 0.4, 10 * tol)
    if "log_a_norm" in r:
        close(r["dist_xa"], r["log_a_norm"], 10 * tol)
    close(r["dist_ab"], r["dist_ba"], 10 * tol)
    assert (r["dist_ac"] <= r["dist_ab"] + r["dist_bc"] + tol).all()
    assert (r["dist_ab"] > 1e-3).all()
    close(r["dist_self"], 0, tol)
    assert np.isfinite(r["dist_sq_gradient"]).all()
    close(r["dist_sq_rgrad"], 0, tol)


@pytest.mark.parametrize("name", [k for k, m in MANIFOLDS.items() if "dist" in m.capabilities])
def test_dist_closed_form(name):
    m, r, tol = results(name)
    want = [REFERENCE_DIST[type(m)](m, a, b) for a, b in zip(r["a"], r["b"])]
    close(r["dist_ab"], want, 1e-11)


@every
def test_frames(name):
    m, r, tol = results(name)
    if "frame" not in m.capabilities:
        with pytest.raises(NotImplementedError, match=r"\.to_frame: .* has no `to_frame`"):
            m.to_frame(r["x"])
        return
    gram = r["frame_gram"]
    close(gram, np.broadcast_to(np.eye(gram.shape[-1]), gram.shape), tol)
    close(r["frame_back"], r["x"], 0)
    if m.horizontal:
        close(r["frame_tangent_gram"], 0, tol)


# ----------------------------------------------------------------------------------------------
# The Riemannian Hessian and the dimension (more laws of the Hessian: test_hessian.py)


def hessian_cost(m):
    """A cost on the ambient space that is not quadratic, so that the Weingarten and Christoffel
    terms of the Hessian matter; on the Grassmann manifold a function of the subspace (``XXᵀ``),
    whose Hessian alone is self-adjoint."""
    if isinstance(m, geometric.Grassmann):
        c = rand((m.n, m.n), seed=2)

        def of_subspace(x):
            p = x.T @ x if m.rows else x @ x.T
            return jnp.sum(jnp.sin(c * p)) + jnp.sum(c * p) ** 2
        return of_subspace
    a, b = rand(m.shape, seed=2), rand(m.shape, seed=3)
    return lambda x: jnp.sum(jnp.sin(a * x)) + jnp.sum(b * x) ** 2 + jnp.sum(a * x ** 3)


@every
def test_check_hessian(name):
    """The acceptance test of the Hessians: geometric.check_hessian passes (slope 3 along a
    geodesic or a retraction corrected to second order, self-adjoint, tangent) in float64."""
    m, r, _ = results(name)
    result = geometric.check_hessian(hessian_cost(m), m, r["x"][0], key=jax.random.PRNGKey(7))
    assert result, result


@every
def test_dim_is_the_rank_of_the_tangent_projection(name):
    m, r, _ = results(name)
    size = int(np.prod(m.shape))
    basis = jnp.eye(size).reshape(size, *m.shape)
    projection = jax.vmap(lambda e: m.project(r["x"][0], e))(basis).reshape(size, size)
    assert type(m.dim) is int
    assert m.dim == np.linalg.matrix_rank(np.asarray(projection), tol=1e-8)


# ----------------------------------------------------------------------------------------------
# Uniform sampling

HAAR_SAMPLES = 4000


@functools.partial(jax.jit, static_argnums=0)
def haar_samples(m, key):
    xs = jax.vmap(lambda k: m.random_point(k, jnp.float64))(jax.random.split(key, HAAR_SAMPLES))
    return xs.reshape(HAAR_SAMPLES, m.shape[0], -1)


@pytest.mark.parametrize("name", ["stiefel-qr", "grassmann", "sphere", "orthogonal"])
def test_random_point_is_haar(name):
    """Mean ≈ 0 and E[x xᵀ] ≈ (p/n) I; an unsigned QR fails the first (LAPACK's sign gauge)."""
    xs = np.asarray(haar_samples(MANIFOLDS[name], jax.random.PRNGKey(1)))
    n, p = xs.shape[1:]
    np.testing.assert_allclose(xs.mean(0), 0, atol=6 * np.sqrt(1 / n / HAAR_SAMPLES))
    second = np.einsum("bip,bjp->ij", xs, xs) / HAAR_SAMPLES
    np.testing.assert_allclose(second, p / n * np.eye(n), atol=6 * np.sqrt(2 / HAAR_SAMPLES) * p / n)


# ----------------------------------------------------------------------------------------------
# Checks: check_point, verify_point, and every method's input checks


def shape_text(shape):
    return re.escape("(..., " + ", ".join(map(str, shape)) + ")")


@every
def test_check_point(name):
    m = MANIFOLDS[name]
    wrong = (*m.shape[:-1], m.shape[-1] + 1)
    with pytest.raises(ValueError, match=rf"^{re.escape(repr(m))}\.check_point: `x` must have "
                                         rf"shape {shape_text(m.shape)}; got {re.escape(str(wrong))}\.$"):
        m.check_point(jnp.zeros(wrong))
    with pytest.raises(ValueError, match=r"^riemannian_adam\.init: `params\['w'\]` must have shape"):
        m.check_point(jnp.zeros(wrong), argname="params['w']", fname="riemannian_adam.init")
    with pytest.raises(TypeError, match=r"check_point: `x` must have dtype float32, float64; got int32"):
        m.check_point(jnp.zeros(m.shape, jnp.int32))
    with pytest.raises(TypeError, match=r"check_point: `x` must be a JAX or NumPy array; got list"):
        m.check_point(np.zeros(m.shape).tolist())
    m.check_point(np.zeros((2, *m.shape)))  # shape and dtype only: not the values


@every
def test_verify_point(name):
    m = MANIFOLDS[name]
    x = jax.vmap(lambda k: m.random_point(k, jnp.float64))(jax.random.split(jax.random.PRNGKey(0), 3))
    ok, reason = m.verify_point(x)
    assert ok, reason
    assert re.fullmatch(rf"{re.escape(m._error_formula)} = \S+ ≤ atol = \S+ \(the largest of 3 points, "
                        r"at index \(\d,\)\)", reason), reason
    off = -1.0 if isinstance(m, geometric.SPD) else 1.5  # a scaled SPD matrix is one
    ok, reason = m.verify_point(x.at[1].multiply(off), atol=1e-3)
    assert not ok
    assert re.fullmatch(rf"{re.escape(m._error_formula)} = \S+ > atol = 0.001 \(the largest of 3 "
                        r"points, at index \(1,\)\)", reason), reason
    ok, reason = m.verify_point(x[0] * np.nan)
    assert not ok and " = nan > " in reason
    with pytest.raises(TypeError, match=r"verify_point: `x` must be a concrete array; got a tracer"):
        jax.jit(lambda x: m.verify_point(x)[0])(x)


def test_verify_point_default_tolerance():
    """√ε·√(size): rounding passes in both dtypes, an unconstrained init does not."""
    st = geometric.Stiefel(64, 16)
    y = st.random_point(jax.random.PRNGKey(0), jnp.float32)
    assert st.verify_point(y) == (True, f"‖xᵀx − I‖_F = {float(st.manifold_error(y)):.3g} ≤ "
                                        f"atol = {np.sqrt(float(np.finfo(np.float32).eps) * 1024):.3g}")
    lecun = jax.random.normal(jax.random.PRNGKey(1), (64, 16)) / 8
    assert not st.verify_point(lecun)[0]
    assert not st.verify_point(y.astype(jnp.float64))[0]  # float64 asks for float64 rounding


def test_method_input_checks():
    st = geometric.Stiefel(5, 2)
    x = st.random_point(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"project: `x` must have shape \(\.\.\., 5, 2\); got \(5, 3\)"):
        st.project(jnp.zeros((5, 3)), jnp.zeros((5, 3)))
    with pytest.raises(ValueError, match=r"retract: `v` must have the shape of `x`, \(5, 2\); got \(3, 5, 2\)"):
        st.retract(x, jnp.zeros((3, 5, 2)))
    with pytest.raises(ValueError, match=r"retract_transport: `u` must have the shape of `x`"):
        st.retract_transport(x, x, x[:, :1])
    with pytest.raises(TypeError, match=r"inner: `u` must have dtype float32, float64; got int32"):
        st.inner(x, jnp.zeros((5, 2), jnp.int32), x)
    with pytest.raises(TypeError, match=r"random_point: `dtype` must be float32 or float64; got int32"):
        st.random_point(jax.random.PRNGKey(0), jnp.int32)
    with pytest.raises(ValueError, match=r"Sphere\(n=3\)\.manifold_error: `x` must have shape \(\.\.\., 3\)"):
        geometric.Sphere(3).manifold_error(jnp.ones((3, 1)))
    with pytest.raises(TypeError, match=r"must be a JAX or NumPy array; got list"):
        st.project_point([[1.0, 0.0]] * 5)
    rows = geometric.Stiefel(5, 2, rows=True)
    with pytest.raises(ValueError, match=r"rows=True\)\.project: `x` must have shape \(\.\.\., 2, 5\); got \(5, 2\)"):
        rows.project(x, x)
    with pytest.raises(ValueError, match=r"from_frame: `y` must have shape \(\.\.\., 5, 1\); got \(5,\)"):
        geometric.Sphere(5).from_frame(jnp.zeros(5))


@every
def test_hashable_and_frozen(name):
    m = MANIFOLDS[name]
    same = dataclasses.replace(m)
    assert same == m and hash(same) == hash(m) and same is not m
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.n = 9


# ----------------------------------------------------------------------------------------------
# The template: capabilities are declared, and checked when a class is defined


def test_capabilities_must_match_the_hooks():
    with pytest.raises(TypeError, match=r"Declared declares 'exp' in `capabilities` but implements no `_exp`"):
        class Declared(geometric.AbstractManifold):
            capabilities = frozenset({"exp"})
    with pytest.raises(TypeError, match=r"Undeclared implements `_log` but does not declare 'log'"):
        class Undeclared(geometric.AbstractManifold):
            def _log(self, x, y):
                return y - x
    with pytest.raises(TypeError, match=r"Unknown: unknown capabilities \['expm'\]; known: exp, log"):
        class Unknown(geometric.AbstractManifold):
            capabilities = frozenset({"expm"})

    with pytest.raises(TypeError, match=r"Frames declares 'frame' in `capabilities` but "
                                        r"implements no `_from_frame`"):
        class Frames(geometric.AbstractManifold):
            capabilities = frozenset({"frame"})

            def _to_frame(self, x):
                return x[..., None]
    with pytest.raises(TypeError, match=r"Gradient implements `_frame_rgrad` but does not "
                                        r"declare 'frame'"):
        class Gradient(geometric.AbstractManifold):
            def _frame_rgrad(self, y, g, yt_g):
                return g, yt_g, 0 * yt_g

    class DistFromLog(geometric.AbstractManifold):  # dist defaults to the norm of log
        capabilities = frozenset({"log", "dist"})

        def _log(self, x, y):
            return y - x

    assert DistFromLog.capabilities == {"log", "dist"}


def test_declared_capabilities():
    assert {name: set(m.capabilities) for name, m in MANIFOLDS.items() if "-" not in name} == {
        "grassmann": {"exp", "log", "dist", "frame"}, "sphere": {"exp", "log", "dist", "frame"},
        "orthogonal": {"exp", "log", "dist", "frame"}, "oblique": {"exp", "log", "dist"},
        "symplectic_stiefel": set()}
    assert set(geometric.SPD(3).capabilities) == {"exp", "log", "dist"}
    assert set(geometric.Stiefel(5, 2).capabilities) == {"exp", "frame"}
    with pytest.raises(NotImplementedError, match=r"^Stiefel\(n=5, p=2, metric='euclidean', "
                                                  r"retraction='qr', rows=False\)\.log: Stiefel has "
                                                  r"no `log` \(capabilities: exp, frame\)\.$"):
        geometric.Stiefel(5, 2).log(jnp.zeros((5, 2)), jnp.zeros((5, 2)))


# Points outside a manifold's domain: nan, as jnp.log(-1.0) is, never a finite wrong number.
OUTSIDE = {
    "ball outside": (geometric.PoincareBall(2), jnp.array([2.0, 0.0])),
    "ball beyond its safe part": (geometric.PoincareBall(2), jnp.array([1 - 1e-12, 0.0])),
    "hyperboloid, lower sheet": (geometric.Lorentz(2), jnp.array([-1.0, 0.0, 0.0])),
    "hyperboloid, spacelike": (geometric.Lorentz(2), jnp.array([0.5, 1.0, 0.0])),
    **{f"indefinite, {metric}": (geometric.SPD(2, metric=metric),
                                 jnp.array([[1.0, 2.0], [2.0, 1.0]]))
       for metric in ("affine", "log_euclidean", "bures_wasserstein")},
}


@pytest.mark.parametrize("case", list(OUTSIDE))
def test_points_outside_the_domain_give_nan(case):
    m, bad = OUTSIDE[case]
    good = m.random_point(jax.random.PRNGKey(0), jnp.float64)
    v = m.random_tangent(jax.random.PRNGKey(1), good)
    calls = {"egrad_to_rgrad": lambda: m.egrad_to_rgrad(bad, v), "inner": lambda: m.inner(bad, v, v),
             "ehess_to_rhess": lambda: m.ehess_to_rhess(bad, v, v, v),
             "norm": lambda: m.norm(bad, v), "retract": lambda: m.retract(bad, v),
             "transport from": lambda: m.transport(bad, good, v),
             "transport to": lambda: m.transport(good, bad, v),
             "exp": lambda: m.exp(bad, v), "log from": lambda: m.log(bad, good),
             "log to": lambda: m.log(good, bad), "dist": lambda: m.dist(good, bad),
             "jit dist": lambda: jax.jit(m.dist)(good, bad)}
    for name, call in calls.items():
        assert np.isnan(call()).all(), name
    assert np.isfinite(m.dist(good, m.project_point(bad) if "safe" in case or "outside" in case
                              else good))
    assert float(m.manifold_error(bad)) > 0


def test_sphere_log_at_the_antipode_is_nan():
    """The cut locus: every direction is a shortest geodesic, so log has no answer (it was 0)."""
    s = geometric.Sphere(3)
    x = jnp.array([1.0, 0.0, 0.0])
    assert np.isnan(s.log(x, -x)).all()
    assert float(s.dist(x, -x)) == pytest.approx(np.pi)
    near = s.project_point(-x + jnp.array([0.0, 1e-3, 0.0]))
    assert np.isfinite(s.log(x, near)).all()
