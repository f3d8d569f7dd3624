"""The interactive circuit view (interp.figures.circuit_view) and the build that draws every published circuit: the
data it embeds is the circuit, its curve's real grid and its ranking; the page works in a real headless Chromium
(head names on the nodes, opening at the selected circuit, a slider over the grid, offline, without errors); no
text of a circuit can end or alter its script; and figures/ holds the views of today's published circuits."""

from __future__ import annotations

import html
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from circuit_samples import publish, sample_circuit

from interp.core.naming import split_result_stem
from interp.core.tables import write_table
from interp.figures.browser import find_browser, headless_chromium
from interp.figures.build import make_figures
from interp.figures.circuit_files import RANKING_LIMIT, PublishedCircuit, published_circuits
from interp.figures.circuit_view import circuit_page, page_data, script_json

ROOT = Path(__file__).resolve().parents[1]
STEM = "circuit_smollm2-135m_UF_few-shot_top-k"
needs_browser = pytest.mark.skipif(find_browser() is None,
                                   reason="needs headless Chromium: run scripts/install_chromium.sh or set BROWSER_PATH")


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> PublishedCircuit:
    results = tmp_path_factory.mktemp("results")
    publish(results, *sample_circuit(200, seed=0), STEM)
    (found,), errors = published_circuits(results, log=lambda _: None)
    assert errors == []
    return found


def embedded(page: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="circuit-data">(.*?)</script>', page, re.S)[1])


def test_the_slider_is_the_curves_grid_with_the_selected_circuit_where_it_opens(published):
    c = published.circuit
    data = embedded(circuit_page(published))
    grid = [s for s in data["stops"] if s["kind"] == "grid"]
    assert [(s["fraction"], s["edges"], s["recovered"], s["accuracy"], s["random_recovered"]) for s in grid] == \
        [(p.fraction, p.edges, pytest.approx(p.recovered, rel=1e-4), pytest.approx(p.accuracy, rel=1e-4),
          pytest.approx(p.random_recovered, rel=1e-4, abs=1e-9)) for p in c.curve.points]
    opened = data["stops"][data["initial"]]
    assert opened["kind"] == "circuit" and opened["edges"] == len(c) == 200
    assert (opened["recovered"], opened["accuracy"]) == (c.recovered, c.accuracy)
    sizes = [s["edges"] for s in data["stops"]]
    assert sizes == sorted(sizes)
    assert [e for e in data["circuit"]] == list(range(200))  # the circuit's edges, its own order
    labels = [data["edges"]["label"][i] for i in data["ranking"]]
    assert labels == [e.label for e in published.ranking] and len(labels) == RANKING_LIMIT
    assert all((s["draw"] == "ranking") == (s["edges"] <= RANKING_LIMIT) for s in grid)
    assert data["edges"]["loss"][0] == c.edges[0].loss and data["edges"]["loss"][len(c)] is None


def test_layouts_hold_every_node_their_edges_need(published):
    data = page_data(published)
    for stop in data["stops"]:
        if stop["layout"] is None:
            continue
        lay = data["layouts"][stop["layout"]]
        ids = data["circuit"] if stop["draw"] == "circuit" else data["ranking"][: stop["edges"]]
        needed = {n for i in ids for n in data["edges"]["segments"][i]}
        assert needed == set(lay["nodes"]), stop
        assert len(lay["x"]) == len(lay["y"]) == len(lay["nodes"])


def test_embedded_data_cannot_end_or_open_a_script():
    hostile = {"role": "<!--<script>", "end": "</script><img src=x onerror=alert(1)>", "amp": "&lt;", "line": "a\u2028b\u2029"}
    text = script_json(hostile)
    assert not set(text) & set("<>&\u2028\u2029") and json.loads(text) == hostile


def test_make_figures_draws_new_circuits_and_skips_earlier_tables(tmp_path, published):
    results = tmp_path / "results"
    results.mkdir()
    old = {"model": "planted-ub", "task": "UB", "length": 4, "counterfactual": "corrupt", "rank": 1, "pos": 4,
           "role": "s1", "reader": "a1.1.v", "writer": "a0.0", "eap_ig": -17.1}  # a table of the earlier format
    for kind in ("circuit", "circuit_summary", "circuit_curve", "circuit_edges", "circuit_components"):
        write_table([old], results / f"{kind}_planted-ub_UB", metadata={"config": {"task": "UB"}, "model": "planted-ub"})
    publish(results, replace(published.circuit, model="/home/someone/ckpt-9/"), published.ranking, "circuit_ckpt-9_UF_top-k")
    notes = []
    written, errors = make_figures(results, tmp_path / "figures", formats=("html",), log=notes.append)
    assert errors == [] and [p.name for p in written] == ["circuit_ckpt-9_UF_top-k.html"]
    page = written[0].read_text()
    assert "<title>Circuit of ckpt-9 on UF (top-k)</title>" in page and "/home/someone" not in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "the page loads something from the network"
    assert any("not saved circuits" in n for n in notes)


def test_a_broken_saved_circuit_is_one_error_naming_it(tmp_path, published):
    path = publish(tmp_path, published.circuit, published.ranking, STEM)
    text = json.loads(path.read_text())
    del text["metadata"]["edges"]
    path.write_text(json.dumps(text))
    written, errors = make_figures(tmp_path, tmp_path / "figures", formats=("html",), log=lambda _: None)
    assert written == [] and len(errors) == 1 and path.name in errors[0] and "missing or unexpected field" in errors[0]
    ranking = tmp_path / STEM.replace("circuit_", "circuit_ranking_", 1)
    publish(tmp_path, published.circuit, published.ranking[:3], STEM)
    ranking.with_suffix(".csv").write_text(ranking.with_suffix(".csv").read_text().replace("\n2,", "\n7,", 1))
    written, errors = make_figures(tmp_path, tmp_path / "figures", formats=("html",), log=lambda _: None)
    assert written == [] and len(errors) == 1 and "ranks are not 1, 2, ..., 3" in errors[0]


PROBE = """<script>
window.__errors = [];
window.addEventListener('error', e => window.__errors.push(String(e.message || e.target && e.target.src)), true);
for (const level of ['error', 'warn']) {
  const original = console[level];
  console[level] = (...args) => { window.__errors.push(level + ': ' + args.join(' ')); original.apply(console, args); };
}
window.addEventListener('load', () => {
  const result = {errors: window.__errors, title: document.title};
  try {
    const section = document.getElementById('circuit'), slider = section.querySelector('input.stop');
    const state = () => ({stop: +section.dataset.stop, edges: +section.dataset.edges,
      paths: section.querySelectorAll('g.edges path').length,
      listed: section.querySelectorAll('table.edge-list tbody tr').length,
      nodes: [...section.querySelectorAll('g.nodes .node-label')].map(t => t.textContent),
      where: section.querySelector('.stop-label').textContent,
      recovered: +section.querySelector('.faithfulness').dataset.recovered});
    const states = [state()];
    for (let v = 0; v <= +slider.max; v++) {
      slider.value = v;
      slider.dispatchEvent(new Event('input'));
      states.push(state());
    }
    Object.assign(result, {states, max: +slider.max, injected: window.__pwned || null,
      images: document.querySelectorAll('img').length, scripts: document.querySelectorAll('script').length});
  } catch (err) { window.__errors.push('probe: ' + err); }
  result.requests = performance.getEntriesByType('resource').map(r => r.name);
  document.body.setAttribute('data-probe', JSON.stringify(result));
});
</script>"""


def probe(page_html: str, tmp_path) -> dict:
    page = tmp_path / "circuit.html"
    page.write_text(page_html.replace("<head>", "<head>" + PROBE, 1))
    found = re.search(r'data-probe="([^"]*)"', headless_chromium(page, window=(1400, 900)))
    assert found, "the probe did not run (the page's scripts are dead)"
    return json.loads(found[1].replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))


@pytest.mark.browser
@needs_browser
def test_the_page_names_heads_opens_at_the_circuit_and_walks_the_grid(published, tmp_path):
    c = published.circuit
    result = probe(circuit_page(published), tmp_path)
    assert result["errors"] == [] and result["requests"] == [], result["errors"]
    data = page_data(published)
    first, walk = result["states"][0], result["states"][1:]
    assert first["stop"] == data["initial"] and first["edges"] == first["listed"] == len(c)
    assert first["where"].startswith("selected circuit: 200 edges")
    heads = {f"{e.reader[1:]} @ {e.role}" for e in c.edges if e.kind != "residual"}
    assert heads <= set(first["nodes"]), heads - set(first["nodes"])  # every head of the circuit named on its node
    assert len(walk) == len(data["stops"]) == result["max"] + 1
    for stop, state in zip(data["stops"], walk):
        drawn = 0 if stop["draw"] is None else len(c) if stop["draw"] == "circuit" else stop["edges"]
        assert state["edges"] == state["listed"] == drawn, (stop, state)
        assert state["paths"] >= drawn and state["recovered"] == pytest.approx(stop["recovered"])
        assert f"{stop['edges']:,} edges" in state["where"]
    assert any("numbers only" in s["where"] for s in walk)  # grid points past the published ranking


@pytest.mark.browser
@needs_browser
def test_markup_in_a_circuit_draws_every_edge_and_runs_nothing(tmp_path):
    """A role ``<!--<script>`` once swallowed the page's script (0 edges drawn); ``</script>`` and an ``<img onerror>``
    must not end the data or run."""
    attack = {"roles": ("bos", "<!--<script>", "s", "</script><img src=x onerror=window.__pwned=1>", "c"),
              "key_roles": ("<!--<script>", "<img src=x onerror=window.__pwned=2>", "o+1")}
    c, ranking = sample_circuit(30, seed=3, ranking=60, model="<script>window.__pwned=3</script>", **attack)
    published = PublishedCircuit(STEM, c, ranking, "<!--<script>")
    result = probe(circuit_page(published), tmp_path)
    assert result["errors"] == [] and result["injected"] is None, result
    assert result["images"] == 0 and result["scripts"] == 3  # the probe, the data, the page's own script
    first = result["states"][0]
    assert first["edges"] == first["listed"] == 30
    assert any("<!--<script>" in n for n in first["nodes"]) and any("</script>" in n for n in first["nodes"])


def test_the_published_views_are_what_make_figures_draws_now(tmp_path):
    """A view redrawn after a change of the page or of a circuit must be committed with it: figures/ holds one view
    per published circuit, each equal to the page built from results/ now, and a PNG beside it at most 1600 px
    tall; no view of a circuit no longer published."""
    from test_circuit_figure import png_size

    from interp.figures.build import write_circuit_figures

    circuits, errors = published_circuits(ROOT / "results", log=lambda _: None)
    assert not errors
    stale = []
    for published in circuits:
        (page,) = write_circuit_figures(published, tmp_path, ("html",))
        if page.read_bytes() != (ROOT / "figures" / page.name).read_bytes():
            stale.append(page.name)
        assert png_size(ROOT / "figures" / f"{published.stem}.png")[1] <= 1600
    assert not stale, f"figures/ holds views older than their circuits or the page code: {stale} (run make figures)"
    views = {p.stem for p in (ROOT / "figures").glob("circuit_*.html") if split_result_stem(p.stem)[0] == "circuit"}
    orphans = sorted(views - {p.stem for p in circuits})
    assert not orphans, f"figures/ holds views of circuits results/ no longer publishes: {orphans}"


@pytest.mark.browser
@needs_browser
def test_every_published_circuit_names_its_heads_and_draws_at_most_40_edges_in_its_figure():
    from test_circuit_figure import edge_label, edge_traces

    from interp.figures.circuit_figure import MAX_DRAWN, circuit_figure

    circuits, errors = published_circuits(ROOT / "results", log=lambda _: None)
    assert not errors
    for published in circuits:
        c = published.circuit
        dom = headless_chromium(ROOT / "figures" / f"{published.stem}.html", window=(1400, 900))
        names = {html.unescape(n) for n in re.findall(r'<text[^>]*class="node-label"[^>]*>([^<]*)</text>', dom)}
        heads = {f"{e.reader[1:]} @ {e.role}" for e in c.edges if e.kind != "residual"}
        assert heads <= names, (published.stem, sorted(heads - names))
        assert re.search(rf'id="circuit"[^>]*data-edges="{len(c)}"', dom), published.stem
        assert len({edge_label(t) for t in edge_traces(circuit_figure(c))}) <= MAX_DRAWN
