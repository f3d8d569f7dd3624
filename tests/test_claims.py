"""The claims table: each claim decided from small hand-made results tables whose answer is known."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from interp.figures.claims import claim_rows, claims_figure, difference_interval


def _write(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _acc(model, task, length, accuracy, n=50, **extra):
    return {"model": model, "task": task, "length": length, "accuracy": accuracy, "n_examples": n, **extra}


@pytest.fixture()
def results(tmp_path: Path) -> Path:
    _write(tmp_path / "directional_bias_m.csv", [_acc("m", "UF", 10, 1.0), _acc("m", "UB", 10, 0.0),
                                                  _acc("m", "UR", 10, 0.5), _acc("m", "UL", 10, 0.46)])
    _write(tmp_path / "head_scores_m.csv", [
        {"model": "m", "layer": 1, "head": 0, "induction": 0.93, "anti_induction": 0.04},
        {"model": "m", "layer": 0, "head": 1, "induction": 0.02, "anti_induction": 0.01}])
    ablation = [_acc("m", "UF", 10, 1.0, condition="baseline", ablation="none"),
                _acc("m", "UB", 10, 0.0, condition="baseline", ablation="none"),
                _acc("m", "UF", 10, 0.2, condition="induction", ablation="zero"),
                _acc("m", "UB", 10, 0.0, condition="anti_induction", ablation="zero"),
                _acc("m", "UF", 10, 1.0, condition="random", ablation="zero"),
                _acc("m", "UB", 10, 0.0, condition="random", ablation="zero")]
    _write(tmp_path / "ablation_m.csv", ablation)
    _write(tmp_path / "edge_patching_m.csv", [
        _acc("m", "UF", 5, 0.9, condition="none"), _acc("m", "UF", 5, 0.1, condition="induction"),
        _acc("m", "UB", 5, 0.8, condition="none"), _acc("m", "UB", 5, 0.78, condition="anti_induction")])
    _write(tmp_path / "from_scratch.csv", [
        {"task": t, "positional": "absolute", "split": "ood", "lengths": "21-40", "accuracy": a, "expressible": e}
        for t, a, e in (("UF", 0.99, True), ("UB", 0.98, True), ("NF", 0.3, False), ("NB", 0.2, False))])
    return tmp_path


def test_each_claim_gets_the_verdict_its_numbers_give(results):
    got = {(c.claim.split(" (")[0], c.model): c for c in claim_rows(results)}
    assert got[("UF > UB", "m")].verdict == "supports" and got[("UF > UB", "m")].lo > 0.8
    assert got[("UR > UL", "m")].verdict == "inconclusive"  # 0.50 vs 0.46 at n = 50 each
    assert got[("strong induction heads", "m")].verdict == "supports"
    assert got[("weak anti-induction heads", "m")].verdict == "supports"
    assert got[("induction-head ablation breaks UF", "m")].verdict == "supports"
    ub = got[("anti-induction-head ablation breaks UB", "m")]
    assert ub.verdict == "cannot test" and "UB at 0.00" in ub.note  # nothing to break at the floor
    assert got[("induction edges carry UF", "m")].verdict == "supports"
    assert got[("anti-induction edges carry UB", "m")].verdict == "inconclusive"  # 0.80 -> 0.78
    scratch = got[("expressible tasks length-generalize from scratch, inexpressible do not", "from scratch (absolute)")]
    assert scratch.verdict == "supports"


def test_edges_that_change_nothing_contradict_carrying(results):
    (results / "edge_patching_m.csv").write_text((results / "edge_patching_m.csv").read_text()
                                                 .replace("UB,5,0.78,50", "UB,5,0.8,50").replace(",50,", ",400,"))
    got = {c.claim: c for c in claim_rows(results)}
    carry = got["anti-induction edges carry UB"]
    assert carry.verdict == "contradicts" and carry.hi < 0.1 and "below 0.1" in carry.note  # 0.80 -> 0.80, n = 400


def test_an_ablation_no_worse_than_random_heads_is_not_support(results):
    rows = (results / "ablation_m.csv").read_text().replace("m,UF,10,1.0,50,random", "m,UF,10,0.2,50,random")
    (results / "ablation_m.csv").write_text(rows)
    got = {c.claim: c for c in claim_rows(results)}
    assert got["induction-head ablation breaks UF"].verdict == "inconclusive"


def test_difference_interval_is_newcombes():
    d, lo, hi = difference_interval((25, 50), (25, 50))
    assert d == 0 and lo < 0 < hi and abs(lo + hi) < 1e-12
    _, lo, hi = difference_interval((50, 50), (0, 50))
    assert 0.89 < lo < hi <= 1.0  # 1 - sqrt(2) x (1 - Wilson lower bound of 50/50)


def test_claims_figure_has_one_mark_per_claim_and_model(results):
    claims = claim_rows(results)
    fig = claims_figure(claims)
    assert sum(len(t.x) for t in fig.data) == len(claims)
