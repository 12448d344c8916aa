"""The SympNet example: its integrators, its models, and its programs on tiny budgets."""
import contextlib
import io
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples.sympnet import data, demo, evaluate, models, train
from tests.helpers import assert_same_checkpoint, stopped_copy

PNG = b"\x89PNG\r\n\x1a\n"
SYSTEMS = sorted(data.SYSTEMS)


def _omega(n):
    return np.block([[np.zeros((n, n)), np.eye(n)], [-np.eye(n), np.zeros((n, n))]])


def _symplecticity_defect(f, z0):
    """``‖Jᵀ Ω J − Ω‖ / ‖J‖²`` of the Jacobian ``J`` of ``f`` at ``z0`` (float64)."""
    jacobian = np.asarray(jax.jacfwd(f)(z0))
    omega = _omega(len(z0) // 2)
    return np.max(np.abs(jacobian.T @ omega @ jacobian - omega)) / np.max(np.abs(jacobian)) ** 2


# -- data ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SYSTEMS)
def test_the_integrators_are_symplectic(name):
    system = data.SYSTEMS[name]
    basic = data.stormer_verlet_step if system.separable else data.implicit_midpoint_step
    step = data.yoshida6(lambda z, h: basic(system.hamiltonian, z, h))
    with jax.enable_x64(True):
        z0 = jnp.asarray(system.z0, jnp.float64) + 0.1
        assert _symplecticity_defect(lambda z: step(z, 0.3), z0) < 1e-12
        if system.separable:  # the implicit midpoint rule is symplectic too
            midpoint = data.yoshida6(lambda z, h: data.implicit_midpoint_step(system.hamiltonian, z, h))
            assert _symplecticity_defect(lambda z: midpoint(z, 0.3), z0) < 1e-12


@pytest.mark.parametrize("name", SYSTEMS)
def test_the_integrators_have_order_six(name):
    system = data.SYSTEMS[name]
    exact = data.flow(system, np.asarray(system.z0), 1, step=0.4, substeps=64)[-1]
    errors = [np.max(np.abs(data.flow(system, np.asarray(system.z0), 1, step=0.4, substeps=k)[-1] - exact))
              for k in (2, 4)]
    assert 2**6 / 2 < errors[0] / errors[1] < 2**6 * 2, errors


@pytest.mark.parametrize("name, tolerance", [("pendulum", 1e-13), ("double_pendulum", 1e-9)])
def test_the_data_conserve_energy(name, tolerance):
    system = data.SYSTEMS[name]
    energy = system.energy(data.load_dataset(system).trajectory)
    assert np.max(np.abs(energy - energy[0])) < tolerance


def test_the_paper_set_up():
    pendulum = data.load_dataset(data.SYSTEMS["pendulum"])
    assert pendulum.train_inputs.shape == (40, 2) and pendulum.test_inputs.shape == (100, 2)
    np.testing.assert_array_equal(pendulum.train_inputs[0], [1.0, 0.0])
    np.testing.assert_array_equal(pendulum.train_targets[:-1], pendulum.train_inputs[1:])
    np.testing.assert_array_equal(pendulum.test_inputs[0], pendulum.train_targets[-1])
    double = data.load_dataset(data.SYSTEMS["double_pendulum"])
    assert double.train_inputs.shape == (200, 4) and double.test_targets.shape == (100, 4)
    assert pendulum.trajectory.dtype == np.float64


# -- models --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SYSTEMS)
def test_the_mlp_has_the_g_sympnets_size(name):
    system = data.SYSTEMS[name]
    counts = {m: models.parameter_count(models.make_model(m, name, system.dim).init(jax.random.key(0), jnp.float32))
              for m in models.MODELS}
    assert abs(counts["mlp"] - counts["g"]) / counts["g"] < 0.05, counts


@pytest.mark.parametrize("name", ["la", "g", "mlp"])
def test_sympnets_are_symplectic_and_the_mlp_is_not(name):
    model = models.make_model(name, "double_pendulum", 4)
    with jax.enable_x64(True):
        params = model.init(jax.random.key(1), jnp.float64)
        # Parameters far from the initialisation's near-identity map.
        params = jax.tree_util.tree_map(lambda x: x + 0.5 * jax.random.normal(jax.random.key(2), x.shape, x.dtype),
                                        params)
        defect = _symplecticity_defect(lambda z: model.apply(params, z), jnp.asarray([0.3, -0.2, 0.5, 0.1]))
    assert (defect < 1e-12) == (name != "mlp"), defect


def test_unknown_model():
    with pytest.raises(ValueError, match="`name` must be one of"):
        models.make_model("hnn", "pendulum", 2)


# -- programs ------------------------------------------------------------------------------------


def _train(log_dir, model, *flags, system="pendulum"):
    with contextlib.redirect_stdout(io.StringIO()):
        return train.main(["--system", system, "--model", model, "--steps", "6", "--checkpoint-every", "3",
                           "--log-every", "2", "--rollout-steps", "50", "--no-progress", "--log-dir", str(log_dir),
                           *flags])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("sympnet")
    return {model: (root / model, _train(root / model, model)) for model in models.MODELS}


@pytest.mark.parametrize("model", models.MODELS)
def test_train_smoke(runs, model):
    run, summary = runs[model]
    assert json.loads((run / "summary.json").read_text()) == summary
    assert summary["steps"] == 6 and np.isfinite(summary["final_loss"]) and summary["rollout_steps"] == 50
    assert {"train_mse", "test_mse", "test_rollout_error", "energy_error_max", "energy_error_last"} <= set(summary)
    assert sorted(p.name for p in run.glob("checkpoint_*.npz")) == ["checkpoint_00000003.npz",
                                                                     "checkpoint_00000006.npz"]
    assert list(run.glob("events.out.tfevents.*"))


def test_resume_is_bit_identical(runs, tmp_path):
    full = runs["la"][0]
    stopped = stopped_copy(full, tmp_path / "la", "checkpoint_00000006.npz")
    summary = _train(stopped, "la", "--resume")
    assert summary["resumed_from"] == 3 and summary["final_loss"] == runs["la"][1]["final_loss"]
    assert_same_checkpoint(full / "checkpoint_00000006.npz", stopped / "checkpoint_00000006.npz")


def test_a_minibatch_run_resumes_exactly_too(tmp_path):
    first = _train(tmp_path / "a", "g", "--batch-size", "16", "--system", "pendulum")
    stopped = stopped_copy(tmp_path / "a", tmp_path / "b", "checkpoint_00000006.npz")
    assert _train(stopped, "g", "--batch-size", "16", "--resume")["final_loss"] == first["final_loss"]


def test_evaluate_writes_plots_and_summary(runs, tmp_path):
    out = tmp_path / "eval"
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        summary = evaluate.main([str(runs[m][0]) for m in models.MODELS] + ["--out", str(out),
                                                                              "--rollout-steps", "50"])
    assert set(summary["models"]) == set(models.MODELS) and summary["system"] == "pendulum"
    for name in ("phase", "energy", "test"):
        assert (out / f"{name}.png").read_bytes()[:8] == PNG
    assert json.loads((out / "summary.json").read_text()) == summary
    np.testing.assert_equal(summary["models"]["la"]["test_mse"], runs["la"][1]["test_mse"])
    assert "|ΔH| max" in printed.getvalue().splitlines()[0]


def test_the_demo_trains_and_evaluates_every_model(tmp_path, monkeypatch):
    monkeypatch.setitem(evaluate.ROLLOUT_STEPS, "pendulum", 50)
    with contextlib.redirect_stdout(io.StringIO()):
        summaries = demo.main(["--systems", "pendulum", "--steps", "3", "--out", str(tmp_path), "--no-progress"])
    assert list(summaries) == ["pendulum"] and set(summaries["pendulum"]["models"]) == set(models.MODELS)
    (run,) = tmp_path.iterdir()
    assert (run / "pendulum" / "eval" / "energy.png").read_bytes()[:8] == PNG


def test_paper_sets_the_budget_and_explicit_flags_win():
    parser = train.build_parser()
    args = train.parse_args(parser, ["--paper"])
    assert (args.steps, args.lr_start, args.lr_end) == (50_000, 1e-3, 1e-3)
    args = train.parse_args(train.build_parser(), ["--paper", "--steps", "7"])
    assert args.steps == 7 and args.lr_start == 1e-3


@pytest.mark.parametrize("program, argv", [
    (train, ["--system", "kepler"]), (train, ["--model", "hnn"]), (train, ["--steps", "0"]),
    (train, ["--rollout-steps", "-1"]), (train, ["--activation", "relu"]), (train, ["--lr-start", "nan"]),
    (evaluate, ["DIR"]), (evaluate, ["RUN", "--rollout-steps", "0"]), (demo, ["--systems", "kepler"]),
    (demo, ["--steps", "0"]),
])
def test_a_bad_flag_is_one_line_and_exit_2(program, argv, tmp_path, capsys):
    (tmp_path / "RUN").mkdir()
    (tmp_path / "RUN" / "config.json").write_text("{}")
    argv = [str(tmp_path / a) if a in ("DIR", "RUN") else a for a in argv]
    argv = [str(tmp_path) if a == str(tmp_path / "DIR") else a for a in argv]
    with pytest.raises(SystemExit) as stop:
        program.main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and "error:" in err, err
