"""The row journal of a long run: finished rows kept while it runs, so that a killed run loses nothing.

``<stem>.partial.jsonl`` holds a header (the run's full configuration) and one line per finished
row, each tagged with the digest of that configuration. A re-run with the same configuration
resumes from the rows; any other configuration starts afresh (one log line says so), and a row
tagged with another configuration is never read. Damaged lines (a line cut by a kill, bytes
flipped, a row of the wrong shape) are skipped with a warning naming the file and line, and the
journal is rewritten without them before anything is appended, so a cut last line never glues
onto the next row. The run holds the table's lock ([`interp.core.locking.TableLock`][interp.core.locking.TableLock]) from the
moment the journal is opened until [`RowJournal.finish`][interp.core.journal.RowJournal.finish] or [`RowJournal.close`][interp.core.journal.RowJournal.close]."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from interp.core.locking import TableLock
from interp.core.tables import Row, atomic_write_text, json_ready, stem_file, write_table

logger = logging.getLogger(__name__)

JOURNAL_FORMAT = 2
# What a row must hold to be reused: column -> accepted JSON types.
RowShape = Mapping[str, type | tuple[type, ...]]
NUMBER = (int, float)
OPTIONAL_NUMBER = (int, float, type(None))


def config_digest(config: Mapping) -> str:
    """A short digest of a JSON-ready configuration (key order does not matter).

    >>> config_digest({"task": "UF", "n": 16}) == config_digest({"n": 16, "task": "UF"})
    True
    """
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def shape_problem(row: object, shape: RowShape) -> str | None:
    """Why ``row`` does not have ``shape`` (None when it does).

    >>> shape_problem({"layer": 3, "score": 0.5}, {"layer": int, "score": NUMBER}) is None
    True
    >>> shape_problem({"layer": "3"}, {"layer": int, "score": NUMBER})
    "lacks ['score']"
    """
    if not isinstance(row, dict):
        return f"expected a row object, got {type(row).__name__}"
    missing = [k for k in shape if k not in row]
    if missing:
        return f"lacks {missing}"
    wrong = [k for k, kinds in shape.items()
             if not isinstance(row[k], kinds) or (kinds is int and isinstance(row[k], bool))]
    return f"wrong type of {wrong}" if wrong else None


# Columns that hold a proportion wherever a row (or a row nested in it) has them.
PROPORTIONS = ("accuracy", "token_accuracy")


def value_problem(row: object) -> str | None:
    """Why a row's numbers cannot be a finished measurement (None when they can): a proportion
    outside [0, 1] or not a number, an ``n_examples`` below 0, anywhere in the row.

    >>> value_problem({"accuracy": 0.5, "cells": [{"accuracy": 7.5}]})
    'accuracy is 7.5, expected a number in [0, 1]'
    >>> value_problem({"accuracy": None, "n_examples": 3}) is None
    True
    """
    if isinstance(row, list):
        return next((p for p in map(value_problem, row) if p), None)
    if not isinstance(row, dict):
        return None
    for key, value in row.items():
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if key in PROPORTIONS and value is not None and not (number and 0 <= value <= 1):
            return f"{key} is {value!r}, expected a number in [0, 1]"
        if key == "n_examples" and value is not None and not (number and value >= 0 and float(value).is_integer()):
            return f"{key} is {value!r}, expected a count"
        if isinstance(value, (dict, list)) and (problem := value_problem(value)):
            return problem
    return None


def _differences(old: object, new: Mapping) -> list[str]:
    if not isinstance(old, dict):
        return ["everything"]
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


class RowJournal:
    """Rows of an unfinished table ``stem``, appended as they finish; a context manager.

    >>> import tempfile
    >>> stem = Path(tempfile.mkdtemp()) / "ablation_tiny-llama"
    >>> with RowJournal(stem, {"n": 30}, shape={"task": str}) as journal:
    ...     rows = journal.done()           # rows an earlier run with the same configuration finished
    ...     journal.add({"task": "UF", "accuracy": 0.5})
    ...     written = journal.finish(journal.done())  # the finished table; the journal is removed
    >>> " ".join(path.suffix for path in written)
    '.csv .json .md'

    ``shape`` (column -> JSON types) is what a row must hold to be reused. Opening a journal takes
    the table's lock (or adopts ``lock``, taken earlier by the caller, e.g. before loading a model):
    a second run on the same table is refused while this one holds it."""

    def __init__(self, stem: str | Path, config: Mapping, shape: RowShape | None = None, lock: TableLock | None = None):
        self.stem = Path(stem)
        self.path = stem_file(self.stem, "partial.jsonl")
        self.config = json_ready(dict(config))
        self.digest = config_digest(self.config)
        self.shape = dict(shape or {})
        if lock is not None and lock.stem != self.stem:
            raise ValueError(f"lock: the lock of {lock.stem} cannot guard the journal of {self.stem}")
        self.lock = (lock or TableLock(self.stem)).acquire()
        try:
            self._rows, clean = self._read()
            if not clean:
                self._rewrite()
        except BaseException:  # a full disk: no lock file may outlive the failed start
            self.lock.release()
            raise

    def _header(self) -> str:
        return json.dumps({"config": self.config, "digest": self.digest, "format": JOURNAL_FORMAT}) + "\n"

    def _read(self) -> tuple[list[dict], bool]:
        """The usable rows, and whether the file is exactly header + those rows."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return [], False
        except OSError as err:
            logger.warning("%s: unreadable journal (%s); starting afresh", self.path, err.strerror or err)
            return [], False
        lines = text.splitlines()
        try:
            header = json.loads(lines[0])
            if header.get("format") != JOURNAL_FORMAT:
                raise ValueError("another journal format")
        except (IndexError, ValueError, AttributeError):
            logger.warning("%s: the journal's first line is not its header; starting afresh", self.path)
            return [], False
        if header.get("digest") != self.digest or header.get("config") != self.config:
            logger.warning("%s was written for another configuration (differs in %s); starting afresh",
                           self.path, ", ".join(_differences(header.get("config"), self.config)))
            return [], False
        rows = []
        for line_no, line in enumerate(lines[1:], 2):
            problem = self._problem(line)
            if problem is None:
                rows.append(json.loads(line)["row"])
            else:
                logger.warning("%s:%d: skipping a damaged journal line (%s)", self.path, line_no, problem)
        return rows, len(rows) == len(lines) - 1 and text.endswith("\n")

    def _problem(self, line: str) -> str | None:
        try:
            entry = json.loads(line)
        except ValueError as err:
            return f"not JSON: {err}"
        if not isinstance(entry, dict) or set(entry) != {"digest", "row"}:
            return "not a journal entry"
        if entry["digest"] != self.digest:
            return "a row of another configuration"
        return shape_problem(entry["row"], self.shape) or value_problem(entry["row"])

    def _rewrite(self) -> None:
        lines = [json.dumps({"digest": self.digest, "row": row}) + "\n" for row in self._rows]
        atomic_write_text(self.path, self._header() + "".join(lines))

    def done(self) -> list[dict]:
        """Rows finished by an earlier run with the same configuration (empty when none)."""
        return [dict(row) for row in self._rows]

    def add(self, row: Mapping) -> None:
        """Record a finished row (flushed to disk before this returns)."""
        row = json_ready(dict(row))
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"digest": self.digest, "row": row}) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self._rows.append(row)

    def finish(self, rows: Sequence[Row], columns: Sequence[str] | None = None, metadata: Mapping | None = None,
               formats: Iterable[str] = ("csv", "json", "md")) -> list[Path]:
        """Write the finished table, drop the journal and release the table."""
        written = write_table(rows, self.stem, columns, formats, metadata)
        self.path.unlink(missing_ok=True)
        self.close()
        return written

    def close(self) -> None:
        """Release the table's lock (the journal stays for a later resume)."""
        self.lock.release()

    def __enter__(self) -> "RowJournal":
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
