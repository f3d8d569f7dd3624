"""Every kind of table the toolkit publishes is checked by `read_published`: a schema where its columns
are known (the claims and their matrix included), else the generic rule (names plain and unique,
numbers finite, text without markup or formula). Nothing in results/ is "a table of no schema"."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from interp.core.naming import RESULT_KINDS, split_result_stem
from interp.core.published import SCHEMAS, TASK_NAMES, read_published, schema_for

ROOT = Path(__file__).resolve().parents[1]


def _smallest_of_each_kind() -> list[Path]:
    kinds: dict[str, Path] = {}
    for path in sorted((ROOT / "results").glob("*.csv"), key=lambda p: p.stat().st_size):
        kinds.setdefault(split_result_stem(path.stem)[0], path)
    return sorted(kinds.values())


@pytest.mark.parametrize("path", _smallest_of_each_kind(), ids=lambda p: p.name)
def test_a_published_table_of_every_kind_reads(path):
    rows = read_published(path)  # was: "no schema for tables of kind 'circuit_summary'" (and 20 other kinds)
    assert rows and all(isinstance(r, dict) for r in rows)


def test_every_kind_the_toolkit_writes_has_a_rule():
    assert all(schema_for(kind) is not None for kind in RESULT_KINDS)
    assert {"claims", "claims_matrix", "circuit_routes"} <= set(SCHEMAS)
    with pytest.raises(ValueError, match=r"no tables of kind 'nonsense'"):
        schema_for("nonsense")


def test_the_task_names_are_the_data_layers():
    from interp.data.tasks import TASK_NAMES as DATA_TASKS

    assert TASK_NAMES == DATA_TASKS


def _write(path: Path, header: list[str], rows: list[list]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


SUMMARY = ["model", "task", "length", "method", "clean_accuracy", "attention_top"]
SOUND_SUMMARY = ["m", "UF", 5, "eap-ig", 0.75, "a11.2 value c->o+1"]


@pytest.mark.parametrize("cell", ["[a](javascript:alert(1))", "[a](https://x){ onclick=alert(1) }", "<script>alert(1)</script>",
                                  "&#106;avascript", "=cmd|' /C calc'!A0", "'=HYPERLINK(1)", "-SUM(1)", "`code`", "a\nb",
                                  "a\u202eb"])
def test_a_table_without_a_schema_refuses_markup_and_formulas(tmp_path, cell):
    path = _write(tmp_path / "circuit_summary_m_UF.csv", SUMMARY, [SOUND_SUMMARY[:-1] + [cell]])
    # a cell over two lines is named by the line it ends on
    with pytest.raises(ValueError, match=r"circuit_summary_m_UF.csv, line [23]: attention_top is .*, expected plain text "
                                         r"\(no markup, no formula\)$"):
        read_published(path)


@pytest.mark.parametrize("header, row, fragment", [
    (SUMMARY, ["m", "UF", 5, "eap-ig", "inf", "x"], r"line 2: clean_accuracy is inf, expected a finite number"),
    (SUMMARY, ["other", "UF", 5, "eap-ig", 0.75, "x"], r"line 2: model is 'other', expected 'm'"),
    (SUMMARY, ["m", "UB", 5, "eap-ig", 0.75, "x"], r"line 2: task is 'UB', expected 'UF', the task the file name says"),
    (SUMMARY[:-1] + ["model"], ["m", "UF", 5, "eap-ig", 0.75, "m"], r"line 1: column 'model' appears twice"),
    (SUMMARY[:-1] + ["<b>x</b>"], SOUND_SUMMARY, r"line 1: column name '<b>x</b>' is not a column"),
    (SUMMARY + ["ci_low", "ci_high"], SOUND_SUMMARY + [0.9, 0.1], r"line 2: ci_low 0.9 is above ci_high 0.1"),
])
def test_a_table_without_a_schema_is_still_checked(tmp_path, header, row, fragment):
    path = _write(tmp_path / "circuit_summary_m_UF.csv", header, [row])
    with pytest.raises(ValueError, match=rf"circuit_summary_m_UF.csv, {fragment}"):
        read_published(path)


def test_a_sound_table_without_a_schema_reads(tmp_path):
    path = _write(tmp_path / "circuit_summary_m_UF.csv", SUMMARY + ["note"], [SOUND_SUMMARY + ["nan"]])
    (row,) = read_published(path)
    assert row["attention_top"] == "a11.2 value c->o+1" and row["clean_accuracy"] == 0.75


CLAIMS = ["claim", "model", "value", "estimate", "lo", "hi", "n", "verdict", "source", "note"]
CLAIM = ["UF > UB (forward beats backward copying)", "m", "UF 1.00 vs UB 0.00 (lengths 10)", 1.0, 0.9, 1.0, 80, "supports",
         "directional_bias_m.csv", ""]


@pytest.mark.parametrize("index, value, fragment", [
    (0, "<img src=x onerror=alert(1)>", "claim is"),
    (2, "see [here](javascript:alert(1))", "value is"),
    (7, "maybe", r"verdict is 'maybe', expected one of supports, contradicts, inconclusive, cannot test"),
    (4, 1.5, r"lo 1.5 is above hi 1.0"),
    (6, -1, r"n is -1, expected an integer >= 0"),
])
def test_a_claims_table_is_checked(tmp_path, index, value, fragment):
    assert len(read_published(_write(tmp_path / "claims.csv", CLAIMS, [CLAIM]))) == 1
    row = list(CLAIM)
    row[index] = value
    path = _write(tmp_path / "claims.csv", CLAIMS, [row])
    with pytest.raises(ValueError, match=rf"claims.csv, line 2: {fragment}"):
        read_published(path)


@pytest.mark.parametrize("header, row, fragment", [
    (["claim", "m"], ["UF > UB", "<b>yes</b>"], r"line 2: m is '<b>yes</b>', expected plain text"),
    (["claim", "m"], ["UF > UB", "yes +0.80 [x](y)"], r"line 2: m is"),
    (["claim", "m<script>"], ["UF > UB", "yes +0.80"], r"line 1: column name 'm<script>'"),
    (["claim", "m", "m"], ["UF > UB", "yes +0.80", "NO -0.10"], r"line 1: column 'm' appears twice"),
])
def test_a_claims_matrix_is_checked(tmp_path, header, row, fragment):
    sound = _write(tmp_path / "claims_matrix.csv", ["claim", "m", "from scratch, mechanism (rope)"],
                   [["UF > UB", "yes +0.80", ""], ["UR > UL", "-", "? -0.03"]])
    assert len(read_published(sound)) == 2
    path = _write(tmp_path / "claims_matrix.csv", header, [row])
    with pytest.raises(ValueError, match=rf"claims_matrix.csv, {fragment}"):
        read_published(path)


def test_model_text_in_a_lorem_table_must_be_a_quoted_token(tmp_path):
    header = ["model", "paragraph", "last_copied", "expected", "produced", "context"]
    path = _write(tmp_path / "lorem_ipsum_m.csv", header, [["m", 0, "'<start>'", "' Tem'", "' <'", "ia. Dolorem"]])
    assert read_published(path)[0]["produced"] == "' <'"  # model text, kept as written and shown escaped
    _write(path, header, [["m", 0, "'<start>'", "' Tem'", "'a\nb'", ""]])
    with pytest.raises(ValueError, match=r"line 3: produced is .*expected a quoted token"):
        read_published(path)
