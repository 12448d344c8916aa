"""Helpers shared by the test modules: random arrays, relative errors, finite differences.

Import as ``from tests.helpers import rand, rel_err`` (the repository root is on pytest's path).
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np


def rand(shape, seed: int = 0, dtype=jnp.float64, scale: float = 1.0) -> jax.Array:
    """Standard normal entries (real and imaginary parts for complex ``dtype``), times ``scale``."""
    rng = np.random.default_rng(seed)
    x = scale * rng.standard_normal(shape)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        x = x + 1j * scale * rng.standard_normal(shape)
    return jnp.asarray(x, dtype)


def spd(shape, seed: int = 0, dtype=jnp.float64) -> jax.Array:
    """Well-conditioned symmetric (Hermitian) positive definite matrices ``G Gᴴ/n + I``."""
    g = rand(shape, seed, dtype)
    n = shape[-1]
    return g @ jnp.conj(jnp.swapaxes(g, -1, -2)) / n + jnp.eye(n, dtype=dtype)


def orthogonal(n: int, seed: int) -> np.ndarray:
    """A random n×n orthogonal matrix."""
    return np.linalg.qr(np.asarray(rand((n, n), seed)))[0]


def symmetric_with_spectrum(spectrum, seed: int) -> jax.Array:
    """A symmetric matrix with the given eigenvalues and random eigenvectors."""
    q = orthogonal(len(spectrum), seed)
    return jnp.asarray((q * np.asarray(spectrum)) @ q.T)


def with_singular_values(m: int, sigma, seed: int) -> jax.Array:
    """An m×k matrix with the given k singular values and random singular vectors."""
    u = orthogonal(m, seed)[:, :len(sigma)]
    v = orthogonal(len(sigma), seed + 1)
    return jnp.asarray((u * np.asarray(sigma)) @ v.T)


def rel_err(a, b) -> float:
    """``max |a - b| / max |b|`` over every leaf of two pytrees (in float64)."""
    worst = 0.0
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        x, y = np.asarray(x), np.asarray(y)
        worst = max(worst, float(np.max(np.abs(x - y), initial=0.0)
                                 / max(float(np.max(np.abs(y), initial=0.0)), 1e-300)))
    return worst


def central_difference(f: Callable, x, direction, eps: float = 1e-6):
    """``(f(x + εd) - f(x - εd)) / 2ε`` for a pytree-valued ``f`` of one array."""
    plus, minus = f(x + eps * direction), f(x - eps * direction)
    return jax.tree_util.tree_map(lambda p, m: (p - m) / (2 * eps), plus, minus)


def spd_reference_dist(m, x, y) -> float:
    """The geodesic distance of ``geometric.SPD`` metric ``m.metric`` between two SPD matrices,
    from NumPy eigendecompositions (affine-invariant, log-Euclidean, Bures–Wasserstein)."""
    def function(a, f):
        w, q = np.linalg.eigh(a)
        return (q * f(w)) @ q.T

    x, y = np.asarray(x), np.asarray(y)
    if m.metric == "affine":
        s = function(x, lambda w: w ** -0.5)
        return float(np.linalg.norm(np.log(np.linalg.eigvalsh(s @ y @ s))))
    if m.metric == "log_euclidean":
        return float(np.linalg.norm(function(x, np.log) - function(y, np.log)))
    s = function(x, np.sqrt)
    return float(np.sqrt(np.trace(x) + np.trace(y)
                         - 2 * np.sum(np.sqrt(np.linalg.eigvalsh(s @ y @ s)))))


def cpu_subprocess_env(devices: int, **extra: str) -> dict[str, str]:
    """The environment of a JAX subprocess on ``devices`` simulated CPU devices, keeping this
    suite's XLA flags (conftest.py: optimisation level 0); ``extra`` adds variables."""
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
    return dict(os.environ, XLA_FLAGS=flags.strip(), JAX_PLATFORMS="cpu", **extra)


def stopped_copy(run: Path, to: Path, last_checkpoint: str) -> Path:
    """A copy at ``to`` of the finished training run ``run``, as if it had died before ``last_checkpoint``.

    The copy has neither that checkpoint nor ``summary.json``: ``--resume`` continues it from the
    checkpoint before.
    """
    shutil.copytree(run, to)
    (to / last_checkpoint).unlink()
    (to / "summary.json").unlink()
    return to


def assert_same_checkpoint(a: Path, b: Path) -> None:
    """The checkpoints ``a`` and ``b`` hold the same arrays under the same names, bit for bit."""
    with np.load(a) as x, np.load(b) as y:
        assert x.files == y.files
        for key in x.files:
            np.testing.assert_array_equal(x[key], y[key])
