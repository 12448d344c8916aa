"""The symplectic-autoencoder example: its full-order model, PSD, the reduced models, and its programs at tiny sizes."""
import contextlib
import io
import json
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geometric.nn as gnn
from examples.symplectic_autoencoder import data, evaluate, train

N = 24  # grid points of the tiny runs: 2N = 48
TINY = ["--grid-points", str(N), "--time-steps", "20", "--train-params", "3", "--test-mu", "0.5",
        "--reduced-dims", "2", "4", "--steps", "6", "--batch-size", "16", "--checkpoint-every", "3",
        "--log-every", "2", "--encoder-blocks", "2", "--encoder-layers", "1", "--decoder-blocks", "2",
        "--decoder-layers", "1", "--sympnet-upscale", "2", "--no-progress"]


@pytest.fixture(scope="module")
def solutions():
    return data.solve(data.training_parameters(4), 32, 40)


# -- the full-order model ------------------------------------------------------------------------


def test_the_integrator_conserves_the_discrete_energy(solutions):
    energy = data.hamiltonian(solutions.states, solutions.mus[:, None])
    drift = np.abs(energy - energy[:, :1]) / energy[:, :1]
    assert drift.max() < 1e-12, drift.max()


def test_each_step_solves_the_implicit_midpoint_equation(solutions):
    h = solutions.times[1]
    for mu, states in zip(solutions.mus, solutions.states):
        a = data.vector_field_matrix(mu, 32)
        z, w = states[:-1], states[1:]
        residual = w - z - h * (z + w) / 2 @ a.T
        assert np.max(np.abs(residual)) < 1e-11 * np.max(np.abs(states))


def test_the_hamiltonian_is_the_quadratic_form_of_the_vector_field():
    mu, n = 0.6, 10
    z = np.random.default_rng(0).normal(size=(3, 2 * n))
    hessian = np.block([[data.stiffness(mu, n), np.zeros((n, n))], [np.zeros((n, n)), np.eye(n)]])
    np.testing.assert_allclose(data.hamiltonian(z, mu), 0.5 * np.einsum("bi,ij,bj->b", z, hessian, z), rtol=1e-13)
    omega = np.block([[np.zeros((n, n)), np.eye(n)], [-np.eye(n), np.zeros((n, n))]])
    np.testing.assert_array_equal(data.vector_field_matrix(mu, n), omega @ hessian)
    m = data.propagator(mu, n, 0.01)
    np.testing.assert_allclose(m.T @ omega @ m, omega, atol=1e-12)  # a symplectic step


def test_the_bump_travels_right_with_speed_mu():
    mu, n = 0.5, 256
    solution = data.solve([mu], n, 200, t_end=0.5)
    q = solution.states[0, -1, :n]
    exact, _ = data.spline(20 * mu * np.abs(data.grid(n) - mu * 0.5 + mu / 2))
    assert np.max(np.abs(q - exact)) < 0.05  # the discretisation error of a C² bump


# -- PSD and the reduced models ------------------------------------------------------------------


@pytest.mark.parametrize("reduced_dim", [2, 6])
def test_psd_reconstruction_error_is_the_tail_of_the_singular_values(solutions, reduced_dim):
    z = solutions.states.reshape(-1, solutions.states.shape[-1])
    sigma = evaluate.psd_singular_values(z)
    with jax.enable_x64(True):
        phi = gnn.cotangent_lift(jnp.asarray(z), reduced_dim)
        reconstructed = np.asarray(gnn.psd_decode(gnn.psd_encode(jnp.asarray(z), phi), phi))
    squared = np.sum((z - reconstructed) ** 2)
    np.testing.assert_allclose(squared, np.sum(sigma[reduced_dim // 2:] ** 2), rtol=1e-8)
    # and the curve evaluate draws for PSD says the same
    np.testing.assert_allclose(np.sqrt(squared / np.sum(z**2)), np.sqrt(np.sum(sigma[reduced_dim // 2:] ** 2)
                                                                         / np.sum(sigma**2)), rtol=1e-8)


def test_psd_reduced_model_is_the_galerkin_projected_linear_system(solutions):
    n, k, mu = 32, 2, float(solutions.mus[1])
    z = solutions.states.reshape(-1, 2 * n)
    step, n_steps = float(solutions.times[1]), 10
    with jax.enable_x64(True):
        phi = jnp.asarray(gnn.cotangent_lift(jnp.asarray(z), 2 * k))
        decoded, energy = evaluate.reduced_rollout(evaluate._psd_encode, evaluate._psd_decode, phi,
                                                   jnp.asarray(solutions.states[1, 0]), jnp.asarray(mu), step,
                                                   n_steps)
    phi = np.asarray(phi)
    hessian = np.block([[data.stiffness(mu, n), np.zeros((n, n))], [np.zeros((n, n)), np.eye(n)]])
    omega = np.block([[np.zeros((k, k)), np.eye(k)], [-np.eye(k), np.zeros((k, k))]])
    reduced = omega @ phi.T @ hessian @ phi  # ξ' = J φᵀ ∇H(φξ)
    eye = np.eye(2 * k)
    cayley = np.linalg.solve(eye - step / 2 * reduced, eye + step / 2 * reduced)
    xi = phi.T @ solutions.states[1, 0]  # the symplectic inverse of blockdiag(V, V) is its transpose
    expected = [phi @ np.linalg.matrix_power(cayley, j) @ xi for j in range(n_steps + 1)]
    np.testing.assert_allclose(np.asarray(decoded), np.array(expected), atol=1e-11)
    np.testing.assert_allclose(np.asarray(energy), float(energy[0]) * np.ones(n_steps + 1), rtol=1e-12)


def test_implicit_midpoint_is_symplectic_and_second_order():
    # the pendulum ξ' = (p, −sin q): the step map's Jacobian is symplectic
    def f(xi):
        return jnp.stack([xi[1], -jnp.sin(xi[0])])

    with jax.enable_x64(True):
        def step_map(xi):
            return evaluate.implicit_midpoint(f, xi, 0.1, 1)[1]

        xi0 = jnp.array([1.0, 0.3])
        jac = jax.jacfwd(step_map)(xi0)
        omega = jnp.array([[0.0, 1.0], [-1.0, 0.0]])
        np.testing.assert_allclose(jac.T @ omega @ jac, omega, atol=1e-10)
        coarse = evaluate.implicit_midpoint(f, xi0, 0.1, 10)[-1]
        fine = evaluate.implicit_midpoint(f, xi0, 0.05, 20)[-1]
        finest = evaluate.implicit_midpoint(f, xi0, 0.025, 40)[-1]
        ratio = float(jnp.linalg.norm(coarse - fine) / jnp.linalg.norm(fine - finest))
    assert 3.5 < ratio < 4.5, ratio


# -- the programs --------------------------------------------------------------------------------


def _train(log_dir, *flags):
    with contextlib.redirect_stdout(io.StringIO()) as stdout:
        summary = train.main([*TINY, "--log-dir", str(log_dir), *flags])
    return summary, stdout.getvalue()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("sae") / "run"
    summary, printed = _train(log_dir)
    return log_dir, summary, printed


def test_train_writes_summary_table_plots_and_checkpoints(run):
    log_dir, summary, printed = run
    assert json.loads((log_dir / "summary.json").read_text()) == summary
    assert sorted(summary["dims"]) == ["2", "4"] and summary["test_mu"] == [0.5]
    for dim in ("2", "4"):
        for method in ("psd", "sae"):
            metrics = summary["dims"][dim][method]
            assert set(metrics) == {"reconstruction_train", "reconstruction_test", "prediction", "prediction_final",
                                    "energy_drift"}
            assert all(np.isfinite(v) for v in metrics.values()), metrics
        assert summary["dims"][dim]["psd"]["energy_drift"] < 1e-10  # a quadratic reduced Hamiltonian
        training = summary["training"][dim]
        assert training["steps"] == 6 and training["reduced_dim"] == int(dim) and np.isfinite(training["final_loss"])
        sub = log_dir / f"sae_{dim}"
        assert sorted(p.name for p in sub.glob("checkpoint_*.npz")) == ["checkpoint_00000003.npz",
                                                                        "checkpoint_00000006.npz"]
        assert list(sub.glob("events.out.tfevents.*"))
    for name in ("errors.png", "snapshots.png", "results.md"):
        assert (log_dir / name).stat().st_size > 0
    assert "| 4 | SAE |" in (log_dir / "results.md").read_text()
    assert "2n = 2:" in printed and "| 2 | PSD |" in printed
    curve = summary["psd_curve"]
    assert curve["reduced_dim"][:3] == [2, 4, 6]
    assert curve["reconstruction_train"][0] == pytest.approx(summary["dims"]["2"]["psd"]["reconstruction_train"],
                                                             rel=1e-8)


def test_resume_is_bit_identical(run, tmp_path):
    full, summary, _ = run
    stopped = tmp_path / "run"
    shutil.copytree(full, stopped)
    for dim in (2, 4):  # as if the run had died after step 3 of both autoencoders
        (stopped / f"sae_{dim}" / "checkpoint_00000006.npz").unlink()
        (stopped / f"sae_{dim}" / "summary.json").unlink()
    (stopped / "summary.json").unlink()
    resumed, _ = _train(stopped, "--resume")
    for dim in (2, 4):
        with np.load(full / f"sae_{dim}/checkpoint_00000006.npz") as a, \
                np.load(stopped / f"sae_{dim}/checkpoint_00000006.npz") as b:
            assert a.files == b.files
            for key in a.files:
                np.testing.assert_array_equal(a[key], b[key])
        assert resumed["training"][str(dim)]["resumed_from"] == 3
        assert resumed["training"][str(dim)]["final_loss"] == summary["training"][str(dim)]["final_loss"]
    assert resumed["dims"] == summary["dims"]
    again, printed = _train(stopped, "--resume")  # a finished run is read back, not trained again
    assert "already trained" in printed and again["dims"] == summary["dims"]


def test_evaluate_reproduces_the_training_summary(run, tmp_path):
    log_dir, summary, _ = run
    with contextlib.redirect_stdout(io.StringIO()):
        again = evaluate.main([str(log_dir), "--out", str(tmp_path / "eval")])
    assert again["dims"] == summary["dims"]
    assert (tmp_path / "eval" / "errors.png").exists()


def _usage_error(capsys, call, *needles):
    with pytest.raises(SystemExit) as stop:
        call()
    assert stop.value.code == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert "Traceback" not in err and "error:" in last and all(n in last for n in needles), err


@pytest.mark.parametrize("flags, needle", [
    (["--reduced-dims", "3"], "--reduced-dims"), (["--reduced-dims", "0"], "--reduced-dims"),
    (["--reduced-dims", "2", "2"], "--reduced-dims"), (["--reduced-dims", "100"], "--reduced-dims"),
    (["--grid-points", "1"], "--grid-points"), (["--time-steps", "0"], "--time-steps"),
    (["--t-end", "-1"], "--t-end"), (["--train-params", "0"], "--train-params"),
    (["--test-mu", "0"], "--test-mu"), (["--test-mu", str(5 / 12)], "--test-mu"),
    (["--steps", "0"], "--steps"), (["--lr-start", "nan"], "--lr-start"), (["--encoder-blocks", "1"], "--encoder-blocks"),
    (["--decoder-blocks", "30"], "--decoder-blocks"), (["--reduced-dims", "48"], "--reduced-dims"),
    (["--dtype", "float16"], "--dtype"), (["--log-dir", "FILE/run"], "--log-dir"), (["--stpes", "5"], "--stpes"),
])
def test_flag_errors_are_one_line_and_exit_2(capsys, tmp_path, flags, needle):
    (tmp_path / "FILE").write_text("")
    flags = [str(tmp_path / f) if f.startswith("FILE") else f for f in flags]
    _usage_error(capsys, lambda: train.main([*TINY, *flags]), needle)


def test_a_fresh_run_refuses_old_checkpoints_and_resume_refuses_changed_flags(run, tmp_path, capsys):
    log_dir = tmp_path / "run"
    shutil.copytree(run[0], log_dir)
    _usage_error(capsys, lambda: train.main([*TINY, "--log-dir", str(log_dir)]), "already holds checkpoints")
    _usage_error(capsys, lambda: train.main([*TINY, "--log-dir", str(log_dir), "--resume", "--lr-start", "0.1"]),
                 "lr_start")
    _usage_error(capsys, lambda: evaluate.main([str(tmp_path)]), "argument run")
    shutil.rmtree(log_dir / "sae_4")
    _usage_error(capsys, lambda: evaluate.main([str(log_dir)]), "argument run", "no checkpoint")


def test_paper_flag_sets_the_tutorial_sizes():
    args = train.apply_paper(train.build_parser().parse_args(["--paper", "--steps", "5"]))
    assert (args.steps, args.batch_size, args.encoder_blocks, args.decoder_blocks, args.encoder_layers,
            args.decoder_layers) == (262_144, 4096, 4, 4, 2, 2)
    assert train.apply_paper(train.build_parser().parse_args(["--steps", "5"])).steps == 5
