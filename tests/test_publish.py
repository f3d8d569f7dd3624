"""`make publish`: a run's tables reach results/ table by table, all files of a table or none."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from interp.cli.publish import main
from interp.core.tables import write_table

ROOT = Path(__file__).resolve().parents[1]
ROWS = [{"model": "m", "task": "UF", "length": 10, "n_examples": 20, "accuracy": 0.5}]


@pytest.fixture()
def folders(tmp_path):
    build, results = tmp_path / "build", tmp_path / "results"
    write_table(ROWS, results / "directional_bias_m", metadata={"run": "old"})
    build.mkdir()
    return build, results


def _old(results: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(results.iterdir())}


def test_a_table_with_only_its_csv_is_not_published_and_the_old_one_stays_whole(folders, capsys):
    build, results = folders
    before = _old(results)
    write_table([{**ROWS[0], "accuracy": 0.9}], build / "directional_bias_m", formats=["csv"])
    assert main(["--build", str(build), "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert "not published directional_bias_m: it lacks its .md" in err
    assert _old(results) == before


def test_a_complete_table_replaces_every_file_and_drops_a_stale_one(folders, capsys):
    build, results = folders
    write_table([{**ROWS[0], "accuracy": 0.9}], build / "directional_bias_m", formats=["csv", "md"])
    write_table(ROWS, build / "claims", metadata={"run": "new"})
    assert main(["--build", str(build), "--results", str(results)]) == 0
    assert sorted(p.name for p in results.iterdir()) == ["claims.csv", "claims.json", "claims.md",
                                                         "directional_bias_m.csv", "directional_bias_m.md"]
    assert "0.9" in (results / "directional_bias_m.csv").read_text()
    assert "published claims" in capsys.readouterr().out


def test_a_damaged_table_is_not_published(folders, capsys):
    build, results = folders
    before = _old(results)
    write_table([{**ROWS[0], "accuracy": 7.5}], build / "directional_bias_m")
    assert main(["--build", str(build), "--results", str(results)]) == 2
    assert "line 2: accuracy is 7.5" in capsys.readouterr().err and _old(results) == before


def test_make_publish_goes_through_the_publisher():
    recipe = subprocess.run(["make", "-n", "publish"], cwd=ROOT, capture_output=True, text=True).stdout
    assert "-m interp.cli.publish --build build/results --results results" in recipe and "cp " not in recipe
