"""MkDocs hook: one page per results table under ``results/`` (``results/<table>_<model>.csv``), built at
every ``mkdocs build``, so the site shows whatever tables the last published runs wrote.

Every table on a page is generated from its CSV as read back through the validating reader
(`interp.core.publish.validated_rows`), each cell escaped for Markdown and HTML
(`interp.core.tables.to_markdown`): the published ``.md`` is never pasted, so an edited ``.md`` can
neither run a script in the site nor show a number its CSV does not hold. A table the reader refuses
is not shown (its section says why) and the build warns, which fails ``mkdocs build --strict``.
A table appears on the site when it is published with its Markdown (``results/<stem>.md`` beside the
CSV; a circuit's every edge, kept as CSV only, does not).

The published figures (``figures/*.png``, and the attention page ``figures/*.html``) are served at
``figures/`` of the site, and every figure ``interp.figures.build_figures`` draws from ``results/`` is
served there as an interactive page (``figures/<stem>.html``, plotly.js once beside them). Each results
page holds one section per model: its figure first (the published PNG, else the interactive page), for a
route table (``circuit_routes_*``) a sentence saying what it shows, generated from its validated rows and
escaped like a cell (`interp.figures.routes.route_sentence`), the run's settings (from the ``.json`` beside
it), then the table, folded away when it is long.
``results/index.md`` lists them. Nothing is written into ``docs/``: the pages exist only in the build.
"""

from __future__ import annotations

import json
import logging
import textwrap
from collections import defaultdict
from pathlib import Path

from mkdocs.structure.files import File, Files

from interp.core.naming import split_result_stem
from interp.core.publish import STEM, settle, validated_rows
from interp.core.tables import markdown_cell, to_markdown

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
FIGURES = ROOT / "figures"
PAGE_DIR = "results"
log = logging.getLogger("mkdocs.hooks.results_pages")  # a warning under "mkdocs" fails a strict build


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
    # always JSON: a string of metadata cannot close the fence (its line breaks become \n)
    text = json.dumps(metadata, indent=1, default=str)
    block = textwrap.indent(f"```json\n{text}\n```", "    ")  # the admonition's body is indented
    return f'??? note "Run settings"\n\n{block}\n'


FIGURE_OF_TABLE = {"directional_bias": "accuracy_vs_length", "from_scratch": "from_scratch"}  # other tables: same name
LONG_TABLE = 20  # rows; a longer table is folded under its figure
PAGE_ROWS = 500  # rows; a longer table shows these first


def figure_stem(table: str, model: str) -> str:
    """The stem of the figure drawn from ``results/<table>_<model>``, as ``interp.figures`` names it."""
    kind = FIGURE_OF_TABLE.get(table, table)
    return f"{kind}_{model}" if model else kind


def figure_block(stem: str, interactive: dict[str, int]) -> str:
    """The section's figure: the published PNG with a link to the interactive page, or the interactive page."""
    png, page = FIGURES / f"{stem}.png", f"figures/{stem}.html"
    link = f"[interactive figure](../{page})" if page in interactive else ""
    if png.is_file():
        return f"![{stem}](../figures/{stem}.png)\n\n{link}\n" if link else f"![{stem}](../figures/{stem}.png)\n"
    if link:  # raw HTML: the built page sits one folder deeper (results/<table>/index.html)
        height = interactive[page] + 20
        return (f'<iframe class="interp-figure" src="../../{page}" title="{stem}" loading="lazy" '
                f'style="height: {height}px"></iframe>\n\n'
                f"{link}\n")
    return ""


def table_block(columns: list[str], rows: list[dict]) -> str:
    """The table as Markdown, generated from its validated rows: as is when short; folded under a
    summary line when long (the figure carries the overview); cut to its first ``PAGE_ROWS`` rows when
    very long (a page of 20,000 rows takes the build half a minute and no reader scrolls it; the CSV
    has them all)."""
    text = to_markdown(rows[:PAGE_ROWS], columns)
    if len(rows) <= LONG_TABLE:
        return text
    title = f"The table ({len(rows)} rows)"
    if len(rows) > PAGE_ROWS:
        title = f"The first {PAGE_ROWS} of the table's {len(rows)} rows (every row: the .csv)"
    return f'??? note "{title}"\n\n' + textwrap.indent(text, "    ") + "\n"


def table_section(source: Path) -> str:
    """The table of the CSV ``source``, or why it is not shown (and a warning, which fails a strict build)."""
    try:
        columns, rows = validated_rows(source)
    except (ValueError, OSError) as err:
        log.warning(f"results page: not showing {source.name}: {err}")
        return f'!!! failure "Not shown: the table did not pass its checks"\n\n    {markdown_cell(str(err))}\n'
    return table_block(columns, rows)


def sentence_block(table: str, source: Path) -> str:
    """What the table shows, in a sentence generated from its validated rows and escaped like a cell
    (`interp.figures.routes.route_sentence` for route tables); ``""`` for other tables, or for a table the
    reader refuses (its section says why)."""
    if table != "circuit_routes":
        return ""
    try:
        _, rows = validated_rows(source)
    except (ValueError, OSError):
        return ""
    from interp.figures.routes import route_sentence

    try:
        text = route_sentence(rows)
    except (ValueError, KeyError, TypeError, ArithmeticError) as err:
        log.warning(f"results page: no sentence for {source.name}: {err}")
        return ""
    # the one attribute list is the page's own: markdown_cell escapes every brace of the text
    return f"{markdown_cell(text)}\n{{: .interp-summary }}\n" if text else ""


def table_page(table: str, sources: list[Path], interactive: dict[str, int] | None = None) -> str:
    """The page of ``table``: one section per published CSV in ``sources``, every table generated from
    its validated rows."""
    interactive = interactive or {}
    parts = [f"# {markdown_cell(table)}\n", f"Generated from `results/{table}_<model>.csv` at build time.\n"]
    for source in sorted(sources):
        _, model = table_and_model(source.stem)
        parts += [f"## {markdown_cell(model or table)}\n", figure_block(figure_stem(table, model), interactive),
                  sentence_block(table, source),
                  f"`results/{source.name}` (also `.json`, `.md`)\n",
                  run_settings(source.with_suffix(".json")), table_section(source) + "\n"]
    return "\n".join(part for part in parts if part)


def index_page(tables: dict[str, list[Path]]) -> str:
    lines = ["# Result tables\n",
             "The published tables under `results/`, one page per table; `make publish` refreshes them from a",
             "run's `build/results/`, and the next `make docs` shows them. What they mean: [findings](../findings.md).\n",
             "| table | models |", "|---|---|"]
    for table, sources in sorted(tables.items()):
        models = markdown_cell(", ".join(sorted(table_and_model(s.stem)[1] for s in sources)))
        lines.append(f"| [{table}]({table}.md) | {models} |")
    return "\n".join(lines) + "\n"


def published_tables(results: Path | None = None) -> dict[str, list[Path]]:
    """``{table: [its CSVs]}`` of the tables published (in ``results/``) with their Markdown; a file name
    that is not a table's (markup in it) is left out."""
    tables: dict[str, list[Path]] = defaultdict(list)
    for marker in (results or RESULTS).glob("*.md"):
        source = marker.with_name(marker.name.removesuffix(".md") + ".csv")
        if STEM.fullmatch(source.stem) and source.is_file():
            tables[table_and_model(source.stem)[0]].append(source)
    return dict(sorted(tables.items()))


def on_config(config):
    """Each table's page goes into the nav, under the entry of ``results/index.md``."""
    for section in config["nav"] or []:
        entries = next(iter(section.values())) if isinstance(section, dict) else None
        if isinstance(entries, list) and any("results/index.md" in str(e) for e in entries):
            entries += [{table: f"{PAGE_DIR}/{table}.md"} for table in published_tables()]
    return config


def interactive_figures(config) -> tuple[list[File], dict[str, int]]:
    """Every figure the published tables allow, as an interactive page, and plotly.js once beside them;
    and each page's height in pixels."""
    from plotly.offline import get_plotlyjs

    from interp.figures import PLOTLY_JS, build_figures, figure_html

    figures, _ = build_figures(RESULTS, log=lambda _: None)  # a table that cannot be drawn has no figure
    pages = [File.generated(config, f"figures/{stem}.html", content=figure_html(fig)) for stem, fig in figures]
    heights = {f"figures/{stem}.html": int(fig.layout.height or 500) for stem, fig in figures}
    return (pages + [File.generated(config, f"figures/{PLOTLY_JS}", content=get_plotlyjs())] if pages else []), heights


def on_files(files: Files, config) -> Files:
    settle(RESULTS)  # a publish killed halfway is finished (or dropped) before any table is read
    published = [File(f"figures/{figure.name}", src_dir=str(ROOT), dest_dir=config["site_dir"],
                      use_directory_urls=config["use_directory_urls"])
                 for figure in sorted([*FIGURES.glob("*.png"), *FIGURES.glob("*.html")])]
    drawn, heights = interactive_figures(config)
    # published pages win; plotly.js is always the hook's (a local `make figures` leaves an ignored copy
    # in figures/, which is not served)
    served = {f.src_uri for f in published}
    interactive = [f for f in drawn if f.src_uri not in served]
    tables = published_tables()
    names = {f.src_uri: heights.get(f.src_uri, 700) for f in published + interactive if f.src_uri.endswith(".html")}
    for table, sources in tables.items():
        files.append(File.generated(config, f"{PAGE_DIR}/{table}.md", content=table_page(table, sources, names)))
    files.append(File.generated(config, f"{PAGE_DIR}/index.md", content=index_page(tables)))
    for file in published + interactive:
        files.append(file)
    return files
