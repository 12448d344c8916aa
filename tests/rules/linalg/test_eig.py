"""Tests of rules/_linalg/eig.py: eig and eigvals of general square matrices.

Eigenvectors are defined up to a complex scale: the unit norm fixes its modulus, LAPACK's
convention (largest component real) its phase, up to a sign that may flip between nearby
matrices. Finite differences therefore go through functions invariant under ``v_j → e^{iθ} v_j``;
the raw derivatives (LAPACK's normalisation, phase held fixed) are compared with JAX's own eig JVP
(``enable_eigvec_derivs=True``), which uses the same gauge.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from jax import lax

import rules
from rules.testing import check_frule, check_rrule
from tests.helpers import central_difference, rand, rel_err
from tests.rules.linalg.sharded import assert_sharded_like_unsharded

EigResult = type(jax.eval_shape(jnp.linalg.eig, jnp.eye(1)))  # JAX's, which the rules return


def ct(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def jax_eig(a):
    """JAX's eig with its eigenvector derivative (LAPACK's gauge) switched on."""
    w, v = lax.linalg.eig(a, compute_left_eigenvectors=False, enable_eigvec_derivs=True)
    return EigResult(w, v)


def sorted_eig(a):
    """``rules.eig`` sorted by the real, then the imaginary part of the eigenvalues.

    LAPACK's order can change between nearby matrices; a sorted order is locally constant where
    the eigenvalues are distinct, so finite differences compare the same eigenpairs.
    """
    w, v = rules.eig(a)
    order = jnp.lexsort((w.imag, w.real))
    return jnp.take_along_axis(w, order, -1), jnp.take_along_axis(v, order[..., None, :], -1)


def invariants(a, x):
    """Functions of eig invariant to each eigenvector's phase: λ, |V|², |Vᴴx|², V sin(Λ) V⁻¹."""
    w, v = sorted_eig(a)
    f = (v * jnp.sin(w)[..., None, :]) @ jnp.linalg.inv(v)
    return w, jnp.abs(v) ** 2, jnp.abs(ct(v) @ x.astype(v.dtype)[..., None]) ** 2, f


def sum_sq(eigvals):
    return lambda a: jnp.sum(jnp.abs(eigvals(a)) ** 2)


def with_spectrum(spectrum, seed, dtype=jnp.float64):
    """``S diag(spectrum) S⁻¹`` for a random, well-conditioned, non-orthogonal ``S``."""
    n = len(spectrum)
    s = rand((n, n), seed, dtype) + 3 * jnp.eye(n, dtype=dtype)
    return s @ jnp.diag(jnp.asarray(spectrum, dtype)) @ jnp.linalg.inv(s)


# ----------------------------------------------------------------------------------------------
# Values


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128])
def test_values_match_scipy_and_jnp(dtype):
    a = rand((3, 5, 5), 1, dtype)
    w, v = rules.eig(a)
    assert w.dtype == v.dtype == jnp.complex128 and w.shape == (3, 5) and v.shape == (3, 5, 5)
    for x, y in zip(rules.eig(a), jnp.linalg.eig(a)):  # the same decomposition, order and gauge
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(rules.eigvals(a), jnp.linalg.eigvals(a))
    np.testing.assert_allclose(a.astype(v.dtype) @ v, v * w[..., None, :], atol=1e-13)
    np.testing.assert_allclose(jnp.linalg.norm(v, axis=-2), 1, rtol=1e-14)
    for i in range(3):
        ws, vs = scipy.linalg.eig(np.asarray(a[i]))
        np.testing.assert_allclose(np.sort_complex(w[i]), np.sort_complex(ws), rtol=1e-12)
        np.testing.assert_allclose(np.sort_complex(rules.eigvals(a[i])), np.sort_complex(ws),
                                   rtol=1e-12)
        # eigenvectors up to phase: the rank-one projectors, in the order of the eigenvalues
        ours, ref = np.argsort(np.asarray(w[i])), np.argsort(ws)
        proj = lambda v, order: np.einsum("ik,jk->kij", v[:, order], np.conj(v[:, order]))
        np.testing.assert_allclose(proj(np.asarray(v[i]), ours), proj(vs, ref), atol=1e-12)


def test_float32_and_integer_input():
    a = rand((4, 6, 6), 2)
    w32, v32 = rules.eig(a.astype(jnp.float32))
    assert w32.dtype == v32.dtype == jnp.complex64
    assert rules.eigvals(a.astype(jnp.complex64)).dtype == jnp.complex64
    np.testing.assert_allclose(np.sort_complex(w32), np.sort_complex(rules.eigvals(a)), rtol=1e-5,
                               atol=1e-5)
    g32 = jax.grad(sum_sq(rules.eigvals))(a.astype(jnp.float32))
    assert g32.dtype == jnp.float32
    assert rel_err(g32, jax.grad(sum_sq(rules.eigvals))(a)) < 1e-4
    i = jnp.array([[1, 2], [3, 4]], jnp.int32)
    for f in (rules.eig, rules.eigvals):
        for x, y in zip(jax.tree.leaves(f(i)), jax.tree.leaves(getattr(jnp.linalg, f.__name__)(i))):
            assert x.dtype == y.dtype
            np.testing.assert_allclose(x, y, rtol=1e-6)


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (0, 3, 3)])
def test_empty(shape):
    a = jnp.zeros(shape)
    w, v = rules.eig(a)
    assert w.shape == shape[:-1] and v.shape == shape and w.dtype == jnp.complex128
    assert rules.eigvals(a).shape == shape[:-1]
    assert jax.grad(sum_sq(rules.eigvals))(a).shape == shape
    assert jax.grad(lambda a: jnp.sum(jnp.abs(rules.eig(a).eigenvectors)))(a).shape == shape
    assert jax.jvp(rules.eig, (a,), (a,))[1].eigenvectors.shape == shape


def test_bad_input():
    for f in (rules.eig, rules.eigvals):
        name = f.__name__
        with pytest.raises(TypeError, match=f"{name}: `a` must be a JAX or NumPy array; got list"):
            f([[1.0, 2.0], [3.0, 4.0]])
        with pytest.raises(ValueError, match=rf"{name}: `a` must have shape \(\.\.\., n, n\) "
                                             r"\(square\); got \(2, 3\)"):
            f(jnp.zeros((2, 3)))
        with pytest.raises(ValueError, match=rf"{name}: `a` must have shape \(\.\.\., n, n\)"):
            f(jnp.zeros(3))
        with pytest.raises(TypeError, match=f"{name}: `a` has dtype float16"):
            f(jnp.eye(2, dtype=jnp.float16))


# ----------------------------------------------------------------------------------------------
# Derivatives at distinct eigenvalues


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128])
def test_finite_differences(dtype):
    # Real input has a complex-conjugate pair here. check_rrule checks the pushforward too;
    # check_jit=False: the op-by-op run dominates the time, every other check runs under jit.
    a = rand((4, 4), 3, dtype)
    x = rand((4,), 5, jnp.complex128)
    check_rrule(invariants, a, x, eps=1e-4, check_jit=False, check_vmap=False)
    check_rrule(rules.eigvals, a, eps=1e-4, check_jit=False)


def test_eigvals_forward_mode_on_a_batch():
    check_frule(rules.eigvals, rand((2, 3, 3), 4), eps=1e-4)


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128])
def test_matches_jax(dtype):
    # Raw derivatives, gauge-dependent losses included: the same as JAX's eig JVP and its
    # transpose (LAPACK's normalisation with the phase held fixed).
    a, da = rand((2, 4, 4), 6, dtype), rand((2, 4, 4), 7, dtype)
    w_bar, v_bar = rand((2, 4), 8, jnp.complex128), rand((2, 4, 4), 9, jnp.complex128)

    @jax.jit
    def derivatives(a):
        out = []
        for eig in (rules.eig, jax_eig):
            res, pullback = jax.vjp(eig, a)
            eigvals = functools.partial(lambda eig, a: eig(a).eigenvalues, eig)
            out.append((tuple(res), pullback(EigResult(w_bar, v_bar)),
                        tuple(jax.jvp(eig, (a,), (da,))[1]), jax.grad(sum_sq(eigvals))(a)))
        out.append((jax.grad(sum_sq(rules.eigvals))(a), jax.grad(sum_sq(jnp.linalg.eigvals))(a)))
        return out

    ours, ref, (g_eigvals, g_jax) = derivatives(a)
    assert rel_err(ours, ref) < 1e-11
    assert rel_err(g_eigvals, g_jax) < 1e-11
    assert ours[1][0].dtype == dtype  # the cotangent of real input is real


def test_tangent_keeps_lapacks_normalisation():
    # ‖v_j‖ = 1 and v_{k_j j} real (k_j the largest component) along the tangent.
    a, da = rand((4, 4), 20, jnp.complex128), rand((4, 4), 21, jnp.complex128)
    (_, v), (_, dv) = jax.jvp(rules.eig, (a,), (da,))
    np.testing.assert_allclose(jnp.sum(jnp.conj(v) * dv, axis=0).real, 0, atol=1e-13)
    k = jnp.argmax(jnp.abs(v), axis=0)
    np.testing.assert_array_equal(v[k, jnp.arange(4)].imag, 0)
    np.testing.assert_allclose(dv[k, jnp.arange(4)].imag, 0, atol=1e-13)


def test_hessian():
    # The Hessian of an eigenvalue function needs the eigenvector derivative (second order).
    a = rand((3, 3), 10)
    loss = lambda a: jnp.sum(jnp.abs(rules.eigvals(a)) ** 2 + jnp.real(rules.eigvals(a)) ** 3)
    h = jax.jit(jax.hessian(loss))(a)
    jax_loss = lambda a: jnp.sum(jnp.abs(jax_eig(a).eigenvalues) ** 2
                                 + jnp.real(jax_eig(a).eigenvalues) ** 3)
    assert rel_err(h, jax.jit(jax.hessian(jax_loss))(a)) < 1e-10
    d = rand((3, 3), 11)
    fd = central_difference(jax.jit(jax.grad(loss)), a, d, eps=1e-5)
    np.testing.assert_allclose(jnp.einsum("ijkl,kl->ij", h, d), fd, rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("which", ["eigvals", "eig"])
def test_reverse_over_reverse(which):
    """Grad of grad differentiates the decomposition in reverse: it agrees with forward over
    reverse (the decomposition's tangent map must be linear in the tangent to transpose)."""
    a, w = rand((3, 3), 14), rand((3, 3), 15)
    f = {"eigvals": lambda a: w[0] * jnp.abs(rules.eigvals(a)) ** 2,
         "eig": lambda a: w * jnp.abs(rules.eig(a).eigenvectors) ** 2}[which]
    loss = lambda a: jnp.sum(f(a))
    reverse = jax.jit(jax.grad(lambda a: jnp.sum(w * jax.grad(loss)(a))))(a)
    forward = jnp.einsum("ijkl,ij->kl", jax.jit(jax.jacfwd(jax.grad(loss)))(a), w)
    assert rel_err(reverse, forward) < 1e-10


def test_batch_vmap_jit():
    a = rand((2, 3, 4, 4), 12, jnp.complex128)
    c = rand((4, 4), 13)

    def loss(a):  # invariant to the eigenvectors' phases
        w, v = rules.eig(a)
        return jnp.sum(jnp.abs(v) ** 2 * jnp.broadcast_to(c, v.shape)) + jnp.sum(jnp.abs(w) ** 2)

    batched = jax.jit(jax.value_and_grad(loss))(a)
    mapped = jax.vmap(jax.vmap(jax.value_and_grad(loss)))(a)
    assert rel_err(batched[1], mapped[1]) < 1e-12
    np.testing.assert_allclose(batched[0], jnp.sum(mapped[0]), rtol=1e-12)
    for x, y in zip(jax.vmap(rules.eig)(a[0]), rules.eig(a[0])):  # vmap is the batch
        np.testing.assert_array_equal(x, y)
    assert_sharded_like_unsharded(jax.value_and_grad(loss), a)  # a batch over two devices


def test_nearly_parallel_eigenvectors():
    # Distinct eigenvalues 1, 1.1 and 2 with two nearly parallel eigenvectors (κ(V) ≈ 100): the
    # derivatives are large (the eigenvalues are ill-conditioned) but finite and correct.
    s = jnp.array([[1.0, 1.0, 0.0], [0.0, 0.02, 0.0], [0.3, 0.2, 1.0]])
    a = s @ jnp.diag(jnp.array([1.0, 1.1, 2.0])) @ jnp.linalg.inv(s)
    x = rand((3,), 14, jnp.complex128)
    check_rrule(invariants, a, x, eps=1e-6, rtol=1e-6, check_jit=False, check_vmap=False)


# ----------------------------------------------------------------------------------------------
# Repeated eigenvalues: eigenvalue derivatives of symmetric functions stay exact, the
# eigenvectors of the repeated eigenvalue get NaN, the others stay finite


@pytest.mark.parametrize("a", [jnp.diag(jnp.array([1.0, 1.0, 2.0])),  # exactly repeated
                               with_spectrum([1.0, 1.0, 2.0], 15)],   # split by rounding
                         ids=["exact", "rounded"])
def test_repeated_eigenvalue(a):
    # Σ λ² = tr(A²): gradient 2Aᵀ; Σ |λ|² against finite differences
    g = jax.grad(lambda a: jnp.sum(rules.eigvals(a) ** 2).real)(a)
    np.testing.assert_allclose(g, 2 * a.T, atol=1e-12)
    g = jax.grad(lambda a: jnp.sum(rules.eig(a).eigenvalues ** 2).real)(a)
    np.testing.assert_allclose(g, 2 * a.T, atol=1e-12)
    d = rand((3, 3), 16)
    g = jax.grad(sum_sq(rules.eigvals))(a)
    np.testing.assert_allclose(jnp.sum(g * d), central_difference(sum_sq(rules.eigvals), a, d),
                               rtol=1e-7)
    # The eigenvectors: NaN for the repeated pair, finite and exact for the simple one
    (w, _), (w_dot, v_dot) = jax.jvp(rules.eig, (a,), (d,))
    simple = jnp.abs(w - 2) < 0.5
    assert np.all(np.isfinite(w_dot))
    assert np.all(np.isnan(v_dot[:, ~simple])) and np.all(np.isfinite(v_dot[:, simple]))
    x = rand((3,), 17, jnp.complex128)

    def loss(a, near):  # |vᴴx|² of the eigenvector whose eigenvalue is nearest `near`
        w, v = rules.eig(a)
        return jnp.abs(jnp.vdot(v[:, jnp.argmin(jnp.abs(w - near))], x)) ** 2

    g = jax.grad(loss)(a, 2.0)
    np.testing.assert_allclose(jnp.sum(g * d), central_difference(lambda a: loss(a, 2.0), a, d),
                               rtol=1e-7)
    assert np.all(np.isnan(jax.grad(loss)(a, 1.0)))
    # Second derivatives need the eigenvector derivative: NaN along directions that split λ = 1
    assert not np.all(np.isfinite(jax.jit(jax.hessian(sum_sq(rules.eigvals)))(a)))


def test_defective_eigenvalue_is_not_finite_wrong():
    # A Jordan block: λ = 1 twice with one eigenvector, λ(t) = 1 ± √t along A + t e₂e₁ᵀ: the
    # derivative is infinite. LAPACK returns V singular to working precision, and the gradient is
    # inf/NaN or of the order of 1/ε, never a moderate wrong number.
    a = jnp.array([[1.0, 1.0], [0.0, 1.0]])
    g = jax.grad(lambda a: jnp.real(rules.eigvals(a)[0]))(a)
    assert not np.all(np.isfinite(g)) or np.max(np.abs(g)) > 1e12
    # Near it the eigenvalues are distinct and the derivative exact: d|λ₁ - λ₂|/dt = 1/√t
    gap = lambda a: jnp.abs(jnp.real(rules.eigvals(a)[0] - rules.eigvals(a)[1]))
    np.testing.assert_allclose(jax.grad(gap)(a.at[1, 0].set(1e-4))[1, 0], 100.0, rtol=1e-8)


# ----------------------------------------------------------------------------------------------
# Platforms


def _grad_eigvals(a):
    return jax.grad(sum_sq(rules.eigvals))(a)


def _grad_eig(a):
    x = jnp.ones(a.shape[-1], jnp.complex128)
    return jax.grad(lambda a: jnp.sum(jnp.abs(ct(rules.eig(a).eigenvectors) @ x) ** 2))(a)


@pytest.mark.parametrize("fun,name", [(_grad_eigvals, "eigvals"), (_grad_eig, "eig"),
                                      (jax.vmap(rules.eig), "eig")])
@pytest.mark.parametrize("platforms", [["tpu"], ["cpu", "tpu"]])
def test_tpu_raises_a_clear_error(fun, name, platforms):
    a = jnp.zeros((2, 4, 4))
    with pytest.raises(NotImplementedError, match=rf"rules\.{name}: the eigendecomposition of a "
                                                  r"general \(non-Hermitian\) matrix has no "
                                                  r"method on platform 'tpu'"):
        jax.export.export(jax.jit(fun), platforms=platforms)(a)


def test_cpu_export():
    a = rand((4, 4), 18)
    exp = jax.export.export(jax.jit(_grad_eig), platforms=["cpu"])(a)
    np.testing.assert_allclose(exp.call(a), _grad_eig(a), rtol=1e-12)


@pytest.mark.parametrize("fun", [_grad_eigvals, rules.eig])
def test_cuda_export_is_jax_unstable_custom_call(fun):
    # JAX lowers eig for CUDA to LAPACK on the host (cuhybrid_eig_*) or to cuSOLVER's geev,
    # neither of them among jax.export's stable custom calls: the export raises JAX's error,
    # as for jnp.linalg.eig, and succeeds with that check disabled.
    a = jnp.zeros((4, 4))
    with pytest.raises(ValueError, match="custom calls whose targets have no compatibility"):
        jax.export.export(jax.jit(fun), platforms=["cuda"])(a)
    targets = ["cuhybrid_eig_real", "cuhybrid_eig_comp", "cusolver_geev_ffi"]
    checks = [jax.export.DisabledSafetyCheck.custom_call(t) for t in targets]
    text = jax.export.export(jax.jit(fun), platforms=["cuda"], disabled_checks=checks)(a)
    assert any(t in text.mlir_module() for t in targets)
