"""`make publish` is all or nothing per table even under ``kill -9``: the publisher runs in a subprocess
that kills itself before its k-th file-system call (every open, rename, unlink, mkdir, rmdir and fsync,
k = 1, 2, ... up to a whole run); after the next publish every table is entirely old or entirely new
and no temporary or staged file is left in results/."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from interp.cli.publish import main
from interp.core.publish import publish_tables
from interp.core.tables import write_table

ROOT = Path(__file__).resolve().parents[1]
ROW = {"model": "m", "task": "UF", "length": 10, "n_examples": 20, "accuracy": 0.5}

# Counts the calls that change or flush the file system and kills the process before the k-th one;
# k = 0 runs to the end and prints how many there were.
KILLER = """
import os, signal, sys
from interp.core.publish import publish_tables
build, results, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
calls = 0
def counted(real):
    def call(*args, **kwargs):
        global calls
        calls += 1
        if calls == k:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
    return call
for name in ("open", "replace", "rename", "unlink", "remove", "rmdir", "mkdir", "fsync", "link", "symlink"):
    setattr(os, name, counted(getattr(os, name)))
publish_tables(build, results)
print(calls)
"""


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def make_folders(base: Path) -> tuple[Path, Path]:
    """results/ with two published tables, and a build/ with new versions of both (one without its JSON)."""
    build, results = base / "build", base / "results"
    write_table([ROW], results / "directional_bias_m", metadata={"run": "old"})
    write_table([{**ROW, "model": "m2"}], results / "directional_bias_m2", metadata={"run": "old"})
    write_table([{**ROW, "accuracy": 0.75}], build / "directional_bias_m", metadata={"run": "new"})
    write_table([{**ROW, "model": "m2", "accuracy": 0.25}], build / "directional_bias_m2", formats=["csv", "md"])
    return build, results


def killed_publish(base: Path, k: int) -> subprocess.CompletedProcess:
    build, results = make_folders(base)
    return subprocess.run([sys.executable, "-c", KILLER, str(build), str(results), str(k)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def tables(files: dict[str, bytes]) -> dict[str, dict[str, bytes]]:
    by_stem: dict[str, dict[str, bytes]] = {}
    for name, data in files.items():
        by_stem.setdefault(name.rsplit(".", 1)[0], {})[name] = data
    return by_stem


def test_publish_killed_at_every_step_leaves_each_table_old_or_new(tmp_path):
    whole = killed_publish(tmp_path / "whole", 0)
    assert whole.returncode == 0, whole.stderr
    steps = int(whole.stdout.split()[-1])
    old = tables(snapshot(make_folders(tmp_path / "old")[1]))
    new = tables(snapshot(tmp_path / "whole" / "results"))
    assert old.keys() == new.keys() and all(old[stem] != new[stem] for stem in old)
    assert "directional_bias_m2.json" not in new["directional_bias_m2"]  # the new table has no JSON: the old one goes
    outcomes = []
    for k in range(1, steps + 1):
        base = tmp_path / f"k{k}"
        done = killed_publish(base, k)
        assert done.returncode == -signal.SIGKILL, f"step {k}: {done.returncode} {done.stderr[-500:]}"
        (base / "empty").mkdir()
        publish_tables(base / "empty", base / "results")  # the next publish, with nothing new
        after = tables(snapshot(base / "results"))
        for stem in old:
            assert after[stem] in (old[stem], new[stem]), f"killed before step {k}: {stem} is a mix of old and new"
        left = sorted(p.name for p in (base / "results").iterdir() if p.name.startswith("."))
        assert not left, f"killed before step {k}: {left} left in results/"
        outcomes.append(tuple(after[stem] == new[stem] for stem in sorted(old)))
    assert outcomes[0] == (False, False) and (True, True) in outcomes  # both ends of the switch were hit


def test_a_target_that_is_a_folder_is_refused_before_anything_changes(tmp_path, capsys):
    build, results = make_folders(tmp_path)
    (results / "directional_bias_m.json").unlink()
    (results / "directional_bias_m.json").mkdir()
    before = snapshot(results)
    assert main(["--build", str(build), "--results", str(results)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: not published directional_bias_m: {results / 'directional_bias_m.json'} is a folder; "
                   "expected a file or nothing there (move it away and publish again)"]
    after = snapshot(results)
    assert {n: d for n, d in after.items() if n.startswith("directional_bias_m.")} == \
        {n: d for n, d in before.items() if n.startswith("directional_bias_m.")}
    assert after["directional_bias_m2.csv"] != before["directional_bias_m2.csv"]  # the other table was published
    assert sorted(p.name for p in results.iterdir() if p.name.startswith(".")) == []


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_results_folder_refuses_each_table_in_one_line(tmp_path, capsys):
    build, results = make_folders(tmp_path)
    before = snapshot(results)
    results.chmod(0o555)
    try:
        report = publish_tables(build, results)
    finally:
        results.chmod(0o755)
    assert report.published == [] and sorted(report.refused) == ["directional_bias_m", "directional_bias_m2"]
    assert all("\n" not in why and "Permission denied" in why for why in report.refused.values())
    assert snapshot(results) == before
