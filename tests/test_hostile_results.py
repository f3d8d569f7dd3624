"""Results under hostile conditions: two runs on one table, damaged journals and head-score
tables, and inputs that used to end in a traceback or a silently wrong table (issue 21)."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from interp.experiments import AblationConfig, study_head_scores
from interp.core.journal import RowJournal
from interp.core.locking import TableInUseError, TableLock
from interp.core.tables import read_csv, stem_file

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

HOLD_LOCK = "import sys, time; from interp.core.locking import TableLock; lock = TableLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(600)"


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
    """The issue's reproduction: --n 32 and --n 2 on one --out, the first killed, then --n 2 again."""
    common = ["--model", "tiny-gpt2", "--device", "cpu", "--quiet", "--tasks", "UF,UB", "--out", str(tmp_path)]
    journal = tmp_path / "directional_bias_tiny-gpt2.partial.jsonl"
    # 50 cells, several seconds of work after the first rows: the first run must still be going when it
    # is stopped (10 small cells ended between two polls on an idle machine)
    first = subprocess.Popen(_script("directional_bias", *common, "--lengths", "2-26", "--n", "32"),
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
        assert "--n 32" in second.stderr
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

    from interp.cli import result_stem_from_args

    def name(**args) -> str:
        return result_stem_from_args(Namespace(out=Path("results"), **args), "ablation").name

    assert name(model="smollm2-135m", dtype=None) == "ablation_smollm2-135m"
    assert name(model="smollm2-135m", dtype="float32") == "ablation_smollm2-135m"
    assert name(model="smollm2-135m", dtype="bfloat16", adapter="ub") == "ablation_smollm2-135m+ub_bfloat16"
    assert name(model="SmolLM2", dtype=None) == "ablation_smollm2-135m"  # an alias names the same file


def test_every_result_file_name_comes_from_result_stem():
    """One function names result files: no script or library module builds a results path by hand."""
    root = Path(__file__).resolve().parents[1]
    by_hand = re.compile(r"""(out|out_dir|results_dir)\)? / f?["'](?!runs)""")
    offenders = [f"{p.relative_to(root)}:{i}" for folder in ("analyses", "interp") for p in sorted((root / folder).rglob("*.py"))
                 for i, line in enumerate(p.read_text().splitlines(), 1) if by_hand.search(line)]
    assert not offenders, offenders


# --------------------------------------------------------------------------- one line instead of a traceback

sys.path.insert(0, str(ROOT / "analyses"))
TINY = ["--device", "cpu", "--quiet"]
FIXTURES = ROOT / "tests" / "fixtures" / "paper_data"


def _refused(script: str, argv: list[str], capsys) -> str:
    """The one error line a script prints for ``argv`` (exit code 2, no traceback)."""
    from interp.cli import run

    module = __import__(script)
    code = run(module.main, argv)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    return err.strip().splitlines()[-1]


def _exits(script: str, argv: list[str], capsys) -> str:
    module = __import__(script)
    with pytest.raises(SystemExit) as exit_info:
        module.main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err, err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize("script, argv, fragment", [
    ("show_heads", ["--model", "tiny-gpt2", "--task", "UR", "--heads", "0.0", "--length", "3000"],
     "argument --length: the prompt + answer has 3053 tokens but the model's context (cfg.n_ctx) is 512"),
    ("score_heads", ["--model", "tiny-gpt2", "--half-length", "300"],
     "argument --half-length: a probe of 2 x 300 tokens = 600 does not fit the model's context of 512 tokens"),
    ("score_heads", ["--model", "tiny-llama", "--half-length", "300"],  # RoPE: used to run past the context
     "argument --half-length: a probe of 2 x 300 tokens = 600 does not fit"),
    ("show_heads", ["--model", "tiny-gpt2", "--task", "UR", "--heads", "0.0", "--out", "/etc/hostname/x.html"],
     "argument --out: cannot write into '/etc/hostname'"),
    ("make_figures", ["--results", str(ROOT / "results"), "--out", "/etc/hostname/figures"],
     "argument --out: cannot write into '/etc/hostname/figures'"),
])
def test_context_and_output_problems_are_one_line_naming_the_argument(script, argv, fragment, capsys, tmp_path):
    argv = {"make_figures": argv, "show_heads": ["--device", "cpu", *argv]}.get(script, [*TINY, *argv, "--out", str(tmp_path)])
    assert fragment in _exits(script, argv, capsys)
    assert not any(tmp_path.iterdir())  # refused before writing anything


def test_make_figures_draws_every_figure_it_can_and_names_the_bad_file(tmp_path, capsys):
    import make_figures

    results = tmp_path / "results"
    results.mkdir()
    for name in ("head_scores_smollm2-135m.csv", "ablation_smollm2-135m.csv", "directional_bias_smollm2-135m.csv"):
        (results / name).write_text((ROOT / "results" / name).read_text())
    bad = results / "ablation_smollm2-135m.csv"
    lines = bad.read_text().splitlines(keepends=True)
    bad.write_text("".join(lines[:4] + [lines[4].rstrip("\n") + ",extra,fields\n"] + lines[5:]))
    assert make_figures.main(["--results", str(results), "--out", str(tmp_path / "figures"), "--formats", "html"]) == 1
    out, err = capsys.readouterr()
    assert sorted(p.name for p in (tmp_path / "figures").glob("*.html")) == [
        "accuracy_vs_length_smollm2-135m.html", "head_scores_smollm2-135m.html"]
    width = len(lines[0].split(","))  # the published table's columns; the damaged line has two more
    assert err.strip().splitlines() == [f"error: results file {bad}, line 5: {width + 2} fields where the header has {width}"]


@pytest.mark.parametrize("argv, fragment", [
    (["--data", str(FIXTURES / "retrieval_unique_len6.jsonl"), "--data", str(FIXTURES / ".." / "paper_data" /
                                                                              "retrieval_unique_len6.jsonl")],
     "argument --data: {dir}/../paper_data/retrieval_unique_len6.jsonl is the file given before"),
    (["--data", "{tmp}/no_answer.jsonl"], "no_answer.jsonl:1: not a record of the paper's files (the record holds no answer"),
    (["--data", "{tmp}/space.jsonl"], "space.jsonl:1: not a record of the paper's files (input_no_space item ' ' holds "
                                      "whitespace"),
    (["--data", "{tmp}/newline.jsonl"], "newline.jsonl:1: not a record of the paper's files (input_no_space item '\\n'"),
    (["--data", "{tmp}/empty.jsonl"], "empty.jsonl:1: not a record of the paper's files (UR item '' is empty"),
    (["--data", "{tmp}/binary.jsonl"], "argument --data: {tmp}/binary.jsonl is not a UTF-8 text file"),
    (["--protocol", "paper", "--template", "simple_rule_explained", "--tasks", "UF"],
     "argument --template: template='simple_rule_explained' does not apply to copying tasks"),
    (["--seed", str(2**64)], "argument --seed: expected a seed from 0 to 2147483647"),
    (["--random-seeds", "0,0"], "argument --random-seeds: seed(s) [0] given twice in '0,0'"),
])
def test_smaller_input_problems_are_refused_by_name(argv, fragment, capsys, tmp_path):
    records = {"no_answer": {"input_no_space": "Qa7bxa", "input_with_space": "Qa7bx|a"},
               "space": {"input_no_space": "Qa b a", "UR": "b"}, "newline": {"input_no_space": "Qa\nb\na", "UR": "b"},
               "empty": {"input_no_space": "Qa7bxa", "UR": ""}}
    for name, record in records.items():
        (tmp_path / f"{name}.jsonl").write_text(json.dumps(record) + "\n")
    (tmp_path / "binary.jsonl").write_bytes(bytes(range(128, 256)) * 4)
    argv = [a.format(tmp=tmp_path) for a in argv]
    tasks = [] if "--tasks" in argv else ["--tasks", "UR"]
    line = _exits("ablate_heads", [*TINY, "--model", "tiny-llama", "--out", str(tmp_path), *tasks, *argv], capsys)
    assert fragment.format(tmp=tmp_path, dir=FIXTURES) in line


def test_data_given_twice_would_have_doubled_n():
    from interp.data.paper_files import read_paper_jsonl

    once = read_paper_jsonl([FIXTURES / "retrieval_unique_len6.jsonl"], ["UR"])
    assert len(once.examples("UR", 6)) == 4  # given twice, the run saw 8
    with pytest.raises(ValueError, match="is the file given before"):
        read_paper_jsonl([FIXTURES / "retrieval_unique_len6.jsonl"] * 2, ["UR"])


def test_blank_items_are_refused_in_a_vocabulary():
    from interp.data.paper_files import Generated
    from interp.data.tasks import check_vocabulary, get_task

    for items in (("a", "b", ""), ("a", "b", " "), ("a", "b\n", "c")):
        with pytest.raises(ValueError, match="every item must be a visible symbol"):
            Generated(items)
        with pytest.raises(ValueError, match="every item must be a visible symbol"):
            check_vocabulary(get_task("UR"), 5, items)


def test_device_map_is_refused_for_models_loaded_whole():
    from interp.models import load_model

    with pytest.raises(ValueError, match="--device-map 'auto': tiny-gpt2 is loaded on one device and cannot be split"):
        load_model("tiny-gpt2", device_map="auto")


def test_the_ablation_log_names_the_length(tiny_llama):
    from interp.experiments import ablation_study
    from interp.measure.head_scores import score_heads

    scores = score_heads(tiny_llama, n_sequences=2, half_length=5, progress=False)
    config = AblationConfig(tasks=("UR",), lengths=(6,), k=2, n_examples=2, kinds=("zero",), random_seeds=())
    lines: list[str] = []
    ablation_study(tiny_llama, scores, config, progress=False, log=lines.append)
    assert lines and all(line.endswith("(zero) on UR at length 6") for line in lines)
    with pytest.raises(ValueError, match=r"random_seeds=\(0, 0\): each seed once"):
        AblationConfig(random_seeds=(0, 0))


# --------------------------------------------------------------------------- from-scratch timing


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def time(self) -> float:
        return self.now

    def process_time(self) -> float:
        return self.now / 2


def test_timing_after_a_resume_counts_the_killed_part_too(tmp_path, monkeypatch):
    import interp.training.run_timing as run_timing

    clock = FakeClock()
    monkeypatch.setattr(run_timing, "time", clock)
    killed = run_timing.RunTimer(tmp_path)
    record = killed.on_step(checkpoint_every=2, last_step=6)
    for step in (1, 2, 3):  # checkpoint at step 2, killed during step 3
        clock.now += 10
        record(step, 0.0)
    resumed = run_timing.RunTimer(tmp_path)  # resumes from the checkpoint of step 2
    record = resumed.on_step(checkpoint_every=2, last_step=6)
    for step in (3, 4, 5, 6):
        clock.now += 10
        record(step, 0.0)
    assert resumed.finish(6) == {"seconds": 60.0, "cpu_seconds": 30.0, "timed_from_step": 0}  # 2 + 4 steps of 10 s
    assert run_timing.RunTimer(tmp_path).finish(6) == {"seconds": 60.0, "cpu_seconds": 30.0, "timed_from_step": 0}

    (tmp_path / run_timing.TIMING_NAME).unlink()  # no record of the earlier part: the table says so
    unknown = run_timing.RunTimer(tmp_path)
    record = unknown.on_step(checkpoint_every=2, last_step=6)
    clock.now += 10
    record(5, 0.0)
    assert unknown.finish(6)["timed_from_step"] == 4


def test_ablate_heads_recomputes_a_truncated_score_table(tmp_path, capsys):
    """The issue's reproduction: cut head_scores_<model>.csv and re-run ablate_heads.py."""
    import ablate_heads

    argv = [*TINY, "--model", "tiny-llama", "--out", str(tmp_path), "--tasks", "UR", "--lengths", "6", "--n", "2",
            "--k", "2", "--kinds", "zero", "--random-seeds", "0", "--score-sequences", "2"]
    assert ablate_heads.main(argv) == 0
    scores, table = tmp_path / "head_scores_tiny-llama.csv", tmp_path / "ablation_tiny-llama.csv"
    whole_scores, whole_table = scores.read_text(), table.read_text()
    scores.write_text("".join(whole_scores.splitlines(keepends=True)[:3]))
    capsys.readouterr()
    assert ablate_heads.main(argv) == 0
    out = capsys.readouterr().out
    assert f"not reusing the head scores in {scores}: head_scores_tiny-llama.csv: it has 2 of the model's 8 heads" in out
    assert scores.read_text() == whole_scores and table.read_text() == whole_table
    scores.unlink()  # the CSV deleted, the JSON kept: recomputed, not a refusal
    assert ablate_heads.main(argv) == 0 and scores.read_text() == whole_scores
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".csv"] * 3 + [".json"] * 3 + [".md"] * 3
