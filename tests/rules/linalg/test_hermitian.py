"""Tests of rules/_linalg/hermitian.py: sqrtmh, logmh, powmh and hermitian_function, functions of
Hermitian matrices whose derivatives (Daleckii–Krein) exist at repeated eigenvalues.

References are NumPy/SciPy eigendecompositions (values), central differences of them
(derivatives, in symmetric directions), JAX's derivative through ``jnp.linalg.eigh`` where
eigenvalues are distinct, and divided differences to 40 digits (``decimal``) at diagonal
matrices, where ``Df(diag λ)[E] = F ∘ E`` exposes ``F`` entry by entry.
"""
import decimal

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sla

import rules
from rules.testing import check_frule, check_rrule
from tests.helpers import central_difference, rand, rel_err, symmetric_with_spectrum
from tests.rules.linalg.sharded import assert_sharded_like_unsharded


def spd(shape, seed, dtype=jnp.float64):
    """Well-conditioned Hermitian positive definite ``(..., n, n)`` matrices ``G Gᴴ/n + I``."""
    g = rand(shape, seed, dtype)
    n = shape[-1]
    return g @ jnp.conj(jnp.swapaxes(g, -1, -2)) / n + jnp.broadcast_to(jnp.eye(n, dtype=dtype), shape)


def herm(x):
    return 0.5 * (x + jnp.conj(jnp.swapaxes(x, -1, -2)))


def dense(f, a):
    """``f(A)`` from NumPy's eigendecomposition of the Hermitian ``a``."""
    w, q = np.linalg.eigh(np.asarray(a))
    return (q * f(w)[..., None, :]) @ np.conj(np.swapaxes(q, -1, -2))


def naive(f, a):
    """``f(A)`` through ``jnp.linalg.eigh``: JAX's derivative, which divides by ``λ_i - λ_j``."""
    w, q = jnp.linalg.eigh(a)
    return (q * f(w).astype(q.dtype)[..., None, :]) @ jnp.conj(jnp.swapaxes(q, -1, -2))


# name: (our function of a, the same function of NumPy eigenvalues, of JAX eigenvalues)
FUNCTIONS = {
    "sqrtmh": (rules.sqrtmh, np.sqrt, jnp.sqrt),
    "logmh": (rules.logmh, np.log, jnp.log),
    "powmh 0.3": (lambda a: rules.powmh(a, 0.3), lambda w: w ** 0.3, lambda w: w ** 0.3),
    "powmh -0.5": (lambda a: rules.powmh(a, -0.5), lambda w: w ** -0.5, lambda w: w ** -0.5),
    "powmh 3": (lambda a: rules.powmh(a, 3), lambda w: w ** 3, lambda w: w ** 3),
    "tanh": (lambda a: rules.hermitian_function(a, jnp.tanh), np.tanh, jnp.tanh),
    "exp": (lambda a: rules.hermitian_function(a, jnp.exp), np.exp, jnp.exp),
}
# One of each kind of divided differences (closed form, log1p, expm1/log1p, generic) for the
# costlier derivative tests.
CORE = ["sqrtmh", "logmh", "powmh 0.3", "tanh"]


# ----------------------------------------------------------------------------------------------
# Values


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_values_match_numpy(name, dtype):
    ours, ref, _ = FUNCTIONS[name]
    a = spd((2, 5, 5), 1, dtype)
    y = jax.jit(ours)(a)
    assert y.dtype == a.dtype and y.shape == a.shape
    assert rel_err(y, dense(ref, a)) < 1e-12
    np.testing.assert_array_equal(y, jnp.conj(jnp.swapaxes(y, -1, -2)))  # Hermitian exactly


def test_values_match_scipy():
    a = np.asarray(spd((6, 6), 2))
    assert rel_err(rules.sqrtmh(a), sla.sqrtm(a).real) < 1e-12
    assert rel_err(rules.logmh(a), sla.logm(a).real) < 1e-12
    for p in (0.3, -0.5, 2.5):
        assert rel_err(rules.powmh(a, p), sla.fractional_matrix_power(a, p).real) < 1e-11
    assert rel_err(rules.hermitian_function(a, jnp.exp), sla.expm(a)) < 1e-12
    assert rel_err(rules.sqrtmh(a), jax.scipy.linalg.sqrtm(a).real) < 1e-10
    b = np.asarray(spd((4, 4), 3, jnp.complex128))
    assert rel_err(rules.sqrtmh(b), sla.sqrtm(b)) < 1e-12
    assert rel_err(rules.logmh(b), sla.logm(b)) < 1e-12


def test_only_the_hermitian_part_is_read():
    a = spd((4, 4), 4) + 0.3 * rand((4, 4), 5)  # not symmetric
    for name, (ours, _, _) in FUNCTIONS.items():
        np.testing.assert_allclose(ours(a), ours(herm(a)), rtol=1e-13, atol=1e-13, err_msg=name)
    d = rand((4, 4), 6)
    _, tangent = jax.jvp(rules.sqrtmh, (a,), (d,))
    np.testing.assert_allclose(tangent, jax.jvp(rules.sqrtmh, (a,), (herm(d),))[1], atol=1e-14)
    g = jax.grad(lambda a: jnp.sum(rules.logmh(a) * rand((4, 4), 7)))(a)
    np.testing.assert_allclose(g, g.T, atol=1e-15)  # the gradient is symmetric


def test_powmh_special_exponents():
    a = spd((2, 4, 4), 8)
    eye = jnp.broadcast_to(jnp.eye(4), a.shape)
    np.testing.assert_allclose(rules.powmh(a, 0), eye, atol=1e-13)
    np.testing.assert_allclose(rules.powmh(a, 1), a, rtol=1e-13)
    np.testing.assert_allclose(rules.powmh(a, -1), jnp.linalg.inv(a), rtol=1e-12)
    np.testing.assert_allclose(rules.powmh(a, 0.5), rules.sqrtmh(a), rtol=1e-13)
    np.testing.assert_allclose(rules.powmh(a, 2.0), a @ a, rtol=1e-12)
    # An integer power is defined at negative eigenvalues (jnp.power's integer_pow), as A·A.
    s = symmetric_with_spectrum((-2.0, -1.0, 0.5, 3.0), 9)
    np.testing.assert_allclose(rules.powmh(s, 2), s @ s, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rules.powmh(s, -1), jnp.linalg.inv(s), rtol=1e-12, atol=1e-12)
    d = rand((4, 4), 10)
    d = d + d.T
    want = central_difference(lambda s: s @ s, s, d)
    np.testing.assert_allclose(jax.jvp(lambda s: rules.powmh(s, 2), (s,), (d,))[1], want,
                               rtol=1e-9, atol=1e-9)


# ----------------------------------------------------------------------------------------------
# Derivatives: finite differences, JAX, repeated eigenvalues


@pytest.mark.parametrize("name", CORE)
def test_finite_differences(name):
    ours = FUNCTIONS[name][0]
    check_rrule(ours, spd((3, 3), 11))  # the pullback, the pushforward, under jit and vmap
    if name in ("sqrtmh", "tanh"):
        check_rrule(ours, spd((3, 3), 12, jnp.complex128), check_jit=False, check_vmap=False)


def test_check_frule_with_static_arguments():
    check_frule(rules.hermitian_function, spd((3, 3), 13), fkwargs={"f": jax.nn.softplus},
                check_vmap=False)
    check_frule(rules.powmh, spd((3, 3), 14, jnp.complex128), fkwargs={"p": -1.5},
                check_jit=False, check_vmap=False)


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.complex128])
def test_derivatives_match_jax_at_distinct_eigenvalues(dtype):
    a, d = spd((5, 5), 14, dtype), herm(rand((5, 5), 15, dtype))
    y_bar = rand((5, 5), 16, dtype)

    @jax.jit
    def derivatives(a):
        out = []
        for ours, _, jf in map(FUNCTIONS.get, CORE):
            for f in (ours, lambda a: naive(jf, a)):
                out.append((jax.jvp(f, (a,), (d,))[1], jax.vjp(f, a)[1](y_bar)[0]))
        return out

    # JAX's pullback of the naive composition is not symmetrised: compare symmetrised parts.
    results = derivatives(a)
    for (j_ours, v_ours), (j_ref, v_ref) in zip(results[::2], results[1::2]):
        assert rel_err(j_ours, j_ref) < 1e-10
        assert rel_err(v_ours, herm(v_ref)) < 1e-10


def test_hessians_match_jax_at_distinct_eigenvalues():
    a = spd((4, 4), 17)
    w = rand((4, 4), 18)

    @jax.jit
    def hessians(a):
        return [[jax.hessian(lambda a: jnp.sum(jnp.sin(f(a)) * w))(a) for f in (ours, lambda a: naive(jf, a))]
                for ours, _, jf in map(FUNCTIONS.get, ["sqrtmh", "powmh 0.3", "tanh"])]

    for ours, ref in hessians(a):
        # The naive Hessian differentiates a as given; ours its symmetric part: compare
        # in symmetric directions, i.e. after symmetrising both pairs of indices.
        sym = lambda h: 0.25 * (h + h.transpose(1, 0, 2, 3) + h.transpose(0, 1, 3, 2)  # noqa: E731
                                + h.transpose(1, 0, 3, 2))
        assert rel_err(sym(ours), sym(ref)) < 1e-10


# Spectra with repeated eigenvalues: all equal (A = 2I), a double one, and a double one split by
# rounding (which JAX's derivative through eigh turns into a large, wrong number).
REPEATED = {"identity": 2 * jnp.eye(4), "double": symmetric_with_spectrum((0.5, 1.5, 1.5, 3.0), 19),
            "split": symmetric_with_spectrum((0.5, 1.5, 1.5 + 1e-14, 3.0), 20)}


@pytest.mark.parametrize("case", REPEATED)
@pytest.mark.parametrize("name", CORE)
def test_derivatives_at_repeated_eigenvalues(name, case):
    ours, ref, _ = FUNCTIONS[name]
    a = REPEATED[case]
    d = rand((4, 4), 21)
    d = d + d.T  # a symmetric perturbation: the finite difference stays Hermitian
    weights = rand((4, 4), 22)
    tangent, grad = jax.jit(lambda a: (jax.jvp(ours, (a,), (d,))[1],
                                       jax.grad(lambda a: jnp.sum(ours(a) * weights))(a)))(a)
    want = central_difference(lambda a: dense(ref, a), a, d, eps=1e-5)
    assert np.all(np.isfinite(tangent)) and np.all(np.isfinite(grad))
    assert rel_err(tangent, want) < 1e-8
    assert abs(jnp.sum(grad * d) - jnp.sum(weights * want)) < 1e-8 * np.abs(want).sum()


def test_jax_fails_where_we_do_not():
    """Why the rule: differentiating through eigh gives NaN at an exactly repeated eigenvalue and
    a wrong number where rounding splits it."""
    d = rand((4, 4), 23)
    d = d + d.T
    for a in REPEATED.values():
        want = central_difference(lambda a: dense(np.sqrt, a), a, d, eps=1e-5)
        theirs = jax.jvp(lambda a: naive(jnp.sqrt, a), (a,), (d,))[1]
        assert not np.all(np.isfinite(theirs)) or rel_err(theirs, want) > 1e-3
        assert rel_err(jax.jvp(rules.sqrtmh, (a,), (d,))[1], want) < 1e-8


@pytest.mark.parametrize("case, names", [("identity", ["logmh", "tanh"]),
                                         ("double", ["sqrtmh", "powmh 0.3"]),
                                         ("split", ["sqrtmh", "tanh"])])
def test_second_derivatives_at_repeated_eigenvalues(case, names):
    """Second-order Daleckii–Krein: hessian-vector products (forward over reverse) and Hessians
    (reverse, then forward) equal finite differences of the gradient, at repeated eigenvalues too
    (where JAX's through eigh are NaN, or wrong where rounding splits them)."""
    a = REPEATED[case]
    d = rand((4, 4), 24)
    d = d + d.T
    weights = rand((4, 4), 25)
    for name in names:
        ours = FUNCTIONS[name][0]
        loss = lambda a: jnp.sum(jnp.sin(ours(a)) * weights)  # noqa: E731
        grad = jax.jit(jax.grad(loss))
        hvp, hess = jax.jit(lambda a: (jax.jvp(jax.grad(loss), (a,), (d,))[1],
                                       jnp.tensordot(jax.hessian(loss)(a), d, 2)))(a)
        fd = central_difference(grad, a, d, eps=1e-5)
        assert rel_err(hvp, fd) < 1e-7, name
        assert rel_err(hess, fd) < 1e-7, name


def test_grad_of_grad():
    a, d = REPEATED["double"], rand((4, 4), 26)
    inner = jax.grad(lambda a: jnp.sum(rules.logmh(a) ** 2))
    outer = jax.jit(jax.grad(lambda a: jnp.sum(inner(a) * d)))(a)
    hvp = jax.jit(lambda a: jax.jvp(inner, (a,), (herm(d),))[1])(a)
    assert rel_err(outer, hvp) < 1e-12  # the Hessian is symmetric


def _decimal_divided_differences(f, w):
    """``F_ij = f[λ_i, λ_j]`` and ``T_ikj`` summed over ``k`` to 40 digits (``f``: a function of
    ``decimal.Decimal``, ``df``/``d2f`` by a 1e-15 step at equal points)."""
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        lam = [decimal.Decimal(float(x)) for x in w]
        h = decimal.Decimal("1e-25")

        def first(x, y):
            return (f(x) - f(y)) / (x - y) if x != y else (f(x + h) - f(x - h)) / (2 * h)

        def second(x, y, z):
            points = sorted([x, y, z])
            lo, mid, hi = points
            if hi != lo:
                return (first(lo, mid) - first(mid, hi)) / (lo - hi)
            return (f(x + h) - 2 * f(x) + f(x - h)) / (2 * h * h)

        n = len(lam)
        f1 = [[float(first(lam[i], lam[j])) for j in range(n)] for i in range(n)]
        f2 = [[float(sum(second(lam[i], lam[k], lam[j]) for k in range(n))) for j in range(n)]
              for i in range(n)]
    return np.array(f1), np.array(f2)


def _dtanh(x):
    e = (2 * x).exp()
    return (e - 1) / (e + 1)


# Functions of Decimals for the 40-digit references.
DECIMAL = {"sqrtmh": lambda x: x.sqrt(), "logmh": lambda x: x.ln(),
           "powmh 0.3": lambda x: (decimal.Decimal("0.3") * x.ln()).exp(),
           "powmh -0.5": lambda x: 1 / x.sqrt(), "powmh 3": lambda x: x ** 3,
           "tanh": _dtanh, "exp": lambda x: x.exp()}


@pytest.mark.parametrize("name", FUNCTIONS)
def test_divided_differences_at_close_eigenvalues(name):
    """At ``A = diag(λ)`` the pushforward of ``E = 11ᵀ`` is ``F`` and the second derivative
    ``2 Σ_k T_ikj``: against 40-digit references at gaps from 0 to far apart, over scales from
    1e-8 to 10 (the divided differences of log and powers vary on the scale of λ, those of tanh
    and exp on a scale of 1)."""
    ours = FUNCTIONS[name][0]
    w = np.array([1e-8, 1e-8 + 1e-15, 2e-8, 0.3, 0.3 + 1e-9, 0.3 + 1e-5, 1.0, 1.0, 10.0])
    a, e = jnp.diag(jnp.asarray(w)), jnp.ones((9, 9))
    f1, f2 = jax.jit(lambda a: (jax.jvp(ours, (a,), (e,))[1],
                                jax.jvp(lambda a: jax.jvp(ours, (a,), (e,))[1], (a,), (e,))[1]))(a)
    ref1, ref2 = _decimal_divided_differences(DECIMAL[name], w)
    np.testing.assert_allclose(f1, ref1, rtol=1e-11, atol=1e-15)  # tanh'(10) = 8e-9 is JAX's
    np.testing.assert_allclose(f2, 2 * ref2, rtol=1e-6)


# ----------------------------------------------------------------------------------------------
# Transformations, dtypes, shapes


def test_batch_vmap_and_sharding():
    a = spd((4, 3, 3), 27)
    loss = lambda a: jnp.sum(jnp.sin(rules.powmh(a, 0.7)))  # noqa: E731
    slices = jnp.stack([rules.powmh(x, 0.7) for x in a])
    np.testing.assert_allclose(rules.powmh(a, 0.7), slices, rtol=1e-13)
    np.testing.assert_allclose(jax.vmap(jax.grad(loss))(a), jax.grad(loss)(a), rtol=1e-13)
    np.testing.assert_allclose(jax.vmap(rules.sqrtmh)(a), rules.sqrtmh(a), rtol=1e-13)
    assert_sharded_like_unsharded(jax.value_and_grad(loss), a, rtol=1e-12)
    # A batch of tiny real matrices goes to Jacobi's eigensolver (rules/_kernels/small.py), one
    # matrix to LAPACK's.
    many = spd((40, 3, 3), 28)
    assert rel_err(rules.logmh(many), dense(np.log, many)) < 1e-12
    grad = jax.jit(jax.grad(lambda a: jnp.sum(rules.logmh(a) ** 2)))
    assert rel_err(grad(many)[:3], jnp.stack([grad(x) for x in many[:3]])) < 1e-12


def test_float32():
    a = spd((2, 5, 5), 29)
    for name in CORE:
        ours, ref, _ = FUNCTIONS[name]
        y, g = jax.jit(jax.value_and_grad(lambda a: jnp.sum(jnp.sin(ours(a)))))(a.astype(jnp.float32))
        assert y.dtype == g.dtype == jnp.float32
        g64 = jax.grad(lambda a: jnp.sum(jnp.sin(ours(a))))(a)
        assert rel_err(g, g64) < 5e-4, name
        assert rel_err(ours(a.astype(jnp.float32)), dense(ref, a)) < 1e-5, name
    # Repeated eigenvalues in float32.
    g = jax.grad(lambda a: jnp.sum(rules.sqrtmh(a) * jnp.arange(9.0, dtype=jnp.float32).reshape(3, 3)))(
        jnp.eye(3, dtype=jnp.float32))
    np.testing.assert_allclose(g, herm(jnp.arange(9.0).reshape(3, 3)) / 2, rtol=1e-6)
    assert rules.sqrtmh(jnp.eye(2, dtype=jnp.complex64)).dtype == jnp.complex64


def test_integer_input_is_promoted():
    i = jnp.array([[2, 1], [1, 2]], jnp.int32)
    assert rules.sqrtmh(i).dtype == jnp.float32
    assert rules.hermitian_function(i, jnp.exp).dtype == jnp.float32


@pytest.mark.parametrize("shape", [(0, 0), (3, 0, 0), (0, 3, 3)])
def test_empty(shape):
    a = jnp.zeros(shape)
    for name in ["sqrtmh", "tanh"]:
        ours = FUNCTIONS[name][0]
        assert ours(a).shape == shape, name
        assert jax.grad(lambda a: jnp.sum(ours(a)))(a).shape == shape, name
        assert jax.jvp(ours, (a,), (a,))[1].shape == shape, name


def test_negative_eigenvalues_give_nan():
    a = symmetric_with_spectrum((-1.0, 2.0, 3.0), 30)
    for f in (rules.sqrtmh, rules.logmh, lambda a: rules.powmh(a, 0.5),
              lambda a: rules.hermitian_function(a, jnp.sqrt)):
        assert np.all(np.isnan(f(a)))
        assert np.all(np.isnan(jax.jvp(f, (a,), (jnp.eye(3),))[1]))
    # Eigenvalues below 0 by rounding only: a singular Gram matrix has a square root.
    x = rand((5, 2), 31)
    g = x @ x.T  # rank 2: three eigenvalues at rounding level, some of them negative
    assert np.linalg.eigvalsh(np.asarray(g)).min() < 0
    root = rules.sqrtmh(g)
    np.testing.assert_allclose(root @ root, g, atol=1e-13)
    assert np.all(np.isfinite(rules.powmh(g, 0.3)))


def test_bad_input():
    with pytest.raises(ValueError, match=r"sqrtmh: `a` must have shape \(\.\.\., n, n\) "
                                         r"\(square\); got \(2, 3\)"):
        rules.sqrtmh(jnp.ones((2, 3)))
    with pytest.raises(ValueError, match=r"logmh: `a` must have shape \(\.\.\., n, n\); got \(3,\)"):
        rules.logmh(jnp.ones(3))
    with pytest.raises(TypeError, match="sqrtmh: `a` must be a JAX or NumPy array; got list"):
        rules.sqrtmh([[1.0]])
    with pytest.raises(TypeError, match="powmh: `a` has dtype float16"):
        rules.powmh(jnp.eye(2, dtype=jnp.float16), 0.5)
    for p in ("0.5", 1j, True, None):
        with pytest.raises(TypeError, match=f"powmh: `p` must be a Python int or float .*; got "
                                            f"{type(p).__name__}"):
            rules.powmh(jnp.eye(2), p)
    with pytest.raises(ValueError, match="powmh: `p` must be finite; got inf"):
        rules.powmh(jnp.eye(2), float("inf"))
    with pytest.raises(TypeError, match="hermitian_function: `f` must be a callable .*; got str"):
        rules.hermitian_function(jnp.eye(2), "tanh")
    with pytest.raises(TypeError, match="hermitian_function: `f` must return a real floating array"):
        rules.hermitian_function(jnp.eye(2), lambda w: w.astype(jnp.complex128))
    with pytest.raises(ValueError, match=r"hermitian_function: `f` must be elementwise.*\(2,\); "
                                         r"got \(\)"):
        rules.hermitian_function(jnp.eye(2), jnp.sum)


def test_f_closing_over_a_differentiated_value_raises():
    a = spd((3, 3), 32)
    with pytest.raises(Exception, match="Tracer"):
        jax.grad(lambda s: jnp.sum(rules.hermitian_function(a, lambda w: jnp.exp(s * w))))(1.0)


@pytest.mark.parametrize("name", ["sqrtmh", "tanh"])  # one rule: the others differ elementwise
def test_lowers_for_gpu_and_tpu(name):
    ours = FUNCTIONS[name][0]

    def loss(a):
        return jnp.sum(jnp.sin(ours(a)))

    for a in (spd((8, 8), 33).astype(jnp.float32), spd((40, 3, 3), 34).astype(jnp.float32)):
        for platform in ("cuda", "tpu"):
            for fn in (jax.grad(loss), jax.hessian(loss) if a.ndim == 2 else jax.vmap(jax.grad(loss))):
                text = jax.export.export(jax.jit(fn), platforms=[platform])(a).mlir_module()
                assert "lapack" not in text.lower() and "schur" not in text.lower()
