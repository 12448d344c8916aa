"""The symplectic-transformer example: its data, its models, and its programs on tiny budgets."""
import contextlib
import io
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples.symplectic_transformer import data, demo, evaluate, models, train
from tests.helpers import assert_same_checkpoint, stopped_copy

PNG = b"\x89PNG\r\n\x1a\n"


def test_windows_follow_the_trajectories():
    dataset = data.load_dataset()
    per_trajectory = data.N_STEPS + 1 - 2 * data.SEQ_LENGTH + 1
    assert dataset.trajectories.shape == (data.N_TRAJECTORIES, data.N_STEPS + 1, 4)
    assert dataset.inputs.shape == dataset.targets.shape == (data.N_TRAJECTORIES * per_trajectory, 3, 4)
    np.testing.assert_array_equal(dataset.inputs[1], dataset.trajectories[0, 1:4])
    np.testing.assert_array_equal(dataset.targets[1], dataset.trajectories[0, 4:7])
    np.testing.assert_array_equal(dataset.targets[-1], dataset.trajectories[-1, -3:])


def test_the_data_are_accurate_and_conserve_energy():
    dataset = data.load_dataset()
    energy = data.SYSTEM.energy(dataset.trajectories)
    assert np.max(np.abs(energy - energy[:, :1])) < 1e-6
    finer = data.systems.flow(data.SYSTEM, data.initial_states()[:4], data.N_STEPS, step=data.STEP, substeps=16)
    assert np.max(np.abs(finer - dataset.trajectories[:4])) < 1e-5


def test_the_validation_states_are_not_training_states():
    assert not (np.abs(data.initial_states()[:, None] - data.VALIDATION[None]).max(axis=-1) < 1e-3).any()


def _transformer_flat(model, params, seq_length):
    return lambda v: model.apply(params, v.reshape(seq_length, 4)).ravel()


@pytest.mark.parametrize("name", models.MODELS)
def test_structure(name):
    """The LST is symplectic on the window's phase space, the VPT preserves volume, the transformer neither."""
    model = models.make_model(name)
    with jax.enable_x64(True):
        params = model.init(1, jnp.float64)
        params = jax.tree_util.tree_map(lambda x: x + 0.3 * jax.random.normal(jax.random.key(2), x.shape, x.dtype),
                                        params)
        x = jax.random.normal(jax.random.key(3), (data.SEQ_LENGTH * 4,), jnp.float64)
        jacobian = np.asarray(jax.jacfwd(_transformer_flat(model, params, data.SEQ_LENGTH))(x))
    # The window's phase space: (q, p) of every time step; the permutation puts all q first.
    t = data.SEQ_LENGTH
    order = np.concatenate([np.arange(t)[:, None] * 4 + np.arange(2), np.arange(t)[:, None] * 4 + 2 + np.arange(2)])
    order = np.concatenate([order[:t].ravel(), order[t:].ravel()])
    j = jacobian[np.ix_(order, order)]
    n = 2 * t
    omega = np.block([[np.zeros((n, n)), np.eye(n)], [-np.eye(n), np.zeros((n, n))]])
    symplectic = np.max(np.abs(j.T @ omega @ j - omega)) / np.max(np.abs(j)) ** 2 < 1e-12
    volume = abs(np.linalg.det(jacobian) - 1) < 1e-9
    assert (symplectic, volume) == {"lst": (True, True), "vpt": (False, True), "transformer": (False, False)}[name]


def test_unknown_model():
    with pytest.raises(ValueError, match="`name` must be one of"):
        models.make_model("rnn")


def _train(log_dir, model, *flags):
    with contextlib.redirect_stdout(io.StringIO()):
        return train.main(["--model", model, "--steps", "4", "--batch-size", "16", "--checkpoint-every", "2",
                           "--log-every", "2", "--no-progress", "--log-dir", str(log_dir), *flags])


@pytest.fixture(scope="module")
def runs(tmp_path_factory, monkeypatch_module):
    monkeypatch_module.setattr(evaluate, "N_STEPS", 30)
    root = tmp_path_factory.mktemp("symplectic_transformer")
    return {model: (root / model, _train(root / model, model)) for model in models.MODELS}


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.mark.parametrize("model", models.MODELS)
def test_train_smoke(runs, model):
    run, summary = runs[model]
    assert json.loads((run / "summary.json").read_text()) == summary
    assert summary["steps"] == 4 and np.isfinite(summary["final_loss"])
    assert {"rollout_error", "energy_error_max", "energy_error_last", "parameters"} <= set(summary)
    assert sorted(p.name for p in run.glob("checkpoint_*.npz")) == ["checkpoint_00000002.npz",
                                                                     "checkpoint_00000004.npz"]
    assert list(run.glob("events.out.tfevents.*"))


def test_resume_is_bit_identical(runs, tmp_path):
    full = runs["lst"][0]
    stopped = stopped_copy(full, tmp_path / "lst", "checkpoint_00000004.npz")
    summary = _train(stopped, "lst", "--resume")
    assert summary["resumed_from"] == 2 and summary["final_loss"] == runs["lst"][1]["final_loss"]
    assert_same_checkpoint(full / "checkpoint_00000004.npz", stopped / "checkpoint_00000004.npz")


def test_evaluate_writes_plots_and_summary(runs, tmp_path):
    out = tmp_path / "eval"
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        summary = evaluate.main([str(runs[m][0]) for m in models.MODELS] + ["--out", str(out), "--n-steps", "30"])
    assert set(summary["models"]) == set(models.MODELS) and summary["n_steps"] == 30
    for name in ("energy", "error", "phase"):
        assert (out / f"{name}.png").read_bytes()[:8] == PNG
    assert json.loads((out / "summary.json").read_text()) == summary
    assert "|ΔH| max" in printed.getvalue().splitlines()[0]


def test_the_demo_trains_and_evaluates_every_model(tmp_path, monkeypatch):
    monkeypatch.setattr(evaluate, "N_STEPS", 30)
    with contextlib.redirect_stdout(io.StringIO()):
        summary = demo.main(["--steps", "2", "--batch-size", "16", "--out", str(tmp_path), "--no-progress"])
    assert set(summary["models"]) == set(models.MODELS)
    (run,) = tmp_path.iterdir()
    assert (run / "eval" / "energy.png").read_bytes()[:8] == PNG


def test_paper_sets_the_budget_and_explicit_flags_win():
    args = train.parse_args(train.build_parser(), ["--paper"])
    assert (args.steps, args.batch_size) == (train.PAPER_STEPS, 2048)
    assert train.parse_args(train.build_parser(), ["--paper", "--steps", "5"]).steps == 5


@pytest.mark.parametrize("program, argv", [
    (train, ["--model", "rnn"]), (train, ["--steps", "0"]), (train, ["--batch-size", "-1"]),
    (train, ["--lr-end", "0"]), (evaluate, ["DIR"]), (evaluate, ["RUN", "--n-steps", "2"]),
    (demo, ["--steps", "0"]), (demo, ["--seed", "-1"]),
])
def test_a_bad_flag_is_one_line_and_exit_2(program, argv, tmp_path, capsys):
    (tmp_path / "RUN").mkdir()
    (tmp_path / "RUN" / "config.json").write_text("{}")
    argv = [str(tmp_path / "RUN") if a == "RUN" else str(tmp_path) if a == "DIR" else a for a in argv]
    with pytest.raises(SystemExit) as stop:
        program.main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and "error:" in err, err
