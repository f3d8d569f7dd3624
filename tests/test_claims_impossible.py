"""Claims from impossible tables: each table below once gave a verdict or a number; now it is refused
in one line naming the file, the line and what was expected, or gives no verdict ("cannot test",
with the reason) where the table is sound but cannot carry one."""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

import pytest

from interp.figures.claims import MIN_ROUTE_GAP, MIN_ROUTE_PROMPTS, claim_rows
from interp.figures.claims_figure import claims_matrix

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyses"))

ROUTE_FIELDS = ["model", "task", "length", "format", "shots", "head_set", "prompt", "route", "heads", "clean_metric",
                "counterfactual_metric", "patched_metric", "correct"]


def _write(path: Path, header: list[str], rows: list[list]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _routes(path: Path, drops: dict[str, float], *, n: int = 12, clean: float = 3.0, counterfactual: float = -1.0,
            correct: bool = True, model: str = "m", task: str = "UB") -> Path:
    """A route table: route r lowers the metric by drops[r] x the gap, +-0.1 alternating over prompts."""
    gap = clean - counterfactual
    rows = [[model, task, 5, "single-shot", 1, "all", i, route, "all", clean, counterfactual,
             clean - gap * drop + (0.1 if i % 2 else -0.1), correct] for i in range(n) for route, drop in drops.items()]
    return _write(path, ROUTE_FIELDS, rows)


def _route_claim(folder: Path):
    (claim,) = claim_rows(folder)
    return claim


ANTI = {"o-1": 0.05, "o": 0.8, "o+1": 0.1}  # a sound UB table: the paper's route o carries 0.8 of the gap


def test_a_sound_route_table_still_gets_its_verdict(tmp_path):
    _routes(tmp_path / "circuit_routes_m_UB.csv", ANTI)
    claim = _route_claim(tmp_path)  # a table of shares alone: the share decides, said in the row
    assert claim.verdict == "supports" and claim.why == "largest share; no removal measured" and claim.n == 12
    assert "minus the largest other's +0.70" in claim.note and "o 0.80" in claim.value
    assert claims_matrix([claim])[0]["m"] == "yes (largest share; no removal measured)"  # the grid's number is a drop


def test_a_share_of_100_is_no_verdict(tmp_path):
    _routes(tmp_path / "circuit_routes_m_UB.csv", {"o-1": 0.0, "o": 100.0, "o+1": 0.0})
    claim = _route_claim(tmp_path)  # was: supports, estimate 100
    assert claim.verdict == "cannot test" and "share" in claim.note and not math.isfinite(claim.estimate)
    assert "100" not in claim.value and claims_matrix([claim])[0]["m"] == "- (shares beyond reach)"  # no share shown


@pytest.mark.parametrize("gap", [1e-12, 0.0, MIN_ROUTE_GAP / 2])
def test_a_gap_too_small_to_share_is_no_verdict(tmp_path, gap):
    path = tmp_path / "circuit_routes_m_UB.csv"
    _routes(path, ANTI, clean=2.0, counterfactual=2.0 - gap)
    claim = _route_claim(tmp_path)  # was: supports 5.8e13 (gap 1e-12), NaN (gap 0)
    assert claim.verdict == "cannot test" and "gap" in claim.note and f"{MIN_ROUTE_GAP:g}" in claim.note
    assert not math.isfinite(claim.estimate)
    assert claims_matrix([claim])[0]["m"] == "- (gap too small for a share)"  # no number for a share never measured


def test_a_negative_gap_with_the_copy_correct_is_no_verdict(tmp_path):
    _routes(tmp_path / "circuit_routes_m_UB.csv", {"o-1": 0.05, "o": -0.8, "o+1": 0.1}, clean=-2.0, counterfactual=2.0)
    claim = _route_claim(tmp_path)  # was: contradicts
    assert claim.verdict == "cannot test" and "gap" in claim.note


@pytest.mark.parametrize("n", [1, MIN_ROUTE_PROMPTS - 1])
def test_too_few_prompts_give_no_verdict(tmp_path, n):
    _routes(tmp_path / "circuit_routes_m_UB.csv", ANTI, n=n)
    claim = _route_claim(tmp_path)  # was: supports [1, 1] from one prompt
    assert claim.verdict == "cannot test" and f"{n} prompt" in claim.note and str(MIN_ROUTE_PROMPTS) in claim.note


def test_enough_prompts_give_a_verdict(tmp_path):
    _routes(tmp_path / "circuit_routes_m_UB.csv", ANTI, n=MIN_ROUTE_PROMPTS)
    assert _route_claim(tmp_path).verdict == "supports"


def _route_rows(path: Path) -> list[list[str]]:
    return list(csv.reader(path.open()))


@pytest.mark.parametrize("edit, fragment", [
    # one prompt's clean metric differs between its routes: the gap of which run?
    (lambda rows: rows[2].__setitem__(9, "9.0"), r": prompt 0 of length 5 \(all heads\): clean_metric differs between "
                                                 r"its routes \(3.0, 9.0, 3.0\); expected one value per prompt"),
    # a route that is none of o-1, o, o+1
    (lambda rows: rows[2].__setitem__(7, "o+2"), r": prompt 0 of length 5 \(all heads\) has routes o-1, o\+2, o\+1; "
                                                 r"expected each of o-1, o, o\+1 once"),
    # a prompt without one of its routes
    (lambda rows: rows.pop(2), r": prompt 0 of length 5 \(all heads\) has routes o-1, o\+1; expected each"),
    # a logit difference no model produces
    (lambda rows: rows[1].__setitem__(11, "1e9"), r", line 2: patched_metric is 1000000000.0, expected a number in "
                                                  r"\[-10000, 10000\]"),
])
def test_an_impossible_route_table_is_refused_naming_the_file(tmp_path, edit, fragment):
    path = _routes(tmp_path / "circuit_routes_m_UB.csv", ANTI)
    rows = _route_rows(path)
    edit(rows)
    _write(path, rows[0], rows[1:])
    with pytest.raises(ValueError, match=rf"circuit_routes_m_UB.csv{fragment}"):
        claim_rows(tmp_path)


# --------------------------------------------------------------------------- accuracy tables

ACC = ["model", "task", "length", "n_examples", "accuracy", "seed"]


def _directional(tmp_path: Path, rows: list[list], header: list[str] = ACC) -> Path:
    return _write(tmp_path / "directional_bias_m.csv", header, rows)


SOUND = [["m", "UF", 10, 40, 1.0, 0], ["m", "UB", 10, 40, 0.0, 0]]


def test_a_sound_directional_table_is_read(tmp_path):
    _directional(tmp_path, SOUND)
    (claim,) = claim_rows(tmp_path)
    assert claim.verdict == "supports" and claim.n == 80


@pytest.mark.parametrize("header, rows, fragment", [
    # the header names accuracy twice: the hidden last column decided (UB 0.0 read as 1.0)
    (["model", "task", "length", "n_examples", "accuracy", "accuracy"], [["m", "UF", 10, 40, 1.0, 1.0], ["m", "UB", 10, 40, 0.0, 1.0]],
     r"line 1: column 'accuracy' appears twice"),
    # 0.55 of one example is no count of successes
    (ACC, [["m", "UF", 10, 1, 0.55, 0], ["m", "UB", 10, 40, 0.0, 0]],
     r"line 2: accuracy is 0.55, expected a whole number of successes out of n_examples 1"),
    # another model's rows in m's file
    (ACC, [["m", "UF", 10, 40, 1.0, 0], ["other", "UB", 10, 40, 0.0, 0]],
     r"line 3: model is 'other', expected 'm', the model the file name says"),
    (ACC, [["other", "UF", 10, 40, 1.0, 0], ["other", "UB", 10, 40, 0.0, 0]],
     r"line 2: model is 'other', expected 'm', the model the file name says"),
    # a trillion examples
    (ACC, [["m", "UF", 10, "1e12", 1.0, 0], ["m", "UB", 10, 40, 0.0, 0]], r"line 2: n_examples is 1000000000000.0, expected an integer in \[1, 1e\+06\]"),
    # 2_0 is 20 to Python's int(), not to a CSV reader
    (ACC, [["m", "UF", 10, "2_0", 1.0, 0], ["m", "UB", 10, 40, 0.0, 0]], r"line 2: n_examples is '2_0', expected an integer"),
    (ACC, [["m", "UF", 10, " 40", 1.0, 0], ["m", "UB", 10, 40, 0.0, 0]], r"line 2: n_examples is ' 40', expected an integer"),
    (ACC, [["m", "UF", 10, "+40", 1.0, 0], ["m", "UB", 10, 40, 0.0, 0]], r"line 2: n_examples is '\+40', expected an integer"),
    (ACC, [["m", "UF", 10, "0x28", 1.0, 0], ["m", "UB", 10, 40, 0.0, 0]], r"line 2: n_examples is '0x28', expected an integer"),
    (ACC, [["m", "UF", 10, "\u0664\u0660", 1.0, 0], ["m", "UB", 10, 40, 0.0, 0]], r"line 2: n_examples is .*, expected an integer"),
    (ACC, [["m", "UF", 10, 40, "Infinity", 0], ["m", "UB", 10, 40, 0.0, 0]], r"line 2: accuracy is 'Infinity', expected a number"),
    # a lower-case task was silently left out of every claim
    (ACC, [["m", "uf", 10, 40, 1.0, 0], ["m", "UB", 10, 40, 0.0, 0]], r"line 2: task is 'uf', expected one of .*UF"),
    # the same cell again under another seed doubled n
    (ACC, [*SOUND, ["m", "UF", 10, 40, 1.0, 1]], r"lines 2 and 4: the same \(model, task, length\) twice"),
])
def test_an_impossible_accuracy_table_is_refused_in_one_line(tmp_path, header, rows, fragment):
    _directional(tmp_path, rows, header)
    with pytest.raises(ValueError, match=rf"directional_bias_m.csv, {fragment}"):
        claim_rows(tmp_path)


EDGE = ["model", "task", "length", "condition", "n_examples", "accuracy", "ci_low", "ci_high"]


@pytest.mark.parametrize("row, fragment", [
    (["m", "UF", 5, "none", 40, 0.9, 0.95, 0.8], r"ci_low 0.95 is above ci_high 0.8"),
    (["m", "UF", 5, "none", 40, 0.9, 0.1, 0.2], r"accuracy 0.9 lies outside \[ci_low, ci_high\] = \[0.1, 0.2\]"),
])
def test_an_interval_that_is_no_interval_is_refused(tmp_path, row, fragment):
    _write(tmp_path / "edge_patching_m.csv", EDGE, [row, ["m", "UF", 5, "induction", 40, 0.1, 0.04, 0.23]])
    with pytest.raises(ValueError, match=rf"edge_patching_m.csv, line 2: {fragment}"):
        claim_rows(tmp_path)


def test_ablation_random_rows_may_repeat_under_seeds_but_other_conditions_may_not(tmp_path):
    header = ["model", "condition", "ablation", "seed", "task", "length", "n_examples", "accuracy", "heads"]
    rows = [["m", "baseline", "none", "", "UF", 10, 30, 1.0, ""], ["m", "induction", "zero", "", "UF", 10, 30, 0.0, "1.0"],
            ["m", "random", "zero", 0, "UF", 10, 30, 1.0, "1.3"], ["m", "random", "zero", 2, "UF", 10, 30, 1.0, "1.3"]]
    _write(tmp_path / "ablation_m.csv", header, rows)  # two seeds that drew the same head: two draws
    (claim,) = claim_rows(tmp_path)
    assert claim.verdict == "supports"
    _write(tmp_path / "ablation_m.csv", header, [*rows, ["m", "baseline", "none", 1, "UF", 10, 30, 1.0, ""]])
    with pytest.raises(ValueError, match=r"ablation_m.csv, lines 2 and 6: the same \(model, condition, ablation, task, "
                                         r"length, heads\) twice"):
        claim_rows(tmp_path)


HEADS = ["model", "layer", "head", "induction", "anti_induction"]


def test_a_head_score_table_missing_heads_is_refused(tmp_path):
    # one head of SmolLM2's 30 x 9: its best induction head, alone, was a verdict over "1 heads"
    _write(tmp_path / "head_scores_m.csv", HEADS, [["m", 18, 6, 0.92, 0.01]])
    with pytest.raises(ValueError, match=r"head_scores_m.csv: 1 of the 19 x 7 heads \(layers 0-18, heads 0-6\); "
                                         r"missing e.g. 0.0"):
        claim_rows(tmp_path)
    grid = [["m", layer, head, 0.5, 0.01] for layer in range(2) for head in range(3)]
    _write(tmp_path / "head_scores_m.csv", HEADS, grid[:-1])
    with pytest.raises(ValueError, match=r"5 of the 2 x 3 heads .* missing e.g. 1.2"):
        claim_rows(tmp_path)
    _write(tmp_path / "head_scores_m.csv", HEADS, grid)
    assert [c.verdict for c in claim_rows(tmp_path)] == ["supports", "supports"]  # strong induction, weak anti-induction


def test_claims_script_refuses_an_impossible_table_in_one_line_writing_nothing(tmp_path, capsys):
    import claims

    _directional(tmp_path, [["m", "UF", 10, 1, 0.55, 0], ["m", "UB", 10, 40, 0.0, 0]])
    out = tmp_path / "out"
    code = claims.run(claims.main, ["--results", str(tmp_path), "--out", str(out), "--formats", ""])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "directional_bias_m.csv, line 2: accuracy is 0.55" in err[0], err
    assert not out.exists() or not any(out.iterdir())
