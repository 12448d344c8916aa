"""Every example program's flags: a mistake is one line naming the flag, exit status 2; --help shows defaults."""
import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from examples import multihost, sweep
from examples.rigid_body import demo as rigid_demo
from examples.rigid_body import evaluate
from examples.rigid_body import train as rigid_train
from examples.stiefel_vit import demo as vit_demo
from examples.stiefel_vit import train as vit_train

ROOT = Path(__file__).resolve().parents[2]

BAD = {
    rigid_train: [
        (["--steps", "-5"], "--steps"), (["--steps", "0"], "--steps"), (["--steps", "ten"], "--steps"),
        (["--lr-start", "-1"], "--lr-start"), (["--lr-start", "nan"], "--lr-start"), (["--lr-end", "0"], "--lr-end"),
        (["--batch-size", "0"], "--batch-size"), (["--log-every", "0"], "--log-every"),
        (["--checkpoint-every", "-1"], "--checkpoint-every"), (["--seed", "-1"], "--seed"),
        (["--devices", "0"], "--devices"), (["--devices", "64"], "--devices"),
        (["--devices", "2", "--batch-size", "31"], "--devices"), (["--model", "rnn"], "--model"),
        (["--dtype", "float16"], "--dtype"), (["--inertia", "book"], "--inertia"),
        (["--log-dir", "FILE"], "--log-dir"), (["--cache-dir", "FILE"], "--cache-dir"), (["--stpes", "5"], "--stpes"),
        (["--log-dir", "FILE/run"], "--log-dir"), (["--cache-dir", "FILE/cache"], "--cache-dir"),
    ],
    vit_train: [
        (["--lr", "-1"], "--lr"), (["--eval-every", "-1"], "--eval-every"), (["--train-size", "0"], "--train-size"),
        (["--train-size", "100000"], "--train-size"), (["--width", "30"], "--width"), (["--heads", "0"], "--heads"),
        (["--depth", "0"], "--depth"), (["--optimizer", "sgd"], "--optimizer"), (["--seed", "-2"], "--seed"),
        (["--log-dir", "FILE/run"], "--log-dir"),
    ],
    evaluate: [
        (["RUN", "--n-steps", "-3"], "--n-steps"), (["RUN", "--n-steps", "2"], "--n-steps"),
        (["DIR"], "argument runs"), (["DIR/missing"], "argument runs"), (["RUN", "--out", "FILE"], "--out"),
        (["RUN", "--out", "FILE/eval"], "--out"),
    ],
    rigid_demo: [
        (["--steps", "-5"], "--steps"), (["--batch-size", "0"], "--batch-size"), (["--seed", "-1"], "--seed"),
        (["--out", "FILE"], "--out"), (["--out", "FILE/demo"], "--out"),
    ],
    vit_demo: [
        (["--steps", "0"], "--steps"), (["--lr", "-1"], "--lr"), (["--seeds", "0", "-1"], "--seeds"),
        (["--", "--depth", "0"], "--depth"), (["--", "--bogus"], "--bogus"), (["--out", "FILE/demo"], "--out"),
    ],
    sweep: [
        (["rigid_body", "--out", "DIR", "--grid", "modle=vpt"], "--modle"),
        (["rigid_body", "--out", "DIR", "--set", "steps=-5"], "--steps"),
        (["rigid_body", "--out", "DIR", "--grid", "log-dir=a,b"], "--log-dir"),
        (["rigid_body", "--out", "DIR", "--grid", "seed=0", "--grid", "seed=1"], "--seed"),
        (["rigid_body", "--out", "DIR", "--grid", "model="], "--grid"),
        (["stiefel_vit", "--out", "DIR", "--grid", "width=30"], "--width"),
        (["rigid", "--out", "DIR"], "example"), (["rigid_body"], "--out"),
        (["rigid_body", "--out", "FILE/sweep"], "--out"),
    ],
    multihost: [
        (["--coordinator", "nohost"], "--coordinator"), (["--coordinator", "host:"], "--coordinator"),
        (["--coordinator", ":1234"], "--coordinator"), (["--coordinator", "host:0"], "--coordinator"),
        (["--coordinator", "host:65536"], "--coordinator"), (["--coordinator", "host:port"], "--coordinator"),
        (["--out", "FILE/results.json"], "--out"), (["--out", "DIR"], "--out"),
        (["--process-id", "1"], "--process-id"), (["--num-processes", "2"], "--coordinator"),
    ],
}


@pytest.mark.parametrize("program, argv, flag", [(program, argv, flag) for program, cases in BAD.items()
                                                 for argv, flag in cases],
                         ids=lambda x: x.__name__.removeprefix("examples.") if hasattr(x, "__name__") else None)
def test_a_bad_flag_is_one_line_naming_it(program, argv, flag, tmp_path, capsys):
    (tmp_path / "FILE").write_text("")
    (tmp_path / "RUN").mkdir()
    (tmp_path / "RUN" / "config.json").write_text("{}")
    names = {"RUN": tmp_path / "RUN", "DIR": tmp_path, "DIR/missing": tmp_path / "missing"}
    with pytest.raises(SystemExit) as stop:
        program.main([str(tmp_path / arg) if arg.startswith("FILE") else str(names.get(arg, arg)) for arg in argv])
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert not out and len(err.splitlines()) == 1, err
    assert err.startswith(f"{program.build_parser().prog}: error: ") and flag in err, err


@pytest.mark.parametrize("program", list(BAD), ids=lambda p: p.__name__.removeprefix("examples."))
def test_help_shows_every_default(program):
    parser = program.build_parser()
    text = " ".join(parser.format_help().split())
    for action in parser._actions:
        shown = action.option_strings or action.nargs in ("?", "*")
        if shown and action.default not in (None, argparse.SUPPRESS) and action.help != argparse.SUPPRESS:
            assert f"(default: {action.default})" in text, action.dest


def test_the_command_line_exits_2_without_a_traceback():
    done = subprocess.run([sys.executable, "-m", "examples.rigid_body.train", "--steps", "-5"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and not done.stdout
    assert done.stderr == "python -m examples.rigid_body.train: error: argument --steps: expected an integer ≥ 1; got '-5'\n"


@pytest.mark.parametrize("argv, message", [
    (["examples.rigid_body.train", "--log-dir", "FILE/run"],
     ("python -m examples.rigid_body.train: error: argument --log-dir: 'FILE/run' cannot be a directory: "
      "'FILE' is a file\n")),
    (["examples.multihost", "--coordinator", "nohost", "--num-processes", "2"],
     ("python -m examples.multihost: error: argument --coordinator: expected HOST:PORT with PORT an integer "
      "1–65535; got 'nohost'\n")),
], ids=["log-dir under a file", "coordinator without a port"])
def test_the_command_line_says_one_line_where_python_raised(argv, message, tmp_path):
    """Once a ``NotADirectoryError`` from ``mkdir``, and an ``IndexError`` from ``jax.distributed.initialize``."""
    (tmp_path / "FILE").write_text("")
    done = subprocess.run([sys.executable, "-m", *argv], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and not done.stdout
    assert done.stderr == message
