"""The framework examples (Flax NNX, equinox): they train on the manifold, resume bit for bit, and
behave like command-line tools."""
import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import equinox as eqx
import jax
import numpy as np
import pytest
from flax import nnx

from examples import equinox_orthogonal, nnx_orthogonal

PROGRAMS = [nnx_orthogonal, equinox_orthogonal]
FAST = ["--steps", "20", "--checkpoint-every", "10", "--log-every", "10"]


def arrays(program, model):
    if program is nnx_orthogonal:
        return jax.tree.leaves(nnx.state(model))
    return jax.tree.leaves(eqx.filter(model, eqx.is_array))


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.removeprefix("examples."))
def test_trains_on_the_manifold_and_resumes_bit_for_bit(program, tmp_path, capsys):
    whole = program.main([*FAST, "--checkpoint-dir", str(tmp_path / "whole")])
    assert whole["step"] == 20 and len(whole["losses"]) == 20
    assert whole["losses"][-1] < 0.5 * whole["losses"][0]
    assert whole["orthonormality_error"] <= 1e-5

    program.main([*FAST, "--steps", "10", "--checkpoint-dir", str(tmp_path / "split")])
    assert sorted(p.name for p in (tmp_path / "split").iterdir()) == ["10"]
    rest = program.main([*FAST, "--resume", "--checkpoint-dir", str(tmp_path / "split")])
    assert "resumed from step 10" in capsys.readouterr().out
    assert rest["losses"] == whole["losses"][10:]
    for a, b in zip(arrays(program, rest["model"]), arrays(program, whole["model"]), strict=True):
        np.testing.assert_array_equal(a, b)
    # max_to_keep=2: the oldest checkpoint is gone.
    assert sorted(p.name for p in (tmp_path / "split").iterdir()) == ["10", "20"]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.removeprefix("examples."))
def test_resume_without_checkpoints_says_so(program, tmp_path, capsys):
    program.main(["--steps", "1", "--resume", "--checkpoint-dir", str(tmp_path / "new")])
    assert "no checkpoint in" in capsys.readouterr().err


BAD = [
    (["--steps", "-5"], "--steps"), (["--steps", "0"], "--steps"), (["--lr", "-1"], "--lr"),
    (["--lr", "nan"], "--lr"), (["--seed", "-1"], "--seed"), (["--optimizer", "adam"], "--optimizer"),
    (["--checkpoint-every", "0"], "--checkpoint-every"), (["--log-every", "0"], "--log-every"),
    (["--checkpoint-dir", "FILE"], "--checkpoint-dir"), (["--checkpoint-dir", "FILE/run"], "--checkpoint-dir"),
    (["--stpes", "5"], "--stpes"),
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.removeprefix("examples."))
@pytest.mark.parametrize("argv, flag", BAD, ids=lambda x: " ".join(x) if isinstance(x, list) else None)
def test_a_bad_flag_is_one_line_naming_it(program, argv, flag, tmp_path, capsys):
    (tmp_path / "FILE").write_text("")
    with pytest.raises(SystemExit) as stop:
        program.main([str(tmp_path / a) if a.startswith("FILE") else a for a in argv])
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert not out and len(err.splitlines()) == 1, err
    assert err.startswith(f"{program.build_parser().prog}: error: ") and flag in err, err


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.removeprefix("examples."))
def test_an_existing_run_needs_resume(program, tmp_path, capsys):
    program.main(["--steps", "1", "--checkpoint-dir", str(tmp_path)])
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        program.main(["--steps", "2", "--checkpoint-dir", str(tmp_path)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "--resume" in err and "step 1" in err, err


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.removeprefix("examples."))
def test_help_shows_every_default(program):
    parser = program.build_parser()
    text = " ".join(parser.format_help().split())
    for action in parser._actions:
        if action.option_strings and action.default not in (None, argparse.SUPPRESS, False) \
                and action.help != argparse.SUPPRESS:
            assert f"(default: {action.default})" in text, action.dest


ROOT = Path(__file__).resolve().parents[2]
IDS = {"ids": lambda p: p.__name__.removeprefix("examples.")}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """``{program: directory}``: 20 steps of each program, its checkpoints of steps 10 and 20, and the losses."""
    root = tmp_path_factory.mktemp("saved")
    out = {}
    for program in PROGRAMS:
        directory = root / program.__name__.removeprefix("examples.")
        out[program] = directory, program.main([*FAST, "--checkpoint-dir", str(directory)])["losses"]
    return out


def _damage(step_dir: Path) -> None:
    """Truncate every file of an Orbax checkpoint, as a full disk or a killed copy leaves it."""
    for path in step_dir.rglob("*"):
        if path.is_file():
            path.write_bytes(path.read_bytes()[:10])


@pytest.mark.parametrize("program", PROGRAMS, **IDS)
def test_an_unreadable_checkpoint_is_named_and_the_one_before_it_used(program, saved, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(saved[program][0], run)
    _damage(run / "20")
    capsys.readouterr()
    rest = program.main([*FAST, "--resume", "--checkpoint-dir", str(run)])
    out, err = capsys.readouterr()
    assert err == (f"warning: checkpoint {run / '20'} is unreadable (truncated or corrupt); using the previous "
                   f"readable checkpoint, {run / '10'}\n")
    assert "resumed from step 10" in out and rest["losses"] == saved[program][1][10:]
    # The unreadable checkpoint of step 20 is replaced by the new one, which reads.
    assert sorted(p.name for p in run.iterdir()) == ["10", "20"]
    program.main([*FAST, "--resume", "--checkpoint-dir", str(run)])
    assert "resumed from step 20" in capsys.readouterr().out


@pytest.mark.parametrize("program", PROGRAMS, **IDS)
def test_no_readable_checkpoint_stops_with_one_line(program, saved, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(saved[program][0], run)
    _damage(run / "20")
    _damage(run / "10")
    with pytest.raises(SystemExit) as stop:
        program.main([*FAST, "--resume", "--checkpoint-dir", str(run)])
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert not out and err == (f"{program.build_parser().prog}: error: no readable checkpoint in {run}: "
                               "20, 10 (truncated or corrupt)\n")


@pytest.mark.parametrize("program", PROGRAMS, **IDS)
def test_resume_with_another_optimizer_stops_with_one_line(program, saved, capsys):
    run = saved[program][0]
    with pytest.raises(SystemExit) as stop:
        program.main([*FAST, "--resume", "--optimizer", "riemannian_sgd", "--checkpoint-dir", str(run)])
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert not out and len(err.splitlines()) == 1, err
    assert f"no readable checkpoint in {run}: 20, 10 (" in err and "saved with another --optimizer?" in err, err


def test_the_command_line_says_only_its_one_line(saved, tmp_path):
    """Orbax logs an unreadable checkpoint, and a failed restore leaves tracebacks behind: neither reaches stderr."""
    run = tmp_path / "run"
    shutil.copytree(saved[nnx_orthogonal][0], run)
    for manifest in (run / "20").rglob("manifest.ocdbt"):  # a restore that fails in TensorStore's reads
        manifest.write_bytes(b"xx")
    _damage(run / "10")  # and one whose metadata does not parse
    done = subprocess.run([sys.executable, "-m", "examples.nnx_orthogonal", *FAST, "--resume",
                           "--checkpoint-dir", str(run)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 2 and not done.stdout
    assert done.stderr == (f"python -m examples.nnx_orthogonal: error: no readable checkpoint in {run}: "
                           "20, 10 (truncated or corrupt)\n")
