"""The edge study's results through the toolkit's one result type (AnswerScores / Accuracy), and the upgrade of
tables written with the earlier columns (n, accuracy_lo/hi, loss, loss_se, delta_loss)."""

import json
import math

import pytest
import torch

from interp.core.stats import binomial_stderr, wilson_interval
from interp.core.tables import read_csv, write_table
from interp.experiments.edge_study import copy_scores
from interp.experiments.edge_tables import main as edge_tables_main, upgrade_table
from interp.measure.teacher_forcing import Accuracy, AnswerScores


def test_accuracy_carries_stderr_and_the_wilson_interval():
    scores = AnswerScores.from_rows([(True, 1.0, -0.1, ()), (False, 0.5, -2.0, ()), (True, 1.0, -0.3, ())])
    summary = Accuracy.of(scores)
    assert (summary.ci_low, summary.ci_high) == wilson_interval(2, 3)
    assert summary.stderr == pytest.approx(math.sqrt(2 / 9 / 3)) and summary.mean_logprob == pytest.approx(-0.8)
    assert Accuracy.of_counts(2, 3).ci_low == summary.ci_low and Accuracy.of_counts(2, 3).accuracy == 2 / 3
    assert math.isnan(Accuracy.of(AnswerScores.from_rows([])).ci_low)
    assert AnswerScores.concat([scores, scores]).correct.tolist() == [True, False, True] * 2


def test_copy_scores_are_the_repos_all_correct_and_cross_entropy():
    """The copy scored through score_answer: all-correct, token accuracy, and mean log-prob = -cross-entropy."""
    torch.manual_seed(0)
    logits, targets = torch.randn(6, 4, 11) * 3, torch.randint(0, 11, (6, 4))
    targets[0] = logits[0].argmax(-1)  # one row right at every position
    scores = copy_scores(logits, targets)
    hits = logits.argmax(-1) == targets
    loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none").mean(-1)
    assert scores.correct.tolist() == hits.all(-1).tolist() and scores.correct[0]
    assert torch.allclose(scores.token_accuracy, hits.float().mean(-1))
    assert torch.allclose(scores.mean_logprob, -loss, atol=1e-5)
    summary = Accuracy.of(scores)
    assert (summary.ci_low, summary.ci_high) == wilson_interval(int(hits.all(-1).sum()), 6)
    assert summary.stderr == pytest.approx(binomial_stderr(summary.accuracy, 6))


def test_upgrade_rewrites_old_tables_and_keeps_their_metadata(tmp_path, capsys):
    old = [{"model": "m", "task": "UF", "length": 3, "condition": c, "n": 32, "accuracy": a, "accuracy_lo": 0.1,
            "accuracy_hi": 0.9, "loss": 1.25, "loss_se": 0.5, "token_accuracy": 0.75, "layers": "all"}
           for c, a in (("none", 1.0), ("induction", 0.03125))]
    sweep = [{"model": "m", "task": "UF", "length": 3, "edge": "induction", "layer": 0, "n": 8, "accuracy": 0.5,
              "accuracy_lo": 0.2, "accuracy_hi": 0.8, "loss": 2.0, "loss_se": float("nan"), "token_accuracy": 0.5,
              "delta_accuracy": -0.5, "delta_loss": 1.5, "heads": "all"}]
    write_table(old, tmp_path / "edge_patching_m", metadata={"model": "m", "ci": "accuracy: Wilson 95%"})
    write_table(sweep, tmp_path / "edge_patching_layers_m", formats=("csv",))
    assert edge_tables_main(["upgrade", str(tmp_path / "edge_patching_m.csv"), str(tmp_path / "edge_patching_layers_m.csv")]) == 0
    rows = read_csv(tmp_path / "edge_patching_m.csv")
    assert list(rows[1])[4:11] == ["n_examples", "accuracy", "stderr", "ci_low", "ci_high", "mean_logprob", "token_accuracy"]
    assert rows[1]["n_examples"] == 32 and rows[1]["accuracy"] == 0.03125 and rows[1]["mean_logprob"] == -1.25
    assert rows[1]["stderr"] == binomial_stderr(0.03125, 32) and rows[1]["ci_low"] == 0.1 and rows[1]["mean_logprob_se"] == 0.5
    stored = json.loads((tmp_path / "edge_patching_m.json").read_text())
    assert stored["metadata"]["model"] == "m" and "binomial" in stored["metadata"]["ci"] and stored["rows"] == rows
    assert "ci_low" in (tmp_path / "edge_patching_m.md").read_text()
    layer = read_csv(tmp_path / "edge_patching_layers_m.csv")[0]
    assert layer["delta_mean_logprob"] == -1.5 and "delta_loss" not in layer and math.isnan(layer["mean_logprob_se"])
    assert not (tmp_path / "edge_patching_layers_m.json").exists()  # only the formats that were there
    before = (tmp_path / "edge_patching_m.csv").read_bytes()
    upgrade_table(tmp_path / "edge_patching_m.csv")
    assert (tmp_path / "edge_patching_m.csv").read_bytes() == before  # upgrading twice changes nothing
    assert edge_tables_main(["upgrade", str(tmp_path / "missing.csv")]) == 2
    assert edge_tables_main([]) == 2
    assert capsys.readouterr().err.strip().splitlines()[0].startswith("error: results file")
