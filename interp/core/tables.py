"""Writing results tables atomically (CSV, JSON, Markdown) and reading them back.

Every writer goes through a temporary file renamed over the target, so an interrupted run never
leaves a half-written table, and a table that was finished stays finished."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import tempfile
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, fields, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

# A table row: a mapping of column -> value, or a dataclass instance whose fields are the columns.
Row = Mapping[str, object] | Any
RowType = TypeVar("RowType")


def as_mapping(row: Row) -> Mapping[str, object]:
    """``row`` as column -> value: a dataclass row by its fields, in field order, or by its
    ``as_row()`` where it has one (a table whose columns depend on the run, e.g. one per length).

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Cell:
    ...     task: str
    ...     accuracy: float
    >>> as_mapping(Cell("UF", 0.5))
    {'task': 'UF', 'accuracy': 0.5}
    """
    if is_dataclass(row) and not isinstance(row, type):
        return row.as_row() if hasattr(row, "as_row") else asdict(row)
    return row


def row_from_mapping(row_type: type[RowType], values: Mapping[str, object]) -> RowType:
    """The dataclass row ``row_type`` of a row read back (a journal line, a CSV row): its fields
    taken by name, other columns ignored, absent fields left at their defaults.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Cell:
    ...     task: str
    ...     note: str = ""
    >>> row_from_mapping(Cell, {"task": "UF", "extra": 1})
    Cell(task='UF', note='')
    """
    return row_type(**{f.name: values[f.name] for f in fields(row_type) if f.name in values})


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; renamed over ``path`` when the block ends,
    removed if it raises. Readers see the old file or the new one, never half of one.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "scores.csv"
    >>> with atomic_path(path) as tmp:
    ...     _ = tmp.write_text("head,score")
    ...     path.exists()
    False
    >>> path.read_text()
    'head,score'
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes files private; results are meant to be shared
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        if err.filename is None:  # a failed write (a full disk) names no file: say which table it was
            err.filename = str(path)
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through [`atomic_path`][interp.core.tables.atomic_path]; returns ``path``.

    >>> import tempfile
    >>> path = atomic_write_text(Path(tempfile.mkdtemp()) / "notes.md", "# Notes")
    >>> path.name, path.read_text()
    ('notes.md', '# Notes')
    """
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through [`atomic_path`][interp.core.tables.atomic_path]; returns ``path``.

    >>> import tempfile
    >>> path = atomic_write_bytes(Path(tempfile.mkdtemp()) / "figure.png", b"PNG")
    >>> path.name, path.read_bytes()
    ('figure.png', b'PNG')
    """
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def _columns(rows: Sequence[Mapping[str, object]], columns: Sequence[str] | None) -> list[str]:
    if columns is not None:
        return list(columns)
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


def _format_value(value: object, digits: int = 3) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.{digits}f}"
    return "" if value is None else str(value)


def csv_cell(value: object) -> object:
    """``value`` safe as a spreadsheet cell: text that a spreadsheet would run as a formula
    (``=``, ``+``, ``@``, a tab, or ``-`` before anything but a number or a space) gets a leading ``'``.

    >>> csv_cell("=cmd|' /C calc'!A0"), csv_cell("-SUM(1)"), csv_cell("- +0.00"), csv_cell("-0.5"), csv_cell(-0.5)
    ("'=cmd|' /C calc'!A0", "'-SUM(1)", '- +0.00', '-0.5', -0.5)
    """
    if not isinstance(value, str) or not value or value[0] not in "=+-@\t\r":
        return value
    if value[0] == "-" and (value[1:2] in ("", " ") or _is_number(value)):
        return value
    return "'" + value


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# What Markdown (with the site's tables and attr_list) reads as syntax inside a table cell: a backslash
# escape, a link or image ([ ]), an attribute list ({ }), emphasis (*, and _ unless between two letters
# or digits, where neither Python-Markdown nor GitHub reads it), a code span (`) and a cell border (|).
# Without an unescaped [ no link or image can form, so ( ) ! stay readable; > cannot open a tag without
# <, and a cell never starts a line, so it starts no quote.
_MARKDOWN_ACTIVE = re.compile(r"[\\\[\]{}*`|]|(?<![^\W_])_|_(?![^\W_])")
# What HTML reads as markup: < opens a tag or a comment, & an entity (&#106;avascript:).
_HTML_ACTIVE = {"&": "&amp;", "<": "&lt;"}


def markdown_cell(text: str) -> str:
    """``text`` as one Markdown table cell that renders as its literal text: no ``|`` or line break
    adds cells or rows, and no tag, entity, link, image, attribute list, emphasis or code span forms.

    >>> markdown_cell("a|b\\n<img src=x>")
    'a\\\\|b &lt;img src=x>'
    >>> print(markdown_cell("[a](https://x){ onclick=alert(1) } &#106; n_examples _x_"))
    \\[a\\](https://x)\\{ onclick=alert(1) \\} &amp;#106; n_examples \\_x\\_
    """
    text = "".join(" " if unicodedata.category(ch) == "Cc" else ch for ch in " ".join(str(text).splitlines()))
    text = re.sub(r"[&<]", lambda found: _HTML_ACTIVE[found[0]], text)
    return _MARKDOWN_ACTIVE.sub(lambda found: "\\" + found[0], text)


def _to_csv(rows: Sequence[Row], columns: Sequence[str] | None = None) -> str:
    rows = [as_mapping(row) for row in rows]
    buffer = io.StringIO()
    cols = _columns(rows, columns)
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([csv_cell(c) for c in cols])
    writer.writerows([csv_cell(row.get(c, "")) for c in cols] for row in rows)
    return buffer.getvalue()


def to_markdown(rows: Sequence[Row], columns: Sequence[str] | None = None, digits: int = 3) -> str:
    """``rows`` as a Markdown table: floats to ``digits`` decimals, None as an empty cell.

    >>> print(to_markdown([{"task": "UF", "accuracy": 0.96875}, {"task": "UB", "accuracy": None}]), end="")
    | task | accuracy |
    |---|---|
    | UF | 0.969 |
    | UB |  |
    """
    rows = [as_mapping(row) for row in rows]
    cols = _columns(rows, columns)
    lines = ["| " + " | ".join(map(markdown_cell, cols)) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(markdown_cell(_format_value(row.get(c), digits)) for c in cols) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def stem_file(stem: str | Path, fmt: str) -> Path:
    """``stem.<fmt>``. Not ``Path.with_suffix``: model names have dots (``ablation_qwen2.5-1.5b``),
    and a suffix there would replace ``.5b``.

    >>> stem_file("results/ablation_qwen2.5-1.5b", "csv").as_posix()
    'results/ablation_qwen2.5-1.5b.csv'
    """
    stem = Path(stem)
    return stem.with_name(f"{stem.name}.{fmt}")


def write_table(rows: Sequence[Row], stem: str | Path, columns: Sequence[str] | None = None,
                formats: Iterable[str] = ("csv", "json", "md"), metadata: Mapping | None = None) -> list[Path]:
    """Write ``rows`` as ``stem.csv`` / ``stem.json`` / ``stem.md``; returns the paths written.

    Every format is rendered and written to its temporary file before any is renamed into
    place, so the files of one table come from one call (no mix of an old csv and a new md).
    Dataclass rows are written by their fields, in field order.

    >>> import tempfile
    >>> paths = write_table([{"task": "UF", "accuracy": 1.0}], Path(tempfile.mkdtemp()) / "accuracy")
    >>> [path.name for path in paths]
    ['accuracy.csv', 'accuracy.json', 'accuracy.md']
    """
    stem = Path(stem)
    rows = [as_mapping(row) for row in rows]
    texts = {}
    for fmt in formats:
        if fmt == "csv":
            texts[fmt] = _to_csv(rows, columns)
        elif fmt == "json":
            texts[fmt] = json.dumps({"metadata": dict(metadata or {}), "rows": list(map(dict, rows))}, indent=2, default=str)
        elif fmt == "md":
            texts[fmt] = to_markdown(rows, columns)
        else:
            raise ValueError(f"unknown table format {fmt!r}; expected csv, json or md")
    with ExitStack() as stack:
        for fmt, text in texts.items():
            stack.enter_context(atomic_path(stem_file(stem, fmt))).write_text(text)
    return [stem_file(stem, fmt) for fmt in texts]


def json_ready(value: object) -> object:
    """``value`` as it reads back from a JSON file (tuples become lists, unknown objects strings).

    >>> json_ready({"lengths": (5, 10), "out": Path("results")})
    {'lengths': [5, 10], 'out': 'results'}
    """
    return json.loads(json.dumps(value, default=str))


def read_table_metadata(stem: str | Path) -> dict | None:
    """The metadata stored with a table (``stem.json``), or None when there is no readable one.

    >>> import tempfile
    >>> stem = Path(tempfile.mkdtemp()) / "ablation"
    >>> _ = write_table([{"head": "1.2"}], stem, metadata={"model": "tiny-gpt2"})
    >>> read_table_metadata(stem), read_table_metadata(stem.with_name("absent"))
    ({'model': 'tiny-gpt2'}, None)
    """
    try:
        return json.loads(stem_file(stem, "json").read_text())["metadata"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_csv(path: str | Path, required: Sequence[str] = ()) -> list[dict]:
    """Rows of a results CSV with numbers parsed; a clear error names the file and what is wrong.

    >>> import tempfile
    >>> stem = Path(tempfile.mkdtemp()) / "accuracy"
    >>> _ = write_table([{"task": "UF", "length": 10, "accuracy": 0.5, "note": None}], stem, formats=["csv"])
    >>> read_csv(stem_file(stem, "csv"), required=["accuracy"])
    [{'task': 'UF', 'length': 10, 'accuracy': 0.5, 'note': None}]
    """
    return [row for _, row in csv_lines(path, required)]


def csv_lines(path: str | Path, required: Sequence[str] = ()) -> list[tuple[int, dict]]:
    """``(line number, row)`` of each row of a results CSV, numbers parsed, for errors that name
    the line; an empty file, a folder or a file without ``required`` columns is refused by name.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "accuracy.csv"
    >>> _ = path.write_text("task,accuracy\\nUF,0.5\\n")
    >>> csv_lines(path)
    [(2, {'task': 'UF', 'accuracy': 0.5})]
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"results file {path} does not exist (run the analysis that writes it first)")
    if not path.is_file():
        raise ValueError(f"results file {path} is not a file")
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            if not reader.fieldnames:
                raise ValueError(f"results file {path} is empty (not even a header); re-run the analysis that writes it")
            # a name given twice would let its last column silently stand for both
            if twice := next((c for i, c in enumerate(reader.fieldnames) if c in reader.fieldnames[:i]), None):
                raise ValueError(f"results file {path}, line 1: column {twice!r} appears twice; expected each column once")
            missing = [c for c in required if c not in reader.fieldnames]
            if missing:
                raise ValueError(f"results file {path} lacks column(s) {missing}; it has {reader.fieldnames}")
            rows = []
            for row in reader:
                if None in row or None in row.values():  # DictReader's marks of extra / missing fields
                    have = len(reader.fieldnames) + len(row.get(None, [])) - list(row.values()).count(None)
                    raise ValueError(f"results file {path}, line {reader.line_num}: {have} fields where the "
                                     f"header has {len(reader.fieldnames)}")
                rows.append((reader.line_num, {k: _parse_value(v) for k, v in row.items()}))
            return rows
    except (UnicodeDecodeError, csv.Error) as err:
        raise ValueError(f"results file {path} is not a readable CSV table ({err})") from None
    except OSError as err:
        raise ValueError(f"results file {path} cannot be read ({err.strerror or err})") from None


# A number as the table writer spells one (Python's repr of an int or float); int() and float() also take
# "2_0", " 20", "+20", "Infinity" and other scripts' digits, which no writer here produces: those stay text.
_NUMBER = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|-?inf|nan")


def _parse_value(text: str | None) -> object:
    if text is None or text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    if not _NUMBER.fullmatch(text):
        return text
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text
