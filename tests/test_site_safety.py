"""No script runs from a published table and no cell becomes a link: results pages are built from the
validated CSV (docs/hooks/results_pages.py), never from the published ``.md``, and every cell is
escaped for Markdown and HTML (interp.core.tables.markdown_cell). Pages are rendered as the site
renders them (mkdocs's Page with mkdocs.yml's Markdown extensions, attr_list included), without the
minutes of a whole site build; the browser tests open them in headless Chromium."""

from __future__ import annotations

import html
import importlib.util
import json
import re
from pathlib import Path

import pytest

from interp.core.tables import markdown_cell, to_markdown, write_table

ROOT = Path(__file__).resolve().parents[1]
ROW = {"model": "m", "task": "UF", "length": 10, "n_examples": 20, "accuracy": 0.5}
# what a tampered results/*.md (or a cell) tries; any that runs marks the page
MARK = "document.documentElement.setAttribute('data-ran', '{}')"
SCRIPTS = [f"<script>document.title = 'ran'; {MARK.format('script')}</script>",
           f'<img src="x.png" onerror="{MARK.format("img")}">',
           f'<svg onload="{MARK.format("svg")}"></svg>']
LINKS = ["[a](https://example.org){ onclick=alert(1) }", "[c](javascript:alert(1))", "[e](&#106;avascript:alert(1))",
         "![i](x.png){: onerror=\"document.title='ran'\" }", "cell { onmouseover=alert(1) }", "<a href='javascript:alert(1)'>x</a>",
         "[r]: javascript:alert(1)", "[r][]", "<https://example.org>", "&lt;b&gt; &amp;", "**bold** _em_ `code` \\*",
         "a|b", "UF > UB (copy) [0.2-0.5]", "n_examples __init__"]


def hook():
    spec = importlib.util.spec_from_file_location("results_pages_under_test", ROOT / "docs" / "hooks" / "results_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rendered(markdown_text: str, folder: Path) -> str:
    """``markdown_text`` as the site renders a page of it: mkdocs's Page with mkdocs.yml's configuration."""
    from mkdocs.config import load_config
    from mkdocs.structure.files import File, Files
    from mkdocs.structure.pages import Page

    config = load_config(str(ROOT / "mkdocs.yml"))
    docs = folder / "docs"
    (docs / "results").mkdir(parents=True, exist_ok=True)
    (docs / "results" / "page.md").write_text(markdown_text)
    file = File("results/page.md", src_dir=str(docs), dest_dir=str(folder / "site"), use_directory_urls=True)
    page = Page(None, file, config)
    page.read_source(config)
    page.render(config, Files([file]))
    return page.content


def tampered_results(folder: Path, cells: list[str]) -> Path:
    """A results folder with a directional-bias table whose .md was replaced by markup and a number
    the CSV does not hold, and a table of a kind without a schema whose cells are ``cells``."""
    results = folder / "results"
    write_table([ROW], results / "directional_bias_m", metadata={"note": "```\n</code><script>x</script>"})
    (results / "directional_bias_m.md").write_text("| accuracy |\n|---|\n| 0.999 |\n\n" + "\n\n".join(SCRIPTS) + "\n")
    write_table([{"reader": cell, "score": 0.25} for cell in cells], results / "circuit_summary_m")
    return results


def results_pages(results: Path) -> str:
    """The results pages the hook writes for ``results``, one after the other."""
    pages = hook()
    pages.RESULTS = results
    return "\n\n".join(pages.table_page(table, sources) for table, sources in pages.published_tables().items())


def live_markup(page_html: str, tags: tuple[str, ...] = ("a", "img", "svg", "script", "iframe", "strong", "em",
                                                              "code")) -> list[str]:
    """Every element a cell must not become (a link other than a heading's permalink, an image, a
    script, emphasis, code) and every on* attribute, as ``tag`` or ``tag attribute``."""
    from html.parser import HTMLParser

    class Tags(HTMLParser):
        found: list[str] = []

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            permalink = tag == "a" and attrs.get("class") == "headerlink" and (attrs.get("href") or "").startswith("#")
            if tag in tags and not permalink:
                self.found.append(tag)
            self.found += [f"{tag} {name}" for name in attrs if name.startswith("on")]

    parser = Tags()
    parser.found = []
    parser.feed(page_html)
    return parser.found


def cell_texts(page_html: str) -> list[str]:
    return [html.unescape(re.sub(r"<[^>]+>", "", cell)) for cell in re.findall(r"<td>(.*?)</td>", page_html, re.S)]


def test_a_cell_renders_as_its_literal_text(tmp_path):
    page = rendered(to_markdown([{"cell": cell} for cell in SCRIPTS + LINKS]), tmp_path)
    assert cell_texts(page) == SCRIPTS + LINKS
    assert live_markup(page) == []


def test_a_results_page_is_built_from_the_csv_not_the_published_markdown(tmp_path):
    markdown_text = results_pages(tampered_results(tmp_path, LINKS))
    page = rendered(markdown_text, tmp_path)
    assert "0.500" in page and "0.999" not in page  # the CSV's number, not the .md's
    assert live_markup(page, ("a", "img", "svg", "script", "iframe")) == []  # the page's own code spans stay
    assert "</code><script>" not in page  # the metadata stays inside its code block


def test_markdown_cell_keeps_plain_names_readable():
    assert markdown_cell("smollm2-135m+ub n_examples 0.39 (-0.21)") == "smollm2-135m+ub n_examples 0.39 (-0.21)"
    assert markdown_cell("[a](x){ .c } _e_ `c` \\ | <b> &amp;") == \
        "\\[a\\](x)\\{ .c \\} \\_e\\_ \\`c\\` \\\\ \\| &lt;b> &amp;amp;"


# --------------------------------------------------------------------------- in a browser

PROBE = """<script>
const found = {ran: document.documentElement.getAttribute('data-ran'), title: document.title, handlers: [], links: []};
for (const el of document.querySelectorAll('*')) {
  for (const attr of el.attributes) if (attr.name.startsWith('on')) found.handlers.push(el.tagName + ' ' + attr.name);
  if (el.tagName === 'A' && el.href && !el.href.startsWith('file:') && !el.getAttribute('href').startsWith('#'))
    found.links.push(el.href);
}
document.body.setAttribute('data-probe', JSON.stringify(found));
</script>"""


def in_chromium(page_html: str, folder: Path) -> dict:
    """What ran in ``page_html`` opened in headless Chromium: the mark a planted script sets, the
    title, every on* attribute and every link that leaves the page."""
    from interp.figures.browser import find_browser, headless_chromium

    if find_browser() is None:
        pytest.skip("needs headless Chromium: run scripts/install_chromium.sh (make does) or set BROWSER_PATH")
    path = folder / "page.html"
    path.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>clean</title></head>"
                    f"<body><article>{page_html}</article></body></html>")
    onload = path.with_name("probe.html")  # the probe runs after the load event: an image's onerror has fired
    onload.write_text(path.read_text().replace("</body>", "<script>window.addEventListener('load', () => {"
                                               + PROBE.removeprefix("<script>").removesuffix("</script>")
                                               + "});</script></body>"))
    found = re.search(r'data-probe="([^"]*)"', headless_chromium(onload, window=(1000, 800)))
    assert found, "the probe did not run"
    return json.loads(html.unescape(found[1]))


@pytest.mark.browser
def test_no_script_runs_from_a_tampered_results_table_in_chromium(tmp_path):
    page = rendered(results_pages(tampered_results(tmp_path, SCRIPTS)), tmp_path)
    found = in_chromium(page, tmp_path)
    assert found == {"ran": None, "title": "clean", "handlers": [], "links": []}, found


@pytest.mark.browser
def test_no_cell_becomes_a_link_or_a_handler_in_chromium(tmp_path):
    page = rendered(to_markdown([{"cell": cell, "n": i} for i, cell in enumerate(SCRIPTS + LINKS)]), tmp_path)
    found = in_chromium(page, tmp_path)
    assert found == {"ran": None, "title": "clean", "handlers": [], "links": []}, found


@pytest.mark.browser
def test_the_probe_sees_what_a_planted_script_does(tmp_path):
    found = in_chromium(SCRIPTS[0] + SCRIPTS[1] + '<a href="javascript:alert(1)" onclick="x()">a</a>', tmp_path)
    assert found["ran"] in ("script", "img") and found["title"] == "ran"
    assert found["handlers"] == ["IMG onerror", "A onclick"] and found["links"] == ["javascript:alert(1)"]
