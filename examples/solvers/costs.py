"""The cost functions of the solver examples, in plain ``jax.numpy``, and their data.

Nothing here imports :mod:`geometric`: the Pymanopt side of ``benchmarks/bench_solvers.py`` runs in
the peers' environment, loads this file by its path and minimises the very same functions, so the
two sides of each comparison differ only in their solvers. Each cost takes the point first and the
problem's data as keyword arguments, the names of the arrays :func:`data` returns.

:func:`data` draws a problem as Pymanopt's example (or, for the Karcher means, Manopt's) draws it,
with NumPy's generator of the seed: the data, and the start ``x0`` on the manifold.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "COSTS",
    "closest_unit_norm_column_approximation",
    "data",
    "dominant_eigenvector",
    "dominant_invariant_subspace",
    "karcher_mean_poincare",
    "karcher_mean_spd",
    "multiple_linear_regression",
    "optimal_rotations",
    "packing_on_the_sphere",
    "pca",
    "poincare_distance",
    "spd_distance_squared",
]


def dominant_eigenvector(x: jax.Array, *, a: jax.Array) -> jax.Array:
    """``−xᵀAx`` on the sphere: its minimum is ``−λ_max(A)``, at the dominant eigenvector."""
    return -x @ (a @ x)


def dominant_invariant_subspace(x: jax.Array, *, a: jax.Array) -> jax.Array:
    """``−tr(XᵀAX)`` on Grassmann: minimal on the span of the ``p`` dominant eigenvectors."""
    return -jnp.sum(x * (a @ x))


def pca(w: jax.Array, *, samples: jax.Array) -> jax.Array:
    """``‖S − SWWᵀ‖²_F`` on Stiefel: the reconstruction error of projecting the samples (rows of
    ``S``) on the span of ``W``, minimal on the span of the principal components."""
    return jnp.sum((samples - (samples @ w) @ w.T) ** 2)


def closest_unit_norm_column_approximation(x: jax.Array, *, a: jax.Array) -> jax.Array:
    """``½‖X − A‖²_F`` on the oblique manifold: minimal at ``A`` with its columns normalised."""
    return 0.5 * jnp.sum((x - a) ** 2)


def optimal_rotations(x: jax.Array, *, abt: jax.Array) -> jax.Array:
    """``−Σₖ ⟨Xₖ, AₖBₖᵀ⟩`` over ``k`` rotations: ``k`` Procrustes problems (Kabsch), each solved
    by the SVD of ``AₖBₖᵀ``."""
    return -jnp.sum(x * abt)


def multiple_linear_regression(w: jax.Array, *, samples: jax.Array, targets: jax.Array
                               ) -> jax.Array:
    """``‖y − Sw‖²`` over ``w ∈ ℝᵈ``: least squares."""
    return jnp.sum((targets - samples @ w) ** 2)


def packing_on_the_sphere(x: jax.Array, *, epsilon: jax.Array) -> jax.Array:
    """``ε log Σ_{i<j} exp(⟨xᵢ, xⱼ⟩/ε)`` over unit columns ``xᵢ``: a smooth maximum of the inner
    products of distinct points (Pymanopt's and Manopt's "packing on the sphere").

    The exponentials are shifted by the largest inner product ``s`` as in Pymanopt, which keeps
    them from overflowing for small ``ε``; the shift is a constant for the derivatives (the
    cost does not depend on it), so it is held out of them.
    """
    y = x.T @ x
    upper = jnp.triu(jnp.ones(y.shape, bool), 1)
    s = jax.lax.stop_gradient(jnp.max(jnp.where(upper, y, -jnp.inf)))
    u = jnp.sum(jnp.where(upper, jnp.exp((y - s) / epsilon), 0))
    return s + epsilon * jnp.log(u)


def spd_distance_squared(x: jax.Array, a: jax.Array) -> jax.Array:
    """The affine-invariant ``d(X, A)² = Σᵢ log² λᵢ(X⁻¹A)``, for a batch of ``A``.

    The eigenvalues of ``X⁻¹A`` are those of the symmetric ``L⁻¹AL⁻ᵀ``, ``X = LLᵀ``. ``L⁻¹`` is
    formed once, and applied to the batch by products: on a machine with two cores, jaxlib's
    LAPACK kernels that split a batch over the CPU thread pool (a batched triangular solve)
    can wait on each other forever when two run at once.
    """
    chol = jnp.linalg.cholesky(x)
    inverse = jax.scipy.linalg.solve_triangular(chol, jnp.eye(x.shape[-1], dtype=x.dtype), lower=True)
    whitened = jnp.einsum("ij,...jk,lk->...il", inverse, a, inverse)
    return jnp.sum(jnp.log(jnp.linalg.eigvalsh(whitened)) ** 2, axis=-1)


def karcher_mean_spd(x: jax.Array, *, a: jax.Array) -> jax.Array:
    """``(1/2m) Σᵢ d(X, Aᵢ)²`` under the affine-invariant metric: minimal at the Karcher mean."""
    return 0.5 * jnp.mean(spd_distance_squared(x, a))


def poincare_distance(x: jax.Array, y: jax.Array) -> jax.Array:
    """The distance of the Poincaré ball of curvature −1 (of broadcast points), ``arcosh(1 + δ)`` with
    ``δ = 2‖x − y‖²/((1 − ‖x‖²)(1 − ‖y‖²))``, as ``log1p(δ + √(δ(δ + 2)))``: accurate for near
    points too, where ``arcosh`` of a number close to 1 loses digits."""
    x, y = jnp.broadcast_arrays(x, y)
    delta = 2 * jnp.sum((x - y) ** 2, axis=-1) / (
        (1 - jnp.sum(x * x, axis=-1)) * (1 - jnp.sum(y * y, axis=-1)))
    return jnp.log1p(delta + jnp.sqrt(delta * (delta + 2)))


def karcher_mean_poincare(x: jax.Array, *, points: jax.Array) -> jax.Array:
    """``(1/2m) Σᵢ d(x, yᵢ)²`` in the Poincaré ball: minimal at the Fréchet mean of the points."""
    return 0.5 * jnp.mean(poincare_distance(x, points) ** 2)


COSTS = {f.__name__: f for f in (
    dominant_eigenvector, dominant_invariant_subspace, pca, closest_unit_norm_column_approximation,
    optimal_rotations, multiple_linear_regression, packing_on_the_sphere, karcher_mean_spd,
    karcher_mean_poincare)}


# -- data ----------------------------------------------------------------------------------------


def _sym(m: np.ndarray) -> np.ndarray:
    return 0.5 * (m + np.swapaxes(m, -1, -2))


def _unit_columns(m: np.ndarray) -> np.ndarray:
    return m / np.linalg.norm(m, axis=-2, keepdims=True)


def _frame(rng: np.random.Generator, n: int, p: int) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((n, p)))
    return q * np.sign(np.diag(r))


def _rotations(rng: np.random.Generator, k: int, n: int) -> np.ndarray:
    """``k`` random rotations (uniform on SO(n)): Q of a Gaussian's QR, one column's sign fixed."""
    q, r = np.linalg.qr(rng.standard_normal((k, n, n)))
    q = q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :]
    q[..., :, 0] *= np.sign(np.linalg.det(q))[..., None]
    return q


def _mobius_add(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    xy = np.sum(x * y, axis=-1, keepdims=True)
    xx = np.sum(x * x, axis=-1, keepdims=True)
    yy = np.sum(y * y, axis=-1, keepdims=True)
    return ((1 + 2 * xy + yy) * x + (1 - xx) * y) / (1 + 2 * xy + xx * yy)


def data(name: str, sizes: dict[str, int], seed: int) -> dict[str, np.ndarray]:
    """The data of problem ``name`` at ``sizes`` and its start ``x0``, float64 NumPy arrays."""
    rng = np.random.default_rng(seed)
    if name == "dominant_eigenvector":
        n = sizes["n"]
        x0 = rng.standard_normal(n)
        return {"a": _sym(rng.standard_normal((n, n))), "x0": x0 / np.linalg.norm(x0)}
    if name == "dominant_invariant_subspace":
        n, p = sizes["n"], sizes["p"]
        return {"a": _sym(rng.standard_normal((n, n))), "x0": _frame(rng, n, p)}
    if name == "pca":
        d, m, p = sizes["dimension"], sizes["samples"], sizes["components"]
        samples = rng.standard_normal((m, d)) * np.linspace(3, 1, d)  # @ diag(3, 2, 1) for d = 3
        return {"samples": samples - samples.mean(axis=0), "x0": _frame(rng, d, p)}
    if name == "closest_unit_norm_column_approximation":
        m, n = sizes["m"], sizes["n"]
        return {"a": rng.standard_normal((m, n)), "x0": _unit_columns(rng.standard_normal((m, n)))}
    if name == "optimal_rotations":
        n, m, k = sizes["n"], sizes["m"], sizes["k"]
        a, b = rng.standard_normal((k, n, m)), rng.standard_normal((k, n, m))
        return {"abt": a @ np.swapaxes(b, -1, -2), "x0": _rotations(rng, k, n)}
    if name == "multiple_linear_regression":
        m, d = sizes["samples"], sizes["weights"]
        return {"samples": rng.standard_normal((m, d)), "targets": rng.standard_normal(m),
                "x0": rng.standard_normal(d)}
    if name == "packing_on_the_sphere":
        d, n = sizes["dimension"], sizes["points"]
        return {"epsilon": np.asarray(0.005), "x0": _unit_columns(rng.standard_normal((d, n)))}
    if name == "karcher_mean_spd":
        # Manopt's positive_definite_intrinsic_mean: m noisy copies of a diagonal reference,
        # eigenvalues clipped at 0.01. Manopt starts at the first matrix; here the start is the
        # identity, because at X = A₁ every eigenvalue of X⁻¹A₁ is 1 and JAX's eigh has no
        # second derivative at repeated eigenvalues (the Hessian-vector product is nan).
        n, m = sizes["n"], sizes["m"]
        ref = np.diag(np.maximum(0.1, 1 + 0.1 * rng.standard_normal(n)))
        w, v = np.linalg.eigh(ref + _sym(0.01 * rng.standard_normal((m, n, n))))
        a = _sym((v * np.maximum(0.01, w)[..., None, :]) @ np.swapaxes(v, -1, -2))
        return {"a": a, "x0": np.eye(n)}
    if name == "karcher_mean_poincare":
        # m points scattered about a centre c at distance 1 from the origin: exp₀(v) =
        # tanh(‖v‖) v/‖v‖ lies at distance 2‖v‖ ≈ 1 from the origin, and the Möbius translation
        # x ↦ c ⊕ x (an isometry) carries the origin to c. The start is the origin.
        n, m = sizes["n"], sizes["m"]
        direction = rng.standard_normal(n)
        centre = np.tanh(0.5) * direction / np.linalg.norm(direction)
        v = 0.5 * rng.standard_normal((m, n)) / np.sqrt(n)
        r = np.linalg.norm(v, axis=-1, keepdims=True)
        return {"points": _mobius_add(centre, np.tanh(r) * v / r), "x0": np.zeros(n)}
    raise ValueError(f"data: unknown problem {name!r}; expected one of {sorted(COSTS)}")
