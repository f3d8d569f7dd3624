"""Known circuits under noise: circuit discovery scored against the planted edges of every planted
model, at full strength and with the plant drowned in seeded noise."""

import sys
from pathlib import Path

import pytest

from interp.core.journal import RowJournal
from interp.experiments import circuit_sensitivity as study
from interp.experiments.circuit_sensitivity import CircuitSensitivityConfig, circuit_sensitivity
from interp.models.planted import PLANTED_MODELS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyses"))

FAST = dict(seeds=(0,), n=2, steps=4)
QUERY_KEY = (".q<-", ".k<-")


@pytest.fixture(scope="module")
def full_strength():
    """Every planted model as planted, every task, every score."""
    rows = circuit_sensitivity(CircuitSensitivityConfig(strengths=(1.0,), **FAST))
    return {(r.model, r.task, r.method): r for r in rows}


CASES = [("planted-uf", "UF"), ("planted-ub", "UB"), ("planted-ur", "UR"), ("planted-ul", "UL"), ("planted-both", "UB")]


@pytest.mark.parametrize("model,task", CASES)
def test_exact_scores_put_exactly_the_planted_edges_on_top(full_strength, model, task):
    row = full_strength[(model, task, "exact")]
    assert row.clean_accuracy == 1.0
    assert row.auc == 1.0 and row.planted_on_top and row.weakest_planted > row.best_other


@pytest.mark.parametrize("model,task", CASES)
def test_eap_ig_recovers_everything_but_the_query_key_edges(full_strength, model, task):
    """The boundary of the input-path gradients: outside query and key inputs EAP-IG puts exactly the planted
    edges on top; over all edges it does not, and the edge out of place is a query or key edge (a planted
    one scored near zero, or an unplanted one scored above a planted value edge)."""
    row = full_strength[(model, task, "eap-ig")]
    assert row.auc_outside_qk == 1.0
    assert row.auc < 1.0 and not row.planted_on_top
    assert any(q in edge for edge in (row.weakest_planted_edge, row.best_other_edge) for q in QUERY_KEY)


def test_every_planted_model_and_task_is_scored(full_strength):
    assert {(m, t) for m, t, _ in full_strength} == set(CASES)
    assert {m for m, _ in CASES} == set(PLANTED_MODELS)
    assert {method for *_, method in full_strength} == {"eap", "eap-ig", "exact"}


def test_strong_noise_degrades_recovery_for_every_score():
    """Pure noise (strength 0) against the plant: the planted edges are no longer on top and every score's
    AUC falls below its full-strength value."""
    config = CircuitSensitivityConfig(models=("planted-uf", "planted-ub"), strengths=(1.0, 0.0), **FAST)
    rows = {(r.model, r.method, r.strength): r for r in circuit_sensitivity(config)}
    for model in ("planted-uf", "planted-ub"):
        for method in ("eap", "eap-ig", "exact"):
            planted, noise = rows[(model, method, 1.0)], rows[(model, method, 0.0)]
            assert noise.auc < planted.auc and not noise.planted_on_top, (model, method)
        assert rows[(model, "exact", 0.0)].clean_accuracy < rows[(model, "exact", 1.0)].clean_accuracy


def test_component_scores_refuse_a_graph_of_another_grain():
    from interp.interventions.circuits import circuit_runner
    from interp.models import load_model

    model = load_model("planted-ub", device="cpu")
    config = CircuitSensitivityConfig(n=2)
    runner = circuit_runner(model, study.planted_task(model, "UB", config), grain="roles")
    with pytest.raises(ValueError, match="grain='components'"):
        study.component_scores(runner, "exact", config)


def test_a_journaled_cell_is_not_run_again(tmp_path, monkeypatch):
    config = CircuitSensitivityConfig(models=("planted-ub",), strengths=(1.0,), seeds=(0,), methods=("exact",), n=2)
    with RowJournal(tmp_path / "circuit_sensitivity_planted", {"n": 2}) as journal:
        first = circuit_sensitivity(config, journal=journal)
    monkeypatch.setattr(study, "_sensitivity_cell", lambda *a: pytest.fail("ran a journaled cell again"))
    with RowJournal(tmp_path / "circuit_sensitivity_planted", {"n": 2}) as journal:
        assert circuit_sensitivity(config, journal=journal) == first


@pytest.mark.parametrize("argv, fragment", [
    (["--models", "planted-xx"], "argument --models: unknown ['planted-xx']"),
    (["--strengths", "1.5"], "argument --strengths"),
    (["--methods", "acdc"], "argument --methods: unknown ['acdc']"),
    (["--seeds", "1,1"], "argument --seeds: seed(s) [1] given twice"),
])
def test_circuit_sensitivity_refuses_bad_arguments_before_any_work(argv, fragment, capsys, monkeypatch, tmp_path):
    import circuit_sensitivity as script

    monkeypatch.setattr(script, "circuit_sensitivity", lambda *a, **k: pytest.fail("ran the study first"))
    with pytest.raises(SystemExit) as exit_info:
        script.main(["--out", str(tmp_path), *argv])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and fragment in err.strip().splitlines()[-1] and "Traceback" not in err


def test_summarize_rewrites_the_summaries_from_the_rows_without_a_model(tmp_path, capsys, monkeypatch):
    import circuit_sensitivity as script
    from interp.core.tables import read_csv, write_table

    monkeypatch.setattr(script, "circuit_sensitivity", lambda *a, **k: pytest.fail("ran the study"))
    with pytest.raises(SystemExit) as exit_info:
        script.main(["--out", str(tmp_path), "--summarize"])
    assert exit_info.value.code == 2 and "--summarize" in capsys.readouterr().err
    rows = [study.CircuitSensitivityRow("planted-ub", "UB", strength, 0, "exact", auc, auc, auc == 1.0, 2.0,
                                        "logits<-a1.1", 1.0, "logits<-a1.0", 137, 5, accuracy, 30.0)
            for strength, auc, accuracy in ((1.0, 1.0, 1.0), (0.5, 0.9, 0.0))]
    write_table(rows, tmp_path / "circuit_sensitivity_planted")
    assert script.main(["--out", str(tmp_path), "--summarize"]) == 0
    stops = read_csv(tmp_path / "circuit_sensitivity_stops_planted.csv")
    assert [(r["recovered_down_to"], r["stops_at"], r["task_stops_at"]) for r in stops] == [(1.0, 0.5, 0.5)]
