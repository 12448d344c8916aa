"""Double-pendulum trajectories from many initial states, cut into windows for the transformers.

The system is :data:`examples.sympnet.data.SYSTEMS` ``["double_pendulum"]`` (unit masses and lengths,
``g = 1``, not separable), integrated by the implicit midpoint rule composed to order 6
(:func:`examples.sympnet.data.flow`) in float64 with the data step ``h = 0.2``:

- training: :data:`N_TRAJECTORIES` initial states ``(q₁, q₂, 0, 0)`` with ``q₁, q₂`` drawn uniformly
  from ``[−1, 1]`` (a fixed seed), each integrated for :data:`N_STEPS` steps (``t = 12``);
- windows of ``seq_length = 3`` consecutive states as input and the 3 states after them as target
  (:func:`geometric.nn.trajectory_windows`, GeometricMachineLearning.jl's ``Batch`` convention):
  ``N_STEPS + 1 − 6 + 1 = 56`` windows per trajectory, shape ``(window, time, feature)``;
- validation: the initial states :data:`VALIDATION`, not among the training ones.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import numpy as np

import geometric.nn
from examples.sympnet import data as systems

__all__ = ["N_STEPS", "N_TRAJECTORIES", "SEQ_LENGTH", "STEP", "SYSTEM", "VALIDATION", "WindowData",
           "initial_states", "load_dataset"]

SYSTEM = systems.SYSTEMS["double_pendulum"]
STEP = 0.2
N_STEPS = 60
N_TRAJECTORIES = 128
SEQ_LENGTH = 3
SUBSTEPS = 4  # order-6 integrator steps per data step
VALIDATION = np.array([[0.6, -0.4, 0.0, 0.0], [-0.8, 0.7, 0.0, 0.0]])
"""The two validation initial states ``(q₁, q₂, p₁, p₂)``."""


class WindowData(NamedTuple):
    """The training data (float64).

    Attributes:
        trajectories: ``(N_TRAJECTORIES, N_STEPS + 1, 4)``.
        inputs: ``(n_windows, SEQ_LENGTH, 4)``, consecutive states.
        targets: ``(n_windows, SEQ_LENGTH, 4)``, the states right after each input window.
    """

    trajectories: np.ndarray
    inputs: np.ndarray
    targets: np.ndarray


def initial_states(n: int = N_TRAJECTORIES, seed: int = 0) -> np.ndarray:
    """``(n, 4)`` training initial states ``(q₁, q₂, 0, 0)``, ``q`` uniform in ``[−1, 1]²``."""
    q = np.random.default_rng(seed).uniform(-1.0, 1.0, size=(n, 2))
    return np.concatenate([q, np.zeros_like(q)], axis=-1)


def trajectories(z0: np.ndarray, n_steps: int) -> np.ndarray:
    """The integrator's trajectories ``(m, n_steps + 1, 4)`` from ``z0`` ``(m, 4)`` with the data step."""
    return systems.flow(SYSTEM, z0, n_steps, step=STEP, substeps=SUBSTEPS)


@functools.lru_cache(maxsize=2)
def load_dataset(n_trajectories: int = N_TRAJECTORIES) -> WindowData:
    """The training trajectories and their windows (a few seconds to generate)."""
    traj = trajectories(initial_states(n_trajectories), N_STEPS)
    with jax.enable_x64(True):
        inputs, targets = geometric.nn.trajectory_windows(jax.numpy.asarray(traj), SEQ_LENGTH)
    return WindowData(traj, np.asarray(inputs), np.asarray(targets))
