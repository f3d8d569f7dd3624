import stat

import pytest

from interp.core.tables import atomic_path, atomic_write_text, read_csv, write_table


def test_interrupted_write_keeps_the_finished_file(tmp_path):
    target = atomic_write_text(tmp_path / "table.md", "finished\n")
    with pytest.raises(RuntimeError, match="killed"):
        with atomic_path(target) as staging:
            staging.write_text("half of a new")
            raise RuntimeError("killed mid-write")
    assert target.read_text() == "finished\n"
    assert [p.name for p in tmp_path.iterdir()] == ["table.md"]  # no temporary file left behind
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # shared results, not mkstemp's private 0600


def test_write_table_round_trip(tmp_path):
    rows = [{"task": "UF", "length": 10, "accuracy": 0.5}, {"task": "UB", "length": 10, "accuracy": 0.0}]
    write_table(rows, tmp_path / "t", ["task", "length", "accuracy"])
    back = read_csv(tmp_path / "t.csv")
    assert [r["task"] for r in back] == ["UF", "UB"] and float(back[0]["accuracy"]) == 0.5


def test_model_names_with_dots_keep_their_whole_name(tmp_path):
    from interp.core.journal import RowJournal
    from interp.core.tables import read_table_metadata

    written = write_table([{"a": 1}], tmp_path / "ablation_qwen2.5-1.5b", metadata={"model": "qwen2.5-1.5b"})
    assert sorted(p.name for p in written) == [f"ablation_qwen2.5-1.5b.{f}" for f in ("csv", "json", "md")]
    assert read_table_metadata(tmp_path / "ablation_qwen2.5-1.5b") == {"model": "qwen2.5-1.5b"}
    assert RowJournal(tmp_path / "x_qwen2.5-1.5b", {}).path.name == "x_qwen2.5-1.5b.partial.jsonl"
