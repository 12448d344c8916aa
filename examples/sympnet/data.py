r"""Hamiltonian systems and their flows, computed with symplectic integrators in float64.

A state is ``z = (q, p)`` of shape ``(..., 2n)`` (positions first, the convention of
:mod:`geometric.nn`), and a system is its Hamiltonian ``H(z)``; the flow of
``ż = J ∇H(z)``, ``J = [[0, I], [-I, 0]]``, is approximated by

- Störmer–Verlet for a separable ``H = T(p) + V(q)`` (explicit, symmetric, order 2):
  ``p½ = p − (h/2) ∇V(q)``, ``q' = q + h ∇T(p½)``, ``p' = p½ − (h/2) ∇V(q')``;
- the implicit midpoint rule for any ``H`` (symmetric, order 2):
  ``z' = z + h J ∇H((z + z')/2)``, solved by Newton's method to a residual of 1e-13;

each raised to order 6 by Yoshida's composition (Yoshida 1990, solution A)
``Φ_{w₃h} ∘ Φ_{w₂h} ∘ Φ_{w₁h} ∘ Φ_{w₀h} ∘ Φ_{w₁h} ∘ Φ_{w₂h} ∘ Φ_{w₃h}`` (a composition of
symmetric symplectic maps is symplectic), and taken ``substeps`` times per data step ``h``. The
SympNets paper generated its data the same way (Störmer–Verlet composed to order 6; Jin et al.,
arXiv:2001.03750, and its code, github.com/jpzxshi/sympnets).

The systems (:data:`SYSTEMS`), with the paper's set-up (its code's ``pendulum.py`` and
``double_pendulum.py``, which order states as ``(p, q)``; here they are ``(q, p)``):

- ``pendulum``: ``H = p²/2 − cos q``; ``z₀ = (q, p) = (1, 0)``, ``h = 0.1``; 40 training pairs
  ``(z_k, z_{k+1})`` along the trajectory from ``z₀``, then 100 test pairs continuing it.
- ``double_pendulum``: unit masses and lengths, ``g = 1``,
  ``H = (p₁² + 2p₂² − 2p₁p₂ cos(q₁ − q₂)) / (2(1 + sin²(q₁ − q₂))) − 2 cos q₁ − cos q₂``
  (not separable); ``z₀ = (3π/7, 3π/8, 0, 0)``, ``h = 0.75``; 200 training pairs, 100 test pairs.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = ["SYSTEMS", "Dataset", "System", "double_pendulum_hamiltonian", "flow", "implicit_midpoint_step",
           "load_dataset", "pendulum_hamiltonian", "stormer_verlet_step", "vector_field", "yoshida6"]

NEWTON_TOL = 1e-13
NEWTON_MAX_ITERATIONS = 30
_W1, _W2, _W3 = -1.17767998417887, 0.235573213359357, 0.784513610477560
_W0 = 1.0 - 2.0 * (_W1 + _W2 + _W3)
YOSHIDA6 = (_W3, _W2, _W1, _W0, _W1, _W2, _W3)
"""Yoshida's order-6 composition weights (solution A); they sum to 1."""

Hamiltonian = Callable[[jax.Array], jax.Array]
Step = Callable[[jax.Array, float], jax.Array]


def pendulum_hamiltonian(z: jax.Array) -> jax.Array:
    """``H(q, p) = p²/2 − cos q`` for ``z = (q, p)`` of shape ``(..., 2)``."""
    q, p = z[..., 0], z[..., 1]
    return 0.5 * p**2 - jnp.cos(q)


def double_pendulum_hamiltonian(z: jax.Array) -> jax.Array:
    """The double pendulum's ``H`` (unit masses and lengths, ``g = 1``) for ``z = (q₁, q₂, p₁, p₂)``."""
    q1, q2, p1, p2 = z[..., 0], z[..., 1], z[..., 2], z[..., 3]
    c, s = jnp.cos(q1 - q2), jnp.sin(q1 - q2)
    kinetic = (p1**2 + 2 * p2**2 - 2 * p1 * p2 * c) / (2 * (1 + s**2))
    return kinetic - 2 * jnp.cos(q1) - jnp.cos(q2)


def vector_field(hamiltonian: Hamiltonian, z: jax.Array) -> jax.Array:
    """``J ∇H(z) = (∂H/∂p, −∂H/∂q)`` for one state ``z`` of shape ``(2n,)``."""
    n = z.shape[-1] // 2
    grad = jax.grad(hamiltonian)(z)
    return jnp.concatenate([grad[n:], -grad[:n]])


def stormer_verlet_step(hamiltonian: Hamiltonian, z: jax.Array, h: float) -> jax.Array:
    """One Störmer–Verlet step of a separable ``H = T(p) + V(q)`` from one state ``z`` (2n,)."""
    n = z.shape[-1] // 2
    grad = jax.grad(hamiltonian)

    def d_dq(q, p):
        return grad(jnp.concatenate([q, p]))[:n]

    def d_dp(q, p):
        return grad(jnp.concatenate([q, p]))[n:]

    q, p = z[:n], z[n:]
    p = p - 0.5 * h * d_dq(q, p)
    q = q + h * d_dp(q, p)
    p = p - 0.5 * h * d_dq(q, p)
    return jnp.concatenate([q, p])


def implicit_midpoint_step(hamiltonian: Hamiltonian, z: jax.Array, h: float) -> jax.Array:
    """One implicit midpoint step from ``z`` (2n,): Newton's method on ``w − z − h f((z + w)/2) = 0``."""
    f = functools.partial(vector_field, hamiltonian)
    eye = jnp.eye(z.shape[-1], dtype=z.dtype)

    def residual(w):
        return w - z - h * f((z + w) / 2)

    def not_converged(state):
        w, iteration = state
        return (jnp.max(jnp.abs(residual(w))) > NEWTON_TOL) & (iteration < NEWTON_MAX_ITERATIONS)

    def newton(state):
        w, iteration = state
        jacobian = eye - (h / 2) * jax.jacfwd(f)((z + w) / 2)
        return w - jnp.linalg.solve(jacobian, residual(w)), iteration + 1

    w, _ = lax.while_loop(not_converged, newton, (z + h * f(z), jnp.asarray(0)))
    return w


def yoshida6(step: Step) -> Step:
    """The order-6 composition of a symmetric order-2 ``step(z, h)`` (:data:`YOSHIDA6`)."""

    def composed(z: jax.Array, h: float) -> jax.Array:
        # A scan, not a Python loop: one traced stage (for the implicit midpoint rule, one Newton solve).
        z, _ = lax.scan(lambda w, weight: (step(w, weight * h), None), z, jnp.asarray(YOSHIDA6, z.dtype))
        return z

    return composed


@dataclasses.dataclass(frozen=True)
class System:
    """A Hamiltonian system and the paper's data set-up for it.

    Attributes:
        name: its command-line name.
        dim: phase-space dimension ``2n``.
        hamiltonian: ``H(z)`` for ``z`` of shape ``(..., dim)``.
        separable: ``H = T(p) + V(q)`` (Störmer–Verlet applies).
        z0: the initial state ``(q, p)`` of the training trajectory.
        step: the data time step ``h``.
        n_train: training pairs (steps from ``z0``).
        n_test: test pairs (steps after the training ones).
        substeps: integrator steps per data step.
    """

    name: str
    dim: int
    hamiltonian: Hamiltonian
    separable: bool
    z0: tuple[float, ...]
    step: float
    n_train: int
    n_test: int
    substeps: int

    def energy(self, z: np.ndarray) -> np.ndarray:
        """``H`` of states ``(..., dim)``, in float64."""
        with jax.enable_x64(True):
            return np.asarray(self.hamiltonian(jnp.asarray(z, jnp.float64)))


SYSTEMS: dict[str, System] = {
    "pendulum": System("pendulum", 2, pendulum_hamiltonian, True, (1.0, 0.0), 0.1, 40, 100, 10),
    "double_pendulum": System("double_pendulum", 4, double_pendulum_hamiltonian, False,
                              (3 * np.pi / 7, 3 * np.pi / 8, 0.0, 0.0), 0.75, 200, 100, 25),
}
"""The systems by command-line name, with the paper's initial state, step and data sizes."""


@functools.partial(jax.jit, static_argnames=("system", "n_steps", "step", "substeps"))
def _flow(system: System, z0: jax.Array, n_steps: int, step: float, substeps: int) -> jax.Array:
    basic = stormer_verlet_step if system.separable else implicit_midpoint_step
    one = yoshida6(functools.partial(basic, system.hamiltonian))
    advance = jax.vmap(lambda z: lax.fori_loop(0, substeps, lambda _, w: one(w, step / substeps), z))

    def scan_step(z, _):
        z = advance(z)
        return z, z

    _, states = lax.scan(scan_step, z0, None, length=n_steps)
    return jnp.concatenate([z0[None], states]).swapaxes(0, 1)


def flow(system: System, z0: np.ndarray, n_steps: int, *, step: float | None = None,
         substeps: int | None = None) -> np.ndarray:
    """The integrator's trajectories from initial states ``z0`` (``(m, dim)`` or ``(dim,)``), in float64.

    Args:
        system: the system.
        z0: initial states.
        n_steps: number of data steps.
        step: the data step ``h`` (default the system's).
        substeps: order-6 integrator steps per data step (default the system's).

    Returns:
        ``(m, n_steps + 1, dim)`` (or ``(n_steps + 1, dim)``): the states at ``t = 0, h, …``.
    """
    step = system.step if step is None else step
    substeps = system.substeps if substeps is None else substeps
    z0 = np.asarray(z0, dtype=np.float64)
    with jax.enable_x64(True):
        out = np.asarray(_flow(system, jnp.asarray(np.atleast_2d(z0)), n_steps, step, substeps))
    return out if z0.ndim == 2 else out[0]


class Dataset(NamedTuple):
    """A system's data set (float64): one trajectory from ``z0`` cut into pairs ``(z_k, z_{k+1})``.

    Attributes:
        trajectory: ``(n_train + n_test + 1, dim)``, the states from ``z0``.
        train_inputs, train_targets: ``(n_train, dim)``, the first ``n_train`` pairs.
        test_inputs, test_targets: ``(n_test, dim)``, the ``n_test`` pairs after them.
    """

    trajectory: np.ndarray
    train_inputs: np.ndarray
    train_targets: np.ndarray
    test_inputs: np.ndarray
    test_targets: np.ndarray


@functools.lru_cache(maxsize=4)
def load_dataset(system: System) -> Dataset:
    """The paper's data of ``system``: the flow from ``z0``, training pairs first, test pairs after them."""
    trajectory = flow(system, np.asarray(system.z0), system.n_train + system.n_test)
    trajectory.flags.writeable = False
    n = system.n_train
    return Dataset(trajectory, trajectory[:n], trajectory[1:n + 1], trajectory[n:-1], trajectory[n + 1:])
