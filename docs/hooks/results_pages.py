"""MkDocs hook: one page per results table under ``results/`` (``results/<table>_<model>.md``), built at
every ``mkdocs build``, so the site shows whatever tables the last published runs wrote.

The published figures (``figures/*.png``) are served at ``figures/`` of the site, for the pages that show them.
Each page holds one section per model with the table and the run's settings (from the ``.json`` beside
it); ``results/index.md`` lists them. Nothing is written into ``docs/``: the pages exist only in the build.
"""

from __future__ import annotations

import json
import textwrap
from collections import defaultdict
from pathlib import Path

from mkdocs.structure.files import File, Files

from interp.core.naming import split_result_stem

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
FIGURES = ROOT / "figures"
PAGE_DIR = "results"


def table_and_model(stem: str) -> tuple[str, str]:
    """``ablation_summary_smollm2-135m`` -> (``ablation_summary``, ``smollm2-135m``), by the package's own
    reading of its file names (a stem of no known kind is a table of its own)."""
    kind, rest = split_result_stem(stem)
    return (kind, rest) if kind else (stem, "")


def run_settings(json_path: Path) -> str:
    if not json_path.is_file():
        return ""
    try:
        metadata = json.loads(json_path.read_text()).get("metadata")
    except (json.JSONDecodeError, AttributeError):
        return ""
    if not metadata:
        return ""
    text = metadata if isinstance(metadata, str) else json.dumps(metadata, indent=1, default=str)
    block = textwrap.indent(f"```json\n{text}\n```", "    ")  # the admonition's body is indented
    return f'??? note "Run settings"\n\n{block}\n'


def table_page(table: str, sources: list[Path]) -> str:
    parts = [f"# {table}\n", f"Generated from `results/{table}_<model>.md` at build time.\n"]
    for source in sorted(sources):
        _, model = table_and_model(source.stem)
        parts += [f"## {model or table}\n", f"`results/{source.name}` (also `.csv`, `.json`)\n",
                  run_settings(source.with_suffix(".json")), source.read_text().strip() + "\n"]
    return "\n".join(parts)


def index_page(tables: dict[str, list[Path]]) -> str:
    lines = ["# Result tables\n",
             "The published tables under `results/`, one page per table; `make publish` refreshes them from a",
             "run's `build/results/`, and the next `make docs` shows them. What they mean: [findings](../findings.md).\n",
             "| table | models |", "|---|---|"]
    for table, sources in sorted(tables.items()):
        models = ", ".join(sorted(table_and_model(s.stem)[1] for s in sources))
        lines.append(f"| [{table}]({table}.md) | {models} |")
    return "\n".join(lines) + "\n"


def published_tables() -> dict[str, list[Path]]:
    tables: dict[str, list[Path]] = defaultdict(list)
    for source in RESULTS.glob("*.md"):
        tables[table_and_model(source.stem)[0]].append(source)
    return dict(sorted(tables.items()))


def on_config(config):
    """Each table's page goes into the nav, under the entry of ``results/index.md``."""
    for section in config["nav"] or []:
        entries = next(iter(section.values())) if isinstance(section, dict) else None
        if isinstance(entries, list) and any("results/index.md" in str(e) for e in entries):
            entries += [{table: f"{PAGE_DIR}/{table}.md"} for table in published_tables()]
    return config


def on_files(files: Files, config) -> Files:
    tables = published_tables()
    for table, sources in tables.items():
        files.append(File.generated(config, f"{PAGE_DIR}/{table}.md", content=table_page(table, sources)))
    files.append(File.generated(config, f"{PAGE_DIR}/index.md", content=index_page(tables)))
    for figure in sorted(FIGURES.glob("*.png")):
        files.append(File(f"figures/{figure.name}", src_dir=str(ROOT), dest_dir=config["site_dir"],
                          use_directory_urls=config["use_directory_urls"]))
    return files
