"""Publishing a run's tables: from a build folder into the tracked results folder, table by table.

A table is its files of one stem (``ablation_smollm2-135m.csv``, ``.json``, ``.md``). What reaches the
results folder is generated from validated data: the CSV is read back through the validating reader
(`validated_rows`) and its Markdown written anew from those rows (the build's ``.md`` only says the
run finished writing the table; its text is never copied), and the JSON is published only when it
parses as an object. A table without its CSV or its Markdown, or one the reader refuses, is not
published and the published one is left as it was; a target that is a folder (or anything but a
file) is refused before any file of the table changes.

Each table switches all or nothing, even when the process is killed at any point: its new files are
staged and flushed to disk in a hidden folder inside the results folder (``.publish/<stem>/``), a
commit record written there last decides the switch, and only then are the files renamed into place
and the files the new table no longer has (an old ``.json``) removed. `settle` (run by every publish
before anything else) finishes a switch that was committed and drops one that was not, so after it
every table is entirely old or entirely new and no staged file is left.
"""

from __future__ import annotations

import csv
import fcntl
import json
import os
import re
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from interp.core.naming import split_result_stem
from interp.core.published import SCHEMAS, read_published
from interp.core.tables import atomic_write_text, csv_lines, to_markdown

TABLE_FORMATS = ("csv", "json", "md")
# What every table writer writes; a JSON (the metadata) may be absent.
REQUIRED_FORMATS = ("csv", "md")
# Tables published as CSV alone (long lists that a figure reads, never a page): no Markdown written or required.
CSV_ONLY_KINDS = ("circuit_ranking",)
# Per-prompt tables whose published JSON keeps the metadata only: their rows are in the CSV, which every reader
# reads, and a second copy of tens of thousands of rows would be most of results/.
METADATA_JSON_KINDS = ("circuit_routes", "scratch_family_routes", "scratch_family_edges", "scratch_family_circuits")
STAGING = ".publish"  # inside the results folder: staged tables, each with its commit record
COMMIT = ".commit"
# A table's stem: what the file-naming scheme writes (interp.core.naming.slug), nothing that is markup.
STEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


@dataclass
class PublishReport:
    """The stems published and the stems refused, each with why; the stems of an interrupted publish
    that `settle` finished (``finished``) or dropped as never committed (``dropped``)."""

    published: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    finished: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


def validated_rows(path: str | Path, kind: str | None = None) -> tuple[list[str], list[dict]]:
    """The columns and rows of the results table ``path`` (of ``kind``, by default the kind its file
    name says), every cell checked; a damaged table raises one ``ValueError`` naming the file and line.
    Publishing and the documentation site read tables only through here.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "directional_bias_m.csv"
    >>> _ = path.write_text("model,task,length,n_examples,accuracy\\nm,UF,10,20,0.5\\n")
    >>> validated_rows(path)
    (['model', 'task', 'length', 'n_examples', 'accuracy'], [{'model': 'm', 'task': 'UF', 'length': 10, 'n_examples': 20, 'accuracy': 0.5}])
    """
    path = Path(path)
    kind = split_result_stem(path.name.removesuffix(".csv"))[0] if kind is None else kind
    rows = read_published(path, kind)
    return (list(rows[0]) if rows else _header(path)), rows


def _header(path: Path) -> list[str]:
    with Path(path).open(encoding="utf-8", newline="") as handle:
        return next(csv.reader(handle), [])


def build_tables(folder: Path) -> dict[str, dict[str, Path]]:
    """``{stem: {format: path}}`` of the table files directly in ``folder``.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "ablation_qwen2.5-1.5b.csv").write_text("a\\n1\\n")
    >>> build_tables(folder)["ablation_qwen2.5-1.5b"]["csv"].name
    'ablation_qwen2.5-1.5b.csv'
    """
    tables: dict[str, dict[str, Path]] = {}
    for path in sorted(Path(folder).iterdir()):
        fmt = path.name.rsplit(".", 1)[-1]
        if fmt in TABLE_FORMATS and path.is_file() and not path.name.startswith("."):
            tables.setdefault(path.name[: -len(fmt) - 1], {})[fmt] = path
    return tables


def _file_problem(stem: str, files: dict[str, Path], results: Path) -> str | None:
    required = ("csv",) if split_result_stem(stem)[0] in CSV_ONLY_KINDS else REQUIRED_FORMATS
    missing = [fmt for fmt in required if fmt not in files]
    if missing:
        return f"it lacks its {', '.join('.' + m for m in missing)} (a run that did not finish writing it?)"
    if not STEM.fullmatch(stem):
        return "its name is not a table's: expected letters, digits and . _ + - only"
    for fmt in TABLE_FORMATS:
        target = results / f"{stem}.{fmt}"
        try:
            mode = target.lstat().st_mode
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(mode):
            what = "a folder" if stat.S_ISDIR(mode) else "a link" if stat.S_ISLNK(mode) else "not a file"
            return f"{target} is {what}; expected a file or nothing there (move it away and publish again)"
    return None


def _table_contents(stem: str, files: dict[str, Path], stage: Path) -> dict[str, bytes]:
    """The table's files as published, {name: bytes}: the CSV as read (and validated as staged, so
    what is checked is what is published), the JSON when it parses, the Markdown generated from the rows."""
    csv_name = f"{stem}.csv"
    contents = {csv_name: files["csv"].read_bytes()}
    _write_synced(stage / csv_name, contents[csv_name])
    try:
        columns, rows = validated_rows(stage / csv_name, split_result_stem(stem)[0])
    except ValueError as err:  # name the build's file, not its staged copy
        raise ValueError(str(err).replace(str(stage / csv_name), str(files["csv"]))) from None
    if "json" in files:
        data = files["json"].read_bytes()
        try:
            parsed = json.loads(data)
        except (UnicodeDecodeError, ValueError):
            parsed = None
        if not isinstance(parsed, dict):
            raise ValueError(f"{files['json']} is not a JSON object (the table's metadata)")
        if split_result_stem(stem)[0] in METADATA_JSON_KINDS:
            data = json.dumps({"metadata": parsed.get("metadata") or {}}, indent=2).encode("utf-8")
        contents[f"{stem}.json"] = data
    if split_result_stem(stem)[0] not in CSV_ONLY_KINDS:
        contents[f"{stem}.md"] = to_markdown(rows, columns).encode("utf-8")
    return contents


def _write_synced(path: Path, data: bytes) -> None:
    with path.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def _results_lock(results: Path) -> Iterator[None]:
    """One publisher (or settler) at a time: an ``flock`` on the results folder itself, which the
    kernel drops when the process dies, and which leaves no file behind."""
    fd = os.open(results, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _switch(results: Path, stem: str, files: dict[str, Path]) -> None:
    """Stage the table, commit, rename it into place (see the module's docstring)."""
    staging = results / STAGING
    stage = staging / stem
    staging.mkdir(exist_ok=True)
    stage.mkdir()
    try:
        contents = _table_contents(stem, files, stage)
        for name, data in contents.items():
            if not (stage / name).exists():
                _write_synced(stage / name, data)
        _sync_dir(stage)
        _sync_dir(staging)
        remove = [f"{stem}.{fmt}" for fmt in TABLE_FORMATS
                  if f"{stem}.{fmt}" not in contents and (results / f"{stem}.{fmt}").exists()]
        _write_synced(stage / (COMMIT + ".tmp"), json.dumps({"install": sorted(contents), "remove": remove}).encode())
        os.replace(stage / (COMMIT + ".tmp"), stage / COMMIT)  # the commit point
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        _remove_if_empty(staging)
        raise
    _sync_dir(stage)
    try:
        _finish(results, stage)
    except OSError as err:
        raise OSError(f"committed but not renamed into place ({err}); the next publish finishes it") from None


def _commit_record(stage: Path) -> dict[str, list[str]]:
    """The switch a commit record names, checked: only this table's own files, by plain name."""
    try:
        record = json.loads((stage / COMMIT).read_text(encoding="utf-8"))
        names = {key: list(record[key]) for key in ("install", "remove")}
    except (OSError, ValueError, KeyError, TypeError):
        names = None
    allowed = {f"{stage.name}.{fmt}" for fmt in TABLE_FORMATS}
    if names is None or not all(isinstance(n, str) and n in allowed for ns in names.values() for n in ns):
        raise ValueError(f"{stage / COMMIT} is not a commit record of table {stage.name!r}; "
                         f"remove {stage} and publish the table again")
    return names


def _finish(results: Path, stage: Path) -> None:
    """Complete a committed switch; every step may be repeated, so a switch killed halfway through
    is completed by running this again."""
    record = _commit_record(stage)
    for name in record["install"]:
        if (stage / name).exists():  # else renamed into place before an interruption
            os.replace(stage / name, results / name)
    for name in record["remove"]:
        (results / name).unlink(missing_ok=True)
    _sync_dir(results)
    (stage / COMMIT).unlink()
    shutil.rmtree(stage)
    _remove_if_empty(stage.parent)


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:  # not empty (another table staged), or already gone
        pass


def settle(results: str | Path) -> PublishReport:
    """Finish every committed switch an interrupted publish left in ``results`` and drop every one it
    had not committed: afterwards each table there is entirely old or entirely new, and no staged
    file is left. Returns the stems finished and dropped.

    >>> import tempfile
    >>> results = Path(tempfile.mkdtemp())
    >>> (results / STAGING / "claims").mkdir(parents=True)  # staged, never committed
    >>> _ = (results / STAGING / "claims" / "claims.csv").write_text("claim\\nx\\n")
    >>> settle(results).dropped, (results / STAGING).exists()
    (['claims'], False)
    """
    results = Path(results)
    if not (results / STAGING).exists() and not (results / STAGING).is_symlink():
        return PublishReport()
    with _results_lock(results):
        return _settle_locked(results)


def _settle_locked(results: Path) -> PublishReport:
    report = PublishReport()
    staging = results / STAGING
    if not staging.exists() and not staging.is_symlink():
        return report
    if staging.is_symlink() or not staging.is_dir():
        raise ValueError(f"{staging} is not the publisher's staging folder; move it away and publish again")
    for stage in sorted(staging.iterdir()):
        if stage.is_dir() and not stage.is_symlink() and (stage / COMMIT).is_file():
            try:
                _finish(results, stage)
            except OSError as err:
                raise ValueError(f"cannot finish the interrupted publish of {stage.name} ({err}); free the way "
                                 f"and publish again") from None
            report.finished.append(stage.name)
        else:
            shutil.rmtree(stage) if stage.is_dir() and not stage.is_symlink() else stage.unlink()
            report.dropped.append(stage.name)
    _remove_if_empty(staging)
    return report


def publish_tables(build: str | Path, results: str | Path) -> PublishReport:
    """Publish each complete, readable table of ``build`` into ``results``, each all or nothing
    (after `settle` has finished any interrupted publish).

    >>> import tempfile
    >>> build, results = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
    >>> _ = (build / "directional_bias_m.csv").write_text("model,task,length,n_examples,accuracy\\nm,UF,10,20,0.5\\n")
    >>> _ = (build / "directional_bias_m.md").write_text("(the run's Markdown: not copied)")
    >>> _ = (build / "theory_table.csv").write_text("task\\nUF\\n")
    >>> report = publish_tables(build, results)
    >>> report.published, list(report.refused)
    (['directional_bias_m'], ['theory_table'])
    >>> print((results / "directional_bias_m.md").read_text(), end="")
    | model | task | length | n_examples | accuracy |
    |---|---|---|---|---|
    | m | UF | 10 | 20 | 0.500 |
    """
    build, results = Path(build), Path(results)
    if not build.is_dir():
        raise FileNotFoundError(f"nothing to publish: {build} is not a folder (run 'make run' first)")
    results.mkdir(parents=True, exist_ok=True)
    with _results_lock(results):
        report = _settle_locked(results)
        for stem, files in build_tables(build).items():
            if problem := _file_problem(stem, files, results):
                report.refused[stem] = problem
                continue
            try:
                _switch(results, stem, files)
            except (ValueError, OSError) as err:
                report.refused[stem] = str(err) if isinstance(err, ValueError) else f"cannot write it ({err})"
                continue
            report.published.append(stem)
    return report


def replace_marked_block(path: str | Path, name: str, block: str) -> Path:
    """Replace what lies between ``<!-- name:start -->`` and ``<!-- name:end -->`` in the text file
    ``path`` by ``block`` (written atomically); the rest of the file is kept as it is.

    >>> import tempfile
    >>> page = Path(tempfile.mkdtemp()) / "README.md"
    >>> _ = page.write_text("intro\\n<!-- table:start -->\\nold\\n<!-- table:end -->\\nafter\\n")
    >>> print(replace_marked_block(page, "table", "| a |\\n|---|").read_text(), end="")
    intro
    <!-- table:start -->
    | a |
    |---|
    <!-- table:end -->
    after
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise ValueError(f"{path}: expected one '{start}' line followed by one '{end}' line around the block to replace")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return atomic_write_text(path, f"{head}{start}\n{block.strip()}\n{end}{tail}")
