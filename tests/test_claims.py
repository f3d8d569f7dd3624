"""The claims table: each claim decided from small hand-made results tables whose answer is known."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyses"))

from interp.figures.claims import claim_rows, difference_interval
from interp.figures.claims_figure import claims_figure


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
        {"model": "m", "layer": 0, "head": 0, "induction": 0.01, "anti_induction": 0.02},
        {"model": "m", "layer": 0, "head": 1, "induction": 0.02, "anti_induction": 0.01},
        {"model": "m", "layer": 1, "head": 1, "induction": 0.03, "anti_induction": 0.03}])
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
    uf = got[("UF's copy runs through induction", "m")]
    assert uf.verdict == "supports" and uf.why == "needed"  # 0.90 -> 0.10 without the induction edges (n = 50)
    ub = got[("UB's copy runs through anti-induction", "m")]
    assert ub.verdict == "contradicts" and ub.why == "o not needed"  # 0.80 -> 0.78: the copy survives
    scratch = got[("expressible tasks length-generalize from scratch, inexpressible do not", "from scratch (absolute)")]
    assert scratch.verdict == "supports"


def test_edges_that_change_nothing_contradict_carrying(results):
    (results / "edge_patching_m.csv").write_text((results / "edge_patching_m.csv").read_text()
                                                 .replace("UB,5,0.78,50", "UB,5,0.8,50").replace(",50,", ",400,"))
    got = {c.claim: c for c in claim_rows(results)}
    carry = got["UB's copy runs through anti-induction (reads at o)"]
    assert carry.verdict == "contradicts" and carry.estimate == 0 and carry.hi < 0.1  # 0.80 -> 0.80, n = 400
    assert "0.80 -> 0.80" in carry.value and "not used: no route table" in carry.value


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


# --------------------------------------------------------------------------- damaged and hostile tables

import sys  # noqa: E402

from interp.core.journal import RowJournal  # noqa: E402
from interp.core.tables import stem_file, write_table  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyses"))


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize("value", ["inf", "-7", "99", "nan", "abc", "-inf"])
def test_an_impossible_head_score_is_refused_naming_file_and_line(results, value):
    _replace(results / "head_scores_m.csv", "0.93", value)
    with pytest.raises(ValueError, match=rf"head_scores_m.csv, line 2: induction is '?{value}'?, expected a number "
                                         rf"in \[0, 1\]"):
        claim_rows(results)


@pytest.mark.parametrize("old, new, fragment", [
    ("m,UF,10,1.0,50", "m,UF,10,1.7,50", r"line 2: accuracy is 1.7, expected a number in \[0, 1\]"),
    ("m,UF,10,1.0,50", "m,UF,10,-0.5,50", r"line 2: accuracy is -0.5, expected a number in \[0, 1\]"),
    ("m,UF,10,1.0,50", "m,UF,10,1.0,0", r"line 2: n_examples is 0, expected an integer in \[1, 1e\+06\]"),
    ("m,UF,10,1.0,50", "m,UF,10,1.0,2.5", r"line 2: n_examples is 2.5, expected an integer in \[1, 1e\+06\]"),
    ("m,UF,10,1.0,50", "m,UF,10,abc,50", r"line 2: accuracy is 'abc', expected a number"),
    ("m,UF,10,1.0,50", "m,UF,0,1.0,50", r"line 2: length is 0, expected an integer in \[1, 1e\+06\]"),
    ("m,UF,10,1.0,50", "m,,10,1.0,50", r"line 2: task is empty"),
])
def test_an_impossible_accuracy_row_is_refused_naming_file_and_line(results, old, new, fragment):
    _replace(results / "directional_bias_m.csv", old, new)
    with pytest.raises(ValueError, match=rf"directional_bias_m.csv, {fragment}"):
        claim_rows(results)


def test_a_row_written_twice_is_refused_not_counted_twice(results):
    path = results / "directional_bias_m.csv"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, lines[1]]) + "\n")  # n would double, the interval narrow
    with pytest.raises(ValueError, match=r"directional_bias_m.csv, lines 2 and 6: the same \(model, task, length\) twice"):
        claim_rows(results)


@pytest.mark.parametrize("text, fragment", [
    ("", r"is empty \(not even a header\)"),
    ("model,layer,head,induction\n", "has a header but no rows"),
    ("model,induction\nm,0.9\n", r"lacks column\(s\) \['layer', 'head'\]"),
])
def test_an_empty_or_columnless_table_is_named_not_silently_dropped(results, text, fragment):
    (results / "head_scores_m.csv").write_text(text)
    with pytest.raises(ValueError, match=rf"head_scores_m.csv {fragment}"):
        claim_rows(results)


@pytest.mark.parametrize("name", ["=cmd|' -C calc'!A0", "@SUM(1+9)*cmd", "m|forged|row", "<img src=x onerror=alert(1)>",
                                  "+SUM(1)", "-2+3", "a\\nb"])
def test_a_hostile_model_name_is_refused(results, name):
    path = results / "head_scores_m.csv"
    path.write_text(path.read_text().replace("\nm,", f"\n\"{name}\","))
    with pytest.raises(ValueError, match=r"head_scores_m.csv, line 2: model is .*expected a name"):
        claim_rows(results)


def test_a_hostile_name_in_a_file_name_is_refused(results):
    (results / "directional_bias_m.csv").rename(results / "directional_bias_=HYPERLINK(x).csv")
    with pytest.raises(ValueError, match=r"is not a model name or variant"):
        claim_rows(results)


def test_tables_escape_cells_for_each_format(tmp_path):
    rows = [{"model": "=cmd|' -C calc'!A0", "value": "a|b\nc <img src=x onerror=y>", "gap": "- +0.00"}]
    csv_path, _, md_path = write_table(rows, tmp_path / "t")
    read = list(csv.reader(csv_path.open()))
    assert read[1][0] == "'=cmd|' -C calc'!A0" and read[1][2] == "- +0.00"
    md = md_path.read_text().splitlines()
    assert len(md) == 3 and "<img" not in md[2] and md[2].count(" | ") == 2 and "a\\|b c &lt;img" in md[2]


@pytest.mark.parametrize("make, fragment", [
    (lambda r: (r / "ablation_x.csv").mkdir(), "ablation_x.csv is not a file"),
    (lambda r: (r / "ablation_m.csv").write_text("model,task\nm,UF\n"), "ablation_m.csv lacks column(s)"),
    (lambda r: _replace(r / "ablation_m.csv", "m,UF,10,1.0,50", "m,UF,10,1.0,0"), "n_examples is 0"),
])
def test_claims_script_problems_are_one_line_naming_the_file(results, capsys, make, fragment):
    import claims

    make(results)
    code = claims.run(claims.main, ["--results", str(results), "--out", str(results / "out"), "--formats", ""])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and fragment in err[0] and str(results) in err[0], err


def test_claims_script_refuses_a_file_as_out_before_reading(results, capsys):
    import claims

    (results / "out").write_text("x")
    with pytest.raises(SystemExit) as exit_info:
        claims.main(["--results", str(results), "--out", str(results / "out"), "--formats", ""])
    assert exit_info.value.code == 2 and "argument --out: cannot write into" in capsys.readouterr().err


def test_claims_figure_shows_names_as_text(results):
    from interp.figures.claims import Claim

    fig = claims_figure([Claim("UF > UB <b>", "m", "<img src=x>", 1.0, 0.9, 1.0, 40, "supports", "x.csv")])
    assert "<img" not in fig.data[0].hovertext[0] and "<b>" not in fig.data[0].y[0]


@pytest.mark.parametrize("accuracy", [float("nan"), 7.5, -0.1, float("inf")])
def test_a_journal_row_with_an_impossible_accuracy_is_not_finished_work(tmp_path, accuracy, caplog):
    stem = tmp_path / "ablation_m"
    with RowJournal(stem, {"n": 1}, {"task": str, "accuracy": (int, float)}) as journal:
        journal.add({"task": "UF", "accuracy": 0.5})
        journal.add({"task": "UB", "accuracy": accuracy})
        journal.add({"task": "UR", "cells": [{"accuracy": accuracy}], "accuracy": 0.5})
    with RowJournal(stem, {"n": 1}, {"task": str, "accuracy": (int, float)}) as journal:
        assert [r["task"] for r in journal.done()] == ["UF"]
    assert f"{stem_file(stem, 'partial.jsonl')}:3: skipping a damaged journal line (accuracy is" in caplog.text


def test_every_table_the_claims_read_has_a_schema():
    from interp.core.published import SCHEMAS
    from interp.figures.claims import READERS

    assert set(READERS) <= set(SCHEMAS)


GIT_ROW = {"model": "m", "task": "revert", "order": "forward", "n_commits": 10, "n_examples": 20, "accuracy": 0.9,
           "stderr": 0.07, "token_accuracy": 0.95, "mean_logprob": -0.2, "generate_accuracy": None,
           "natural_split": 1.0, "n_shots": 2, "seed": 0}
LOREM_ROW = {"model": "m", "n_paragraphs": 16, "accuracy": 0.25, "share_departures_ambiguous": float("nan"),
             "tf_accuracy_ambiguous": 0.9, "tf_accuracy_unambiguous": 2732 / 2760, "n_ambiguous_positions": 300,
             "n_unambiguous_positions": 2760, "n_shots": 2, "seed": 0}


@pytest.mark.parametrize("stem, rows, fragment", [
    ("git_history_m", [GIT_ROW], None),
    ("git_history_m", [GIT_ROW, GIT_ROW], r"lines 2 and 3: the same \(model, task, n_commits, n_shots\) twice"),
    ("git_history_m", [{**GIT_ROW, "accuracy": 7.5}], r"line 2: accuracy is 7.5"),
    ("git_history_m", [{**GIT_ROW, "n_commits": -3}], r"line 2: n_commits is -3"),
    ("lorem_ipsum_summary_m", [LOREM_ROW], None),  # a share of no departures is undefined, not damage
    ("lorem_ipsum_summary_m", [{**LOREM_ROW, "tf_accuracy_ambiguous": 9.0}], r"line 2: tf_accuracy_ambiguous is 9.0"),
    ("lorem_ipsum_summary_m", [{**LOREM_ROW, "n_paragraphs": 0}], r"line 2: n_paragraphs is 0"),
])
def test_the_realistic_tables_are_checked_like_the_others(tmp_path, stem, rows, fragment):
    from interp.core.published import read_published

    csv_path = write_table(rows, tmp_path / stem)[0]
    if fragment is None:
        assert len(read_published(csv_path)) == len(rows)
    else:
        with pytest.raises(ValueError, match=rf"{stem}.csv, {fragment}"):
            read_published(csv_path)


def test_claims_writes_its_matrix_into_the_readme_between_the_markers(tmp_path):
    import claims as claims_script

    page = tmp_path / "README.md"
    page.write_text("# Title\n\n<!-- claims-matrix:start -->\nold table\n<!-- claims-matrix:end -->\nMore text.\n")
    out = tmp_path / "out"
    out.mkdir()
    claims_script.main(["--out", str(out), "--formats", "", "--readme", str(page), "--quiet"])
    text = page.read_text()
    matrix = (out / "claims_matrix.md").read_text().strip()
    assert "old table" not in text and f"<!-- claims-matrix:start -->\n{matrix}\n<!-- claims-matrix:end -->" in text
    assert text.startswith("# Title\n\n") and text.endswith("More text.\n")


def test_the_readme_matrix_is_the_published_one():
    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    block = readme.split("<!-- claims-matrix:start -->\n", 1)[1].split("\n<!-- claims-matrix:end -->", 1)[0]
    assert block == (root / "results" / "claims_matrix.md").read_text().strip(), "run `make claims`"


def test_claims_refuses_a_readme_without_markers_in_one_line(tmp_path, capsys):
    import claims as claims_script
    from interp.cli import run

    page = tmp_path / "README.md"
    page.write_text("# no markers\n")
    with pytest.raises(SystemExit) as exit_info:
        run(claims_script.main, ["--out", str(tmp_path), "--formats", "", "--readme", str(page)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--readme" in err.strip().splitlines()[-1] and "claims-matrix:start" in err and "Traceback" not in err
