"""Results under hostile conditions: two runs on one table, damaged journals and head-score
tables, and inputs that used to end in a traceback or a silently wrong table (issue 21)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from interp.experiments import AblationConfig, study_head_scores
from interp.journal import RowJournal
from interp.locking import TableInUseError, TableLock
from interp.results import read_csv, stem_file

ROOT = Path(__file__).resolve().parents[1]
SHAPE = {"task": str, "length": int, "accuracy": (int, float)}


def _script(name: str, *argv: str) -> list[str]:
    return [sys.executable, str(ROOT / "analyses" / f"{name}.py"), *argv]


def _env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def _wait_for(predicate, what: str, process: subprocess.Popen | None = None, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the process ended (code {process.returncode}) before {what}: {process.stderr.read()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


# --------------------------------------------------------------------------- journals


def _journal_with_rows(stem: Path, config: dict, n: int) -> None:
    with RowJournal(stem, config, SHAPE) as journal:
        for i in range(n):
            journal.add({"task": "UF", "length": 10 + i, "accuracy": i / 10})


def test_a_cut_last_line_is_skipped_named_and_never_glued_to_the_next_row(tmp_path, caplog):
    stem = tmp_path / "table"
    _journal_with_rows(stem, {"n": 2}, 3)
    path = stem_file(stem, "partial.jsonl")
    path.write_bytes(path.read_bytes()[:-15])  # the run was killed while writing its third row
    with caplog.at_level(logging.WARNING):
        journal = RowJournal(stem, {"n": 2}, SHAPE)
    assert [r["length"] for r in journal.done()] == [10, 11]
    assert f"{path}:4: skipping a damaged journal line" in caplog.text
    journal.add({"task": "UF", "length": 12, "accuracy": 0.2})
    journal.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        again = RowJournal(stem, {"n": 2}, SHAPE)
    assert [r["length"] for r in again.done()] == [10, 11, 12] and "damaged" not in caplog.text
    assert all(json.loads(line) for line in path.read_text().splitlines())
    again.close()


def test_rows_of_the_wrong_shape_are_skipped_with_their_line_not_a_key_error(tmp_path, caplog):
    stem = tmp_path / "table"
    _journal_with_rows(stem, {"n": 2}, 2)
    path = stem_file(stem, "partial.jsonl")
    digest = json.loads(path.read_text().splitlines()[0])["digest"]
    with path.open("a") as handle:
        handle.write(json.dumps({"digest": digest, "row": {"task": "UF"}}) + "\n")  # valid JSON, no length
        handle.write(json.dumps({"digest": digest, "row": [1, 2]}) + "\n")
        handle.write(json.dumps({"digest": digest, "row": {"task": "UF", "length": "ten", "accuracy": 1}}) + "\n")
        handle.write("\x00\xff garbage\n")
    with caplog.at_level(logging.WARNING):
        journal = RowJournal(stem, {"n": 2}, SHAPE)
    assert [r["length"] for r in journal.done()] == [10, 11]
    for line_no, why in [(4, "lacks ['length', 'accuracy']"), (5, "expected a row object"), (6, "wrong type of ['length']"),
                         (7, "not JSON")]:
        assert f"{path}:{line_no}: skipping a damaged journal line ({why}" in caplog.text
    journal.close()
    assert len(path.read_text().splitlines()) == 3  # rewritten without the damaged lines


def test_a_row_of_another_configuration_is_never_read(tmp_path, caplog):
    stem = tmp_path / "table"
    _journal_with_rows(stem, {"n": 6}, 2)
    other = stem_file(stem, "partial.jsonl").read_text().splitlines()[1]
    _journal_with_rows(stem, {"n": 2}, 1)  # another configuration starts afresh
    with stem_file(stem, "partial.jsonl").open("a") as handle:
        handle.write(other + "\n")  # a row appended by a run of the other configuration
    with caplog.at_level(logging.WARNING):
        journal = RowJournal(stem, {"n": 2}, SHAPE)
    assert journal.done() == [{"task": "UF", "length": 10, "accuracy": 0.0}]
    assert "a row of another configuration" in caplog.text
    journal.close()
    with caplog.at_level(logging.WARNING):
        RowJournal(stem, {"n": 6}, SHAPE).close()
    assert "written for another configuration (differs in n); starting afresh" in caplog.text


# --------------------------------------------------------------------------- one writer per table

HOLD_LOCK = "import sys, time; from interp.locking import TableLock; lock = TableLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(600)"


def test_a_live_holder_is_refused_by_name_and_a_dead_ones_lock_is_taken_over(tmp_path, caplog):
    stem = tmp_path / "ablation_tiny-llama"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(stem)], stdout=subprocess.PIPE, text=True, env=_env())
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(TableInUseError, match=rf"{stem} is being written by another run \(pid {holder.pid} on "):
            TableLock(stem).acquire()
    finally:
        holder.kill()  # SIGKILL: the lock file stays behind
        holder.wait()
    assert stem_file(stem, "lock").exists()
    with caplog.at_level(logging.WARNING), TableLock(stem) as lock:
        assert lock.held
    assert f"taking over the lock left by another run (pid {holder.pid}" in caplog.text
    assert not stem_file(stem, "lock").exists()  # released: nothing left behind


def test_two_processes_on_one_out_never_mix_configurations(tmp_path):
    """The issue's reproduction: --n 6 and --n 2 on one --out, the first killed, then --n 2 again."""
    common = ["--model", "tiny-gpt2", "--device", "cpu", "--quiet", "--tasks", "UF,UB", "--out", str(tmp_path)]
    journal = tmp_path / "directional_bias_tiny-gpt2.partial.jsonl"
    first = subprocess.Popen(_script("directional_bias", *common, "--lengths", "5-9", "--n", "6"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        _wait_for(lambda: journal.exists() and len(journal.read_text().splitlines()) >= 2, "a first row", first)
        first.send_signal(signal.SIGSTOP)  # alive and holding the table
        second = subprocess.run(_script("directional_bias", *common, "--lengths", "5,6", "--n", "2"),
                                capture_output=True, text=True, env=_env(), timeout=300)
        assert second.returncode == 2, second.stderr
        assert second.stderr.strip().splitlines() == [
            next(line for line in second.stderr.splitlines() if line.startswith("error: "))]
        assert f"directional_bias_tiny-gpt2 is being written by another run (pid {first.pid} " in second.stderr
        assert "--n 6" in second.stderr
    finally:
        first.kill()
        first.wait()
    third = subprocess.run(_script("directional_bias", *common, "--lengths", "5,6", "--n", "2"),
                           capture_output=True, text=True, env=_env(), timeout=300)
    assert third.returncode == 0, third.stderr
    assert "written for another configuration (differs in lengths, n); starting afresh" in third.stderr
    rows = read_csv(tmp_path / "directional_bias_tiny-gpt2.csv")
    assert len(rows) == 4 and {r["n_examples"] for r in rows} == {2}
    assert json.loads((tmp_path / "directional_bias_tiny-gpt2.json").read_text())["metadata"]["n"] == 2
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith((".csv", ".json", ".md"))) == []


# --------------------------------------------------------------------------- head-score tables

SCORE_CONFIG = AblationConfig(tasks=("UF",), lengths=(4,), n_examples=4, random_seeds=(), k=2)


def _scores(model, stem, caplog_lines: list[str]):
    return study_head_scores(model, stem, SCORE_CONFIG, n_sequences=3, progress=False, log=caplog_lines.append)


def test_a_damaged_head_score_table_is_recomputed_never_trusted(tiny_llama, tmp_path):
    stem = tmp_path / "head_scores_tiny-llama"
    log: list[str] = []
    first = _scores(tiny_llama, stem, log).rows()
    assert log == [] and _scores(tiny_llama, stem, log).rows() == first and log == []  # reused when whole
    csv = stem_file(stem, "csv")
    whole = csv.read_text()

    damage = {
        "truncated": lambda: csv.write_text("".join(whole.splitlines(keepends=True)[:4])),
        "deleted": lambda: csv.unlink(),
        "nan": lambda: csv.write_text(whole.replace(whole.splitlines()[3].split(",")[3], "nan", 1)),
        "edited": lambda: csv.write_text(whole.replace(whole.splitlines()[3].split(",")[3], "0.999", 1)),
        "extra field": lambda: csv.write_text(whole.replace("\n", ",1\n", 3)),
    }
    expected = {"truncated": "it has 3 of the model's 8 heads", "deleted": "does not exist",
                "nan": "has no finite induction score", "edited": "disagrees with the rows kept in",
                "extra field": "head_scores_tiny-llama.csv"}
    for name, spoil in damage.items():
        spoil()
        log.clear()
        assert _scores(tiny_llama, stem, log).rows() == first, name
        assert len(log) == 1 and expected[name] in log[0] and "computing them again" in log[0], (name, log)
        assert csv.read_text() == whole  # rewritten whole


def test_head_scores_of_another_dtype_are_not_reused(tiny_llama, tmp_path):
    stem = tmp_path / "head_scores_tiny-llama"
    log: list[str] = []
    _scores(tiny_llama, stem, log)
    table = json.loads(stem_file(stem, "json").read_text())
    assert table["metadata"]["dtype"] == "float32"
    table["metadata"]["dtype"] = "bfloat16"
    stem_file(stem, "json").write_text(json.dumps(table))
    _scores(tiny_llama, stem, log)
    assert len(log) == 1 and "made with another dtype ('bfloat16', this run: 'float32')" in log[0]


def test_tables_of_another_dtype_get_their_own_files():
    from argparse import Namespace

    from interp.cli import results_suffix

    assert results_suffix(Namespace(model="smollm2-135m", dtype=None)) == "_smollm2-135m"
    assert results_suffix(Namespace(model="smollm2-135m", dtype="float32")) == "_smollm2-135m"
    assert results_suffix(Namespace(model="smollm2-135m", dtype="bfloat16", adapter="ub")) == "_smollm2-135m+ub_bfloat16"
