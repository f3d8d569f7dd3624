"""Publishing a run's tables: from a build folder into the tracked results folder, table by table.

A table is its files of one stem (``ablation_smollm2-135m.csv``, ``.json``, ``.md``). Each is
published whole or not at all: a table without its CSV or its Markdown in the build folder is
refused and the published one left as it was, and a published file the new table no longer has
(an old ``.json``) is removed, so the results folder never mixes two runs of one table. A table
that a reader of its kind refuses (`interp.core.published.read_published`) is not published.
"""

from __future__ import annotations

import shutil
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from interp.core.naming import split_result_stem
from interp.core.published import SCHEMAS, read_published
from interp.core.tables import atomic_path, atomic_write_text, read_csv

TABLE_FORMATS = ("csv", "json", "md")
# What every table writer writes; a JSON (the metadata) may be absent.
REQUIRED_FORMATS = ("csv", "md")


@dataclass
class PublishReport:
    """The stems published and the stems refused, each with why."""

    published: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)


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


def _problem(stem: str, files: dict[str, Path]) -> str | None:
    missing = [fmt for fmt in REQUIRED_FORMATS if fmt not in files]
    if missing:
        return f"it lacks its {', '.join('.' + m for m in missing)} (a run that did not finish writing it?)"
    kind = split_result_stem(stem)[0]
    try:
        read_published(files["csv"], kind) if kind in SCHEMAS else read_csv(files["csv"])
    except (ValueError, OSError) as err:
        return str(err)
    return None


def publish_tables(build: str | Path, results: str | Path) -> PublishReport:
    """Copy each complete, readable table of ``build`` into ``results`` (all its files or none).

    >>> import tempfile
    >>> build, results = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
    >>> _ = (build / "claims.csv").write_text("claim\\nx\\n"), (build / "claims.md").write_text("| claim |\\n")
    >>> _ = (build / "theory_table.csv").write_text("task\\nUF\\n")
    >>> report = publish_tables(build, results)
    >>> report.published, list(report.refused)
    (['claims'], ['theory_table'])
    """
    build, results = Path(build), Path(results)
    if not build.is_dir():
        raise FileNotFoundError(f"nothing to publish: {build} is not a folder (run 'make run' first)")
    report = PublishReport()
    for stem, files in build_tables(build).items():
        if problem := _problem(stem, files):
            report.refused[stem] = problem
            continue
        with ExitStack() as stack:  # every file copied beside its target before any is renamed
            for fmt, source in files.items():
                shutil.copyfile(source, stack.enter_context(atomic_path(results / f"{stem}.{fmt}")))
        for fmt in TABLE_FORMATS:
            if fmt not in files:
                (results / f"{stem}.{fmt}").unlink(missing_ok=True)
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
