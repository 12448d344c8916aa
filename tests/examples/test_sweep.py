"""The hyperparameter sweep: grid expansion, printed commands, sequential runs and the table."""
import csv
import shlex

import pytest

from examples import sweep

# The flags of the rigid-body tests' runs, so that the compiled training step is shared.
RIGID = ["--set", "steps=6", "--set", "batch-size=32", "--set", "checkpoint-every=3", "--set", "log-every=2",
         "--set", "no-progress", "--set", "model=transformer"]


def test_grid_expansion():
    grid = [("model", ["vpt", "vpff"]), ("lr-start", ["0.01", "0.003"])]
    assert sweep.expand_grid(grid) == [
        {"model": "vpt", "lr-start": "0.01"}, {"model": "vpt", "lr-start": "0.003"},
        {"model": "vpff", "lr-start": "0.01"}, {"model": "vpff", "lr-start": "0.003"}]
    assert sweep.expand_grid([]) == [{}]


def test_print_commands(tmp_path, capsys):
    sweep.main(["rigid_body", "--out", str(tmp_path), "--grid", "model=vpt,vpff", "--set", "steps=10",
                "--set", "no-progress", "--print-commands"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    argv = shlex.split(lines[1])
    assert argv[1:3] == ["-m", "examples.rigid_body.train"]
    assert argv[3:] == ["--steps", "10", "--no-progress", "--model", "vpff", "--log-dir", str(tmp_path / "model-vpff")]
    assert not any(tmp_path.iterdir())


def test_bad_assignment():
    with pytest.raises(SystemExit):
        sweep.main(["rigid_body", "--out", "x", "--grid", "model="])


def test_run_skip_and_collect(tmp_path, capsys, cache_dir):
    argv = ["rigid_body", "--out", str(tmp_path / "sweep"), "--grid", "seed=0,1", *RIGID,
            "--set", f"cache-dir={cache_dir}"]
    rows = sweep.main(argv)
    assert [r["status"] for r in rows] == ["done", "done"]
    assert [r["seed"] for r in rows] == ["0", "1"] and rows[1]["parameters"] == 153
    assert rows[0]["final_loss"] != rows[1]["final_loss"]
    table = (tmp_path / "sweep" / "results.md").read_text()
    assert table.splitlines()[0] == ("| seed | status | final_loss | rollout_error | norm_drift | diverged | train_time_s "
                                     "| steps_per_s |")
    with (tmp_path / "sweep" / "results.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 2

    capsys.readouterr()
    sweep.main(argv)  # everything is done: nothing is trained again
    assert capsys.readouterr().out.count("done, skipped") == 2

    rows = sweep.main(["rigid_body", "--out", str(tmp_path / "sweep"), "--grid", "seed=0,2", "--collect"])
    assert [r["status"] for r in rows] == ["done", "missing"]
