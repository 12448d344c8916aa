"""Tests of rules/_linalg/matfun.py: the matrix exponential, its Fréchet derivative and the
Cayley transform."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import rules
from rules.testing import check_frule, check_rrule
from tests.helpers import rand, rel_err
from tests.rules.linalg.sharded import assert_sharded_like_unsharded


def test_expm_finite_differences():
    # LU of the Padé denominator and a few squarings; tiny matrices (the closed-form inverse) are
    # compared with JAX's derivatives below.
    # check_jit=False: op by op, the squaring loops compile one program per step and branch.
    check_rrule(rules.expm, 2.0 * rand((5, 5), 1, jnp.complex128), check_jit=False)


def _assert_expm_matches_jax(a, tol, seed):
    """Values, vjp and jvp of ``rules.expm`` against ``jax.scipy.linalg.expm``, slice by slice."""
    da, x_bar = rand(a.shape, seed, a.dtype), rand(a.shape, seed + 1, a.dtype)

    @jax.jit
    def derivatives(a):
        return [(f(a), jax.vjp(f, a)[1](x_bar), jax.jvp(f, (a,), (da,))[1])
                for f in (rules.expm, jax.scipy.linalg.expm)]

    ours, ref = derivatives(a)
    for x, y in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(ref)):
        assert x.dtype == y.dtype
        for k in range(a.shape[0]):
            assert rel_err(x[k], y[k]) < tol


@pytest.mark.parametrize("shape,dtype", [((3, 3, 3), jnp.float64), ((2, 6, 6), jnp.float32)])
def test_expm_matches_jax(shape, dtype):
    # Both Padé degrees (13 in double, 7 in single precision) and both denominator solves (closed
    # form, U and L⁻¹P); complex input is checked against finite differences above. Slices of
    # very different norms: each keeps its own number of squarings.
    scales = jnp.array([0.01, 1.0, 30.0][: shape[0]])[:, None, None]
    a = rand(shape, 2, dtype) * scales.astype(dtype)
    # Both are backward stable; with 30·‖A‖ the squarings amplify rounding by ~κ(exp).
    _assert_expm_matches_jax(a, 1e-4 if dtype == jnp.float32 else 1e-10, seed=3)


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_expm_many_squarings_match_jax(dtype):
    # Skew-symmetric slices of norms 0.1 to 400: exp is a rotation (no overflow, well
    # conditioned) and the slices need 0, about 3 and about 8 squarings, so both stretches of the
    # squaring loops run, each slice keeping its own count.
    k = rand((3, 6, 6), 11)
    a = ((k - k.mT) * jnp.array([0.1, 10.0, 200.0])[:, None, None]).astype(dtype)
    # The derivatives grow with ‖A‖ (by ~‖A‖ relative to ‖Ȧ‖), and so does their rounding.
    _assert_expm_matches_jax(a, 2e-3 if dtype == jnp.float32 else 1e-10, seed=12)


def test_expm_properties():
    k = rand((4, 3, 3), 5)
    k = k - k.mT   # skew-symmetric: exp is a rotation
    r = jax.jit(rules.expm)(k)
    np.testing.assert_allclose(r @ r.mT, jnp.broadcast_to(jnp.eye(3), r.shape), atol=1e-13)
    np.testing.assert_allclose(jnp.linalg.det(r), 1.0, atol=1e-13)
    # exp(A) commutes with A, and the Fréchet derivative in the direction A is A exp(A).
    a = rand((6, 6), 6)
    x, dx = jax.jit(lambda a: jax.jvp(rules.expm, (a,), (a,)))(a)
    np.testing.assert_allclose(dx, a @ x, rtol=1e-11, atol=1e-11)
    # The pullback is the Fréchet derivative at Aᵀ.
    g = rand((6, 6), 7)
    pull = jax.jit(lambda a, g: jax.vjp(rules.expm, a)[1](g)[0])(a, g)
    push_t = jax.jit(lambda a, g: jax.jvp(rules.expm, (a.T,), (g,))[1])(a, g)
    np.testing.assert_allclose(pull, push_t, rtol=1e-11, atol=1e-11)


def test_expm_higher_derivatives():
    # Against finite differences of the (checked) gradient: JAX's own expm takes minutes to
    # compile under jax.hessian.
    a, d = rand((2, 2), 8), rand((2, 2), 9)

    def loss(a):
        return jnp.sum(jnp.sin(rules.expm(a)))

    grad = jax.jit(jax.grad(loss))
    hvp, grad_of_grad = jax.jit(lambda a, d: (
        jax.jvp(jax.grad(loss), (a,), (d,))[1],
        jax.grad(lambda a: jnp.vdot(jax.grad(loss)(a), d))(a)))(a, d)
    eps = 1e-5
    fd = (grad(a + eps * d) - grad(a - eps * d)) / (2 * eps)
    assert rel_err(hvp, fd) < 1e-8
    assert rel_err(grad_of_grad, fd) < 1e-8  # the Hessian is symmetric


def test_expm_large_norm_and_nonfinite_are_nan_like_jax():
    a = jnp.stack([jnp.full((3, 3), 1e6), jnp.full((3, 3), jnp.inf), jnp.eye(3)])
    ours, ref = rules.expm(a), jax.scipy.linalg.expm(a)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(ref))
    assert np.all(np.isnan(ours[:2])) and np.all(np.isfinite(ours[2]))


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (0, 3, 3)])
def test_expm_empty(shape):
    a = jnp.zeros(shape)
    assert rules.expm(a).shape == jax.scipy.linalg.expm(a).shape == shape
    assert jax.grad(lambda a: jnp.sum(rules.expm(a)))(a).shape == shape


def test_expm_dtypes_and_bad_input():
    assert rules.expm(jnp.eye(2, dtype=jnp.int32)).dtype == jnp.float32
    with pytest.raises(TypeError, match="expm: `A` has dtype float16"):
        rules.expm(jnp.eye(2, dtype=jnp.float16))
    with pytest.raises(TypeError, match="expm: `A` must be a JAX or NumPy array; got list"):
        rules.expm([[1.0]])
    with pytest.raises(ValueError, match=r"expm: `A` must have shape \(\.\.\., n, n\) \(square\); "
                                         r"got \(2, 3\)"):
        rules.expm(jnp.ones((2, 3)))


def test_expm_sharded_batch():
    a = rand((4, 5, 5), 9)
    assert_sharded_like_unsharded(
        jax.value_and_grad(lambda a: jnp.sum(jnp.sin(rules.expm(a)))), a, rtol=1e-11)


# ----------------------------------------------------------------------------------------------
# Fréchet derivative of the exponential


def _frechet_case(shape, seed, dtype=jnp.float64):
    """``(A, E)``: skew-symmetric slices plus a small general part (well conditioned, no
    overflow) of norms about 2, 80 and 1500, needing 0, 3 and 8 squarings, so both stretches of
    the squaring loops run, each slice keeping its own count."""
    k = rand(shape, seed)
    scales = jnp.array([0.1, 10.0, 200.0])[: shape[0], None, None]
    a = ((k - k.mT) * scales + rand(shape, seed + 1, scale=0.3)).astype(dtype)
    return a, rand(shape, seed + 2, dtype)


def _per_slice_err(x, y):
    return max(rel_err(x[k], y[k]) for k in range(x.shape[0]))


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128, jnp.float32])
def test_expm_frechet_matches_jax_and_scipy(dtype):
    a, e = _frechet_case((3, 5, 5), 20, dtype)
    tol = 1e-4 if dtype == jnp.float32 else 1e-11

    @jax.jit
    def values(a, e):
        return (rules.expm_frechet(a, e), rules.expm_frechet(a, e, compute_expm=False),
                jax.scipy.linalg.expm_frechet(a, e), rules.expm(a))

    (x, l), l_alone, (x_ref, l_ref), x_expm = values(a, e)
    assert x.dtype == l.dtype == x_ref.dtype == l_alone.dtype
    same = 1e-6 if dtype == jnp.float32 else 1e-14  # the same operations, compiled apart
    assert _per_slice_err(x, x_expm) < same and _per_slice_err(l, l_alone) < same
    assert _per_slice_err(x, x_ref) < tol and _per_slice_err(l, l_ref) < tol
    if dtype != jnp.float32:
        for k in range(a.shape[0]):
            x_sp, l_sp = scipy.linalg.expm_frechet(np.asarray(a[k]), np.asarray(e[k]))
            assert rel_err(x[k], x_sp) < 1e-10 and rel_err(l[k], l_sp) < 1e-10


def test_expm_frechet_derivatives_match_jax():
    """Gradients of both outputs and of ``L`` alone, and tangents, against JAX's (LU of the Padé
    denominator; tiny matrices below). Tangents in ``A`` alone and in ``E`` alone (the other
    symbolically zero) add up to the tangent in both."""
    a, e = _frechet_case((3, 6, 6), 36)
    wx, wl, da, de = (rand(a.shape, 40 + i) for i in range(4))

    def derivatives(f):
        def both(a, e):
            x, l = f(a, e)
            return jnp.sum(wx * x) + jnp.sum(wl * l)

        def alone(a, e):
            return jnp.sum(wl * f(a, e, compute_expm=False))

        return (jax.grad(both, (0, 1))(a, e), jax.grad(alone, (0, 1))(a, e),
                jax.jvp(f, (a, e), (da, de))[1])

    @jax.jit
    def run():
        in_a = jax.jvp(lambda a: rules.expm_frechet(a, e), (a,), (da,))[1]
        in_e = jax.jvp(lambda e: rules.expm_frechet(a, e, compute_expm=False), (e,), (de,))[1]
        return (derivatives(rules.expm_frechet), derivatives(jax.scipy.linalg.expm_frechet),
                in_a, in_e)

    ours, ref, in_a, in_e = run()
    for o, r in zip(jax.tree.leaves(ours), jax.tree.leaves(ref)):
        assert _per_slice_err(o, r) < 1e-10
    x_dot, l_dot = ours[2]
    assert _per_slice_err(in_a[0], x_dot) < 1e-14
    assert _per_slice_err(in_a[1] + in_e, l_dot) < 1e-12


def test_expm_frechet_finite_differences():
    # One squaring, the LU of the Padé denominator (n = 5); complex: holomorphic, plain transposes.
    # check_jit=False: op by op, the squaring loops compile one program per step and branch.
    a, e = 2.0 * rand((5, 5), 50, jnp.complex128), rand((5, 5), 51, jnp.complex128)
    check_rrule(rules.expm_frechet, a, e, check_jit=False, max_entries=20)
    check_frule(rules.expm_frechet, a, e, check_jit=False)


def test_expm_frechet_higher_derivatives():
    # Tiny matrices (the closed-form inverse): the gradient against JAX's, then forward over
    # reverse (jax.hessian) and reverse over reverse against finite differences of it: JAX's own
    # expm takes minutes to compile under jax.hessian.
    a, e, da, de = (rand((2, 2), 60 + i) for i in range(4))

    def loss(a, e, f=rules.expm_frechet):
        x, l = f(a, e)
        return jnp.sum(jnp.sin(l)) + jnp.sum(jnp.cos(x))

    grads = jax.jit(lambda a, e: [jax.grad(loss, (0, 1))(a, e, f)
                                  for f in (rules.expm_frechet, jax.scipy.linalg.expm_frechet)])
    ours, ref = grads(a, e)
    assert rel_err(ours, ref) < 1e-12

    def second(a, e):
        (haa, hae), (hea, hee) = jax.hessian(loss, (0, 1))(a, e)
        hvp = [jnp.einsum("ijkl,kl->ij", h, da) + jnp.einsum("ijkl,kl->ij", g, de)
               for h, g in ((haa, hae), (hea, hee))]
        grad_of_grad = jax.grad(lambda a, e: sum(
            jnp.vdot(g, d) for g, d in zip(jax.grad(loss, (0, 1))(a, e), (da, de))), (0, 1))(a, e)
        return hvp, grad_of_grad

    grad = jax.jit(jax.grad(loss, (0, 1)))
    hvp, grad_of_grad = jax.jit(second)(a, e)
    eps = 1e-5
    fd = [(p - m) / (2 * eps) for p, m in zip(grad(a + eps * da, e + eps * de),
                                               grad(a - eps * da, e - eps * de))]
    assert rel_err(hvp, fd) < 1e-8
    assert rel_err(grad_of_grad, fd) < 1e-8  # the Hessian is symmetric


def test_expm_frechet_vmap_and_shared_direction():
    a, e = _frechet_case((3, 4, 4), 70)
    w = rand(a.shape, 73)
    batched = jax.vmap(rules.expm_frechet)(a, e)
    assert rel_err(batched, rules.expm_frechet(a, e)) < 1e-14
    # One E for every slice: its cotangent is summed over the batch.
    shared = e[0]

    def loss(a, e):
        return jnp.sum(w * jax.vmap(rules.expm_frechet, in_axes=(0, None))(a, e)[1])

    def broadcast(a, e):
        return jnp.sum(w * rules.expm_frechet(a, jnp.broadcast_to(e, a.shape))[1])

    got, want = jax.jit(lambda a, e: (jax.grad(loss, (0, 1))(a, e),
                                      jax.grad(broadcast, (0, 1))(a, e)))(a, shared)
    assert rel_err(got, want) < 1e-12


def test_expm_frechet_large_norm_is_nan():
    a = jnp.stack([jnp.full((3, 3), 1e6), jnp.full((3, 3), jnp.inf), 0.5 * jnp.eye(3)])
    x, l = rules.expm_frechet(a, jnp.ones_like(a))
    np.testing.assert_array_equal(jnp.isnan(x), jnp.isnan(jax.scipy.linalg.expm(a)))
    assert np.all(np.isnan(l[:2])) and np.all(np.isfinite(x[2])) and np.all(np.isfinite(l[2]))


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (0, 3, 3)])
def test_expm_frechet_empty(shape):
    z = jnp.zeros(shape)
    assert [x.shape for x in rules.expm_frechet(z, z)] == [shape] * 2
    grads = jax.grad(lambda a, e: jnp.sum(rules.expm_frechet(a, e, compute_expm=False)),
                     (0, 1))(z, z)
    assert [g.shape for g in grads] == [shape] * 2


def test_expm_frechet_dtypes_and_bad_input():
    x, l = rules.expm_frechet(jnp.eye(2, dtype=jnp.int32), jnp.eye(2, dtype=jnp.int32))
    assert x.dtype == l.dtype == jnp.float32
    a = jnp.eye(3)
    with pytest.raises(ValueError, match=r"expm_frechet: `E` must have the shape of `A`, "
                                         r"\(3, 3\); got \(2, 2\)"):
        rules.expm_frechet(a, jnp.eye(2))
    with pytest.raises(TypeError, match="expm_frechet: `E` must have the dtype of `A`, float64; "
                                        "got float32"):
        rules.expm_frechet(a, jnp.eye(3, dtype=jnp.float32))
    with pytest.raises(ValueError, match=r"expm_frechet: `A` must have shape \(\.\.\., n, n\)"):
        rules.expm_frechet(jnp.ones((2, 3)), jnp.ones((2, 3)))
    with pytest.raises(TypeError, match="expm_frechet: `compute_expm` must be a bool; got str"):
        rules.expm_frechet(a, a, compute_expm="yes")


# ----------------------------------------------------------------------------------------------
# Cayley transform


def _mT(x):
    return jnp.swapaxes(x, -1, -2)


def _eye(n, like):
    return jnp.broadcast_to(jnp.eye(n, dtype=like.dtype), (*like.shape[:-2], n, n))


def plain_cayley(c):
    eye = _eye(c.shape[-1], c)
    return (eye - c) @ jnp.linalg.inv(eye + c)


def _skew(shape, seed):
    s = rand(shape, seed)
    return s - _mT(s)


# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 3, 4, 6])
def test_cayley_matches_definition_and_is_orthogonal(n):
    c = _skew((3, n, n), n)
    general = rand((3, n, n), n, scale=0.3)  # not skew: still (I - C)(I + C)⁻¹
    lam, lam_ref, lam_general, lam_general_ref = jax.jit(
        lambda c, g: (rules.cayley(c), plain_cayley(c), rules.cayley(g), plain_cayley(g)))(c, general)
    np.testing.assert_allclose(lam, lam_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lam_general, lam_general_ref, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(_mT(lam) @ lam, _eye(n, lam), atol=1e-12)
    np.testing.assert_allclose(np.linalg.det(lam), np.ones(3), atol=1e-12)


@pytest.mark.parametrize("n, dtype", [(3, jnp.float64), (6, jnp.float64), (4, jnp.complex128),
                                      (5, jnp.complex128)])
def test_cayley_matches_jax_vjp(n, dtype):
    c = _skew((2, n, n), n).astype(dtype) + rand((2, n, n), 1, dtype, scale=0.2)
    lam_bar = rand((2, n, n), 2, dtype)

    @jax.jit
    def vjps(c):
        return [jax.vjp(f, c)[1](lam_bar)[0] for f in (rules.cayley, plain_cayley)]

    ours, ref = vjps(c)
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n", [3, 6])
def test_cayley_check_rrule(n):
    # Skew plus a small general part keeps I + C well conditioned for the finite differences.
    c = _skew((2, n, n), n) / 2 + rand((2, n, n), 3, scale=0.1)
    check_rrule(rules.cayley, c, max_entries=12)


def test_cayley_bad_input():
    with pytest.raises(ValueError, match=r"cayley: `c` must have shape \(\.\.\., n, n\) \(square\); "
                                         r"got \(2, 3\)"):
        rules.cayley(jnp.zeros((2, 3)))
    with pytest.raises(TypeError, match="cayley: `c` must have dtype .* got int32"):
        rules.cayley(jnp.zeros((2, 2), jnp.int32))


def test_expm_options_as_jax_takes_them():
    """``A`` by name, ``upper_triangular``, and ``max_squarings`` (NaN beyond it, as JAX)."""
    a = rand((2, 4, 4), 40)
    np.testing.assert_allclose(rules.expm(A=jnp.triu(a), upper_triangular=True),
                               jax.scipy.linalg.expm(jnp.triu(a), upper_triangular=True),
                               rtol=1e-12)
    big = 300 * a
    for max_squarings in (0, 3, 7, 20):
        ours = rules.expm(big, max_squarings=max_squarings)
        theirs = jax.scipy.linalg.expm(big, max_squarings=max_squarings)
        np.testing.assert_array_equal(jnp.isnan(ours), jnp.isnan(theirs))
    g = jax.grad(lambda a: jnp.sum(jnp.sin(rules.expm(a, max_squarings=2))))(3 * a)
    want = jax.grad(lambda a: jnp.sum(jnp.sin(jax.scipy.linalg.expm(a, max_squarings=2))))(3 * a)
    assert rel_err(g, want) < 1e-8
    with pytest.raises(ValueError, match=r"expm: `max_squarings` must be ≥ 0; got -1"):
        rules.expm(a, max_squarings=-1)
    with pytest.raises(TypeError, match=r"expm: `upper_triangular` must be a bool"):
        rules.expm(a, upper_triangular=1)
