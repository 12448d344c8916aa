"""Tests of rules/_linalg/spectral.py: eigh and svd, at distinct and at degenerate spectra.

Eigenvectors and singular vectors are gauge dependent (signs; phases for complex input; a basis
inside a degenerate eigenspace), so finite differences go through gauge-invariant functions. At
distinct spectra the rules share JAX's forward and gauge, and their raw derivatives agree with
JAX's to rounding. At degenerate spectra JAX's gradients are NaN; ours are finite and equal to
finite differences of every invariant loss.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rules
from rules.testing import check_rrule
from tests.helpers import rand, rel_err
from tests.rules.linalg.sharded import assert_sharded_like_unsharded


def herm(x):
    return 0.5 * (x + jnp.conj(jnp.swapaxes(x, -1, -2)))


def unitary(n, seed, dtype=jnp.float64):
    q, r = jnp.linalg.qr(rand((n, n), seed, dtype))
    d = jnp.diagonal(r)
    return q * (d / jnp.abs(d).astype(d.dtype))[None, :]


def ct(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


# Gauge-invariant views of the outputs, for finite differences.

def eigh_invariants(a):
    w, v = rules.eigh(a)
    weights = jnp.sin(w).astype(v.dtype)[..., None, :]
    return w, jnp.abs(v) ** 2, (v * weights) @ ct(v)


thin_svd = functools.partial(rules.svd, full_matrices=False)


def svd_invariants(a, **kwargs):
    u, s, vh = rules.svd(a, **{"full_matrices": False, **kwargs})
    k = s.shape[-1]
    c = jnp.broadcast_to(jnp.linspace(1.0, 2.0, k), s.shape).astype(u.dtype)
    u1, vh1 = u[..., :, :k], vh[..., :k, :]
    out = (s, jnp.abs(u1) ** 2, jnp.abs(vh1) ** 2, (u1 * c[..., None, :]) @ vh1)
    if kwargs.get("full_matrices"):  # the complements, through their projectors
        out += (u[..., :, k:] @ ct(u[..., :, k:]), ct(vh[..., k:, :]) @ vh[..., k:, :])
    return out


# ----------------------------------------------------------------------------------------------
# Distinct spectra: finite differences and JAX


def separated(shape, seed, dtype=jnp.float64):
    """``U diag(s) Vᴴ`` with singular values 1, …, 2 evenly spaced: finite differences of the
    singular vectors need gaps well above their step."""
    m, n = shape[-2:]
    k = min(m, n)
    u = jnp.linalg.qr(rand((*shape[:-2], m, m), seed, dtype))[0][..., :, :k]
    v = jnp.linalg.qr(rand((*shape[:-2], n, n), seed + 1, dtype))[0][..., :, :k]
    s = jnp.broadcast_to(jnp.linspace(1.0, 2.0, k), (*shape[:-2], k)).astype(dtype)
    return (u * s[..., None, :]) @ ct(v)


def test_eigh_finite_differences():
    check_rrule(eigh_invariants, herm(separated((5, 5), 1, jnp.complex128)))


@pytest.mark.parametrize("shape,dtype,kwargs", [((6, 5), jnp.float64, {}),
                                                ((4, 2), jnp.complex128, {"full_matrices": True})])
def test_svd_finite_differences(shape, dtype, kwargs):
    # check_jit=False: the op-by-op run dominates the time; every other check runs under jit.
    check_rrule(functools.partial(svd_invariants, **kwargs), separated(shape, 2, dtype),
                check_jit=False)


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128])
@pytest.mark.parametrize("symmetrize_input", [True, False])
def test_eigh_matches_jax(dtype, symmetrize_input):
    a = herm(rand((2, 5, 5), 3, dtype))
    da, w_bar, v_bar = rand((2, 5, 5), 4, dtype), rand((2, 5), 5), rand((2, 5, 5), 6, dtype)

    @jax.jit
    def derivatives(a):
        out = []
        for eigh in (rules.eigh, jnp.linalg.eigh):
            f = functools.partial(eigh, symmetrize_input=symmetrize_input)
            res, pullback = jax.vjp(f, a)
            out.append((tuple(res), pullback(type(res)(w_bar, v_bar)),
                        tuple(jax.jvp(f, (a,), (da,))[1])))
        return out

    ours, ref = derivatives(a)
    assert rel_err(ours, ref) < 1e-12


@pytest.mark.parametrize("shape", [(2, 5, 3), (3, 5), (4, 4)])
@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128])
def test_svd_matches_jax(shape, dtype):
    a, da = rand(shape, 7, dtype), rand(shape, 8, dtype)
    cts = [rand(y.shape, 9 + i, y.dtype) for i, y in enumerate(jnp.linalg.svd(a, full_matrices=False))]

    @jax.jit
    def derivatives(a):
        out = []
        for svd in (thin_svd, functools.partial(jnp.linalg.svd, full_matrices=False)):
            res, pullback = jax.vjp(svd, a)
            s_only = functools.partial(svd, compute_uv=False)
            out.append((tuple(res), pullback(type(res)(*cts)), tuple(jax.jvp(svd, (a,), (da,))[1]),
                        jax.vjp(s_only, a)[1](cts[1]), jax.jvp(s_only, (a,), (da,))[1]))
        return out

    ours, ref = derivatives(a)
    assert rel_err(ours, ref) < 1e-11


def test_svd_full_matrices_gauge():
    # The complement's tangent is the smallest motion that keeps U unitary: U₂ᴴU̇₂ = 0.
    a, da = rand((5, 2), 12, jnp.complex128), rand((5, 2), 13, jnp.complex128)
    full_jvp = jax.jit(lambda a, da: jax.jvp(functools.partial(rules.svd, full_matrices=True),
                                             (a,), (da,)))
    (u, s, vh), (du, ds, dvh) = full_jvp(a, da)
    thin = jax.jit(lambda a, da: jax.jvp(thin_svd, (a,), (da,))[1])(a, da)
    np.testing.assert_allclose(du[:, :2], thin.U, atol=1e-13)
    np.testing.assert_allclose(ct(u) @ du + ct(du) @ u, 0, atol=1e-13)  # UᴴU̇ skew-Hermitian
    np.testing.assert_allclose(ct(u[:, 2:]) @ du[:, 2:], 0, atol=1e-13)
    for x, y in zip(rules.svd(a, full_matrices=True), jnp.linalg.svd(a, full_matrices=True)):
        np.testing.assert_array_equal(x, y)


# ----------------------------------------------------------------------------------------------
# Degenerate spectra: JAX's gradient is NaN, ours is finite and equals finite differences


def fd_directional(loss, a, directions, eps=1e-6):
    return np.array([(loss(a + eps * d) - loss(a - eps * d)) / (2 * eps) for d in directions])


def assert_gradient_is_finite_difference(loss, a, directions, jax_loss=None):
    g = jax.jit(jax.grad(loss))(a)
    assert np.all(np.isfinite(g))
    ours = np.array([jnp.real(jnp.sum(g * d)) for d in directions])  # JAX's pairing
    np.testing.assert_allclose(ours, fd_directional(jax.jit(loss), a, directions), rtol=1e-6,
                               atol=1e-8)
    if jax_loss is not None:  # the same loss through JAX's own decomposition
        assert not np.all(np.isfinite(jax.jit(jax.grad(jax_loss))(a)))
    # forward mode agrees with reverse mode
    t = jax.jit(lambda a, d: jax.jvp(loss, (a,), (d,))[1])(a, directions[0])
    np.testing.assert_allclose(t, ours[0], rtol=1e-10, atol=1e-12)


def eigh_loss(eigh, x, m):
    """Σ sin λ + |v₃ᴴx| + Σ P ⊙ M with P the projector onto the (degenerate) first two columns."""
    def loss(a):
        w, v = eigh(a)
        p = v[..., :, :2] @ ct(v[..., :, :2])
        return (jnp.sum(jnp.sin(w)) + jnp.sum(jnp.abs(ct(v[..., :, 2:]) @ x[..., None]))
                + jnp.sum(jnp.real(p * m)))
    return loss


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128])
def test_eigh_degenerate(dtype):
    q = unitary(3, 20, dtype)
    a = jnp.stack([jnp.diag(jnp.array([1.0, 1.0, 2.0])).astype(dtype),   # exactly degenerate
                   q @ jnp.diag(jnp.array([-1.0, -1.0, 0.5])).astype(dtype) @ ct(q)])  # by rounding
    x, m = rand((2, 3), 21, dtype), rand((2, 3, 3), 22, dtype)
    directions = [herm(rand((2, 3, 3), 23 + i, dtype)) for i in range(3)]
    assert_gradient_is_finite_difference(eigh_loss(rules.eigh, x, m), a, directions,
                                         jax_loss=eigh_loss(jnp.linalg.eigh, x, m))


def svd_loss(svd, x, m):
    """Σ s² + |u₁ᴴx| + Σ P ⊙ M with P the projector onto the degenerate left pair."""
    def loss(a):
        u, s, _ = svd(a)
        p = u[..., :, 1:] @ ct(u[..., :, 1:])
        return (jnp.sum(s ** 2) + jnp.sum(jnp.abs(ct(u[..., :, :1]) @ x[..., None]))
                + jnp.sum(jnp.real(p * m)))
    return loss


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128])
def test_svd_degenerate(dtype):
    exact = jnp.array([[0.0, 1, 0], [0, 0, 0], [1, 0, 0], [0, 0, 3]], dtype)   # s = (3, 1, 1)
    rounded = unitary(4, 30, dtype)[:, :3] @ jnp.diag(jnp.array([2.0, 0.5, 0.5])).astype(dtype) @ ct(
        unitary(3, 31, dtype))
    a = jnp.stack([exact, rounded])
    x, m = rand((2, 4), 32, dtype), rand((2, 4, 4), 33, dtype)
    directions = [rand((2, 4, 3), 34 + i, dtype) for i in range(3)]
    jax_svd = functools.partial(jnp.linalg.svd, full_matrices=False)
    assert_gradient_is_finite_difference(svd_loss(thin_svd, x, m), a, directions,
                                         jax_loss=svd_loss(jax_svd, x, m))


def test_svd_degenerate_zero_singular_values_of_a_tall_matrix():
    # Rank 1: the zero singular values are degenerate with each other and with the complement.
    u0, v0 = rand((5,), 40), rand((3,), 41)
    a = jnp.outer(u0, v0)
    x = rand((5,), 42)

    def loss(a):
        u, s, _ = thin_svd(a)
        return jnp.sum(s ** 2) + jnp.abs(u[:, 0] @ x)

    assert_gradient_is_finite_difference(loss, a, [rand((5, 3), 43 + i) for i in range(3)])


def test_second_derivatives_at_a_degenerate_spectrum_are_nan_like_jax():
    # They depend on the loss beyond its gradient (Σ λ² = ‖(A + Aᵀ)/2‖²: the Hessian needs the
    # off-diagonal of VᴴȦV inside the degenerate block): NaN, never a finite wrong number.
    degenerate, split = jnp.diag(jnp.array([1.0, 1.0, 2.0])), jnp.diag(jnp.array([1.0, 1.1, 2.0]))

    @jax.jit
    def derivatives(a):
        out = []
        for eigenvalues in [lambda a: rules.eigh(a).eigenvalues, lambda a: jnp.linalg.eigh(a)[0],
                            lambda a: rules.svd(a, compute_uv=False)]:
            loss = lambda a: jnp.sum(eigenvalues(a) ** 2)  # noqa: E731
            out.append((jax.grad(loss)(a), jax.hessian(loss)(a)))
        return out

    for grad, hessian in derivatives(degenerate):
        assert np.all(np.isfinite(grad)) and np.any(np.isnan(hessian))
    exact = jax.hessian(lambda a: jnp.sum(herm(a) ** 2))(split)
    for _, hessian in derivatives(split)[:2]:
        np.testing.assert_allclose(hessian, exact, atol=1e-12)


def test_degeneracy_tol():
    # λ = 1, 1 + 1e-4, 3: a real gap far above the default tolerance is resolved exactly.
    q = unitary(3, 50)
    a = q @ jnp.diag(jnp.array([1.0, 1.0 + 1e-4, 3.0])) @ q.T
    x = rand((3,), 51)

    def single(tol):  # depends on one eigenvector of the close pair: not invariant
        return lambda a: jnp.abs(rules.eigh(a, degeneracy_tol=tol).eigenvectors[:, 0] @ x)

    def pair(tol):    # the projector onto the pair: invariant
        return lambda a: jnp.sum(rules.eigh(a, degeneracy_tol=tol).eigenvectors[:, :2] ** 2 * x[:, None])

    g_jax, g_default, g_zero, g_coarse = jax.jit(lambda a: [jax.grad(f)(a) for f in [
        lambda a: jnp.abs(jnp.linalg.eigh(a).eigenvectors[:, 0] @ x), single(None), single(0.0),
        single(1e-3)]])(a)
    np.testing.assert_allclose(g_default, g_jax, rtol=1e-9)
    np.testing.assert_allclose(g_zero, g_jax, rtol=1e-9)
    assert rel_err(g_coarse, g_jax) > 0.1   # the pair is declared degenerate
    directions = [herm(rand((3, 3), 52 + i)) for i in range(2)]
    assert_gradient_is_finite_difference(pair(1e-3), a, directions)
    for fn in [rules.eigh, rules.svd]:
        with pytest.raises(ValueError, match=f"{fn.__name__}: `degeneracy_tol` must be None or a "
                                             "Python float ≥ 0; got -1.0"):
            fn(a, degeneracy_tol=-1.0)
        with pytest.raises(TypeError, match=f"{fn.__name__}: `degeneracy_tol` must be None or a "
                                            "Python float ≥ 0; got str"):
            fn(a, degeneracy_tol="1e-3")


# ----------------------------------------------------------------------------------------------
# Transformations, dtypes, shapes, bad input


def test_higher_derivatives_match_jax():
    a = herm(rand((4, 4), 60))
    b = rand((4, 3), 61)
    m = rand((4, 4), 62)

    def eigh_loss(eigh, a):
        w, v = eigh(a)
        return jnp.sum(jnp.sin(w)) + jnp.sum((v * jnp.cos(w)[None, :]) @ v.T * m)

    def svd_loss(svd, a):
        u, s, vh = svd(a)
        return jnp.sum(s ** 3) + jnp.sum(jnp.sin((u * s[None, :]) @ vh)) + jnp.sum(u @ u.T * m)

    @jax.jit
    def derivatives(a, b):
        out = []
        for eigh, svd in [(rules.eigh, thin_svd),
                          (jnp.linalg.eigh, functools.partial(jnp.linalg.svd, full_matrices=False))]:
            le, ls = functools.partial(eigh_loss, eigh), functools.partial(svd_loss, svd)
            out.append((jax.hessian(le)(a), jax.grad(lambda a: jnp.sum(jax.grad(le)(a) ** 2))(a),
                        jax.hessian(ls)(b), jax.jacfwd(jax.grad(ls))(b)))
        return out

    ours, ref = derivatives(a, b)
    assert rel_err(ours, ref) < 1e-9


def test_vmap_equals_batch():
    a = herm(rand((3, 4, 4), 63))
    loss = lambda a: jnp.sum(eigh_invariants(a)[2] ** 2) + jnp.sum(svd_invariants(a)[3] ** 2)  # noqa: E731
    g = jax.jit(jax.grad(loss))(a)
    g_vmap = jax.jit(jax.vmap(jax.grad(loss)))(a)
    np.testing.assert_allclose(g_vmap, g, rtol=1e-12, atol=1e-13)


def test_float32_results_and_types():
    a = herm(rand((5, 5), 64))
    for fn in [rules.eigh, rules.svd]:
        out, ref = fn(a), (jnp.linalg.eigh(a) if fn is rules.eigh else jnp.linalg.svd(a))
        assert type(out) is type(ref) and out._fields == ref._fields
    grad = jax.jit(jax.grad(lambda a: jnp.sum(eigh_invariants(a)[2]) + jnp.sum(svd_invariants(a)[3])))
    g64, g32 = grad(a), grad(a.astype(jnp.float32))
    assert g32.dtype == jnp.float32 and rel_err(g32, g64) < 1e-4
    assert rules.svd(a.astype(jnp.float32), compute_uv=False).dtype == jnp.float32
    with pytest.raises(TypeError, match="eigh: `a` has dtype float16"):
        rules.eigh(jnp.eye(3, dtype=jnp.float16))
    i = jnp.array([[2, 1], [1, 2]], jnp.int32)
    for x, y in zip(rules.eigh(i), jnp.linalg.eigh(i)):
        assert x.dtype == y.dtype


@pytest.mark.parametrize("shape", [(0, 0), (2, 0), (0, 2), (3, 0, 0), (0, 3, 3)])
def test_empty(shape):
    a = jnp.zeros(shape)
    for full in [False, True]:
        for x, y in zip(rules.svd(a, full), jnp.linalg.svd(a, full)):
            assert x.shape == y.shape
    assert rules.svd(a, compute_uv=False).shape == jnp.linalg.svd(a, compute_uv=False).shape
    g = jax.grad(lambda a: jnp.sum(svd_invariants(a)[3]) + jnp.sum(thin_svd(a).S))(a)
    assert g.shape == shape
    if shape[-1] == shape[-2]:
        for x, y in zip(rules.eigh(a), jnp.linalg.eigh(a)):
            assert x.shape == y.shape
        assert jax.grad(lambda a: jnp.sum(eigh_invariants(a)[2]))(a).shape == shape


def test_bad_input():
    with pytest.raises(TypeError, match="eigh: `a` must be a JAX or NumPy array; got list"):
        rules.eigh([[1.0]])
    with pytest.raises(ValueError, match=r"eigh: `a` must have shape \(\.\.\., n, n\) \(square\); "
                                         r"got \(2, 3\)"):
        rules.eigh(jnp.ones((2, 3)))
    with pytest.raises(ValueError, match="eigh: `UPLO` must be one of None, 'L', 'U'; got 'X'"):
        rules.eigh(jnp.eye(2), UPLO="X")
    with pytest.raises(ValueError, match=r"svd: `a` must have shape \(\.\.\., m, n\); got \(3,\)"):
        rules.svd(jnp.ones(3))
    with pytest.raises(TypeError, match="svd: `a` must have dtype .*; got <U1"):
        rules.svd(np.array([["a"]]))


def test_sharded_batch():
    a = herm(rand((4, 4, 4), 70))
    b = rand((4, 5, 3), 71, jnp.complex128)

    def values_and_grads(a, b):
        loss = lambda a, b: (jnp.sum(eigh_invariants(a)[2] ** 2)  # noqa: E731
                             + jnp.sum(jnp.abs(svd_invariants(b)[3]) ** 2))
        return jax.value_and_grad(loss, argnums=(0, 1))(a, b)

    assert_sharded_like_unsharded(values_and_grads, a, b, rtol=1e-10)


def test_svd_hermitian_is_jaxs():
    """``hermitian=True`` computes what JAX computes, from rules.eigh: values, and the gradient of
    a sign-invariant loss (also at a matrix with eigenvalues ±1, a degenerate ``s``)."""
    for a in [rand((3, 4, 4), 30) + rand((3, 4, 4), 30).mT,
              jnp.diag(jnp.array([1.0, -1.0, 2.0]))]:
        ours, theirs = rules.svd(a, hermitian=True), jnp.linalg.svd(a, hermitian=True)
        for x, y in zip(ours, theirs):
            np.testing.assert_allclose(jnp.abs(x), jnp.abs(y), atol=1e-12)
        np.testing.assert_allclose(rules.svd(a, compute_uv=False, hermitian=True),
                                   jnp.linalg.svd(a, compute_uv=False, hermitian=True), atol=1e-12)

        def loss(svd):
            return lambda a: jnp.sum(jnp.sin((lambda u, s, vh: (u * s[..., None, :]) @ vh)(
                *svd(a, hermitian=True))))
        np.testing.assert_allclose(jax.grad(loss(rules.svd))(a), jax.grad(loss(jnp.linalg.svd))(a),
                                   atol=1e-10)
    with pytest.raises(ValueError, match=r"svd: `a` must have shape \(\.\.\., n, n\) with "
                                         r"`hermitian=True`"):
        rules.svd(jnp.ones((3, 2)), hermitian=True)


def test_svd_subset_by_index_as_jax_takes_it():
    a = rand((5, 3), 31)
    for x, y in zip(rules.svd(a, False, subset_by_index=(0, 3)), rules.svd(a, False)):
        np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError, match="full_matrices and subset_by_index cannot both be set"):
        rules.svd(a, subset_by_index=(1, 3))
    with pytest.raises(NotImplementedError, match=r"svd: `subset_by_index=\(1, 3\)` selects part"):
        rules.svd(a, False, subset_by_index=(1, 3))
    with pytest.raises(ValueError, match="svd: `subset_by_index` must be None or a pair of ints"):
        rules.svd(a, False, subset_by_index=(1.0, 3.0))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_jacobi_route_matches_jax(n):
    """A batch of tiny real matrices takes Jacobi's method (rules/_kernels/small.py): the
    invariants of its decompositions, and their derivatives, are JAX's."""
    a, da = rand((40, n, n), 80 + n), rand((40, n, n), 90 + n)

    def eigh_part(eigh):
        return lambda a: (lambda w, v: (w, (v * jnp.sin(w)[..., None, :]) @ v.mT))(*eigh(a))

    def svd_part(svd):
        return lambda a: (lambda u, s, vh: (s, (u * jnp.sin(s)[..., None, :]) @ vh))(*svd(a))

    for ours, theirs, x in [(eigh_part(rules.eigh), eigh_part(jnp.linalg.eigh), a + a.mT),
                            (svd_part(rules.svd), svd_part(jnp.linalg.svd), a)]:
        (value, tangent), (want, want_tangent) = (jax.jvp(f, (x,), (da,)) for f in (ours, theirs))
        assert rel_err(value, want) < 1e-11 and rel_err(tangent, want_tangent) < 1e-9
        loss = lambda f: lambda x: sum(jnp.sum(jnp.sin(y)) for y in f(x))  # noqa: E731
        assert rel_err(jax.grad(loss(ours))(x), jax.grad(loss(theirs))(x)) < 1e-9
