r"""Training data from trajectories: windows of consecutive states and seeded minibatches."""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from rules.internal import REAL_DTYPES, check_array

from .._core.checks import check_int_field

__all__ = ["batch", "trajectory_windows"]


def trajectory_windows(trajectories: jax.Array, seq_length: int,
                       prediction_window: int | None = None) -> tuple[jax.Array, jax.Array]:
    r"""Every window of ``seq_length`` states of a trajectory and the states that follow it.

    .. math::
        \mathrm{inputs}_{(k, t)} = (x^{(k)}_t, \dots, x^{(k)}_{t+L-1}), \qquad
        \mathrm{targets}_{(k, t)} = (x^{(k)}_{t+L}, \dots, x^{(k)}_{t+L+P-1}),

    for every trajectory ``k`` and every start ``t = 0, …, T - L - P`` (``L = seq_length``,
    ``P = prediction_window``, ``T`` steps): ``T - L - P + 1`` windows per trajectory, ordered by
    trajectory, then by start. This is GeometricMachineLearning.jl's ``Batch(batch_size,
    seq_length, prediction_window)`` on a time-series ``DataLoader``: the same windows (its
    ``input_time_steps - (seq_length - 1) - prediction_window`` starts per parameter), the target
    starting right after the input. ``seq_length = prediction_window = 1`` gives the pairs
    ``(x_t, x_{t+1})`` of a one-step integrator (GML's ``Batch(batch_size)``).

    Args:
      trajectories: ``(n_traj, n_steps, d)`` or one trajectory ``(n_steps, d)``, real floats.
      seq_length: ``L ≥ 1``, the states of one input window.
      prediction_window: ``P ≥ 1``, the states of one target window; None: ``seq_length``.

    Returns:
      ``(inputs, targets)`` of shapes ``(N, L, d)`` and ``(N, P, d)``, ``N = n_traj (T - L - P +
      1)``.

    Raises:
      TypeError: ``trajectories`` is not a float32/float64 array; a length is not an int.
      ValueError: ``trajectories`` is not 2- or 3-dimensional; a length is < 1; ``T < L + P``.

    Examples:
      >>> import jax.numpy as jnp, geometric.nn
      >>> x = jnp.arange(10.0).reshape(5, 2)  # 5 states in R²
      >>> inputs, targets = geometric.nn.trajectory_windows(x, 2, 1)
      >>> inputs.shape, targets.shape
      ((3, 2, 2), (3, 1, 2))
      >>> print(inputs[1, :, 0], targets[1, :, 0])
      [2. 4.] [6.]
    """
    name = "trajectory_windows"
    check_array(name, "trajectories", trajectories, dtypes=REAL_DTYPES)
    if trajectories.ndim not in (2, 3):
        raise ValueError(f"{name}: `trajectories` must have shape (n_traj, n_steps, d) or "
                         f"(n_steps, d); got {tuple(trajectories.shape)}.")
    length = check_int_field(name, "seq_length", seq_length)
    window = length if prediction_window is None else check_int_field(
        name, "prediction_window", prediction_window)
    x = jnp.asarray(trajectories)
    if x.ndim == 2:
        x = x[None]
    n_traj, n_steps, dim = x.shape
    starts = n_steps - length - window + 1
    if starts < 1:
        raise ValueError(f"{name}: a trajectory of {n_steps} steps has no window of seq_length "
                         f"{length} followed by prediction_window {window}: it needs at least "
                         f"{length + window} steps.")
    # static index arrays: one gather per output, no loop over windows
    offsets = np.arange(starts)[:, None]
    inputs = x[:, offsets + np.arange(length)]
    targets = x[:, offsets + length + np.arange(window)]
    return (inputs.reshape(n_traj * starts, length, dim),
            targets.reshape(n_traj * starts, window, dim))


def batch(inputs: jax.Array, targets: jax.Array, *, batch_size: int, step: Any, seed: Any
          ) -> tuple[jax.Array, jax.Array]:
    r"""The minibatch of training step ``step``: epochs of seeded permutations of the samples.

    .. math::
        e, j = \operatorname{divmod}(\mathrm{step}, \lfloor N / B\rfloor), \qquad
        \mathrm{indices} = \pi_{\mathrm{seed}, e}[jB : (j + 1)B]

    with ``π_{seed, e}`` the permutation ``jax.random.permutation(fold_in(key(seed), e), N)`` of
    the ``N`` samples and ``B = min(batch_size, N)``. Each epoch visits ``⌊N/B⌋B`` distinct
    samples (the last ``N mod B`` of its order are skipped, so every batch has the same shape and
    the step compiles once), and a new permutation each epoch reaches the rest. The batch is a
    pure function of ``(seed, step)``: a resumed run sees exactly the batches of an uninterrupted
    one, on any platform. ``step`` and ``seed`` may be traced (a ``jax.lax.scan`` over steps).
    GML's ``Batch`` draws one permutation per epoch too, but keeps a shorter last batch.

    Args:
      inputs: ``(N, ...)``, e.g. from :func:`trajectory_windows`.
      targets: ``(N, ...)``, the same number of samples.
      batch_size: ``B ≥ 1`` (a Python int; more than ``N`` means ``N``).
      step: the step number, an int ``≥ 0`` or an integer array of shape ``()``.
      seed: an int or an integer array of shape ``()``.

    Returns:
      ``(inputs[indices], targets[indices])``, each with leading axis ``B``.

    Raises:
      TypeError: ``inputs`` or ``targets`` is not an array; ``batch_size`` is not an int;
        ``step`` or ``seed`` is not an integer scalar.
      ValueError: ``inputs`` and ``targets`` have different leading axes or none; ``batch_size
        < 1``; ``step`` or ``seed`` is negative.

    Examples:
      >>> import jax.numpy as jnp, geometric.nn
      >>> x = jnp.arange(10.0)[:, None]
      >>> xb, yb = geometric.nn.batch(x, 2 * x, batch_size=4, step=0, seed=0)
      >>> xb.shape, bool(jnp.all(yb == 2 * xb))
      ((4, 1), True)
    """
    name = "batch"
    for argname, value in (("inputs", inputs), ("targets", targets)):
        if not isinstance(value, (jax.Array, np.ndarray)):
            raise TypeError(f"{name}: `{argname}` must be a JAX or NumPy array; "
                            f"got {type(value).__name__}.")
        if value.ndim < 1:
            raise ValueError(f"{name}: `{argname}` must have a leading sample axis; got shape ().")
    n = inputs.shape[0]
    if targets.shape[0] != n:
        raise ValueError(f"{name}: `inputs` and `targets` must have the same number of samples "
                         f"(leading axis); got {inputs.shape[0]} and {targets.shape[0]}.")
    if n == 0:
        raise ValueError(f"{name}: `inputs` has no samples.")
    size = min(check_int_field(name, "batch_size", batch_size), n)
    step = _integer_scalar(name, "step", step)
    seed = _integer_scalar(name, "seed", seed)
    epoch, position = jnp.divmod(step, n // size)
    order = jax.random.permutation(jax.random.fold_in(jax.random.key(seed), epoch), n)
    indices = lax.dynamic_slice_in_dim(order, position * size, size)
    return jnp.take(inputs, indices, axis=0), jnp.take(targets, indices, axis=0)


def _integer_scalar(fname: str, argname: str, value: Any) -> jax.Array:
    """``value`` as an integer array of shape (); a concrete negative value is refused."""
    if isinstance(value, bool) or not (
            isinstance(value, (int, np.integer))
            or (isinstance(value, (jax.Array, np.ndarray))
                and jnp.issubdtype(value.dtype, jnp.integer) and value.shape == ())):
        kind = (f"an array of dtype {value.dtype} and shape {value.shape}"
                if isinstance(value, (jax.Array, np.ndarray)) else type(value).__name__)
        raise TypeError(f"{fname}: `{argname}` must be an int or an integer array of shape (); "
                        f"got {kind}.")
    if not isinstance(value, jax.core.Tracer) and int(value) < 0:
        raise ValueError(f"{fname}: `{argname}` must be ≥ 0; got {int(value)}.")
    return jnp.asarray(value)
