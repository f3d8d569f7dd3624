"""`make publish`: a run's tables reach results/ table by table, all files of a table or none, and the
Markdown it publishes is generated from the validated CSV, never copied from the run
(tests/test_publish_kill.py: the same under kill -9 at every step)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from interp.cli.publish import main
from interp.core.publish import validated_rows
from interp.core.tables import to_markdown, write_table

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
    write_table([{**ROWS[0], "model": "m2"}], build / "directional_bias_m2", metadata={"run": "new"})
    assert main(["--build", str(build), "--results", str(results)]) == 0
    assert sorted(p.name for p in results.iterdir()) == ["directional_bias_m.csv", "directional_bias_m.md",
                                                         "directional_bias_m2.csv", "directional_bias_m2.json",
                                                         "directional_bias_m2.md"]
    assert "0.9" in (results / "directional_bias_m.csv").read_text()
    assert "published directional_bias_m2" in capsys.readouterr().out


def test_a_damaged_table_is_not_published(folders, capsys):
    build, results = folders
    before = _old(results)
    write_table([{**ROWS[0], "accuracy": 7.5}], build / "directional_bias_m")
    assert main(["--build", str(build), "--results", str(results)]) == 2
    assert "line 2: accuracy is 7.5" in capsys.readouterr().err and _old(results) == before


def test_make_publish_goes_through_the_publisher():
    recipe = subprocess.run(["make", "-n", "publish"], cwd=ROOT, capture_output=True, text=True).stdout
    assert "-m interp.cli.publish --build build/results --results results" in recipe and "cp " not in recipe


def test_the_markdown_is_written_from_the_validated_csv_not_copied(folders):
    build, results = folders
    write_table([{**ROWS[0], "accuracy": 0.9}], build / "directional_bias_m")
    planted = "| accuracy |\n|---|\n| 0.999 |\n<script>document.title = 'ran'</script>\n<img src=x onerror=alert(1)>\n"
    (build / "directional_bias_m.md").write_text(planted)
    assert main(["--build", str(build), "--results", str(results)]) == 0
    published = (results / "directional_bias_m.md").read_text()
    assert published == to_markdown(validated_rows(results / "directional_bias_m.csv")[1])
    assert "| 0.900 |" in published and "0.999" not in published and "<" not in published


def test_a_table_named_with_markup_is_not_published(folders, capsys):
    build, results = folders
    before = _old(results)
    write_table(ROWS, build / "directional_bias_<img src=x onerror=alert(1)>")
    assert main(["--build", str(build), "--results", str(results)]) == 2
    assert "its name is not a table's" in capsys.readouterr().err and _old(results) == before


def test_metadata_that_is_not_a_json_object_is_not_published(folders, capsys):
    build, results = folders
    before = _old(results)
    write_table([{**ROWS[0], "accuracy": 0.9}], build / "directional_bias_m")
    (build / "directional_bias_m.json").write_text("[1, 2")
    assert main(["--build", str(build), "--results", str(results)]) == 2
    assert "directional_bias_m.json is not a JSON object" in capsys.readouterr().err and _old(results) == before


def test_a_committed_switch_left_by_a_killed_publish_is_finished_and_said(folders, capsys):
    build, results = folders
    stage = results / ".publish" / "directional_bias_m"
    write_table([{**ROWS[0], "accuracy": 0.9}], stage / "directional_bias_m", formats=["csv", "md"])
    (stage / ".commit").write_text('{"install": ["directional_bias_m.csv", "directional_bias_m.md"], '
                                   '"remove": ["directional_bias_m.json"]}')
    assert main(["--build", str(build), "--results", str(results)]) == 0
    assert "note: finished the interrupted publish of directional_bias_m" in capsys.readouterr().out
    assert sorted(p.name for p in results.iterdir()) == ["directional_bias_m.csv", "directional_bias_m.md"]
    assert "0.9" in (results / "directional_bias_m.csv").read_text()


def test_a_ranking_is_published_as_its_csv_alone(folders, capsys):
    """A circuit's ranking (thousands of rows a figure reads) goes out without Markdown; other kinds still need it."""
    build, results = folders
    rows = [{"rank": 1, "kind": "residual", "reader": "a0.0.v", "writer": "embed", "role": "s", "key_role": "",
             "sources": "", "score": -62.3, "rank_value": 1001.0}]
    write_table(rows, build / "circuit_ranking_m_UB_L4_greedy", formats=["csv"])
    write_table([{**ROWS[0], "accuracy": 0.9}], build / "directional_bias_m", formats=["csv"])
    assert main(["--build", str(build), "--results", str(results)]) == 2
    assert "not published directional_bias_m: it lacks its .md" in capsys.readouterr().err
    published = sorted(p.name for p in results.glob("circuit_ranking_*"))
    assert published == ["circuit_ranking_m_UB_L4_greedy.csv"]


def test_a_route_tables_json_is_published_with_its_metadata_only(folders):
    """Per-prompt rows live in the CSV; the published JSON of such a table keeps the metadata, not a second copy."""
    build, results = folders
    rows = [{"model": "m", "task": "UB", "length": 4, "head_set": "all", "route": "o", "prompt": i, "clean_metric": 5.0,
             "counterfactual_metric": -5.0, "patched_metric": -4.0, "correct": True} for i in range(3)]
    write_table(rows, build / "circuit_routes_m_UB", metadata={"model": "m", "n": 3})
    assert main(["--build", str(build), "--results", str(results)]) == 0
    import json

    assert json.loads((results / "circuit_routes_m_UB.json").read_text()) == {"metadata": {"model": "m", "n": 3}}
    assert len(validated_rows(results / "circuit_routes_m_UB.csv")[1]) == 3
