"""An interrupted script and a full disk: one line each saying what to do, and nothing left behind
that the next run would trip on (a 0-byte lock, a temporary file)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from interp.cli import run
from interp.core.locking import TableLock
from interp.core.tables import write_table

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def test_ctrl_c_is_one_line_saying_how_to_resume(capsys):
    def main(argv):
        raise KeyboardInterrupt

    try:
        code = run(main)
    except KeyboardInterrupt:
        pytest.fail("the interrupt escaped as a traceback")
    assert code == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "interrupted" in err[0] and "run the same command again to resume" in err[0]


def test_ctrl_c_during_a_study_is_one_line_and_keeps_its_rows(tmp_path):
    common = [sys.executable, str(ROOT / "analyses" / "directional_bias.py"), "--model", "tiny-gpt2", "--device", "cpu",
              "--quiet", "--tasks", "UF,UB,UR,UL", "--lengths", "5-40", "--n", "4", "--out", str(tmp_path)]
    journal = tmp_path / "directional_bias_tiny-gpt2.partial.jsonl"
    # A shell that starts a job in the background ignores SIGINT for it, and Python then keeps it ignored:
    # give the script the default disposition a terminal's Ctrl-C meets.
    first = subprocess.Popen(common, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env(),
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not (journal.exists() and len(journal.read_text().splitlines()) >= 2):
        assert first.poll() is None, first.stderr.read()
        assert time.monotonic() < deadline, "no journaled row in 120 s"
        time.sleep(0.1)
    first.send_signal(signal.SIGINT)
    err = first.communicate(timeout=60)[1]
    assert first.returncode == 130
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("INFO", "WARNING"))]
    assert len(lines) == 1 and "run the same command again to resume" in lines[0], err
    assert not (tmp_path / "directional_bias_tiny-gpt2.lock").exists()
    assert len(journal.read_text().splitlines()) >= 2  # the rows a re-run resumes from (tests/test_hostile_results.py)


def _full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_leaves_no_empty_lock(tmp_path, monkeypatch):
    import interp.core.locking as locking

    monkeypatch.setattr(locking.os, "write", _full_disk)
    with pytest.raises(OSError):
        TableLock(tmp_path / "ablation_m").acquire()
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_as_out_is_one_line_naming_the_table(tmp_path, monkeypatch, capsys):
    def main(argv):
        with TableLock(tmp_path / "ablation_m"):
            write_table([{"task": "UF", "accuracy": 0.5}], tmp_path / "ablation_m")

    monkeypatch.setattr(Path, "write_text", _full_disk)
    assert run(main) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0] and str(tmp_path / "ablation_m.") in err[0], err
    assert list(tmp_path.iterdir()) == []  # no lock, no temporary file


def test_a_journal_that_cannot_start_on_a_full_disk_leaves_no_lock(tmp_path, monkeypatch):
    import interp.core.journal as journal

    from interp.core.journal import RowJournal

    monkeypatch.setattr(journal, "atomic_write_text", _full_disk)
    with pytest.raises(OSError) as failure:
        RowJournal(tmp_path / "ablation_m", {"n": 1})
    # released when the start fails, not whenever the error (and the half-made journal) is dropped
    assert failure.value.errno == errno.ENOSPC and list(tmp_path.iterdir()) == []
