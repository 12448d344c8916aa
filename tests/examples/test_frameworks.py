"""The framework examples (Flax NNX, equinox): they train on the manifold, resume bit for bit, and
behave like command-line tools."""
import argparse

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
    (["--checkpoint-dir", "FILE"], "--checkpoint-dir"), (["--stpes", "5"], "--stpes"),
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__.removeprefix("examples."))
@pytest.mark.parametrize("argv, flag", BAD, ids=lambda x: " ".join(x) if isinstance(x, list) else None)
def test_a_bad_flag_is_one_line_naming_it(program, argv, flag, tmp_path, capsys):
    (tmp_path / "FILE").write_text("")
    with pytest.raises(SystemExit) as stop:
        program.main([str(tmp_path / "FILE") if a == "FILE" else a for a in argv])
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
