"""Writing results tables atomically (CSV, JSON, Markdown) and reading them back.

Every writer goes through a temporary file renamed over the target, so an interrupted run never
leaves a half-written table, and a table that was finished stays finished."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

Row = Mapping[str, object]


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; renamed over ``path`` when the block ends,
    removed if it raises. Readers see the old file or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes files private; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def _columns(rows: Sequence[Row], columns: Sequence[str] | None) -> list[str]:
    if columns is not None:
        return list(columns)
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


def format_value(value: object, digits: int = 3) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.{digits}f}"
    return "" if value is None else str(value)


def to_csv(rows: Sequence[Row], columns: Sequence[str] | None = None) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=_columns(rows, columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def to_markdown(rows: Sequence[Row], columns: Sequence[str] | None = None, digits: int = 3) -> str:
    cols = _columns(rows, columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(format_value(row.get(c), digits) for c in cols) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_table(rows: Sequence[Row], stem: str | Path, columns: Sequence[str] | None = None,
                formats: Iterable[str] = ("csv", "json", "md"), metadata: Mapping | None = None) -> list[Path]:
    """Write ``rows`` as ``stem.csv`` / ``stem.json`` / ``stem.md``; returns the paths written."""
    stem = Path(stem)
    written = []
    for fmt in formats:
        if fmt == "csv":
            text = to_csv(rows, columns)
        elif fmt == "json":
            text = json.dumps({"metadata": dict(metadata or {}), "rows": list(map(dict, rows))}, indent=2, default=str)
        elif fmt == "md":
            text = to_markdown(rows, columns)
        else:
            raise ValueError(f"unknown table format {fmt!r}; expected csv, json or md")
        written.append(atomic_write_text(stem.with_suffix("." + fmt), text))
    return written


def read_csv(path: str | Path, required: Sequence[str] = ()) -> list[dict]:
    """Rows of a results CSV with numbers parsed; a clear error names the file and any missing column."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"results file {path} does not exist (run the analysis that writes it first)")
    with path.open() as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"results file {path} lacks column(s) {missing}; it has {reader.fieldnames}")
        return [{k: parse_value(v) for k, v in row.items()} for row in reader]


def parse_value(text: str | None) -> object:
    if text is None or text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text
