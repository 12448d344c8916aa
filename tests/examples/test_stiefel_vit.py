"""The Stiefel vision-transformer example on tiny budgets."""
import json
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geometric
from examples.stiefel_vit import data, demo, model, train

TINY = ["--depth", "1", "--width", "8", "--heads", "2", "--batch-size", "32", "--train-size", "256",
        "--eval-every", "2", "--checkpoint-every", "2", "--no-progress"]


def test_patches_tile_the_image():
    images = np.arange(2 * 64, dtype=np.float32).reshape(2, 8, 8)
    patches = data.patchify(images, 2)
    assert patches.shape == (2, 16, 4)
    np.testing.assert_array_equal(patches[0, 0], [0, 1, 8, 9])
    np.testing.assert_array_equal(patches[1, 5], images[1, 2:4, 2:4].ravel())
    with pytest.raises(ValueError, match="must divide"):
        data.patchify(images, 3)


def test_digits_split():
    digits = data.load_digits()
    assert digits.train_x.shape == (1347, 16, 4) and digits.test_x.shape == (450, 16, 4)
    assert set(np.unique(digits.test_y)) == set(range(10))
    assert 0 <= digits.train_x.min() and digits.train_x.max() <= 1


def test_projections_start_on_the_stiefel_manifold_and_manifolds_mirror_params():
    config = model.ViTConfig(depth=2, width=16, heads=4, mlp_width=32)
    params = model.init(np.random.default_rng(0), config, jnp.float64)
    assert float(model.orthonormality_error(params)) < 1e-12
    manifolds = model.manifolds(params)
    stiefel = jax.tree_util.tree_leaves(manifolds, is_leaf=lambda m: isinstance(m, geometric.Stiefel))
    assert len(stiefel) == 2 * 3 and all(m.shape == (16, 4) for m in stiefel)
    logits = jax.eval_shape(model.apply, params, jax.ShapeDtypeStruct((5, 16, 4), jnp.float64))
    assert logits.shape == (5, 10)


@pytest.mark.parametrize("optimizer", ["manifold_adam", "adam",
                                       pytest.param("riemannian_adam", marks=pytest.mark.slow)])
def test_train_smoke(tmp_path, optimizer):
    summary = train.main(["--optimizer", optimizer, "--steps", "4", "--log-dir", str(tmp_path), *TINY])
    history = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in history] == [2, 4]
    assert summary["test_accuracy"] == history[-1]["test_accuracy"]
    assert np.isfinite(summary["final_loss"]) and summary["parameters"] > 0
    if optimizer == "adam":
        assert summary["orthonormality_error"] > 1e-3  # unconstrained projections leave the manifold
    else:
        assert summary["orthonormality_error"] < 1e-5
    assert list(tmp_path.glob("events.out.tfevents.*")) and (tmp_path / "summary.json").exists()


def test_resume_is_bit_identical_and_keeps_the_history(tmp_path):
    flags = ["--optimizer", "manifold_adam", "--steps", "4", *TINY]
    train.main(flags + ["--log-dir", str(tmp_path / "full")])
    shutil.copytree(tmp_path / "full", tmp_path / "stopped")
    (tmp_path / "stopped" / "checkpoint_00000004.npz").unlink()
    summary = train.main(flags + ["--log-dir", str(tmp_path / "stopped"), "--resume"])
    assert summary["resumed_from"] == 2
    with np.load(tmp_path / "full" / "checkpoint_00000004.npz") as a, \
            np.load(tmp_path / "stopped" / "checkpoint_00000004.npz") as b:
        for key in a.files:
            np.testing.assert_array_equal(a[key], b[key])
    assert (tmp_path / "full" / "metrics.jsonl").read_text() == (tmp_path / "stopped" / "metrics.jsonl").read_text()


@pytest.mark.slow
def test_demo_plots_every_optimizer(tmp_path, capsys):
    results = demo.main(["--steps", "2", "--out", str(tmp_path), "--no-progress", "--", *TINY])
    assert set(results) == set(train.OPTIMIZERS)
    (run,) = tmp_path.iterdir()
    assert (run / "curves.png").stat().st_size > 1000
    assert "test accuracy" in capsys.readouterr().out


def test_curves_of_one_evaluation_are_visible(tmp_path, monkeypatch):
    """A short run evaluates once or twice: a line without markers through one point draws nothing."""
    import matplotlib.pyplot as plt

    drawn, close = [], plt.close
    monkeypatch.setattr(plt, "close", drawn.append)  # keep the figure that `_curves` closes
    record = {"step": 2, "train_loss": 2.1, "test_loss": 2.2, "test_accuracy": 0.3, "orthonormality_error": 1e-7}
    demo._curves({"manifold_adam": [record], "adam": [record | {"step": 4}]}, {"manifold_adam": None, "adam": None},
                 tmp_path / "curves.png")
    (fig,) = drawn
    try:
        lines = [line for ax in fig.axes for line in ax.lines]
        assert len(lines) == 2 * 4 and all(len(line.get_xdata()) == 1 for line in lines)
        assert all(line.get_marker() not in (None, "None", "", " ") and line.get_markersize() > 0 for line in lines)
    finally:
        close(fig)
