"""analyses/circuit_routes.py: arguments checked before torch is imported, the table it writes, and a
prompt whose string starts at position 0."""

from __future__ import annotations

import subprocess
import sys

import pytest
from script_loading import load_script, run_without_torch

from interp.cli import run
from interp.core.tables import read_csv


@pytest.fixture(scope="module")
def script():
    return load_script("circuit_routes")


def without_torch(*argv: str) -> subprocess.CompletedProcess:
    """The script run with ``import torch`` made to fail."""
    return run_without_torch("circuit_routes", *argv)


def test_the_scripts_names_are_the_librarys(script):
    from interp.experiments.routes import READ_KINDS, ROUTE_COUNTERFACTUALS
    from interp.interventions.edges import data

    assert script.TASKS == data.TASKS and set(script.FORMATS) == set(data.FORMATS)
    assert (script.MIN_LENGTH, script.MAX_LENGTH, script.DEFAULT_SHOTS) == (data.MIN_LENGTH, data.MAX_LENGTH, data.DEFAULT_SHOTS)
    assert script.COUNTERFACTUALS == ROUTE_COUNTERFACTUALS and script.READ_KINDS == READ_KINDS


@pytest.mark.parametrize("argv,argument", [
    (["--lengths", "30"], "--lengths"), (["--counterfactuals", "noise"], "--counterfactuals"),
    (["--format", "single-shot", "--shots", "3"], "--shots"), (["--n", "100000"], "--n"),
    (["--kinds", "query"], "--kinds"), (["--layers", "1,1"], "--layers"), (["--workers", "2"], "--workers"),
])
def test_bad_arguments_are_refused_in_one_line_before_torch(tmp_path, argv, argument):
    done = without_torch(*argv, "--out", str(tmp_path))
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(f"circuit_routes.py: error: argument {argument}")
    assert "Traceback" not in done.stderr and not list(tmp_path.iterdir())


def test_help_needs_no_torch_and_names_the_papers_edges():
    done = without_torch("--help")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "``o(t)`` (the paper's anti-induction edge" in text and "``o(t) + 1`` (the paper's induction edge)" in text
    assert "``o(t) - 1`` (the paper's anti-induction" not in text  # o - 1 read directly is a third route
    assert "--executor" in text and "--counterfactuals" in text


def test_a_string_at_position_zero_skips_the_read_before_it(tmp_path, script, capsys):
    """The few-shot prompt of one shot without BOS starts with the string: ``o - 1`` of the first copy
    position is position -1 (the run stopped with 'edges: source positions must be >= 0')."""
    code = run(script.main, ["--model", "planted-uf", "--task", "UF", "--lengths", "4", "--n", "4", "--format", "few-shot",
                             "--shots", "1", "--bos", "no", "--out", str(tmp_path), "--counterfactuals", "zero", "--quiet"])
    out = capsys.readouterr()
    assert code == 0, out.err
    rows = read_csv(tmp_path / "circuit_routes_planted-uf_UF_few-shot.csv")
    skipped = {(r["route"], r["test"]): r["skipped"] for r in rows if r["kind"] == "value"}
    assert skipped[("o-1", "necessity")] == skipped[("o-1+o", "necessity")] == skipped[("o-1", "sufficiency")] == 1
    assert skipped[("o", "necessity")] == 0
    assert "skipped (source before the prompt): 1 read(s) of o-1" in out.out


def test_the_table_keeps_the_share_columns_and_adds_the_removals(tmp_path, script, capsys):
    from interp.experiments.routes import route_shares

    argv = ["--model", "planted-ub", "--task", "UB", "--lengths", "4", "--n", "6", "--layers", "1", "--out", str(tmp_path),
            "--results", str(tmp_path), "--counterfactuals", "zero,corrupt", "--boot", "200", "--quiet"]
    assert run(script.main, argv) == 0
    out = capsys.readouterr().out
    rows = read_csv(tmp_path / "circuit_routes_planted-ub_UB.csv")
    for column in ("route", "head_set", "prompt", "clean_metric", "counterfactual_metric", "patched_metric", "correct",
                   "kind", "test", "counterfactual", "patched_correct", "patched_margin", "patched_logprob"):
        assert column in rows[0]
    assert {r["head_set"] for r in rows} == {"all", "layers_1"}  # no circuit in tmp_path
    assert len(rows) == 2 * 6 * 2 * 2 * 7  # head sets x prompts x kinds x counterfactuals x removals
    shares = route_shares([r for r in rows if r["head_set"] == "all"], n_boot=200)
    assert shares["o"].share > 0.99 and abs(shares["o+1"].share) < 0.01
    assert "o value read removed (zero): 0/6 exact copies" in out and ": needed" in out
    assert "share of the logit-difference gap (value reads, corrupt): o-1 +0.00" in out


def test_a_layer_the_model_lacks_is_refused_after_loading_with_nothing_written(tmp_path, script, capsys):
    with pytest.raises(SystemExit) as stopped:
        script.main(["--model", "planted-ub", "--lengths", "4", "--n", "2", "--layers", "5", "--out", str(tmp_path), "--quiet"])
    assert stopped.value.code == 2 and "argument --layers: expected layers 0-1" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
