"""The experiments `make run` and the directional-bias script print, on a tiny model: the ablation
study (its replayed conditions equal full hooked passes), its summary, the directional table and
its pairs, and resuming a killed run from its journal."""

from __future__ import annotations

import pytest
import torch

import interp.experiments.head_ablation as experiments
from interp.measure.encoding import encode_for
from interp.interventions.ablation import ablation_hooks, compute_head_means
from interp.measure.evaluate import evaluate_prompts
from interp.experiments import (AblationConfig, AblationRow, ablation_prompt_sets, ablation_study, ablation_summary,
                                directional_bias, pair_table, reference_means)
from interp.core.heads import parse_heads
from interp.core.journal import RowJournal
from interp.core.tables import read_csv, write_table
from interp.data.tasks import get_task
from interp.measure.head_scores import score_heads

CONFIG = AblationConfig(tasks=("UF", "UR"), lengths=(6,), k=2, n_examples=6, random_seeds=(0,), n_reference=4,
                        batch_size=4)


@pytest.fixture(scope="module")
def scores(tiny_llama):
    return score_heads(tiny_llama, n_sequences=4, half_length=10, progress=False)


@pytest.fixture(scope="module")
def study(tiny_llama, scores):
    return ablation_study(tiny_llama, scores, CONFIG, progress=False)


def test_ablation_study_rows(study, scores):
    cells = [(r.condition, r.ablation, r.seed, r.task) for r in study]
    expected = [("baseline", "none", None, t) for t in ("UF", "UR")]
    expected += [(c, k, s, t) for c, s in (("induction", None), ("anti_induction", None), ("random", 0))
                 for k in ("zero", "mean") for t in ("UF", "UR")]
    assert cells == expected
    assert all(r.delta_accuracy == 0 for r in study if r.condition == "baseline")
    induction = [r for r in study if r.condition == "induction"]
    assert {r.heads for r in induction} == {";".join(str(h) for h in scores.top_heads("induction", 2))}
    random_heads = parse_heads(next(r.heads for r in study if r.condition == "random"))
    assert not set(random_heads) & set(scores.top_heads("induction", 2) + scores.top_heads("anti_induction", 2))


def test_replayed_conditions_equal_full_hooked_passes(tiny_llama, study):
    """The study recomputes only the layers from the lowest ablated one; a full pass with the same
    hooks must give the same accuracy and log-probabilities."""
    prompts = ablation_prompt_sets(tiny_llama, CONFIG)
    means = reference_means(tiny_llama, CONFIG, progress=False)
    for row in study:
        heads = parse_heads(row.heads)
        hooks = ablation_hooks(tiny_llama, heads, row.ablation, means) if heads else []
        full = evaluate_prompts(tiny_llama, prompts[(row.task, row.length)], CONFIG.prompt_config,
                                CONFIG.batch_size, hooks, progress=False)
        assert full.accuracy == row.accuracy
        assert abs(full.mean_logprob.mean().item() - row.mean_logprob) < 1e-5


def test_ablation_changes_the_output(tiny_llama, study):
    """A test that would pass with hooks that never fire is no test: zero ablation moves log-probs."""
    zero = {(r.condition, r.task): r.mean_logprob for r in study if r.ablation == "zero"}
    base = {r.task: r.mean_logprob for r in study if r.condition == "baseline"}
    assert all(abs(v - base[task]) > 1e-6 for (_, task), v in zero.items())


def test_ablation_summary_cells():
    def row(condition: str, ablation: str, accuracy: float) -> AblationRow:
        return AblationRow("m", condition, ablation, None, "UF", 10, 4, accuracy, 0.0, 1.0, accuracy - 0.5, None, "", condition)

    summary = ablation_summary([row("baseline", "none", 0.5), row("random", "zero", 0.2), row("random", "zero", 0.4)])
    assert [s.as_row() for s in summary] == [{"condition": "baseline", "ablation": "none", "UF@10": "0.50 (+0.00)"},
                                             {"condition": "random", "ablation": "zero",
                                              "UF@10": "0.30 (-0.20) [0.20-0.40]"}]


def test_config_refuses_what_the_model_cannot_supply():
    with pytest.raises(ValueError, match="only 8 heads"):
        AblationConfig(k=9).check_model(2, 4)
    with pytest.raises(ValueError, match="random-head control"):
        AblationConfig(k=3).check_model(2, 4)
    AblationConfig(k=3, random_seeds=()).check_model(2, 4)
    with pytest.raises(ValueError, match="n_examples=0"):
        AblationConfig(n_examples=0)
    with pytest.raises(ValueError, match="kinds"):
        AblationConfig(kinds=())


def test_directional_bias_and_pairs(tiny_llama):
    tasks = [get_task(t) for t in ("UF", "UB", "UR")]
    rows = directional_bias(tiny_llama, tasks, [5, 70], n_examples=3, progress=False)
    assert [(r.task, r.length) for r in rows] == [("UF", 5), ("UF", 70), ("UB", 5), ("UB", 70), ("UR", 5), ("UR", 70)]
    too_long = [r for r in rows if r.task in ("UF", "UB") and r.length == 70]
    assert all(r.accuracy is None and "vocabulary" in r.note for r in too_long)  # 62 items < 70
    assert all(r.n_examples == 3 and 0 <= r.accuracy <= 1 for r in rows if r not in too_long)
    pairs = pair_table(rows)
    uf_ub = next(p for p in pairs if p.pair == "UF vs UB" and p.length == 5)
    assert uf_ub.gap == pytest.approx(uf_ub.right_or_forward - uf_ub.left_or_backward)
    ur = next(p for p in pairs if p.pair == "UR vs UL" and p.length == 5)
    assert ur.left_or_backward is None and ur.gap is None
    assert not any(p.length == 70 and p.pair == "UF vs UB" for p in pairs)  # neither side measurable


def test_a_killed_study_resumes_and_keeps_the_finished_table(tiny_llama, scores, study, tmp_path, monkeypatch):
    stem = tmp_path / "ablation"
    write_table([{"old": 1}], stem)  # a finished table from an earlier run
    calls = {"n": 0}
    real_replay = experiments.replay

    def dies_after_three(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > 3:
            raise KeyboardInterrupt
        return real_replay(*args, **kwargs)

    monkeypatch.setattr(experiments, "replay", dies_after_three)
    config = {"run": "test"}
    with pytest.raises(KeyboardInterrupt):
        ablation_study(tiny_llama, scores, CONFIG, progress=False, journal=RowJournal(stem, config))
    assert read_csv(stem.with_suffix(".csv")) == [{"old": 1}]  # still the finished table
    done = RowJournal(stem, config).done()
    assert 2 <= len(done) < len(study)

    calls["n"] = -1000  # no more kills; count what the resumed run recomputes
    journal = RowJournal(stem, config)
    resumed = ablation_study(tiny_llama, scores, CONFIG, progress=False, journal=journal)
    assert resumed == study
    journal.finish(resumed)
    assert len(read_csv(stem.with_suffix(".csv"))) == len(study) and not journal.path.exists()
    assert RowJournal(stem, {"run": "other"}).done() == []  # another configuration starts afresh


def test_head_means_pool_real_tokens_only(tiny_llama):
    """Padding never enters the means: one batch of two prompts of different lengths gives the
    means of two unpadded batches."""

    sets = ablation_prompt_sets(tiny_llama, CONFIG)
    prompts = [sets[("UF", 6)][0], sets[("UR", 6)][0]]
    encoded = encode_for(tiny_llama, prompts, CONFIG.prompt_config)
    assert len(encoded[0].ids) != len(encoded[1].ids)
    padded = compute_head_means(tiny_llama, encoded, batch_size=2, progress=False)
    unpadded = compute_head_means(tiny_llama, encoded, batch_size=1, progress=False)
    assert all(torch.allclose(padded.overall[l], unpadded.overall[l], atol=1e-6) for l in padded.overall)


def test_full_passes_give_the_same_table(tiny_llama, scores, study):
    """The reference path (every condition a full hooked pass) agrees with the replayed study."""
    full = ablation_study(tiny_llama, scores, CONFIG, progress=False, replay_clean=False)
    assert [r.accuracy for r in full] == [r.accuracy for r in study]
    assert all(abs(a.mean_logprob - b.mean_logprob) < 1e-5 for a, b in zip(full, study))


def test_dataclass_rows_are_written_by_their_fields(tmp_path):
    """A table of dataclass rows is the table of their fields, in field order; None is blank."""
    from dataclasses import asdict

    from interp.experiments import DIRECTIONAL_COLUMNS, DirectionalRow

    rows = [DirectionalRow("m", "UF", 5, "plain", 4, 0.5, stderr=0.25, ci_low=0.15, ci_high=0.85, mean_logprob=-1.5,
                           token_accuracy=0.75, n_shots=2, protocol="interp", seed=0),
            DirectionalRow("m", "UF", 70, None, 0, None, note="too long")]
    write_table(rows, tmp_path / "typed")
    write_table([asdict(r) for r in rows], tmp_path / "plain", DIRECTIONAL_COLUMNS)
    assert (tmp_path / "typed.csv").read_text() == (tmp_path / "plain.csv").read_text()
    assert (tmp_path / "typed.csv").read_text().splitlines()[2] == "m,UF,70,,0,,,,,,,,,,too long"
    assert read_csv(tmp_path / "typed.csv")[0]["accuracy"] == 0.5


def test_journal_rows_of_an_earlier_version_are_read_as_typed_rows(tmp_path):
    """A journal written before rows were typed lacks the change from the baseline: the row still
    reads back (the study recomputes that column), and its other fields keep their types."""
    values = {"model": "m", "condition": "induction", "ablation": "zero", "seed": None, "task": "UF", "length": 6,
              "n_examples": 4, "accuracy": 0.25, "mean_logprob": -1.5, "heads": "1.0;1.1"}
    with RowJournal(tmp_path / "ablation", {"run": "old"}, experiments.ABLATION_ROW_SHAPE) as journal:
        journal.add(values)
        (row,) = experiments.journal_rows(journal)
    assert isinstance(row, AblationRow) and row.heads == "1.0;1.1" and row.seed is None and row.accuracy == 0.25
    assert experiments.cell_key(row) == ("induction", "zero", None, "UF", 6)
