"""The documentation site as built (``mkdocs build --strict`` into a temporary folder, once for the module):
no raw Sphinx roles, every published figure on some page, results pages that lead with their figure,
the public API first in search, a search index, each module on one API page, no online fonts; in headless Chromium, results pages that are short
and whose wide tables scroll."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
RAW_ROLE = re.compile(r":(?:func|mod|class|meth|attr|data|obj|exc):(?:<code>|`)")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
                          timeout=600)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-3000:]}"
    return out


def published_figures(suffix: str) -> list[Path]:
    """The figures the repository publishes (tracked by git): ``make claims`` or a local run may leave
    ignored pages beside them."""
    listed = subprocess.run(["git", "ls-files", "-z", "figures"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:  # not a git checkout: whatever is there
        return sorted((ROOT / "figures").glob(f"*{suffix}"))
    return sorted(ROOT / name for name in listed.stdout.split("\0") if name.endswith(suffix))


def pages(site: Path) -> dict[str, str]:
    return {str(p.relative_to(site)): p.read_text(encoding="utf-8") for p in site.rglob("index.html")}


def test_raw_role_pattern():
    assert RAW_ROLE.search("use :func:<code>ablated</code> as a context manager")
    assert RAW_ROLE.search("see :class:`HeadScores`") and not RAW_ROLE.search("a ratio 1:2 and <code>x</code>")


def test_no_raw_sphinx_roles(site):
    found = {name: RAW_ROLE.findall(text)[:3] for name, text in pages(site).items() if RAW_ROLE.search(text)}
    assert not found, f"raw Sphinx roles in the built pages (use mkdocstrings cross-references): {found}"


def test_every_published_figure_is_on_a_page(site):
    text = "\n".join(pages(site).values())
    shown = {unquote(name) for name in re.findall(r'<img[^>]+src="[^"]*figures/([^"/]+\.png)"', text)}
    missing = sorted(p.name for p in published_figures(".png") if p.name not in shown)
    assert not missing, f"figures/ holds PNGs that no page shows: {missing}"
    linked = {unquote(name) for name in re.findall(r'href="[^"]*figures/([^"/]+\.html)"', text)}
    assert {p.name for p in published_figures(".html")} <= linked  # the interactive attention page
    assert (site / "figures" / "plotly.min.js").is_file()


def test_results_pages_lead_with_their_figure(site):
    page = (site / "results" / "head_scores" / "index.html").read_text()
    for model in ("smollm2-135m", "qwen2.5-1.5b", "gemma-3-270m"):
        section = re.split(r"<h2[^>]*>" + re.escape(model) + "<", page, maxsplit=1)[1].split("<h2", 1)[0]
        figure = re.search(r"<(img|iframe)[^>]+figures/head_scores_" + re.escape(model) + r"\.(png|html)", section)
        table = section.find("<table")
        assert figure and figure.start() < table, f"{model}: the section does not lead with its figure"
        assert "<details" in section[:table], f"{model}: the long table is not folded under its figure"
        frame = re.search(r'<iframe[^>]+src="([^"]+)"', section)
        if frame:  # an embedded interactive figure points at a page of the site
            assert (site / "results" / "head_scores" / frame[1]).resolve().is_file()


def test_search_ranks_the_public_api_first(site):
    index = json.loads((site / "search" / "search_index.json").read_text())["docs"]
    hits = [d for d in index if d["title"] == "ablated" or d["title"].startswith("ablated")]
    best = max(hits, key=lambda d: (d.get("boost", 1), d["title"] == "ablated"))
    assert best["title"] == "ablated" and best.get("boost", 1) > 1, best
    assert best["location"] == "api/#ablated" and "<code>interp.ablated</code>" in best["text"]


def test_the_site_has_its_search_index(site):
    index = site / "search" / "search_index.json"
    assert index.is_file(), "the site was written without search/search_index.json: search fails on every page"
    locations = {doc["location"].split("#")[0] for doc in json.loads(index.read_text())["docs"]}
    assert {"", "api/circuits/", "api/interventions/", "results/head_scores/"} <= locations


def test_each_module_is_documented_on_exactly_one_api_page(site):
    """Two pages with one module's anchors give autorefs two primary URLs, and the strict build aborts
    or not by the order it meets them."""
    spec = importlib.util.spec_from_file_location("api_index", ROOT / "docs" / "hooks" / "api_index.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    modules, api = [m for m in hook.module_names() if m != "interp"], hook.api_pages()
    anchors: dict[str, set[str]] = {}
    for name, text in pages(site).items():
        for anchor in set(re.findall(r'id="(interp[\w.]*)"', text)):
            anchors.setdefault(anchor, set()).add(str(Path(name).parent))
    where = {module: sorted(anchors.get(module, ())) for module in modules}
    assert {m: p for m, p in where.items() if len(p) != 1} == {}, "modules documented on no page or on several"
    assert all(p == [hook.page_of(m, api).removesuffix(".md")] for m, p in where.items()), where


def test_no_online_fonts(site):
    online = [name for name, text in pages(site).items() if re.search(r"fonts\.(googleapis|gstatic)\.com", text)]
    assert not online, f"pages load fonts from the network: {online[:5]}"


def test_attention_page_names_its_maker(site):
    page = (site / "figures" / "attention_UB.html").read_text()
    assert "Made by interp.figures.attention" in page and "interp.viz" not in page


# --------------------------------------------------------------------------- in a browser

TABLE_PROBE = """<script>
window.addEventListener('load', () => {
  const article = document.querySelector('article').getBoundingClientRect(), tables = [];
  for (const table of document.querySelectorAll('article table, article pre > code')) {
    let el = table.tagName === 'CODE' ? table : table.parentElement, scrolls = false;
    while (el && el.tagName !== 'ARTICLE') {
      const overflow = getComputedStyle(el).overflowX;
      if (overflow === 'auto' || overflow === 'scroll') { scrolls = true; break; }
      el = el.parentElement;
    }
    tables.push([table.tagName === 'CODE' ? table.scrollWidth : table.getBoundingClientRect().width, scrolls]);
  }
  document.body.setAttribute('data-probe', JSON.stringify(
    {height: document.documentElement.scrollHeight, article: article.width, tables: tables}));
});
</script></body>"""


def measure(page: Path) -> dict:
    """The page's height, its article's width and each table's / code block's (width, scrolls) in Chromium."""
    from interp.figures.browser import find_browser, headless_chromium

    if find_browser() is None:
        pytest.skip("needs headless Chromium: run scripts/install_chromium.sh (make does) or set BROWSER_PATH")
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("</body>", TABLE_PROBE))
    found = re.search(r'data-probe="([^"]*)"', headless_chromium(probe, window=(1300, 900)))
    assert found, "the probe did not run"
    return json.loads(found[1].replace("&quot;", '"'))


@pytest.mark.browser
@pytest.mark.parametrize("page", ["results/head_scores", "api/interventions"])
def test_pages_are_short_and_wide_tables_and_code_scroll(site, page):
    measured = measure(site / page / "index.html")
    if page == "results/head_scores":
        assert measured["height"] < 20_000, f"the head-score page is {measured['height']} px tall: figures lead, tables fold"
    assert measured["tables"], "nothing measured"
    for width, scrolls in measured["tables"]:
        assert width <= measured["article"] + 1 or scrolls, f"a {width} px block is cut off at {measured['article']} px"
