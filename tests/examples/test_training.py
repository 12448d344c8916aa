"""The loop and files every example's trainer shares (:mod:`examples._training`), without a model."""
import argparse
import json
import math
import os
import signal
import time

import jax.numpy as jnp
import numpy as np
import pytest

from examples import _training


class Writer:
    """What ``train_loop`` needs of a ``tensorboardX.SummaryWriter``, recorded."""

    def __init__(self):
        self.losses, self.texts, self.flushed = {}, {}, 0

    def add_scalar(self, tag, value, step):
        if tag == "train/loss":
            self.losses[step] = value

    def add_text(self, tag, text, step):
        self.texts[tag, step] = text

    def flush(self):
        self.flushed = len(self.losses)


def _step(params, opt_state, batch):
    return params + 1, opt_state, jnp.asarray(batch, jnp.float32)


def _loop(run_dir, next_batch, writer, steps=8):
    state = _training.TrainState(0, jnp.zeros(()), (), 0)
    return _training.train_loop(run_dir, _step, state, next_batch, steps=steps, checkpoint_every=0, log_every=4,
                                writer=writer, progress=False)


def test_a_loss_that_stops_being_finite_marks_the_step_it_diverged_at(tmp_path):
    writer = Writer()
    result = _loop(tmp_path, lambda step: math.nan if step >= 2 else 1.0, writer)
    assert result.diverged_at == 3  # the loss of the third step, which saw batch 2
    assert math.isnan(result.final_loss) and np.isnan(result.losses[2:]).all()
    assert sorted(writer.losses) == [1, 2] and list(writer.texts) == [("train/diverged", 3)]
    (tmp_path / "fine").mkdir()
    assert _loop(tmp_path / "fine", lambda step: 1.0, Writer()).diverged_at is None


def _raise_keyboard_interrupt():
    raise KeyboardInterrupt


def _send_sigterm():
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(10)  # the handler interrupts the sleep


@pytest.mark.parametrize("interrupt", [_raise_keyboard_interrupt, _send_sigterm], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_run_writes_its_last_losses_and_a_checkpoint(tmp_path, interrupt, capsys):
    before = signal.getsignal(signal.SIGTERM)
    writer = Writer()

    def next_batch(step):
        if step == 5:
            interrupt()
        return float(step)

    with pytest.raises(KeyboardInterrupt):
        _loop(tmp_path, next_batch, writer)
    # Steps 1-4 were logged at step 4; step 5 was waiting for step 8.
    assert writer.losses == {s: float(s - 1) for s in range(1, 6)} and writer.flushed == 5
    assert [p.name for p in _training.checkpoints(tmp_path)] == ["checkpoint_00000005.npz"]
    with np.load(tmp_path / "checkpoint_00000005.npz") as archive:
        assert archive["step"] == 5 and archive["params_000"] == 5
    assert "interrupted at step 5" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) == before


def test_json_files_are_strict_json(tmp_path):
    data = {"nan": math.nan, "list": [math.inf, np.float32("nan"), np.float64(1.5)], "nested": {"x": -math.inf},
            "kept": 2, "path": tmp_path}
    _training.write_json(tmp_path / "x.json", data)

    def reject(constant):
        raise AssertionError(constant)

    stored = json.loads((tmp_path / "x.json").read_text(), parse_constant=reject)
    assert stored == {"nan": None, "list": [None, None, 1.5], "nested": {"x": None}, "kept": 2, "path": str(tmp_path)}
    assert stored == json.loads(json.dumps(_training.json_safe(data), allow_nan=False, default=str))


def _state(step):
    return _training.TrainState(step, {"w": jnp.full(3, float(step))}, (jnp.zeros(()),), 7)


@pytest.mark.parametrize("damage", [b"", b"not an archive at all", None], ids=["empty", "garbage", "truncated"])
def test_an_unreadable_checkpoint_is_named_and_the_previous_one_used(tmp_path, capsys, damage):
    older = _training.save_checkpoint(tmp_path, _state(3))
    newer = _training.save_checkpoint(tmp_path, _state(6))
    # NumPy reads bytes that are no archive as a pickle and says "allow_pickle=False": no advice to repeat.
    newer.write_bytes(newer.read_bytes()[:200] if damage is None else damage)
    path, state = _training.load_latest(tmp_path, lambda p: _training.load_checkpoint(p, _state(0)))
    assert path == older and state.step == 3 and float(state.params["w"][0]) == 3
    assert capsys.readouterr().err == (f"warning: checkpoint {newer} is unreadable (truncated or corrupt); "
                                       f"using the previous readable checkpoint, {older}\n")

    older.write_bytes(b"")
    with pytest.raises(ValueError) as error:
        _training.load_latest(tmp_path, lambda p: _training.load_checkpoint(p, _state(0)))
    assert str(error.value) == (f"no readable checkpoint in {tmp_path}: checkpoint_00000006.npz, "
                                "checkpoint_00000003.npz (truncated or corrupt)")
    assert not capsys.readouterr().err


def test_a_checkpoint_of_other_flags_says_so(tmp_path, capsys):
    _training.save_checkpoint(tmp_path, _state(3))
    other = _training.TrainState(0, {"w": jnp.zeros(4)}, (jnp.zeros(()),), 7)  # another size
    expected = (r"checkpoint_00000003.npz \(its `params_000` has shape \(3,\) and dtype float\d+, this run expects "
                r"\(4,\) and float\d+: written with other flags\?\)")
    with pytest.raises(ValueError, match=expected):
        _training.load_latest(tmp_path, lambda p: _training.load_checkpoint(p, other))


def test_a_directory_under_a_file_is_a_flag_error(tmp_path):
    (tmp_path / "file").write_text("")
    assert _training.directory(str(tmp_path / "new" / "run")) == tmp_path / "new" / "run"
    with pytest.raises(argparse.ArgumentTypeError, match="is a file"):
        _training.directory(str(tmp_path / "file" / "run"))
    with pytest.raises(argparse.ArgumentTypeError, match="exists and is not a directory"):
        _training.directory(str(tmp_path / "file"))
    assert _training.output_file(str(tmp_path / "new" / "x.json")) == tmp_path / "new" / "x.json"
    with pytest.raises(argparse.ArgumentTypeError, match="is a file, not a directory"):
        _training.output_file(str(tmp_path / "file" / "x.json"))
    with pytest.raises(argparse.ArgumentTypeError, match="is a directory"):
        _training.output_file(str(tmp_path))
