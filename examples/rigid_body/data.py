"""Rigid-body training data: Euler's equations integrated with the implicit midpoint rule.

The free rigid body's angular momentum ``z ∈ ℝ³`` obeys Euler's equations

.. math::

    \\dot z_1 = a z_2 z_3, \\quad \\dot z_2 = b z_1 z_3, \\quad \\dot z_3 = c z_1 z_2, \\qquad
    a = 1/I_3 - 1/I_2, \\; b = 1/I_1 - 1/I_3, \\; c = 1/I_2 - 1/I_1,

with the invariants ``‖z‖²`` and the energy ``½ Σ z_i² / I_i``. We use the moments of inertia of the
paper's text, ``I = (1, 2, 2/3)`` (so ``a = 1, b = c = -1/2``); the paper's data code used
``I = (2, 1, 2/3)``, the same system after swapping ``z₁`` and ``z₂`` and reversing time. Pass
``inertia=`` to :func:`load_dataset` for the other choice.

The data set (docs/examples/rigid-body.md#data): initial conditions ``(sin v, 0, cos v)`` and ``(0, sin v, cos v)`` for
``v = 0.1, 0.11, …, < 2π`` (1238 trajectories), the implicit midpoint rule with ``h = 0.2`` on
``t ∈ [0, 12]`` (61 states), each step solved by Newton's method to a residual of 1e-12 in float64.
The implicit midpoint rule preserves quadratic invariants, so every state lies on the sphere
``‖z‖ = 1`` up to the Newton tolerance. Training pairs are windows of 3 consecutive states (input)
and the 3 states after them (target): 56 windows per trajectory, 69,328 in all, in the layout
``(window, time, feature)`` that :mod:`rules` layers take.

All trajectories are integrated at once: the Newton solve for one state is ``jax.vmap``-ed over
trajectories and ``lax.scan``-ned over time. The result is cached as ``.npz`` in a cache directory
(default ``~/.cache/pullbacks``), keyed by every parameter that changes the data.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = [
    "PAPER_INERTIA",
    "CODE_INERTIA",
    "RigidBodyData",
    "default_cache_dir",
    "euler_vector_field",
    "implicit_midpoint",
    "initial_conditions",
    "load_dataset",
    "validation_initial_conditions",
    "windows",
]

PAPER_INERTIA = (1.0, 2.0, 2.0 / 3.0)
"""Moments of inertia ``(I₁, I₂, I₃)`` of the paper's text (used by default)."""
CODE_INERTIA = (2.0, 1.0, 2.0 / 3.0)
"""Moments of inertia of the paper's data code (``z₁ ↔ z₂`` and time reversed)."""

STEP = 0.2
T_END = 12.0
NEWTON_TOL = 1e-12
NEWTON_MAX_ITERATIONS = 50
N_IN = 3
N_OUT = 3


class RigidBodyData(NamedTuple):
    """The rigid-body data set.

    Attributes:
        trajectories: ``(n_trajectories, n_times, 3)`` float64, the implicit-midpoint solutions.
        inputs: ``(n_windows, 3, 3)`` float64, three consecutive states (time, feature).
        targets: ``(n_windows, 3, 3)`` float64, the three states that follow each input.
        step: the time step ``h``.
        inertia: the moments of inertia ``(I₁, I₂, I₃)``.
    """

    trajectories: np.ndarray
    inputs: np.ndarray
    targets: np.ndarray
    step: float
    inertia: tuple[float, float, float]


def default_cache_dir() -> Path:
    """``$PULLBACKS_CACHE`` if set, else ``$XDG_CACHE_HOME/pullbacks`` (``~/.cache/pullbacks``)."""
    if "PULLBACKS_CACHE" in os.environ:
        return Path(os.environ["PULLBACKS_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pullbacks"


def _coefficients(inertia: tuple[float, float, float]) -> tuple[float, float, float]:
    i1, i2, i3 = inertia
    return 1 / i3 - 1 / i2, 1 / i1 - 1 / i3, 1 / i2 - 1 / i1


def euler_vector_field(z: jax.Array, inertia: tuple[float, float, float] = PAPER_INERTIA) -> jax.Array:
    """Right-hand side of Euler's equations for states ``z`` of shape ``(..., 3)``."""
    a, b, c = _coefficients(inertia)
    z1, z2, z3 = z[..., 0], z[..., 1], z[..., 2]
    return jnp.stack([a * z2 * z3, b * z1 * z3, c * z1 * z2], axis=-1)


def _euler_jacobian(z: jax.Array, inertia: tuple[float, float, float]) -> jax.Array:
    """Jacobian ``∂f/∂z`` of :func:`euler_vector_field` at one state ``z`` of shape ``(3,)``."""
    a, b, c = _coefficients(inertia)
    z1, z2, z3 = z[0], z[1], z[2]
    zero = jnp.zeros_like(z1)
    return jnp.array([[zero, a * z3, a * z2], [b * z3, zero, b * z1], [c * z2, c * z1, zero]])


def _midpoint_step(z: jax.Array, h: float, inertia: tuple[float, float, float], tol: float) -> jax.Array:
    """One implicit midpoint step from one state ``z`` (3,): solve ``w = z + h f((z + w)/2)``.

    Newton's method on ``F(w) = w - z - h f((z + w)/2)`` with ``∂F/∂w = I - (h/2) ∂f((z + w)/2)``,
    started from the explicit Euler step, until ``‖F(w)‖∞ ≤ tol``.
    """
    eye = jnp.eye(3, dtype=z.dtype)

    def residual(w):
        return w - z - h * euler_vector_field((z + w) / 2, inertia)

    def not_converged(state):
        w, iteration = state
        return (jnp.max(jnp.abs(residual(w))) > tol) & (iteration < NEWTON_MAX_ITERATIONS)

    def newton(state):
        w, iteration = state
        jacobian = eye - (h / 2) * _euler_jacobian((z + w) / 2, inertia)
        return w - jnp.linalg.solve(jacobian, residual(w)), iteration + 1

    w0 = z + h * euler_vector_field(z, inertia)
    w, _ = lax.while_loop(not_converged, newton, (w0, jnp.asarray(0)))
    return w


def implicit_midpoint(
    z0: jax.Array,
    n_steps: int,
    *,
    step: float = STEP,
    inertia: tuple[float, float, float] = PAPER_INERTIA,
    tol: float = NEWTON_TOL,
) -> jax.Array:
    """Integrate Euler's equations with the implicit midpoint rule from many initial states.

    Args:
        z0: ``(n, 3)`` initial states. Use float64 (under ``jax.enable_x64``) to reach ``tol``.
        n_steps: number of steps.
        step: the time step ``h``.
        inertia: moments of inertia ``(I₁, I₂, I₃)``.
        tol: Newton tolerance on the residual's max-norm.

    Returns:
        ``(n, n_steps + 1, 3)``: the states at ``t = 0, h, …, n_steps·h``.
    """
    advance = jax.vmap(lambda z: _midpoint_step(z, step, inertia, tol))

    def scan_step(z, _):
        z_next = advance(z)
        return z_next, z_next

    _, states = lax.scan(scan_step, z0, None, length=n_steps)
    return jnp.concatenate([z0[None], states], axis=0).swapaxes(0, 1)


def initial_conditions() -> np.ndarray:
    """The 1238 initial conditions ``(sin v, 0, cos v)``, then ``(0, sin v, cos v)``, ``v = 0.1, 0.11, … < 2π``."""
    v = 0.1 + 0.01 * np.arange(int(np.floor((2 * np.pi - 0.1) / 0.01)) + 1)
    zero = np.zeros_like(v)
    first = np.stack([np.sin(v), zero, np.cos(v)], axis=-1)
    second = np.stack([zero, np.sin(v), np.cos(v)], axis=-1)
    return np.concatenate([first, second])


def validation_initial_conditions() -> np.ndarray:
    """The two validation initial conditions ``(sin 1.1, 0, cos 1.1)`` and ``(0, sin 1.1, cos 1.1)``."""
    s, c = np.sin(1.1), np.cos(1.1)
    return np.array([[s, 0.0, c], [0.0, s, c]])


def windows(trajectories: np.ndarray, n_in: int = N_IN, n_out: int = N_OUT) -> tuple[np.ndarray, np.ndarray]:
    """Cut trajectories ``(n, n_times, d)`` into (input, target) windows of ``n_in`` and ``n_out`` states.

    Returns:
        ``inputs`` of shape ``(n · (n_times - n_in - n_out + 1), n_in, d)`` and ``targets`` of shape
        ``(…, n_out, d)``, trajectory-major.
    """
    n, n_times, d = trajectories.shape
    view = np.lib.stride_tricks.sliding_window_view(trajectories, n_in + n_out, axis=1)
    view = view.transpose(0, 1, 3, 2).reshape(n * (n_times - n_in - n_out + 1), n_in + n_out, d)
    return np.ascontiguousarray(view[:, :n_in]), np.ascontiguousarray(view[:, n_in:])


def _generate(inertia: tuple[float, float, float], step: float, t_end: float) -> np.ndarray:
    n_steps = int(round(t_end / step))
    with jax.enable_x64(True):
        z0 = jnp.asarray(initial_conditions(), dtype=jnp.float64)
        integrate = jax.jit(implicit_midpoint, static_argnames=("n_steps", "step", "inertia", "tol"))
        return np.asarray(integrate(z0, n_steps, step=step, inertia=inertia))


def load_dataset(
    cache_dir: str | os.PathLike | None = None,
    *,
    inertia: tuple[float, float, float] = PAPER_INERTIA,
    step: float = STEP,
    t_end: float = T_END,
) -> RigidBodyData:
    """Load the rigid-body data set, generating and caching it on first use (a few seconds).

    Args:
        cache_dir: directory of the ``.npz`` cache; :func:`default_cache_dir` if None.
        inertia: moments of inertia ``(I₁, I₂, I₃)``; default the paper text's ``(1, 2, 2/3)``.
        step: the time step ``h``.
        t_end: the final time.

    Returns:
        The trajectories and their windows (float64 NumPy arrays).
    """
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    inertia = tuple(float(i) for i in inertia)
    key = json.dumps({"inertia": inertia, "step": step, "t_end": t_end, "tol": NEWTON_TOL}, sort_keys=True)
    path = cache_dir / f"rigid_body_{hashlib.sha256(key.encode()).hexdigest()[:12]}.npz"
    if path.exists():
        trajectories = np.load(path)["trajectories"]
    else:
        trajectories = _generate(inertia, step, t_end)
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, trajectories=trajectories, key=key)
        os.replace(tmp, path)
    inputs, targets = windows(trajectories)
    return RigidBodyData(trajectories, inputs, targets, step, inertia)
