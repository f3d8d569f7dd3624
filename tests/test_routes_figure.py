"""The route table as a figure and a sentence (interp/figures/routes.py), drawn by `make figures` and shown on the
results page of ``circuit_routes_*`` (docs/hooks/results_pages.py) above the folded raw table."""

from __future__ import annotations

import html
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from interp.core.published import read_published
from interp.figures.build import build_figures
from interp.figures.routes import route_figure, route_figures, route_sentence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_claims_hypotheses import route_table, share_table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def needs_o_minus_1(route: str, kind: str, cf: str) -> int:
    """Of 32 prompts, those still copied: every removal of the read at o-1 breaks the copy, nothing else does."""
    return 0 if route in ("o-1", "o-1+o") else 32


@pytest.fixture()
def results(tmp_path: Path) -> Path:
    route_table(tmp_path, "UB", needs_o_minus_1, {"o-1": 0.9, "o": 0.1, "o+1": 0.0})
    share_table(tmp_path, "UF", {"o-1": 0.0, "o": 0.02, "o+1": 0.95}, model="n")
    return tmp_path


def test_the_figure_shows_each_removal_with_its_interval_and_the_share_beside(results):
    fig = route_figure(read_published(results / "circuit_routes_m_UB.csv"))
    names = [t.name for t in fig.data]
    # a zero key is no removal (its score of 0 can pull attention toward the entry): values only
    assert names == ["previous-token cut", "mean", "zero", "corrupt", "previous-token cut", "mean", "corrupt",
                     "share of the gap"]
    value_mean = fig.data[1]  # value reads, mean counterfactual: o-1, o, o+1, o-1+o
    assert list(value_mean.y) == [0.0, 1.0, 1.0, 0.0] and value_mean.xaxis == "x"
    assert round(value_mean.error_y.array[0], 2) == 0.11  # Wilson upper bound of 0/32
    share = fig.data[-1]
    assert list(share.x) == ["o-1", "o", "o+1"] and [round(y, 2) for y in share.y] == [0.9, 0.1, 0.0]
    assert [a.text for a in fig.layout.annotations][:3] == ["value read removed", "key read removed",
                                                            "share of the logit-difference gap"]


def test_a_table_of_shares_alone_gets_the_share_and_says_so(results):
    fig = route_figure(read_published(results / "circuit_routes_n_UF.csv"))
    assert [t.name for t in fig.data] == ["share of the gap"]
    assert any("Necessity not measured" in a.text.replace("<br>", " ") for a in fig.layout.annotations)


def test_the_sentence_comes_from_the_numbers(results):
    text = route_sentence(read_published(results / "circuit_routes_m_UB.csv"))
    assert text.startswith("On UB (m, 32 prompts, length 9, every head; 1.00 copied exactly), removing one read at a time, ")
    assert "the read at o-1 is needed (0.00 [0.00, 0.11] exact copies without its value, previous-token cut)" in text
    assert "the read at o is not needed (1.00 [0.89, 1.00] exact copies without its value, zero)" in text
    assert "value reads at o-1, o, o+1 carry 0.90 [0.90, 0.90], 0.10 [0.10, 0.10], 0.00 [-0.00, 0.00] of the" in text
    old = route_sentence(read_published(results / "circuit_routes_n_UF.csv"))
    assert old.endswith("Necessity was not measured in this table (a table of shares alone).")


def test_make_figures_draws_one_per_route_table_named_as_the_table(results):
    (results / "circuit_routes_x_UB.csv").write_text("model,task\nx,UB\n")  # damaged: named, the others drawn
    figures, errors = route_figures(results, log=lambda line: None)
    assert [stem for stem, _ in figures] == ["circuit_routes_m_UB", "circuit_routes_n_UF"]
    assert len(errors) == 1 and "circuit_routes_x_UB.csv" in errors[0]
    drawn, _ = build_figures(results, log=lambda line: None)
    assert {"circuit_routes_m_UB", "circuit_routes_n_UF"} <= {stem for stem, _ in drawn}


def hook():
    spec = importlib.util.spec_from_file_location("results_pages_routes", ROOT / "docs" / "hooks" / "results_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def routes_page(results: Path, figures: Path) -> str:
    """The circuit_routes results page as Markdown, the hook pointed at ``results`` and ``figures``."""
    pages = hook()
    pages.RESULTS, pages.FIGURES = results, figures
    return pages.table_page("circuit_routes", pages.published_tables(results)["circuit_routes"])


def test_the_results_page_leads_with_the_figure_and_the_sentence(results, tmp_path):
    figures = tmp_path / "figures"
    figures.mkdir()
    (figures / "circuit_routes_m_UB.png").write_bytes(b"")
    page = routes_page(results, figures)
    section = page.split("## m_UB", 1)[1].split("## ", 1)[0]
    figure, sentence, table = (section.index(s) for s in ("![circuit_routes_m_UB]", "On UB (m,", "??? note"))
    assert figure < sentence < table  # the figure, its sentence, then the folded raw table
    assert "\\[0.00, 0.11\\]" in section and "{: .interp-summary }" in section  # escaped as a cell is


@pytest.mark.browser
def test_the_results_page_shows_the_figure_and_the_sentence_in_chromium(results, tmp_path):
    from interp.figures import save_figure
    from interp.figures.browser import find_browser, headless_chromium
    from test_site_safety import rendered

    if find_browser() is None:
        pytest.skip("needs headless Chromium: run scripts/install_chromium.sh (make does) or set BROWSER_PATH")
    figures = tmp_path / "site" / "figures"
    figures.mkdir(parents=True)
    save_figure(route_figure(read_published(results / "circuit_routes_m_UB.csv")), figures / "circuit_routes_m_UB", ["png"])
    body = rendered(routes_page(results, figures), tmp_path / "render")
    probe = ("<script>window.addEventListener('load', () => {"
             "const img = document.querySelector('img[src$=\"circuit_routes_m_UB.png\"]');"
             "const p = [...document.querySelectorAll('p.interp-summary')].map(e => e.textContent);"
             "document.body.setAttribute('data-probe', JSON.stringify({width: img ? img.naturalWidth : -1, sentences: p}));"
             "});</script>")
    page = tmp_path / "site" / "results" / "page.html"  # ../figures/ from here is the figures folder
    page.parent.mkdir(parents=True)
    page.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{body}{probe}</body></html>")
    found = json.loads(html.unescape(re.search(r'data-probe="([^"]*)"', headless_chromium(page, window=(1200, 900)))[1]))
    assert found["width"] > 500  # the figure loaded, not a broken image
    expected = route_sentence(read_published(results / "circuit_routes_m_UB.csv"))
    assert expected in found["sentences"] and len(found["sentences"]) == 2  # one per table: m's and n's
