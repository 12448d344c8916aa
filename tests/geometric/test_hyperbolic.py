"""geometric/hyperbolic.py (the operations hyperbolic layers are built from) and the kernels of
geometric/_core/hyperbolic.py: gyrovector identities, closed forms, removable singularities,
boundary safety, input checks, transformations."""
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geometric
from geometric import hyperbolic
from geometric._core import hyperbolic as hyp
from tests.helpers import rand


def ball_points(shape, seed, c, dtype=jnp.float64, radius=0.8):
    """Points of the ball of radius up to ``radius/√c``."""
    z = np.asarray(rand(shape, seed))
    r = radius * np.random.default_rng(seed + 100).uniform(0, 1, shape[:-1] + (1,))
    return jnp.asarray(r * z / np.linalg.norm(z, axis=-1, keepdims=True) / np.sqrt(c), dtype)


def close(got, want, tol=1e-12):
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# ----------------------------------------------------------------------------------------------
# Removable singularities and arcosh(1 + δ)


REFERENCE = {  # f(t²) in terms of t, and f's derivative at 0 (the Taylor coefficient of t²)
    hyp.tanhc: (lambda t: np.tanh(t) / t, -1 / 3), hyp.t_over_tanh: (lambda t: t / np.tanh(t), 1 / 3),
    hyp.sinhc: (lambda t: np.sinh(t) / t, 1 / 6), hyp.t_over_sinh: (lambda t: t / np.sinh(t), -1 / 6),
    hyp.cosh_root: (np.cosh, 1 / 2), hyp.artanhc: (lambda t: np.arctanh(t) / t, 1 / 3),
}


@pytest.mark.parametrize("f", list(REFERENCE), ids=lambda f: f.__name__)
def test_even_functions_of_the_square_across_their_cutoffs(f):
    want, slope = REFERENCE[f]
    t = np.asarray([1e-9, 1e-3, 0.0299, 0.0301, 0.0999, 0.1001, 0.5, 0.9])
    close(f(jnp.asarray(t * t)), want(t), 3e-16)
    np.testing.assert_allclose(f(jnp.asarray(t * t, jnp.float32)), want(t), rtol=4e-7)
    h = 1e-7  # the derivative in t², continuous across the cutoffs, against central differences
    s = t[1:-1] ** 2
    fd = (want(np.sqrt(s + h)) - want(np.sqrt(s - h))) / (2 * h)
    close(jax.vmap(jax.grad(f))(jnp.asarray(s)), fd, 1e-8)
    # analytic at 0: the value, the slope, and a finite second derivative
    assert float(f(jnp.zeros(()))) == 1
    close(jax.grad(f)(jnp.zeros(())), slope, 1e-15)
    assert np.isfinite(jax.grad(jax.grad(f))(jnp.zeros(())))
    # the masked polynomial must not overflow (sinh itself overflows float32 beyond 89)
    big = jnp.asarray([50.0**2] if "sinh" in f.__name__ or "cosh" in f.__name__ else [50.0**2, 1e12],
                      jnp.float32)
    assert np.isfinite(jax.vmap(jax.grad(f))(big)).all() and np.isfinite(f(big)).all()


def test_arcosh1p_is_accurate_for_small_and_large_arguments():
    delta = np.asarray([1e-20, 1e-10, 1e-3, 1.0, 1e8])
    want = 2 * np.arcsinh(np.sqrt(delta / 2))  # = arcosh(1 + δ), without rounding 1 + δ
    close(hyp.arcosh1p(jnp.asarray(delta)), want, 1e-15)
    close(hyp.arcosh1p_squared(jnp.asarray(delta)), want**2, 1e-15)
    # arcosh(1 + δ)² = 2δ − δ²/3 + …: analytic at 0; the distance has the subgradient 0 there
    zero = jnp.zeros(())
    close(jax.grad(hyp.arcosh1p_squared)(zero), 2, 1e-15)
    close(jax.grad(jax.grad(hyp.arcosh1p_squared))(zero), -2 / 3, 1e-13)
    assert float(jax.grad(hyp.arcosh1p)(zero)) == 0


# ----------------------------------------------------------------------------------------------
# Gyrovector identities (Ungar) and the closed forms of Ganea et al.


@pytest.mark.parametrize("c", [1.0, 0.3])
def test_mobius_addition(c):
    x, y, z = ball_points((3, 4, 5), 0, c)
    add = functools.partial(hyperbolic.mobius_add, curvature=c)
    xy, x2, y2 = np.sum(x * y, -1), np.sum(x * x, -1), np.sum(y * y, -1)
    want = (((1 + 2 * c * xy + c * y2)[:, None] * x + (1 - c * x2)[:, None] * y)
            / (1 + 2 * c * xy + c**2 * x2 * y2)[:, None])
    close(add(x, y), want)
    close(add(jnp.zeros_like(x), y), y)
    close(add(-x, add(x, y)), y, 1e-11)                         # left cancellation
    gyr = lambda a, b, w: add(-add(a, b), add(a, add(b, w)))      # gyr[a, b] w
    close(add(x, add(y, z)), add(add(x, y), gyr(x, y, z)), 1e-11)  # gyro-associativity
    close(add(x, y), gyr(x, y, add(y, x)), 1e-11)                  # gyro-commutativity
    assert (np.linalg.norm(add(x, y), axis=-1) < 1 / np.sqrt(c)).all()


@pytest.mark.parametrize("c", [1.0, 2.0])
def test_scalar_multiplication_matvec_and_the_maps_at_the_origin(c):
    x, y = ball_points((2, 4, 3), 1, c)
    kw = {"curvature": c}
    r = jnp.asarray([0.5, 2.0, -1.0, 3.0])
    norm = np.linalg.norm(x, axis=-1)
    want = np.tanh(r * np.arctanh(np.sqrt(c) * norm))[:, None] * x / (np.sqrt(c) * norm)[:, None]
    close(hyperbolic.mobius_scalar_mul(r, x, **kw), want, 1e-12)
    close(hyperbolic.mobius_scalar_mul(2.0, x, **kw), hyperbolic.mobius_add(x, x, **kw), 1e-11)
    close(hyperbolic.mobius_scalar_mul(1.0, x, **kw), x)
    w = rand((5, 3), 2)
    mx = np.asarray(x) @ np.asarray(w).T
    mnorm = np.linalg.norm(mx, axis=-1)[:, None]
    want = np.tanh(mnorm / norm[:, None] * np.arctanh(np.sqrt(c) * norm[:, None])) * mx / (np.sqrt(c) * mnorm)
    close(hyperbolic.mobius_matvec(w, x, **kw), want, 1e-12)                   # Ganea et al.
    close(hyperbolic.mobius_matvec(jnp.broadcast_to(w, (4, 5, 3)), x, **kw), want, 1e-12)
    close(hyperbolic.mobius_matvec(jnp.eye(3), x, **kw), x, 1e-12)
    close(hyperbolic.mobius_matvec(jnp.zeros((2, 3)), x, **kw), 0, 0)          # Mx = 0
    v = rand((4, 3), 3)
    close(hyperbolic.logmap0(hyperbolic.expmap0(v, **kw), **kw), v, 1e-11)
    ball = geometric.PoincareBall(3, curvature=c)
    close(hyperbolic.expmap0(v, **kw), ball.exp(jnp.zeros_like(v), v), 1e-12)   # λ₀ = 2
    close(ball.dist(jnp.zeros_like(v), hyperbolic.expmap0(v, **kw)), 2 * np.linalg.norm(v, axis=-1), 1e-11)
    close(hyperbolic.logmap0(y, **kw), ball.log(jnp.zeros_like(y), y), 1e-12)


def test_conversions_are_inverse_isometries():
    c = 0.7
    x, y = ball_points((2, 6, 3), 4, c, radius=0.99)
    to_h = functools.partial(hyperbolic.poincare_to_lorentz, curvature=c)
    to_b = functools.partial(hyperbolic.lorentz_to_poincare, curvature=c)
    h = to_h(x)
    assert h.shape == (6, 4)
    close(-h[:, 0] ** 2 + np.sum(h[:, 1:] ** 2, -1), -1 / c, 1e-9)
    assert (h[:, 0] > 0).all()
    close(to_b(h), x, 1e-12)
    ball, hyperboloid = geometric.PoincareBall(3, curvature=c), geometric.Lorentz(3, curvature=c)
    close(hyperboloid.dist(h, to_h(y)), ball.dist(x, y), 1e-10)


# ----------------------------------------------------------------------------------------------
# Boundary safety, transformations, checks


def test_a_hyperbolic_layer_is_finite_in_the_safe_ball_and_nan_outside_it():
    """Values and gradients of ``W ⊗ x ⊕ b`` and of the maps at the origin, in float32, for
    x = 0, on the safe sphere and beyond it by rounding (finite), and just inside the unit sphere
    and outside the ball (nan, as jnp.log(-1.0), and so are the gradients there)."""
    f32 = jnp.float32
    edge = 1 - hyp.ball_margin(f32)
    u = np.ones(3, np.float32) / np.sqrt(3)
    x = jnp.asarray(np.stack([0 * u, edge * u, (1 - 1e-7) * u, 3 * u, 1e-30 * u,
                              (1 - hyp.ball_margin(f32) * 0.6) * u]), f32)
    w, b = jnp.asarray(rand((2, 3), 5), f32), jnp.asarray([0.3, -0.2], f32)

    def layer(w, b, x):
        h = hyperbolic.mobius_add(hyperbolic.mobius_matvec(w, x), hyperbolic.expmap0(b))
        return jnp.sum(hyperbolic.logmap0(h)) + jnp.sum(hyperbolic.mobius_scalar_mul(2.0, x))

    values = jax.jit(jax.vmap(layer, (None, None, 0)))(w, b, x)
    grads = jax.jit(jax.vmap(jax.grad(layer, argnums=(0, 1, 2)), (None, None, 0)))(w, b, x)
    inside = np.array([True, True, False, False, True, True])
    np.testing.assert_array_equal(np.isfinite(values), inside)
    assert all(np.isfinite(g[inside]).all() for g in grads)
    out = hyperbolic.expmap0(1e4 * jnp.asarray(x))
    assert (np.linalg.norm(out, axis=-1) <= edge * (1 + 1e-7)).all()


def test_batch_axes_broadcast_and_jit_vmap():
    x, y = ball_points((2, 4, 3), 6, 1.0)
    bias = y[0]
    close(hyperbolic.mobius_add(x, bias), jax.vmap(lambda a: hyperbolic.mobius_add(a, bias))(x))
    close(jax.jit(hyperbolic.mobius_add, static_argnames="curvature")(x, y, curvature=2.0),
          hyperbolic.mobius_add(x, y, curvature=2.0))
    stacked = hyperbolic.mobius_add(x[:, None], y[None, :])
    assert stacked.shape == (4, 4, 3)
    close(stacked[1, 2], hyperbolic.mobius_add(x[1], y[2]))
    assert hyperbolic.mobius_scalar_mul(jnp.ones((2, 1)), x).shape == (2, 4, 3)
    assert hyperbolic.mobius_add(x.astype(jnp.float32), y.astype(jnp.float32)).dtype == jnp.float32


def test_input_checks():
    x = jnp.zeros((4, 3))
    with pytest.raises(TypeError, match=r"^geometric\.hyperbolic\.mobius_add: `y` must be a JAX "
                                         r"or NumPy array; got list\.$"):
        hyperbolic.mobius_add(x, [0.0, 0.0, 0.0])
    with pytest.raises(TypeError, match=r"mobius_add: `y` must have the dtype of `x`, float64; got float32"):
        hyperbolic.mobius_add(x, x.astype(jnp.float32))
    with pytest.raises(ValueError, match=r"mobius_add: `y` must have shape \(\.\.\., 3\) like `x`; got \(4, 2\)"):
        hyperbolic.mobius_add(x, jnp.zeros((4, 2)))
    with pytest.raises(ValueError, match=re.escape("mobius_add: the batch axes of `x` (4, 3) and `y` "
                                                   "(2, 3) do not broadcast.")):
        hyperbolic.mobius_add(x, jnp.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"mobius_matvec: `m` must have shape \(\.\.\., p, 3\)"):
        hyperbolic.mobius_matvec(jnp.zeros((3, 2)), x)
    with pytest.raises(ValueError, match=r"mobius_scalar_mul: `r` of shape \(3,\) must broadcast"):
        hyperbolic.mobius_scalar_mul(jnp.ones(3), x)
    with pytest.raises(TypeError, match=r"expmap0: `v` must have dtype float32, float64; got int32"):
        hyperbolic.expmap0(jnp.zeros(3, jnp.int32))
    with pytest.raises(ValueError, match=r"logmap0: `y` must have shape \(\.\.\., n\); got \(\)"):
        hyperbolic.logmap0(jnp.zeros(()))
    with pytest.raises(ValueError, match=r"lorentz_to_poincare: `x` must have shape \(\.\.\., n \+ 1\) "
                                         r"with n ≥ 1; got \(4, 1\)"):
        hyperbolic.lorentz_to_poincare(jnp.zeros((4, 1)))
    with pytest.raises(ValueError, match=r"poincare_to_lorentz: `curvature` must be a positive "
                                         r"finite float; got 0"):
        hyperbolic.poincare_to_lorentz(x, curvature=0)
    with pytest.raises(TypeError, match=r"expmap0: `curvature` must be a positive float"):
        hyperbolic.expmap0(x, curvature=jnp.ones(()))
