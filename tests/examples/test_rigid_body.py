"""The rigid-body example: its data, its models, and its training program on tiny budgets."""
import contextlib
import io
import json
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples import _training
from examples.rigid_body import data, evaluate, models, train
from tests.helpers import assert_same_checkpoint, stopped_copy


@pytest.fixture(scope="module")
def dataset(cache_dir):
    return data.load_dataset(cache_dir)


# -- data ----------------------------------------------------------------------------------------


def test_sizes(dataset):
    assert data.initial_conditions().shape == (1238, 3)
    assert dataset.trajectories.shape == (1238, 61, 3)
    assert dataset.inputs.shape == dataset.targets.shape == (69_328, 3, 3)
    assert dataset.trajectories.dtype == np.float64


def test_norm_is_conserved(dataset):
    norm = np.linalg.norm(dataset.trajectories, axis=-1)
    np.testing.assert_allclose(norm, norm[:, :1] * np.ones_like(norm), rtol=0, atol=1e-10)
    energy = 0.5 * np.sum(dataset.trajectories**2 / np.asarray(dataset.inertia), axis=-1)
    np.testing.assert_allclose(energy, energy[:, :1] * np.ones_like(energy), rtol=0, atol=1e-10)


def test_steps_solve_the_midpoint_equation(dataset):
    z, w = dataset.trajectories[:, :-1], dataset.trajectories[:, 1:]
    with jax.enable_x64(True):
        f = np.asarray(data.euler_vector_field(jnp.asarray((z + w) / 2), dataset.inertia))
    assert np.max(np.abs(w - z - data.STEP * f)) < 1e-12


def test_windows_follow_the_trajectories(dataset):
    traj = dataset.trajectories
    np.testing.assert_array_equal(dataset.inputs[0], traj[0, 0:3])
    np.testing.assert_array_equal(dataset.targets[0], traj[0, 3:6])
    np.testing.assert_array_equal(dataset.inputs[56 + 55], traj[1, 55:58])
    np.testing.assert_array_equal(dataset.targets[-1], traj[-1, 58:61])


def test_cache_is_reused(cache_dir, dataset):
    (path,) = cache_dir.glob("rigid_body_*.npz")
    mtime = path.stat().st_mtime_ns
    np.testing.assert_array_equal(data.load_dataset(cache_dir).trajectories, dataset.trajectories)
    assert path.stat().st_mtime_ns == mtime


def test_code_inertia_is_the_paper_system_with_z1_z2_swapped_and_time_reversed():
    z0 = np.array([[0.3, 0.5, np.sqrt(1 - 0.34)]])
    with jax.enable_x64(True):
        paper = np.asarray(data.implicit_midpoint(jnp.asarray(z0), 5))
        code = np.asarray(data.implicit_midpoint(jnp.asarray(z0[:, [1, 0, 2]]), 5, step=-data.STEP,
                                                 inertia=data.CODE_INERTIA))
    np.testing.assert_allclose(code[..., [1, 0, 2]], paper, atol=1e-12)


# -- models --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, count", [("vpt", 162), ("vpff", 135), ("transformer", 153)])
def test_parameter_counts(name, count):
    params = models.make_model(name).init(np.random.default_rng(0), jnp.float32)
    assert models.parameter_count(params) == count


@pytest.mark.parametrize("name, preserving", [("vpt", True), ("vpff", True), ("transformer", False)])
def test_volume_preservation(name, preserving):
    model = models.make_model(name)
    params = model.init(np.random.default_rng(1), jnp.float64)
    x = jax.random.normal(jax.random.key(2), (3, 3), jnp.float64)
    jacobian = jax.jit(jax.jacrev(lambda v: model.apply(params, v.reshape(3, 3)).ravel()))(x.ravel())
    det = float(jnp.linalg.det(jacobian))
    assert (abs(det - 1) < 1e-10) == preserving, det


def test_models_keep_float32_under_x64():
    for name in models.MODELS:
        model = models.make_model(name)
        params = model.init(np.random.default_rng(0), jnp.float32)
        out = jax.eval_shape(model.apply, params, jax.ShapeDtypeStruct((2, 3, 3), jnp.float32))
        assert out.dtype == jnp.float32 and out.shape == (2, 3, 3)


def test_unknown_model():
    with pytest.raises(ValueError, match="`name` must be one of"):
        models.make_model("rnn")


def test_rollout_of_the_integrator_reproduces_the_reference():
    def integrator(params, x):  # the next 3 implicit-midpoint states after the window
        return data.implicit_midpoint(x[:, -1], 3)[:, 1:]

    ref = evaluate.reference(20)
    out = np.asarray(evaluate.rollout(integrator, None, jnp.asarray(ref[:, :3]), 21))
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12)
    metrics = evaluate.rollout_metrics(out, ref)
    assert metrics["rollout_error"] < 1e-12 and metrics["norm_drift"] < 1e-12


# -- training ------------------------------------------------------------------------------------


def test_batch_order_is_a_function_of_seed_and_step():
    first = [_training.batch_indices(3, s, 10, 4) for s in range(4)]
    again = [_training.batch_indices(3, s, 10, 4) for s in reversed(range(4))][::-1]
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert len(set(np.concatenate(first[:2]))) == 8  # no repeats within an epoch
    assert not np.array_equal(first[0], _training.batch_indices(4, 0, 10, 4))


def _train(log_dir, cache_dir, model, *flags):
    return train.main(["--model", model, "--steps", "6", "--batch-size", "32", "--checkpoint-every", "3",
                       "--log-every", "2", "--no-progress", "--log-dir", str(log_dir),
                       "--cache-dir", str(cache_dir), *flags])


@pytest.fixture(scope="module")
def runs(tmp_path_factory, cache_dir, dataset):
    """One tiny training run of each model, and ``diverged``, a transformer whose learning rate makes
    its loss NaN within the 6 steps: ``{name: (run_dir, summary, printed)}``."""
    root = tmp_path_factory.mktemp("runs")
    out = {}
    for name, model, flags in [*((model, model, []) for model in models.MODELS),
                               ("diverged", "transformer", ["--lr-start", "1e30", "--lr-end", "1e30"])]:
        with contextlib.redirect_stdout(io.StringIO()) as stdout:
            summary = _train(root / name, cache_dir, model, *flags)
        out[name] = (root / name, summary, stdout.getvalue())
    return out


@pytest.mark.parametrize("model", ["vpt", "vpff", "transformer"])
def test_train_smoke(runs, model):
    run, summary, printed = runs[model]
    np.testing.assert_equal(json.loads((run / "summary.json").read_text()), summary)
    assert summary["parameters"] == {"vpt": 162, "vpff": 135, "transformer": 153}[model]
    assert f"{model}: {summary['parameters']} parameters" in printed
    assert np.isfinite(summary["final_loss"]) and summary["steps"] == 6
    assert {"rollout_error", "norm_drift", "train_time_s", "steps_per_s"} <= set(summary)
    assert sorted(p.name for p in run.glob("checkpoint_*.npz")) == ["checkpoint_00000003.npz",
                                                                     "checkpoint_00000006.npz"]
    assert list(run.glob("events.out.tfevents.*")) and list((run / "hparams").glob("events.out.tfevents.*"))


def test_resume_is_bit_identical(runs, tmp_path, cache_dir):
    full = runs["vpt"][0]
    stopped = stopped_copy(full, tmp_path / "vpt", "checkpoint_00000006.npz")  # as if it had died after step 3
    summary = _train(stopped, cache_dir, "vpt", "--resume")
    assert summary["resumed_from"] == 3
    assert_same_checkpoint(full / "checkpoint_00000006.npz", stopped / "checkpoint_00000006.npz")
    assert summary["final_loss"] == runs["vpt"][1]["final_loss"]


def _usage_error(capsys, run, *needles):
    """``run()`` stops with exit status 2, its last line on stderr an error holding every needle."""
    with pytest.raises(SystemExit) as stop:
        run()
    assert stop.value.code == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert "Traceback" not in err and "error:" in last and all(n in last for n in needles), err


def test_resume_refuses_changed_flags_and_fresh_runs_refuse_old_checkpoints(runs, tmp_path, cache_dir, capsys):
    run = tmp_path / "vpff"
    shutil.copytree(runs["vpff"][0], run)
    _usage_error(capsys, lambda: _train(run, cache_dir, "vpff", "--resume", "--lr-start", "0.1"),
                 "lr_start was 0.01, now 0.1")
    _usage_error(capsys, lambda: _train(run, cache_dir, "vpff", "--resume", "--steps", "4"), "steps was 6, now 4")
    _usage_error(capsys, lambda: _train(run, cache_dir, "vpff"), "already holds checkpoints")


def _truncate(path):
    path.write_bytes(path.read_bytes()[:200])


def test_a_corrupt_checkpoint_is_named_and_the_one_before_it_used(runs, tmp_path, cache_dir, capsys):
    full = runs["vpt"][0]
    stopped = tmp_path / "vpt"
    shutil.copytree(full, stopped)
    (stopped / "summary.json").unlink()
    _truncate(stopped / "checkpoint_00000006.npz")
    (stopped / "checkpoint_00000009.npz.tmp.npz").write_bytes(b"half a checkpoint")  # never counts
    with contextlib.redirect_stdout(io.StringIO()):
        summary = _train(stopped, cache_dir, "vpt", "--resume")
    err = capsys.readouterr().err
    assert err == (f"warning: checkpoint {stopped / 'checkpoint_00000006.npz'} is unreadable (truncated or corrupt); "
                   f"using the previous readable checkpoint, {stopped / 'checkpoint_00000003.npz'}\n")
    assert summary["resumed_from"] == 3
    with np.load(full / "checkpoint_00000006.npz") as a, np.load(stopped / "checkpoint_00000006.npz") as b:
        for key in a.files:
            np.testing.assert_array_equal(a[key], b[key])


def test_evaluation_falls_back_too_and_no_readable_checkpoint_stops_with_one_line(runs, tmp_path, cache_dir, capsys):
    run = tmp_path / "vpt"
    shutil.copytree(runs["vpt"][0], run)
    (run / "checkpoint_00000006.npz").write_bytes(b"")
    _, _, params = evaluate.restore_run(run)
    assert f"checkpoint {run / 'checkpoint_00000006.npz'} is unreadable" in capsys.readouterr().err
    with np.load(run / "checkpoint_00000003.npz") as archive:
        np.testing.assert_array_equal(jax.tree_util.tree_leaves(params)[0], archive["params_000"])
    _truncate(run / "checkpoint_00000003.npz")
    _usage_error(capsys, lambda: _train(run, cache_dir, "vpt", "--resume"),
                 f"no readable checkpoint in {run}", "checkpoint_00000003.npz", "checkpoint_00000006.npz")
    _usage_error(capsys, lambda: evaluate.main([str(run), "--out", str(tmp_path / "eval")]),
                 "argument runs: no readable checkpoint")


def test_resume_without_checkpoints_says_so_and_starts_afresh(runs, tmp_path, cache_dir, capsys):
    summary = _train(tmp_path / "new", cache_dir, "vpt", "--resume")
    assert f"--resume: no checkpoint in {tmp_path / 'new'}; starting a new run at step 0" in capsys.readouterr().err
    assert summary["resumed_from"] == 0 and summary["final_loss"] == runs["vpt"][1]["final_loss"]


def test_resume_with_more_steps_extends_a_finished_run(runs, tmp_path, cache_dir, capsys):
    run = tmp_path / "transformer"
    shutil.copytree(runs["transformer"][0], run)
    summary = _train(run, cache_dir, "transformer", "--resume", "--steps", "9")
    assert "extending" in capsys.readouterr().out
    assert summary["resumed_from"] == 6 and summary["steps"] == 9 and np.isfinite(summary["final_loss"])
    assert (run / "checkpoint_00000009.npz").exists()
    assert json.loads((run / "config.json").read_text())["steps"] == 9


def test_learning_rate_decays_from_start_to_end():
    _, schedule = train.make_optimizer(1e-2, 1e-6, 100)
    np.testing.assert_allclose([schedule(0), schedule(50), schedule(100)], [1e-2, 1e-4, 1e-6], rtol=1e-5)


def test_evaluate_writes_plots_and_summary(runs, tmp_path, capsys):
    out = tmp_path / "eval"
    summary = evaluate.main([str(runs["vpt"][0]), str(runs["diverged"][0]), "--out", str(out)])
    assert set(summary["models"]) == {"vpt", "transformer"}
    vpt = summary["models"]["vpt"]
    assert vpt["parameters"] == 162
    np.testing.assert_equal(vpt["rollout_error"], runs["vpt"][1]["rollout_error"])
    for name in ("trajectories", "norm", "error", "overview"):
        assert (out / f"{name}.png").stat().st_size > 1000
    assert _strict_json(out / "summary.json") == summary and summary["n_steps"] == 500
    diverged = summary["models"]["transformer"]
    assert diverged["diverged"] is True and diverged["diverged_at"] == runs["diverged"][1]["diverged_at"]
    table = capsys.readouterr().out.splitlines()
    assert "rollout err" in table[0] and table[0].endswith("diverged")
    assert table[2].startswith("transformer") and table[2].endswith(f"step {diverged['diverged_at']['step']}")
    assert "n/a" in table[2] and "nan" not in table[2]


def test_data_parallel_over_two_devices_matches_one(runs, tmp_path, cache_dir):
    """``--devices 2`` (the suite runs with two CPU devices) trains to the single-device result."""
    import jax

    assert len(jax.devices()) >= 2
    with contextlib.redirect_stdout(io.StringIO()):
        summary = _train(tmp_path / "vpt2", cache_dir, "vpt", "--devices", "2")
    np.testing.assert_allclose(summary["final_loss"], runs["vpt"][1]["final_loss"], rtol=1e-5)
    with pytest.raises(ValueError, match=r"--batch-size \(31\) must be divisible by --devices \(2\)"):
        train.data_parallel(2, 31)
    with pytest.raises(ValueError, match="--devices must be between 1 and"):
        train.data_parallel(len(jax.devices()) + 1, 32)


def _strict_json(path):
    def reject(constant):
        raise AssertionError(f"{path} holds {constant}, which is not JSON")

    return json.loads(path.read_text(), parse_constant=reject)


def test_a_diverged_training_is_reported_in_strict_json(runs):
    run, summary, printed = runs["diverged"]
    stored = _strict_json(run / "summary.json")
    assert stored == summary
    assert stored["diverged"] is True and stored["diverged_at"]["where"] == "training"
    assert 1 <= stored["diverged_at"]["step"] <= 6
    assert stored["final_loss"] is None and stored["rollout_error"] is None
    assert f"transformer: training diverged at step {stored['diverged_at']['step']}" in printed


def test_a_diverging_rollout_is_located_and_marked_on_every_figure():
    ref = evaluate.reference(20)
    exploding = ref.copy()
    exploding[1, 10:] *= 100  # leaves ‖z‖ ≤ 10 at step 10 from the second IC
    at = evaluate.rollout_divergence(exploding)
    assert at == {"where": "rollout", "t": 2.0, "rollout_step": 10, "initial_condition": "(0, sin 1.1, cos 1.1)"}
    assert evaluate.rollout_divergence(ref) is None
    assert "t = 2" in evaluate.describe_divergence(at)

    broken = np.where(np.arange(21)[:, None] < data.N_IN, ref, np.nan)  # NaN parameters predict NaN
    figures = evaluate.figures({"good": ref * 1.001, "bad": exploding, "broken": broken}, ref, data.STEP,
                               {"broken": {"where": "training", "step": 2}})
    try:
        for name, fig in figures.items():
            # The figure's legend holds for every panel: a training divergence, not a rollout's.
            labels = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
            assert {"good", "bad", "broken (training diverged at step 2)"} <= set(labels), (name, labels)
            assert fig.get_suptitle()
        # Each panel names the divergences from its own initial condition: "bad" only from the second.
        first_ic = "broken diverged at t = 0.6"
        expected = {"trajectories": [[first_ic], ["bad diverged at t = 2", first_ic]],
                    "norm": [[first_ic], ["bad diverged at t = 2", first_ic]],
                    "error": [[first_ic], ["bad diverged at t = 2", first_ic]],
                    "overview": [[first_ic]] * 3}  # three panels of the first initial condition
        for name, panels in expected.items():
            shown = [sorted(t.get_text() for t in ax.get_legend().get_texts()) for ax in figures[name].axes]
            assert shown == panels, (name, shown)
        for name in ("norm", "error"):
            first, second = figures[name].axes
            dotted = [[line.get_xdata()[0] for line in ax.lines if line.get_linestyle() == ":"] for ax in (first, second)]
            assert dotted == [[pytest.approx(0.6)], [pytest.approx(2.0), pytest.approx(0.6)]], dotted
    finally:
        import matplotlib.pyplot as plt

        for fig in figures.values():
            plt.close(fig)


def test_a_panel_without_divergences_has_no_divergence_legend():
    """The demo's case: the transformer diverges from the first initial condition only."""
    ref = evaluate.reference(20)
    exploding = ref.copy()
    exploding[0, 10:] *= 100
    figures = evaluate.figures({"vpt": ref * 1.001, "transformer": exploding}, ref, data.STEP)
    try:
        for name in ("trajectories", "norm", "error"):
            first, second = figures[name].axes
            assert [t.get_text() for t in first.get_legend().get_texts()] == ["transformer diverged at t = 2"]
            assert second.get_legend() is None, name
            labels = [t.get_text() for legend in figures[name].legends for t in legend.get_texts()]
            assert not any("diverged" in label for label in labels), (name, labels)
    finally:
        import matplotlib.pyplot as plt

        for fig in figures.values():
            plt.close(fig)


def test_a_diverged_model_has_no_rollout_metrics_to_print():
    """A rollout stopped soon after ``‖z‖ > 10`` still has finite errors: they measure the blow-up, not the model."""
    finite = {"rollout_error": 1.141, "final_error": 6.731, "norm_drift": 11.01, "final_loss": 0.0141,
              "steps_per_s": 765.0}
    diverged = finite | {"diverged_at": {"where": "rollout", "t": 34.0, "rollout_step": 170,
                                         "initial_condition": evaluate.INITIAL_CONDITIONS[0]}}
    _, fine, row = evaluate.format_table({"vpt": finite | {"diverged_at": None}, "transformer": diverged}).splitlines()
    assert row.split() == ["transformer", "-", "-", "1.410e-02", "n/a", "n/a", "n/a", "-", "765", "t", "=", "34"], row
    assert fine.split()[4:7] == ["1.141e+00", "6.731e+00", "1.101e+01"], fine
    assert evaluate.format_metric(diverged, "final_loss", ".3e") == "1.410e-02"  # training went fine


def test_the_demo_says_each_thing_once(tmp_path, cache_dir, dataset, monkeypatch, capsys):
    """Every model diverges (the learning rate of the ``diverged`` run): one line on each, one on the plots."""
    from examples.rigid_body import demo

    make_optimizer = train.make_optimizer
    monkeypatch.setattr(train, "make_optimizer", lambda start, end, steps: make_optimizer(1e30, 1e30, steps))
    # The figures are drawn elsewhere (test_evaluate_writes_plots_and_summary); here only their names count.
    monkeypatch.setattr(evaluate, "plot", lambda rollouts, ref, step, out, diverged_at=None:
                        [out / f"{name}.png" for name in ("trajectories", "norm", "error", "overview")])
    demo.main(["--steps", "6", "--batch-size", "32", "--out", str(tmp_path), "--cache-dir", str(cache_dir),
               "--no-progress"])
    printed = capsys.readouterr().out.splitlines()
    for name in models.MODELS:
        assert sum(f"{name}: training diverged at step" in line for line in printed) == 1, printed
    assert sum(line.startswith("plots:") for line in printed) == 1, printed
