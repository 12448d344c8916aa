"""geometric/nn/_data.py: trajectory windows (GML's Batch convention) and seeded minibatches."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geometric.nn import batch, trajectory_windows


def trajectories(n_traj=3, n_steps=9, d=2, dtype=jnp.float64):
    """x[k, t] = (100k + t, -(100k + t), ...): every state names its trajectory and time."""
    base = 100 * np.arange(n_traj)[:, None] + np.arange(n_steps)[None, :]
    return jnp.asarray(base[..., None] * (-1.0) ** np.arange(d), dtype)


@pytest.mark.parametrize("seq_length, prediction_window", [(1, 1), (3, 3), (3, 2), (2, 5)])
def test_windows_follow_gml_batch(seq_length, prediction_window):
    x = trajectories()
    inputs, targets = trajectory_windows(x, seq_length, prediction_window)
    starts = 9 - seq_length - prediction_window + 1  # GML: input_time_steps - (L - 1) - P
    assert inputs.shape == (3 * starts, seq_length, 2)
    assert targets.shape == (3 * starts, prediction_window, 2)
    for k in range(3):
        for t in range(starts):
            i = k * starts + t  # trajectory-major, then start
            np.testing.assert_array_equal(inputs[i], x[k, t:t + seq_length])
            np.testing.assert_array_equal(
                targets[i], x[k, t + seq_length:t + seq_length + prediction_window])


def test_windows_default_prediction_window_and_single_trajectory():
    x = trajectories(1)
    inputs, targets = trajectory_windows(x[0], 3)
    assert inputs.shape == targets.shape == (4, 3, 2)
    np.testing.assert_array_equal(targets[0], x[0, 3:6])
    pair_inputs, pair_targets = trajectory_windows(x[0], 1, 1)
    np.testing.assert_array_equal(pair_inputs[:, 0], x[0, :-1])
    np.testing.assert_array_equal(pair_targets[:, 0], x[0, 1:])


def test_windows_keep_dtype_and_jit():
    x = trajectories(dtype=jnp.float32)
    inputs, targets = trajectory_windows(x, 2, 1)
    assert inputs.dtype == targets.dtype == jnp.float32
    jitted = jax.jit(trajectory_windows, static_argnums=(1, 2))(x, 2, 1)
    np.testing.assert_array_equal(jitted[0], inputs)
    np.testing.assert_array_equal(jitted[1], targets)
    grad = jax.grad(lambda y: jnp.sum(trajectory_windows(y, 2, 1)[1]))(trajectories())
    assert grad.shape == (3, 9, 2)  # each state counted once per target window it is in
    np.testing.assert_array_equal(grad[:, :2], 0.0)


@pytest.mark.parametrize("args, error, match", [
    ((np.arange(6).reshape(3, 2), 1), TypeError, "`trajectories` must have dtype"),
    (([[0.0, 1.0]], 1), TypeError, "`trajectories` must be a JAX or NumPy array"),
    ((jnp.zeros(5), 1), ValueError, r"`trajectories` must have shape \(n_traj, n_steps, d\)"),
    ((jnp.zeros((5, 2)), 0), ValueError, "`seq_length` must be ≥ 1"),
    ((jnp.zeros((5, 2)), 2.0), TypeError, "`seq_length` must be an int"),
    ((jnp.zeros((5, 2)), 2, 0), ValueError, "`prediction_window` must be ≥ 1"),
    ((jnp.zeros((5, 2)), 3), ValueError, "a trajectory of 5 steps .* needs at least 6 steps"),
])
def test_windows_bad_input(args, error, match):
    with pytest.raises(error, match="trajectory_windows: " + match):
        trajectory_windows(*args)


def samples(n=10):
    x = jnp.arange(n, dtype=jnp.float64)[:, None]
    return x, -x


def indices(n, batch_size, step, seed):
    return np.asarray(batch(*samples(n), batch_size=batch_size, step=step, seed=seed)[0][:, 0],
                      dtype=int)


def test_batch_is_a_pure_function_of_seed_and_step():
    x, y = samples()
    xb, yb = batch(x, y, batch_size=3, step=7, seed=4)
    assert xb.shape == yb.shape == (3, 1)
    np.testing.assert_array_equal(yb, -xb)  # inputs and targets stay paired
    np.testing.assert_array_equal(batch(x, y, batch_size=3, step=7, seed=4)[0], xb)
    assert not np.array_equal(indices(10, 3, 7, 5), indices(10, 3, 7, 4))
    # a resumed run: steps 5… computed afresh equal those of an uninterrupted run
    run = [indices(10, 3, s, 4) for s in range(12)]
    np.testing.assert_array_equal(np.stack([indices(10, 3, s, 4) for s in range(5, 12)]),
                                  np.stack(run[5:]))


def test_batch_epochs_are_permutations():
    n, size = 10, 3
    per_epoch = n // size
    for epoch in range(3):
        seen = np.concatenate([indices(n, size, epoch * per_epoch + j, 0)
                               for j in range(per_epoch)])
        assert len(set(seen)) == per_epoch * size  # no sample twice in an epoch
    orders = [tuple(indices(n, size, e * per_epoch, 0)) for e in range(3)]
    assert len(set(orders)) == 3  # a new permutation each epoch
    everything = np.concatenate([indices(n, size, s, 0) for s in range(20 * per_epoch)])
    assert set(everything) == set(range(n))  # the skipped remainder is reached later


def test_batch_size_larger_than_the_data_is_all_of_it():
    xb, _ = batch(*samples(4), batch_size=10, step=3, seed=0)
    assert sorted(np.asarray(xb[:, 0])) == [0, 1, 2, 3]


def test_batch_under_jit_vmap_and_scan():
    x, y = samples()
    eager = np.stack([indices(10, 4, s, 2) for s in range(6)])
    jitted = jax.jit(lambda s, seed: batch(x, y, batch_size=4, step=s, seed=seed)[0][:, 0])
    np.testing.assert_array_equal(np.stack([jitted(s, 2) for s in range(6)]), eager)
    mapped = jax.vmap(lambda s: batch(x, y, batch_size=4, step=s, seed=2)[0][:, 0])(
        jnp.arange(6))
    np.testing.assert_array_equal(mapped, eager)

    def body(total, s):
        xb, _ = batch(x, y, batch_size=4, step=s, seed=2)
        return total + jnp.sum(xb), xb[:, 0]

    total, scanned = jax.lax.scan(body, 0.0, jnp.arange(6))
    np.testing.assert_array_equal(scanned, eager)
    assert float(total) == eager.sum()
    xb, _ = batch(x.astype(jnp.float32), y, batch_size=4, step=0, seed=0)
    assert xb.dtype == jnp.float32


@pytest.mark.parametrize("kwargs, error, match", [
    ({"targets": jnp.zeros((9, 1))}, ValueError, "`inputs` and `targets` must have the same number of samples"),
    ({"inputs": [1.0, 2.0]}, TypeError, "`inputs` must be a JAX or NumPy array"),
    ({"inputs": jnp.zeros(())}, ValueError, "`inputs` must have a leading sample axis"),
    ({"batch_size": 0}, ValueError, "`batch_size` must be ≥ 1"),
    ({"batch_size": 2.0}, TypeError, "`batch_size` must be an int"),
    ({"step": -1}, ValueError, "`step` must be ≥ 0"),
    ({"step": 1.0}, TypeError, "`step` must be an int or an integer array"),
    ({"step": jnp.arange(2)}, TypeError, "`step` must be an int or an integer array"),
    ({"seed": True}, TypeError, "`seed` must be an int"),
    ({"seed": -3}, ValueError, "`seed` must be ≥ 0"),
])
def test_batch_bad_input(kwargs, error, match):
    x, y = samples()
    arguments = {"inputs": x, "targets": y, "batch_size": 2, "step": 0, "seed": 0} | kwargs
    with pytest.raises(error, match="batch: " + match):
        batch(arguments.pop("inputs"), arguments.pop("targets"), **arguments)


@pytest.mark.parametrize("platform", ["cuda", "tpu"])
def test_lowers_for_accelerators(platform):
    x = jax.ShapeDtypeStruct((2, 9, 4), jnp.float32)
    windows = jax.export.export(jax.jit(lambda t: trajectory_windows(t, 3, 2)),
                                platforms=[platform])(x)
    assert windows.out_avals[0].shape == (10, 3, 4)
    inputs = jax.ShapeDtypeStruct((10, 3, 4), jnp.float32)
    step = jax.ShapeDtypeStruct((), jnp.int32)
    exported = jax.export.export(
        jax.jit(lambda a, b, s: batch(a, b, batch_size=4, step=s, seed=s)),
        platforms=[platform])(inputs, inputs, step)
    assert exported.out_avals[0].shape == (4, 3, 4)


def test_the_rigid_body_windows_are_these():
    """The volume-preserving transformer's data (examples/rigid_body) is this pipeline's windows
    with seq_length = prediction_window = 3."""
    from examples.rigid_body import data as rigid_body

    trajectories = np.random.default_rng(0).normal(size=(4, 11, 3))
    inputs, targets = rigid_body.windows(trajectories, 3, 3)
    ours = trajectory_windows(jnp.asarray(trajectories), 3, 3)
    np.testing.assert_array_equal(np.asarray(ours[0]), inputs)
    np.testing.assert_array_equal(np.asarray(ours[1]), targets)
