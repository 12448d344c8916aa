r"""The full-order model: the linear wave equation, discretised as a canonical Hamiltonian system.

The wave equation ``∂ₜq = p, ∂ₜp = μ²∂ξξ q`` on ``ξ ∈ (−½, ½)`` with ``q = 0`` at both ends is
discretised on ``N`` interior points ``ξᵢ = −½ + iΔx``, ``Δx = 1/(N + 1)``, by finite differences
of its Hamiltonian:

.. math::

    H(q, p; \mu) = \tfrac12 p^Tp + \tfrac12 q^TKq, \qquad
    K = \frac{\mu^2}{\Delta x^2}\,\mathrm{tridiag}(-1, 2, -1), \qquad
    \dot z = J_{2N}\nabla H(z) = \begin{bmatrix} p \\ -Kq \end{bmatrix},

``z = (q, p) ∈ ℝ²ᴺ`` in canonical coordinates (``J_{2N} = [[0, I], [−I, 0]]``, as in
:class:`geometric.SymplecticStiefel`). This is the Hamiltonian of GeometricMachineLearning.jl's
linear wave equation (Peng & Mohseni 2016; Buchfink et al. 2023) divided by ``Δx``, which takes
its ``J/Δx`` back to the canonical ``J``; the boundary values are fixed here instead of carried as
two more degrees of freedom. ``Δx·H`` approximates the continuous energy
``½∫ μ²(∂ξq)² + p² dξ``.

Initial conditions (Brantner & Kraus, arXiv:2312.10004, and GeometricProblems.jl): the cubic
spline ``h(s) = 1 − 3s²/2 + 3s³/4`` on ``[0, 1]``, ``(2 − s)³/4`` on ``[1, 2]``, 0 beyond, and

.. math::

    q_0(\xi; \mu) = h(s), \quad s = 20\mu\,|\xi + \mu/2|, \qquad
    p_0(\xi; \mu) = -\mu\,\partial_\xi q_0(\xi; \mu),

a bump of half-width ``0.1/μ`` centred at ``ξ = −μ/2`` that travels to the right with speed
``μ``: the exact solution is ``q(t, ξ) = q₀(ξ − μt)`` until it reaches the boundary, which it does
not before ``t = 1`` for ``μ ≤ 0.72`` (it touches it for the largest parameters of the paper's
range ``μ ∈ [5/12, 5/6]``). A transported bump is what a linear reduced space represents badly:
the snapshots at different times are nearly orthogonal, their singular values decay slowly (a
slowly decaying Kolmogorov n-width, Greif & Urban 2019).

Time integration: the implicit midpoint rule, which for the linear system ``ż = Az`` is the Cayley
propagator ``z_{k+1} = (I − hA/2)⁻¹(I + hA/2) z_k``, computed once by a linear solve in float64;
it is symplectic and conserves the quadratic ``H`` exactly (up to rounding).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "MU_RANGE",
    "Snapshots",
    "grid",
    "hamiltonian",
    "initial_condition",
    "propagator",
    "solve",
    "spline",
    "stiffness",
    "training_parameters",
    "vector_field_matrix",
]

MU_RANGE = (5 / 12, 5 / 6)
"""The parameter range ``μ ∈ [5/12, 5/6]`` of the paper (the wave speed)."""


class Snapshots(NamedTuple):
    """Full-order solutions at several parameters.

    Attributes:
        states: ``(n_mu, n_steps + 1, 2N)`` float64, the implicit-midpoint states ``z = (q, p)``.
        mus: ``(n_mu,)`` the parameters.
        times: ``(n_steps + 1,)`` the times ``0, h, …, T``.
    """

    states: np.ndarray
    mus: np.ndarray
    times: np.ndarray


def grid(n: int) -> np.ndarray:
    """The ``n`` interior grid points ``ξᵢ = −½ + i/(n + 1)``, ``i = 1..n``."""
    return -0.5 + np.arange(1, n + 1) / (n + 1)


def stiffness(mu: float, n: int) -> np.ndarray:
    """``K = (μ/Δx)² tridiag(−1, 2, −1)``, ``(n, n)``, the potential energy's matrix."""
    dx = 1 / (n + 1)
    k = 2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    return (mu / dx) ** 2 * k


def vector_field_matrix(mu: float, n: int) -> np.ndarray:
    """``A = J_{2n} blockdiag(K, I) = [[0, I], [−K, 0]]``: the full-order model is ``ż = Az``."""
    zero, eye = np.zeros((n, n)), np.eye(n)
    return np.block([[zero, eye], [-stiffness(mu, n), zero]])


def hamiltonian(z, mu: float):
    """``H(z) = ½pᵀp + ½(μ/Δx)² Σᵢ (q_{i+1} − qᵢ)²`` (with ``q₀ = q_{N+1} = 0``) of states ``(..., 2N)``.

    Written with array methods only, so it takes NumPy and JAX arrays alike (the reduced models
    differentiate it with JAX).
    """
    n = z.shape[-1] // 2
    q, p = z[..., :n], z[..., n:]
    dx = 1 / (n + 1)
    first, last = q[..., :1], q[..., -1:]
    differences = ((q[..., 1:] - q[..., :-1]) ** 2).sum(-1) + (first**2).sum(-1) + (last**2).sum(-1)
    return 0.5 * (p**2).sum(-1) + 0.5 * (mu / dx) ** 2 * differences


def spline(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cubic spline ``h(s)`` for ``s ≥ 0`` and its derivative ``h'(s)``."""
    inner, outer = s <= 1, (s > 1) & (s <= 2)
    value = np.where(inner, 1 - 1.5 * s**2 + 0.75 * s**3, np.where(outer, 0.25 * (2 - s) ** 3, 0.0))
    slope = np.where(inner, -3 * s + 2.25 * s**2, np.where(outer, -0.75 * (2 - s) ** 2, 0.0))
    return value, slope


def initial_condition(mu: float, n: int) -> np.ndarray:
    """``z₀ = (q₀, p₀)``, ``(2n,)``: the bump ``h(20μ|ξ + μ/2|)`` moving right with speed ``μ``."""
    xi = grid(n)
    shifted = xi + mu / 2
    value, slope = spline(20 * mu * np.abs(shifted))
    dq = slope * 20 * mu * np.sign(shifted)
    return np.concatenate([value, -mu * dq])


def propagator(mu: float, n: int, step: float) -> np.ndarray:
    """The implicit-midpoint step ``(I − hA/2)⁻¹(I + hA/2)``, ``(2n, 2n)`` (a symplectic matrix)."""
    a = vector_field_matrix(mu, n)
    eye = np.eye(2 * n)
    return np.linalg.solve(eye - step / 2 * a, eye + step / 2 * a)


def solve(mus, n: int, n_steps: int, t_end: float = 1.0) -> Snapshots:
    """Implicit-midpoint solutions from :func:`initial_condition` at each ``μ`` in ``mus``, in float64.

    Args:
        mus: the parameters.
        n: grid points (the full-order dimension is ``2n``).
        n_steps: time steps of ``h = t_end / n_steps``.
        t_end: the final time.

    Returns:
        The :class:`Snapshots`.
    """
    mus = np.asarray(mus, dtype=np.float64).reshape(-1)
    step = t_end / n_steps
    states = np.empty((len(mus), n_steps + 1, 2 * n))
    for i, mu in enumerate(mus):
        m = propagator(float(mu), n, step)
        states[i, 0] = initial_condition(float(mu), n)
        for k in range(n_steps):
            states[i, k + 1] = m @ states[i, k]
    return Snapshots(states, mus, step * np.arange(n_steps + 1))


def training_parameters(count: int) -> np.ndarray:
    """``count`` equally spaced parameters over :data:`MU_RANGE`, its ends included (one: the middle)."""
    if count == 1:
        return np.array([sum(MU_RANGE) / 2])
    return np.linspace(*MU_RANGE, count)
