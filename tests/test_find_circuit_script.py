"""analyses/find_circuit.py: arguments checked (with bounds on what they cost) before torch is imported, the tables
it writes, a weak task refused, and a stopped run resumed from its stages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from script_loading import load_script, run_without_torch

from interp.core.tables import read_csv

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "analyses" / "find_circuit.py"


@pytest.fixture(scope="module")
def script():
    return load_script("find_circuit")


def without_torch(*argv: str) -> subprocess.CompletedProcess:
    """The script run with ``import torch`` made to fail."""
    return run_without_torch("find_circuit", *argv)


def test_the_scripts_names_are_the_librarys(script):
    from interp.interventions.circuits.find import SELECTIONS
    from interp.interventions.circuits.role_graph import GRAINS
    from interp.interventions.circuits.role_scores import ROLE_METHODS
    from interp.interventions.circuits.task import COUNTERFACTUALS, METRICS, RETRIEVAL_TASKS
    from interp.interventions.edges import data

    assert script.METHODS == SELECTIONS and script.SCORES == ROLE_METHODS
    assert script.GRAINS == GRAINS and script.COUNTERFACTUALS == COUNTERFACTUALS
    assert script.METRICS == METRICS and set(script.FORMATS) == set(data.FORMATS)
    assert (script.MIN_LENGTH, script.MAX_LENGTH) == (data.MIN_LENGTH, data.MAX_LENGTH)
    assert set(script.TASKS) == set(data.TASKS) | set(RETRIEVAL_TASKS)


@pytest.mark.parametrize("argv,argument", [
    (["--steps", "100000000"], "--steps"), (["--random", "100000"], "--random"), (["--shots", "100000", "--format", "few-shot"], "--shots"),
    (["--lengths", "4,4"], "--lengths"), (["--verify", "10000000"], "--verify"), (["--lengths", "30"], "--lengths"),
    (["--mask-steps", "1"], "--mask-steps"), (["--method", "acdc"], "--method"), (["--n", "100000"], "--n"),
    (["--counterfactual", "zero"], "--score"), (["--task", "UR", "--format", "few-shot"], "--format"),
])
def test_costly_or_bad_arguments_are_refused_in_one_line_before_torch(tmp_path, argv, argument):
    done = without_torch(*argv, "--out", str(tmp_path))
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(f"find_circuit.py: error: argument {argument}")
    assert "Traceback" not in done.stderr and not list(tmp_path.iterdir())


def test_help_needs_no_torch():
    done = without_torch("--help")
    assert done.returncode == 0, done.stderr
    assert "role" in done.stdout and "--max-edges" in done.stdout


def test_a_weak_task_is_refused_in_one_line_and_writes_no_circuit(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--model", "tiny-llama", "--task", "UF", "--lengths", "4", "--n", "4",
                           "--method", "top-k", "--out", str(tmp_path), "--quiet"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "gap" in last and "--allow-weak" in last and "Traceback" not in done.stderr
    assert not list(tmp_path.glob("circuit_*.csv"))


def test_tables_and_a_resume_from_the_stages(tmp_path, script, monkeypatch):
    import interp.interventions.circuits.find as find

    argv = ["--model", "planted-ub", "--task", "UB", "--lengths", "3", "--n", "4", "--method", "top-k,greedy",
            "--max-edges", "30", "--out", str(tmp_path), "--quiet", "--random", "0"]
    calls = []
    original = find.role_edge_scores
    monkeypatch.setattr(find, "role_edge_scores", lambda *a, **k: calls.append(1) or original(*a, **k))
    failing = find.faithfulness_curve

    def stop(*args, **kwargs):  # the run stops after the scores and the first selection were kept
        raise KeyboardInterrupt

    monkeypatch.setattr(find, "faithfulness_curve", stop)
    with pytest.raises(KeyboardInterrupt):
        script.main(argv)
    assert list(tmp_path.glob("*.stages.pt")) and calls == [1]
    monkeypatch.setattr(find, "faithfulness_curve", failing)
    assert script.main(argv) == 0
    assert calls == [1]  # the scores were not computed again
    summary = read_csv(tmp_path / "circuit_summary_planted-ub_UB.csv")
    assert [r["method"] for r in summary] == ["top-k", "greedy"] and all(r["recovered"] >= 0.8 for r in summary)
    assert summary[1]["common_size"] == summary[0]["edges"]
    from interp.interventions.circuits.circuit import Circuit

    circuit = Circuit.load(tmp_path / "circuit_planted-ub_UB_L3_greedy.json")
    assert len(circuit) == summary[1]["edges"] and circuit.edges[0].loss is not None
    assert read_csv(tmp_path / "circuit_ranking_planted-ub_UB_L3_greedy.csv")[0]["rank"] == 1
    assert not list(tmp_path.glob("*.stages.pt"))  # every circuit written: the stages are gone
