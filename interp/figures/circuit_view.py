"""An interactive view of a published circuit: one offline HTML page per ``circuit_<model>_<task>`` table
(nodes by layer and position role, edge width by score, every number of an edge on hover, a slider over
the edge budgets of the faithfulness curve), and a static plotly figure of the chosen circuit for papers.

The page is plain SVG drawn by a short inline script from JSON embedded in the page: no plotly.js, no
network. The edges kept at a budget ``b`` are the first ``b`` in the order the faithfulness curve
selected them (``|score|`` of the study's method, ties by position in the graph), so the number shown
beside the slider is the curve's measured share of the metric gap for exactly the edges drawn.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.core.naming import split_result_stem
from interp.core.tables import read_csv
from interp.figures.style import FONT, OKABE_ITO, style

EDGE_COLUMNS = ("length", "counterfactual", "pos", "role", "reader", "writer")
CURVE_COLUMNS = ("length", "counterfactual", "edges", "recovered", "accuracy")
SUMMARY_COLUMNS = ("length", "counterfactual", "method", "circuit_edges", "clean_metric", "empty_metric")
SCORE_METHODS = ("eap", "eap_ig", "eap_ig_act", "exact")  # edge-table columns, in the order the page shows them
METHOD_TITLES = {"eap": "EAP", "eap_ig": "EAP-IG", "eap_ig_act": "EAP-IG (activations)", "exact": "exact",
                 "exact_component": "exact"}
CHANNEL_COLOURS = {"q": OKABE_ITO["blue"], "k": OKABE_ITO["purple"], "v": OKABE_ITO["vermillion"],
                   "in": OKABE_ITO["green"], "out": OKABE_ITO["black"]}
CHANNEL_TITLES = {"q": "query input", "k": "key input", "v": "value input", "in": "MLP input", "out": "logits"}
COLUMN_PX, ROW_PX = 64, 70  # one column per position, one row per component kind of a layer
STATIC_WIDTH = 1000  # px of the static figure at most


@dataclass
class CircuitPanel:
    """One circuit (one copy length and counterfactual of a study): its edges in selection order, and
    the faithfulness curve measured over budgets of that order."""
    model: str
    task: str
    length: int
    counterfactual: str
    method: str  # the edge-table column the circuit was selected by
    roles: list[str]  # role of each position
    edges: list[dict]  # pos, role, reader, writer, the scores; selection order, the first max(budget) only
    curve: list[dict]  # edges, fraction, recovered, accuracy, random_recovered (ascending budgets)
    circuit_edges: int  # the budget of the published circuit
    summary: dict
    components: dict[str, dict] = field(default_factory=dict)  # "reader<-writer" -> component-level numbers

    @property
    def title(self) -> str:
        return f"length {self.length}, {self.counterfactual} counterfactual"


def _owner(reader: str) -> tuple[str, str]:
    """``a1.2.v`` -> (``a1.2``, ``v``); ``m0.in`` -> (``m0``, ``in``); ``logits`` -> (``logits``, ``out``)."""
    if reader == "logits":
        return "logits", "out"
    component, _, channel = reader.rpartition(".")
    return component, channel


def _shape(components: set[str]) -> tuple[int, int]:
    """(layers, heads per layer) implied by component labels."""
    layers = heads = 0
    for c in components:
        found = re.fullmatch(r"a(\d+)\.(\d+)|m(\d+)", c)
        if found and found[1] is not None:
            layers, heads = max(layers, int(found[1]) + 1), max(heads, int(found[2]) + 1)
        elif found:
            layers = max(layers, int(found[3]) + 1)
    return layers, heads


def layout(panel: CircuitPanel) -> tuple[dict[str, tuple[float, float]], list[tuple[float, str]], list[tuple[float, str]], float, float]:
    """Node coordinates (``"<component>@<pos>"`` -> (x, y), y down as in SVG), the row labels, the
    column labels, and the width and height of the drawing. Rows from the bottom: embeddings, then per
    layer its heads and its MLP, then the logits; columns: positions (labelled by role), heads spread
    inside their position's column.

    >>> coords, rows, columns, width, height = layout(load_circuit_panels("results/circuit_planted-ub_UB.csv")[0])
    >>> [label for _, label in rows], columns[4][1], coords["a1.1@4"][1] < coords["a0.0@4"][1]
    (['embeddings', 'attn 0', 'MLP 0', 'attn 1', 'MLP 1', 'logits'], 's1', True)
    """
    components = {e["writer"] for e in panel.edges} | {_owner(e["reader"])[0] for e in panel.edges}
    layers, heads = _shape(components)
    rows = ["embed"] + [f"{kind}{layer}" for layer in range(layers) for kind in ("a", "m")] + ["logits"]
    height = ROW_PX * (len(rows) + 1)
    y_of = {row: height - ROW_PX * (i + 1) for i, row in enumerate(rows)}
    left = 90
    width = left + COLUMN_PX * len(panel.roles) + 20

    def offset(slot: int, slots: int) -> float:
        return (slot - (slots - 1) / 2) * COLUMN_PX / (slots + 1)

    coords: dict[str, tuple[float, float]] = {}
    for pos in range(len(panel.roles)):
        centre = left + COLUMN_PX * (pos + 0.5)
        coords[f"embed@{pos}"] = (centre + offset(0, 2), y_of["embed"])
        coords[f"pos_embed@{pos}"] = (centre + offset(1, 2), y_of["embed"])
        coords[f"logits@{pos}"] = (centre, y_of["logits"])
        for layer in range(layers):
            coords[f"m{layer}@{pos}"] = (centre, y_of[f"m{layer}"])
            for head in range(heads):
                coords[f"a{layer}.{head}@{pos}"] = (centre + offset(head, heads), y_of[f"a{layer}"])
    row_titles = {"embed": "embeddings", "logits": "logits"}
    row_labels = [(y_of[r], row_titles.get(r) or (f"attn {r[1:]}" if r[0] == "a" else f"MLP {r[1:]}")) for r in rows]
    column_labels = [(left + COLUMN_PX * (p + 0.5), role) for p, role in enumerate(panel.roles)]
    return coords, row_labels, column_labels, width, height


def selection_order(rows: list[dict], method: str) -> list[dict]:
    """The edges in the order the faithfulness curve kept them: largest ``|score|`` first, ties by row
    order (the graph's position-reader-writer order, which the edge table is written in).

    >>> [r["reader"] for r in selection_order([{"reader": "a", "eap": 1.0}, {"reader": "b", "eap": -3.0},
    ...                                        {"reader": "c", "eap": 1.0}], "eap")]
    ['b', 'a', 'c']
    """
    return sorted(rows, key=lambda r: -abs(r[method] or 0.0))  # sorted() is stable: ties keep row order


def _method_column(method: str) -> str:
    return method.replace("-", "_")


def _component_numbers(rows: list[dict]) -> dict[str, dict]:
    keep = (*SCORE_METHODS[:-1], "exact_component")
    return {f"{r['reader']}<-{r['writer']}": {k: r[k] for k in keep if r.get(k) is not None} for r in rows}


def load_circuit_panels(circuit_csv: str | Path) -> list[CircuitPanel]:
    """Every circuit (one per length and counterfactual) of a published ``circuit_<model>_<task>.csv``, read
    with its edge, curve, summary and component tables beside it.

    >>> panels = load_circuit_panels("results/circuit_planted-ub_UB.csv")  # from the repository's root
    >>> [(p.length, p.circuit_edges, len(p.edges), p.curve[-1]["edges"]) for p in panels]
    [(4, 16, 1024, 1024)]
    """
    circuit_csv = Path(circuit_csv)
    kind, rest = split_result_stem(circuit_csv.stem)
    if kind != "circuit":
        raise ValueError(f"results file {circuit_csv}: expected a circuit_<model>_<task>.csv table")
    folder = circuit_csv.parent

    def beside(table: str, required) -> list[dict]:
        path = folder / f"{table}_{rest}.csv"
        if not path.is_file():
            raise ValueError(f"results file {circuit_csv}: {path.name} is missing beside it (analyses/find_circuit.py "
                             f"writes the circuit_* tables together)")
        rows = read_csv(path, required=required)
        if not rows:
            raise ValueError(f"results file {folder / f'{table}_{rest}.csv'} has a header but no rows")
        return rows

    summary, curve = beside("circuit_summary", SUMMARY_COLUMNS), beside("circuit_curve", CURVE_COLUMNS)
    edges = beside("circuit_edges", EDGE_COLUMNS)
    components_path = folder / f"circuit_components_{rest}.csv"
    components = read_csv(components_path, required=("length", "counterfactual", "reader", "writer")) \
        if components_path.is_file() else []
    circuit = read_csv(circuit_csv, required=("length", "counterfactual", "rank", "pos", "reader", "writer"))
    panels = []
    for s in summary:
        key = (s["length"], s["counterfactual"])

        def mine(rows: list[dict]) -> list[dict]:
            return [r for r in rows if (r["length"], r["counterfactual"]) == key]

        method = _method_column(str(s["method"]))
        cell_edges, cell_curve = mine(edges), sorted(mine(curve), key=lambda r: r["edges"])
        if not cell_edges or not cell_curve:
            raise ValueError(f"results file {circuit_csv}: length {key[0]} ({key[1]}) has no edges or no curve beside it")
        if method not in cell_edges[0]:
            raise ValueError(f"results file {folder / f'circuit_edges_{rest}.csv'} lacks column {method!r} "
                             f"(the method the circuit was selected by)")
        n_pos = max(r["pos"] for r in cell_edges) + 1
        roles = ["?"] * n_pos
        for r in cell_edges:
            roles[r["pos"]] = str(r["role"])
        ordered = selection_order(cell_edges, method)[: int(cell_curve[-1]["edges"])]
        chosen = sorted(mine(circuit), key=lambda r: r["rank"])
        if [(r["pos"], r["reader"], r["writer"]) for r in chosen] != \
                [(r["pos"], r["reader"], r["writer"]) for r in ordered[: len(chosen)]]:
            raise ValueError(f"results file {circuit_csv}: its edges are not the top {len(chosen)} of "
                             f"circuit_edges_{rest}.csv by |{method}|; the tables come from different runs")
        panels.append(CircuitPanel(
            model=str(s.get("model") or rest), task=str(s.get("task") or ""), length=int(key[0]),
            counterfactual=str(key[1]), method=method, roles=roles, edges=ordered, curve=cell_curve,
            circuit_edges=int(s["circuit_edges"]), summary=s, components=_component_numbers(mine(components))))
    return panels


def _sig(value, digits: int = 5):
    return None if value is None else float(f"{float(value):.{digits}g}")


def page_data(panel: CircuitPanel) -> dict:
    """What the page embeds for one circuit: nodes, edges (selection order, compact columns), the curve.

    >>> data = page_data(load_circuit_panels("results/circuit_planted-ub_UB.csv")[0])
    >>> [p["edges"] for p in data["budgets"]][:5], data["initial"]
    ([1, 2, 4, 8, 16], 4)
    """
    coords, row_labels, column_labels, width, height = layout(panel)
    methods = [m for m in SCORE_METHODS if m in panel.edges[0]]
    readers = sorted({e["reader"] for e in panel.edges})
    writers = sorted({e["writer"] for e in panel.edges})
    budgets = [{"edges": int(p["edges"]), "fraction": p.get("fraction"), "recovered": p["recovered"],
                "accuracy": p["accuracy"], "random_recovered": p.get("random_recovered"), "metric": p.get("metric")}
               for p in panel.curve]
    initial = next((i for i, p in enumerate(budgets) if p["edges"] == panel.circuit_edges), len(budgets) - 1)
    return {
        "title": panel.title, "method": panel.method, "methods": methods,
        "method_titles": {m: METHOD_TITLES.get(m, m) for m in (*methods, "exact_component")},
        "width": width, "height": height, "rows": row_labels, "columns": column_labels,
        "nodes": {k: [round(x, 1), round(y, 1)] for k, (x, y) in coords.items()},
        "readers": readers, "writers": writers, "roles": panel.roles,
        "edges": {"pos": [e["pos"] for e in panel.edges],
                  "reader": [readers.index(e["reader"]) for e in panel.edges],
                  "writer": [writers.index(e["writer"]) for e in panel.edges],
                  **{m: [_sig(e[m]) for e in panel.edges] for m in methods}},
        "components": {k: {m: _sig(v) for m, v in nums.items()} for k, nums in panel.components.items()},
        "budgets": budgets, "initial": initial,
        "summary": {k: panel.summary.get(k) for k in ("n", "clean_metric", "empty_metric", "clean_accuracy", "cpr",
                                                      "cmd", "random_cpr", "edges", "circuit_edges")},
        "channels": {c: [CHANNEL_COLOURS[c], CHANNEL_TITLES[c]] for c in CHANNEL_COLOURS},
    }


SCRIPT = r"""
(() => {
  const NS = 'http://www.w3.org/2000/svg';
  const data = JSON.parse(document.getElementById('circuit-data').textContent);
  const fmt = v => v === null || v === undefined ? 'not measured' : (Math.abs(v) >= 0.001 || v === 0 ? v.toFixed(3) : v.toExponential(2));
  const pct = v => v === null || v === undefined ? '-' : (100 * v).toFixed(1).replace(/^-0\.0$/, '0.0') + '%';
  const el = (name, attrs, parent) => {
    const node = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (parent) parent.appendChild(node);
    return node;
  };
  const owner = r => r === 'logits' ? ['logits', 'out'] : [r.slice(0, r.lastIndexOf('.')), r.slice(r.lastIndexOf('.') + 1)];
  data.circuits.forEach((c, ci) => {
    const section = document.getElementById('circuit-' + ci);
    const svg = section.querySelector('svg.graph');
    const slider = section.querySelector('input.budget');
    const label = section.querySelector('.budget-label');
    const faith = section.querySelector('.faithfulness');
    const method = c.method;
    const scale = Math.max(...c.edges[method].map(v => Math.abs(v || 0)), 1e-12);
    svg.setAttribute('viewBox', `0 0 ${c.width} ${c.height}`);
    svg.setAttribute('width', c.width);
    svg.setAttribute('height', c.height);
    const axes = el('g', {class: 'axes'}, svg);
    for (const [y, text] of c.rows) el('text', {x: 6, y: y + 4, class: 'row-label'}, axes).textContent = text;
    c.columns.forEach(([x, text], pos) => {
      el('line', {x1: x, x2: x, y1: 20, y2: c.height - 40, class: 'column'}, axes);
      const t = el('text', {x: x, y: c.height - 18, class: 'column-label'}, axes);
      t.textContent = text;
      el('title', {}, t).textContent = `position ${pos}: ${text}`;
    });
    const curve = section.querySelector('svg.curve');
    const [cw, ch, pad] = [280, 130, 30];
    const logs = c.budgets.map(b => Math.log2(b.edges)), lo = Math.min(...logs), hi = Math.max(...logs, lo + 1);
    const cx = b => pad + (cw - pad - 8) * (Math.log2(b.edges) - lo) / (hi - lo);
    const cy = v => ch - pad + 6 - (ch - pad - 6) * Math.max(-0.1, Math.min(1.1, v || 0)) / 1.1;
    curve.setAttribute('viewBox', `0 0 ${cw} ${ch}`);
    el('line', {x1: pad, x2: cw - 8, y1: cy(0), y2: cy(0), class: 'axis'}, curve);
    el('line', {x1: pad, x2: pad, y1: cy(1.1), y2: cy(-0.1), class: 'axis'}, curve);
    for (const v of [0, 1]) el('text', {x: pad - 4, y: cy(v) + 4, class: 'tick', 'text-anchor': 'end'}, curve).textContent = v;
    el('text', {x: (cw + pad) / 2, y: ch - 4, class: 'tick', 'text-anchor': 'middle'}, curve).textContent = 'edges kept (log scale)';
    const line = key => c.budgets.filter(b => b[key] !== null && b[key] !== undefined).map(b => `${cx(b)},${cy(b[key])}`).join(' ');
    el('polyline', {points: line('random_recovered'), class: 'random'}, curve);
    el('polyline', {points: line('recovered'), class: 'recovered'}, curve);
    const marker = el('circle', {r: 4.5, class: 'marker'}, curve);
    el('title', {}, curve).textContent = 'share of the metric gap recovered by the circuit (solid) and by random circuits of the same size (dashed)';
    const edgeLayer = el('g', {class: 'edges'}, svg);
    const nodeLayer = el('g', {class: 'nodes'}, svg);
    const draw = () => {
      const b = c.budgets[+slider.value];
      edgeLayer.replaceChildren();
      nodeLayer.replaceChildren();
      const used = new Map();
      for (let i = 0; i < b.edges; i++) {
        const pos = c.edges.pos[i], reader = c.readers[c.edges.reader[i]], writer = c.writers[c.edges.writer[i]];
        const [target, channel] = owner(reader);
        const from = c.nodes[writer + '@' + pos], to = c.nodes[target + '@' + pos];
        const shift = {q: -3, k: 0, v: 3}[channel] || 0;
        const [x1, y1, x2, y2] = [from[0], from[1], to[0] + shift, to[1]];
        const bend = 0.12 * Math.abs(y1 - y2);
        const path = el('path', {d: `M${x1},${y1} Q${(x1 + x2) / 2 + bend},${(y1 + y2) / 2} ${x2},${y2}`,
          stroke: c.channels[channel][0], 'stroke-width': (0.6 + 7 * Math.abs(c.edges[method][i] || 0) / scale).toFixed(2),
          class: 'edge'}, edgeLayer);
        const comp = c.components[reader + '<-' + writer] || {};
        const lines = [`${reader} (${c.channels[channel][1]} of ${target}) \u2190 ${writer}`,
          `position ${pos} (${c.roles[pos]}), rank ${i + 1} by |${c.method_titles[method]}|`,
          ...c.methods.map(m => `${c.method_titles[m]}: ${fmt(c.edges[m][i])}`)];
        if (Object.keys(comp).length) lines.push('over all positions: ' +
          Object.entries(comp).map(([m, v]) => `${c.method_titles[m] || m} ${fmt(v)}`).join(', '));
        el('title', {}, path).textContent = lines.join('\n');
        for (const [name, p] of [[writer, pos], [target, pos]]) {
          const key = name + '@' + p;
          used.set(key, (used.get(key) || []).concat([i + 1]));
        }
      }
      for (const [key, ranks] of used) {
        const [x, y] = c.nodes[key];
        const circle = el('circle', {cx: x, cy: y, r: 4.5, class: 'node'}, nodeLayer);
        const [name, pos] = key.split('@');
        el('title', {}, circle).textContent = `${name} at position ${pos} (${c.roles[pos]}): ${ranks.length} kept edge(s)`;
      }
      label.textContent = `${b.edges} edges` + (b.fraction !== null && b.fraction !== undefined ? ` (${pct(b.fraction)} of the graph)` : '');
      faith.textContent = `recovers ${pct(b.recovered)} of the metric gap; accuracy ${pct(b.accuracy)}` +
        (b.random_recovered !== null && b.random_recovered !== undefined ? `; random circuit of this size: ${pct(b.random_recovered)}` : '');
      faith.dataset.recovered = b.recovered;
      marker.setAttribute('cx', cx(b));
      marker.setAttribute('cy', cy(b.recovered));
      section.dataset.edges = b.edges;
    };
    slider.max = c.budgets.length - 1;
    slider.value = c.initial;
    slider.addEventListener('input', draw);
    draw();
  });
})();
"""

STYLE = f"""
body {{ font-family: {FONT}; margin: 16px; color: #222; }}
section.circuit {{ margin-bottom: 28px; }}
.scroll {{ overflow-x: auto; border: 1px solid #ddd; }}
.controls {{ display: flex; gap: 14px; align-items: center; flex-wrap: wrap; margin: 8px 0; }}
input.budget {{ width: 320px; }}
.faithfulness {{ font-weight: bold; }}
.row-label {{ font-size: 12px; fill: #444; }}
.column-label {{ font-size: 11px; fill: #444; text-anchor: middle; }}
line.column {{ stroke: #f0f0f0; }}
path.edge {{ fill: none; stroke-opacity: 0.75; }}
path.edge:hover {{ stroke-opacity: 1; }}
svg.curve {{ width: 280px; height: 130px; }}
svg.curve .axis {{ stroke: #888; }}
svg.curve .tick {{ font-size: 10px; fill: #555; }}
svg.curve polyline {{ fill: none; stroke-width: 1.8; }}
svg.curve .recovered {{ stroke: {OKABE_ITO["blue"]}; }}
svg.curve .random {{ stroke: {OKABE_ITO["grey"]}; stroke-dasharray: 4 3; }}
svg.curve .marker {{ fill: {OKABE_ITO["vermillion"]}; }}
circle.node {{ fill: #fff; stroke: #333; stroke-width: 1.2; }}
.legend span {{ display: inline-block; margin-right: 12px; font-size: 13px; }}
.legend i {{ display: inline-block; width: 18px; height: 4px; margin-right: 4px; vertical-align: middle; }}
"""


def _summary_line(panel: CircuitPanel) -> str:
    s = panel.summary
    parts = [f"n = {s.get('n')} prompts", f"clean metric {s.get('clean_metric'):.3g}",
             f"empty circuit {s.get('empty_metric'):.3g}"]
    if s.get("cpr") is not None:
        parts.append(f"CPR {s['cpr']:.3f}, CMD {s['cmd']:.3f}" + (f", random CPR {s['random_cpr']:.3f}"
                                                                  if s.get("random_cpr") is not None else ""))
    parts.append(f"published circuit: {panel.circuit_edges} edges recovering "
                 f"{100 * float(s.get('circuit_recovered') or 0):.1f}% of the gap at accuracy "
                 f"{100 * float(s.get('circuit_accuracy') or 0):.1f}%")
    return "; ".join(parts)


def circuit_page(panels: list[CircuitPanel], source: str = "") -> str:
    """The self-contained HTML page of a study's circuits (one section each), with a real ``<title>``.

    >>> page = circuit_page(load_circuit_panels("results/circuit_planted-ub_UB.csv"))
    >>> "<title>Circuit of planted-ub on UB</title>" in page, "http" in page.split("<body>")[1].replace(
    ...     "http://www.w3.org/2000/svg", "")
    (True, False)
    """
    first = panels[0]
    title = f"Circuit of {first.model} on {first.task}"
    data = {"circuits": [page_data(p) for p in panels]}
    legend = "".join(f'<span><i style="background:{CHANNEL_COLOURS[c]}"></i>into the {html.escape(CHANNEL_TITLES[c])}</span>'
                     for c in CHANNEL_COLOURS)
    sections = []
    for i, panel in enumerate(panels):
        sections.append(f"""<section class="circuit" id="circuit-{i}">
<h2>{html.escape(panel.title)}</h2>
<p>{html.escape(_summary_line(panel))}</p>
<div class="controls"><label>edge budget <input type="range" class="budget" min="0" step="1"></label>
<span class="budget-label"></span><span class="faithfulness"></span>
<svg class="curve" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="faithfulness curve"></svg></div>
<div class="scroll"><svg class="graph" xmlns="http://www.w3.org/2000/svg" role="img"
 aria-label="{html.escape(title)}, {html.escape(panel.title)}"></svg></div>
</section>""")
    method = METHOD_TITLES.get(first.method, first.method)
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>{html.escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>{STYLE}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p>Position-resolved edges (writer output into a reader's input at the same position), kept in order of
|{method}| score; the slider picks how many, and the line beside it is the faithfulness measured for
exactly those edges (everything else ablated). Width: |{method}|. Hover an edge for all its numbers.
{html.escape(("Tables: " + source) if source else "")}</p>
<p class="legend">{legend}</p>
{''.join(sections)}
<p style="font-size:12px;color:#666">Made by interp.figures.circuit_view.</p>
<script type="application/json" id="circuit-data">{payload}</script>
<script>{SCRIPT}</script>
</body></html>
"""


def circuit_figure(panels: list[CircuitPanel]) -> go.Figure:
    """The published circuits (each at its chosen budget) as a static plotly figure, for PDF/PNG.

    >>> fig = circuit_figure(load_circuit_panels("results/circuit_planted-ub_UB.csv"))
    >>> sum(1 for t in fig.data if t.mode == "lines" and not t.showlegend)  # one line per kept edge
    16
    """
    first = panels[0]
    geometry = [layout(p) for p in panels]
    # the page's pixel layout shrunk to a paper figure (axes keep the page's coordinates)
    shrink = min(1.0, STATIC_WIDTH / (max(g[3] for g in geometry) + 40))
    width = int(shrink * (max(g[3] for g in geometry) + 40))
    heights = [shrink * g[4] for g in geometry]
    fig = make_subplots(rows=len(panels), cols=1, vertical_spacing=min(0.3, 90 / sum(heights)),
                        row_heights=heights, subplot_titles=[
                            f"{p.title}: {p.circuit_edges} edges, "
                            f"{100 * float(p.summary.get('circuit_recovered') or 0):.0f}% of the gap" for p in panels])
    method = METHOD_TITLES.get(first.method, first.method)
    shown_channels: set[str] = set()
    for row, (panel, (coords, row_labels, column_labels, w, h)) in enumerate(zip(panels, geometry), 1):
        kept = panel.edges[: panel.circuit_edges]
        scale = max((abs(e[panel.method] or 0) for e in panel.edges), default=1.0) or 1.0
        used = set()
        for e in kept:
            target, channel = _owner(e["reader"])
            (x1, y1), (x2, y2) = coords[f"{e['writer']}@{e['pos']}"], coords[f"{target}@{e['pos']}"]
            fig.add_trace(go.Scatter(x=[x1, x2], y=[y1, y2], mode="lines", hoverinfo="skip",
                                     line=dict(color=CHANNEL_COLOURS[channel], width=0.6 + 7 * abs(e[panel.method] or 0) / scale),
                                     legendgroup=channel, showlegend=False), row=row, col=1)
            shown_channels.add(channel)
            used |= {f"{e['writer']}@{e['pos']}", f"{target}@{e['pos']}"}
        xs, ys = zip(*(coords[k] for k in sorted(used))) if used else ((), ())
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", showlegend=False, hoverinfo="skip",
                                 marker=dict(size=8, color="white", line=dict(color="#333", width=1.2))), row=row, col=1)
        fig.update_xaxes(range=[0, w], tickvals=[x for x, _ in column_labels], ticktext=[t for _, t in column_labels],
                         showgrid=False, tickfont=dict(size=10), row=row, col=1)
        fig.update_yaxes(range=[h - 20, 20], tickvals=[y for y, _ in row_labels], ticktext=[t for _, t in row_labels],
                         showgrid=False, row=row, col=1)
    for channel in [c for c in CHANNEL_COLOURS if c in shown_channels]:  # legend lines of one width
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=f"into the {CHANNEL_TITLES[channel]}",
                                 line=dict(color=CHANNEL_COLOURS[channel], width=3), legendgroup=channel, showlegend=True))
    note = (f"Edges kept by |{method}| at the smallest budget recovering the target share of the metric gap; "
            f"width proportional to |{method}|, colour by the reader's input. n = {first.summary.get('n')} prompts.")
    return style(fig, f"Circuit of {first.model} on {first.task}", width, int(sum(heights) + 90 * (len(panels) - 1) + 230), note=note)


def save_circuit_view(panels: list[CircuitPanel], stem: str | Path, formats=("html", "pdf", "png"), exporter=None,
                      source: str = "") -> list[Path]:
    """Write the page (``stem.html``) and the static figure (``stem.pdf`` / ``.png`` / ``.svg``, through a
    running [`StaticExporter`][interp.figures.export.StaticExporter] or one started here); returns the paths.

    >>> import tempfile
    >>> panels = load_circuit_panels("results/circuit_planted-ub_UB.csv")
    >>> [p.name for p in save_circuit_view(panels, Path(tempfile.mkdtemp()) / "c", formats=("html",))]
    ['c.html']
    """
    from interp.core.tables import atomic_write_text, stem_file
    from interp.figures.export import STATIC_FORMATS, StaticExporter

    stem = Path(stem)
    written = []
    if "html" in formats:
        written.append(atomic_write_text(stem_file(stem, "html"), circuit_page(panels, source)))
    static = [f for f in formats if f in STATIC_FORMATS]
    if static:
        fig = circuit_figure(panels)
        if exporter is None:
            with StaticExporter() as own:
                return written + [own.export(fig, stem_file(stem, f), f) for f in static]
        written += [exporter.export(fig, stem_file(stem, f), f) for f in static]
    return written
