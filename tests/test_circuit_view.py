"""The interactive circuit view: the data it embeds agrees with the published tables, and the page works
in a real headless Chromium (the slider redraws the edges and the faithfulness, offline, without errors)."""

from __future__ import annotations

import csv
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from interp.core.tables import read_csv
from interp.figures.browser import find_browser, headless_chromium
from interp.figures.build import make_figures
from interp.figures.circuit_view import circuit_page, load_circuit_panels, page_data

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
STEM = "planted-ub_UB"  # the smallest published circuit: 16 edges of 1781, one length


@pytest.fixture(scope="module")
def panel():
    (panel,) = load_circuit_panels(RESULTS / f"circuit_{STEM}.csv")
    return panel


def embedded(page: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="circuit-data">(.*?)</script>', page, re.S)[1])


def test_budgets_and_faithfulness_are_the_curve_table(panel):
    curve = read_csv(RESULTS / f"circuit_curve_{STEM}.csv")
    data = embedded(circuit_page([panel]))["circuits"][0]
    assert [b["edges"] for b in data["budgets"]] == [r["edges"] for r in curve]
    assert [b["edges"] for b in data["budgets"]] == sorted(b["edges"] for b in data["budgets"])
    assert [b["recovered"] for b in data["budgets"]] == [r["recovered"] for r in curve]
    assert [b["accuracy"] for b in data["budgets"]] == [r["accuracy"] for r in curve]
    summary = read_csv(RESULTS / f"circuit_summary_{STEM}.csv")[0]
    assert data["budgets"][data["initial"]]["edges"] == summary["circuit_edges"] == 16


def test_edges_are_in_selection_order_and_start_with_the_published_circuit(panel):
    data = page_data(panel)
    edges = data["edges"]
    assert len(edges["pos"]) == data["budgets"][-1]["edges"]  # enough for the largest budget, no more
    scores = [abs(s) for s in edges["eap_ig"]]
    assert scores == sorted(scores, reverse=True)
    drawn = [(p, data["readers"][r], data["writers"][w]) for p, r, w in zip(edges["pos"], edges["reader"], edges["writer"])]
    circuit = sorted(read_csv(RESULTS / f"circuit_{STEM}.csv"), key=lambda r: r["rank"])
    assert drawn[: len(circuit)] == [(r["pos"], r["reader"], r["writer"]) for r in circuit]
    assert all(f"{writer}@{p}" in data["nodes"] for p, _, writer in drawn)


def test_tables_of_different_runs_are_refused(tmp_path):
    for table in RESULTS.glob(f"circuit*_{STEM}.csv"):
        shutil.copy(table, tmp_path / table.name)
    path = tmp_path / f"circuit_{STEM}.csv"
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    rows[0]["reader"], rows[1]["reader"] = rows[1]["reader"], rows[0]["reader"]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(ValueError, match="different runs"):
        load_circuit_panels(path)


def test_make_figures_writes_one_page_per_circuit(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    for table in RESULTS.glob(f"circuit*_{STEM}.*"):
        shutil.copy(table, results / table.name)
    written, errors = make_figures(results, tmp_path / "figures", formats=("html",), log=lambda line: None)
    assert errors == [] and [p.name for p in written] == [f"circuit_{STEM}.html"]
    page = written[0].read_text()
    assert "<title>Circuit of planted-ub on UB</title>" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "the page loads something from the network"


def test_a_missing_table_is_one_error_naming_it(tmp_path):
    for table in RESULTS.glob(f"circuit*_{STEM}.csv"):
        shutil.copy(table, tmp_path / table.name)
    (tmp_path / f"circuit_curve_{STEM}.csv").unlink()
    written, errors = make_figures(tmp_path, tmp_path / "figures", formats=("html",), log=lambda line: None)
    assert written == [] and len(errors) == 1
    assert f"circuit_{STEM}.csv" in errors[0] and f"circuit_curve_{STEM}.csv is missing" in errors[0]


PROBE = """<script>
window.__errors = [];
window.addEventListener('error', e => window.__errors.push(String(e.message || e.target && e.target.src)), true);
for (const level of ['error', 'warn']) {
  const original = console[level];
  console[level] = (...args) => { window.__errors.push(level + ': ' + args.join(' ')); original.apply(console, args); };
}
window.addEventListener('load', () => {
  const result = {errors: window.__errors, requests: [], title: document.title};
  try {
  const section = document.getElementById('circuit-0'), slider = section.querySelector('input.budget');
  const state = () => ({edges: section.querySelectorAll('g.edges path').length, shown: +section.dataset.edges,
    faithfulness: section.querySelector('.faithfulness').textContent,
    recovered: +section.querySelector('.faithfulness').dataset.recovered,
    marker: section.querySelector('svg.curve .marker').getAttribute('cx'),
    titled: [...section.querySelectorAll('g.edges path')].every(p => p.querySelector('title'))});
  const states = [state()];
  for (const value of [0, slider.max]) {
    slider.value = value;
    slider.dispatchEvent(new Event('input'));
    states.push(state());
  }
  Object.assign(result, {states, hover: section.querySelector('g.edges path title').textContent});
  } catch (err) { window.__errors.push('probe: ' + err); }
  result.requests = performance.getEntriesByType('resource').map(r => r.name);
  document.body.setAttribute('data-probe', JSON.stringify(result));
});
</script>"""


@pytest.mark.browser
@pytest.mark.skipif(find_browser() is None,
                    reason="needs headless Chromium: run scripts/install_chromium.sh (make does) or set BROWSER_PATH")
def test_slider_redraws_edges_and_faithfulness_in_headless_chromium(panel, tmp_path):
    page = tmp_path / "circuit.html"
    page.write_text(circuit_page([panel]).replace("<head>", "<head>" + PROBE, 1))
    found = re.search(r'data-probe="([^"]*)"', headless_chromium(page, window=(1200, 900)))
    assert found, "the probe did not run"
    probe = json.loads(found[1].replace("&quot;", '"').replace("&amp;", "&"))
    assert probe["errors"] == [] and probe["requests"] == [], probe
    curve = {r["edges"]: r["recovered"] for r in read_csv(RESULTS / f"circuit_curve_{STEM}.csv")}
    first, smallest, largest = probe["states"]
    assert probe["title"] == "Circuit of planted-ub on UB"
    assert (first["edges"], smallest["edges"], largest["edges"]) == (16, 1, max(curve))
    for state in probe["states"]:
        assert state["edges"] == state["shown"] and state["titled"]
        assert state["recovered"] == pytest.approx(curve[state["edges"]])
    assert len({s["faithfulness"] for s in probe["states"]}) == 3, "the faithfulness shown did not follow the slider"
    assert len({s["marker"] for s in probe["states"]}) == 3, "the curve's marker did not follow the slider"
    assert "100.0%" in first["faithfulness"] and "0.0%" in smallest["faithfulness"]
    for words in ("a0.0.v", "embed", "position 4 (s1)", "EAP: ", "EAP-IG: -17.066", "exact: not measured",
                  "over all positions"):
        assert words in probe["hover"], (words, probe["hover"])


def test_a_circuit_selected_by_eap_ig_over_activations_is_drawn_by_its_own_scores(tmp_path):
    sys.path.insert(0, str(ROOT / "analyses"))
    import find_circuit
    from interp.cli import run

    run(find_circuit.main, ["--model", "planted-ub", "--task", "UB", "--lengths", "3", "--n", "2", "--steps", "1",
                            "--method", "eap-ig-act", "--random", "0", "--exact", "none", "--attention", "no",
                            "--quiet", "--out", str(tmp_path)])
    written, errors = make_figures(tmp_path, tmp_path / "figures", formats=("html",), log=lambda line: None)
    assert errors == [] and [p.name for p in written] == ["circuit_planted-ub_UB.html"]
    data = embedded(written[0].read_text())["circuits"][0]
    assert data["method"] == "eap_ig_act" and "eap_ig_act" in data["methods"]
    assert data["method_titles"]["eap_ig_act"] == "EAP-IG (activations)"
    scores = [abs(s) for s in data["edges"]["eap_ig_act"]]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0


def test_a_capped_edge_table_still_holds_the_largest_circuit_the_view_redraws(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "analyses"))
    import find_circuit
    from interp.cli import run
    from interp.experiments import circuit_study

    monkeypatch.setattr(circuit_study, "MAX_EDGE_ROWS", 10)  # a pretrained model's millions, in miniature
    run(find_circuit.main, ["--model", "planted-ub", "--task", "UB", "--lengths", "3", "--n", "2", "--steps", "1",
                            "--budget", "4,24", "--random", "0", "--exact", "none", "--attention", "no",
                            "--quiet", "--out", str(tmp_path)])
    assert len(read_csv(tmp_path / "circuit_edges_planted-ub_UB.csv")) == 24
    (panel,) = load_circuit_panels(tmp_path / "circuit_planted-ub_UB.csv")
    assert len(panel.edges) == 24 and panel.curve[-1]["edges"] == 24


def test_the_published_views_are_what_make_figures_draws_from_the_published_tables(tmp_path):
    """A view redrawn after a change of the page or of a table must be committed with it: every
    ``figures/circuit_*.html`` equals the page built from ``results/`` now."""
    from interp.figures.build import circuit_views, write_circuit_view

    views, errors = circuit_views(ROOT / "results", log=lambda _: None)
    assert not errors and len(views) >= 9
    stale = []
    for stem, panels in views:
        (page,) = write_circuit_view(stem, panels, ROOT / "results", tmp_path)
        if page.read_bytes() != (ROOT / "figures" / f"{stem}.html").read_bytes():
            stale.append(stem)
    assert not stale, f"figures/ holds views older than their tables or the page code: {stale} (run make figures)"
