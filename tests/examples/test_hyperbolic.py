"""The hyperbolic-embedding example: generated trees, the reconstruction metrics, a quick run, flags."""
import json

import numpy as np
import pytest

from examples.hyperbolic import data, model, train


def test_trees_and_their_closure():
    tree = data.balanced_tree(3, 3)
    assert tree.size == 1 + 3 + 9 + 27 and tree.depth.max() == 3
    assert len(tree.edges) == tree.depth.sum()                     # one edge per (ancestor, node)
    assert (tree.related == tree.related.T).all() and not tree.related.diagonal().any()
    assert tree.related[0, 1:].all()                                # the root is everyone's ancestor
    assert not tree.related[1, 2]                                   # siblings are unrelated
    wordnet_like = data.random_tree(300, seed=1)
    assert wordnet_like.size == 300 and wordnet_like.depth.max() <= 8
    children = np.bincount(wordnet_like.parent[1:], minlength=300)
    assert children.max() >= 10 and (children == 0).sum() > 150     # hubs and many leaves
    with pytest.raises(ValueError, match="parent must list"):
        data.from_parents(np.asarray([-1, 2, 0]))


def test_reconstruction_metrics():
    tree = data.balanced_tree(2, 2)
    # distances that rank every related node first: mean rank 1, MAP 1
    perfect = np.where(tree.related, 1.0, 2.0)
    np.fill_diagonal(perfect, 0)
    assert model.reconstruction(perfect, tree.related) == {"mean_rank": 1.0, "map": 1.0}
    # node 1 (children 3, 4; parent 0) with the unrelated nodes 2, 5, 6 ranked 2nd, 4th, 6th
    d = perfect.copy()
    d[1] = [0.1, 0, 0.2, 0.3, 0.5, 0.4, 0.6]
    ranks_1 = [1, 2, 3]                                  # 0, 3, 4 among the unrelated 2, 5, 6
    precision_1 = np.mean([1 / 1, 2 / 3, 3 / 5])
    got = model.reconstruction(d, tree.related)
    np.testing.assert_allclose(got["map"], (6 + precision_1) / 7)
    n_pairs = tree.related.sum()
    np.testing.assert_allclose(got["mean_rank"], (n_pairs - 3 + sum(ranks_1)) / n_pairs)


def test_quick_run_writes_metrics_table_and_picture(tmp_path):
    summary = train.main(["--quick", "--dims", "2", "3", "--epochs", "30", "--out", str(tmp_path)])
    runs = summary["runs"]
    assert [(r["dim"], r["geometry"]) for r in runs] == [(2, "poincare"), (2, "euclidean"),
                                                         (3, "poincare"), (3, "euclidean")]
    for r in runs:
        assert 1 <= r["mean_rank"] < 40 and 0 < r["map"] <= 1 and np.isfinite(r["final_loss"])
    assert max(r["max_norm"] for r in runs if r["geometry"] == "poincare") < 1
    assert json.loads((tmp_path / "summary.json").read_text())["tree"]["nodes"] == 40
    assert "| 2 | poincare |" in (tmp_path / "results.md").read_text()
    assert summary["disk_png"] and (tmp_path / "disk.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("argv, flag", [
    (["--dims", "0"], "--dims"), (["--epochs", "-1"], "--epochs"), (["--lr", "nan"], "--lr"),
    (["--branching", "1"], "--branching"), (["--tree", "wordnet"], "--tree"), (["--negatives", "0"], "--negatives"),
    (["--nodes", "1"], "--nodes"), (["--burn-in", "-1"], "--burn-in"), (["--out", "FILE"], "--out"),
    (["--out", "FILE/run"], "--out"),
])
def test_a_bad_flag_is_one_line_naming_it(argv, flag, tmp_path, capsys):
    (tmp_path / "FILE").write_text("")
    with pytest.raises(SystemExit) as stop:
        train.main([str(tmp_path / a) if a.startswith("FILE") else a for a in argv])
    assert stop.value.code == 2
    out, err = capsys.readouterr()
    assert not out and len(err.splitlines()) == 1 and flag in err, err


def test_help_shows_every_default():
    parser = train.build_parser()
    text = " ".join(parser.format_help().split())
    for action in parser._actions:
        if action.option_strings and action.default not in (None, False) and action.dest != "help":
            assert f"(default: {action.default})" in text, action.dest
