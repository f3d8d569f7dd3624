"""An interactive view of a published circuit: one offline HTML page (inline SVG drawn by an inline script, no
plotly.js, no network) with the graph, its edges listed beside it (label, loss, score), and a slider over the
curve's real grid.

Nodes are labelled boxes (``18.6 @ c``) placed as in the static figure (`interp.figures.circuit_layout`). The
slider's positions are the grid points of the circuit's faithfulness curve, each showing its measured share
of the gap and accuracy (and a random circuit's), and the selected circuit among them at its size, where the
page opens. A grid point of ``k`` edges draws the top ``k`` of the method's ranking when the published ranking
holds them (`interp.figures.circuit_files.RANKING_LIMIT`); beyond it shows its numbers only.

The page embeds its data as JSON in a ``<script type="application/json">`` element with ``<``, ``>``, ``&`` and
the two JavaScript line separators escaped, so no text of a circuit can end or alter a script, and the script
sets every text through ``textContent``.
"""

from __future__ import annotations

import html
import json
from dataclasses import replace
from pathlib import Path

from interp.figures.circuit_files import RANKING_LIMIT, PublishedCircuit
from interp.figures.circuit_figure import circuit_title
from interp.figures.circuit_layout import CHANNELS, channel, layout, node_label, segments
from interp.figures.circuit_view_script import SCRIPT, STYLE
from interp.figures.style import model_title

ROW_PX, LEFT_PX, TOP_PX, BOTTOM_PX = 46, 110, 10, 30  # the view's rows, and room for row and column labels


def script_json(data) -> str:
    """``data`` as JSON that is safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` (so no ``</script>``
    and no ``<!--``) and no U+2028 / U+2029, each written as its ``\\u`` escape.

    >>> script_json({"role": "<!--<script></script>&\\u2028"})
    '{"role":"\\\\u003c!--\\\\u003cscript\\\\u003e\\\\u003c/script\\\\u003e\\\\u0026\\\\u2028"}'
    """
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return text


def _sig(value, digits: int = 5):
    """A number to ``digits`` significant figures (None for none or a non-finite one: JSON has no NaN)."""
    if value is None or value != value or value in (float("inf"), float("-inf")):
        return None
    return float(f"{float(value):.{digits}g}")


def _stops(published: PublishedCircuit, drawable: int) -> tuple[list[dict], int]:
    """The slider's positions: every grid point of the curve, and the selected circuit inserted at its size."""
    c = published.circuit
    stops = []
    for p in (c.curve.points if c.curve is not None else ()):
        stops.append({"kind": "grid", "fraction": _sig(p.fraction), "edges": int(p.edges), "recovered": _sig(p.recovered),
                      "accuracy": _sig(p.accuracy), "random_recovered": _sig(p.random_recovered),
                      "random_accuracy": _sig(p.random_accuracy), "draw": "ranking" if p.edges <= drawable else None})
    at = sum(1 for s in stops if s["edges"] <= len(c))
    stops.insert(at, {"kind": "circuit", "fraction": _sig(len(c) / c.total_edges) if c.total_edges else None,
                      "edges": len(c), "recovered": _sig(c.recovered), "accuracy": _sig(c.accuracy),
                      "random_recovered": None, "random_accuracy": None, "draw": "circuit"})
    return stops, at


def page_data(published: PublishedCircuit) -> dict:
    """What the page embeds: node labels, one table of edges (the circuit's and the ranking's top, each once), the
    circuit and the ranking as indices into it, the slider's stops and one layout per distinct drawn set.

    >>> from interp.interventions.circuits.circuit import Circuit, CircuitEdge
    >>> c = Circuit("m", "UB", "top-k", "roles", (CircuitEdge("residual", "logits", "a1.1", "c", score=2.0, loss=0.9),),
    ...             0.9, 1.0, 1.0, 2.0, 0.0, 4, 10)
    >>> data = page_data(PublishedCircuit("circuit_m_UB_top-k", c, (), "results/circuit_m_UB_top-k.json"))
    >>> data["nodes"], data["edges"]["label"], [s["kind"] for s in data["stops"]], data["initial"]
    (['1.1 @ c', 'logits @ c'], ['logits <- a1.1 @ c'], ['circuit'], 0)
    """
    c = published.circuit
    table, index, nodes = [], {}, {}

    def add(edge) -> int:
        key = (edge.kind, edge.reader, edge.writer, edge.role, edge.key_role)
        if key not in index:
            index[key] = len(table)
            table.append(edge)
            for segment in segments(edge):
                for node in segment:
                    nodes.setdefault(node, len(nodes))
        return index[key]

    circuit = [add(e) for e in c.edges]
    ranking = [add(e) for e in published.ranking[:RANKING_LIMIT]]
    stops, initial = _stops(published, len(ranking))
    layouts, seen = [], {}
    for stop in stops:
        chosen = circuit if stop["draw"] == "circuit" else ranking[: stop["edges"]] if stop["draw"] else None
        key = None if chosen is None else (stop["draw"], len(chosen))
        if key is not None and key not in seen:
            seen[key] = len(layouts)
            used = [n for i in chosen for segment in segments(table[i]) for n in segment]
            lay = layout(used, ROW_PX, left=LEFT_PX, top=TOP_PX)
            layouts.append({"nodes": [nodes[n] for n in lay.nodes], "x": [round(p[0], 1) for p in lay.nodes.values()],
                            "y": [round(p[1], 1) for p in lay.nodes.values()], "rows": [[round(y, 1), t] for y, t in lay.rows],
                            "columns": [[round(x, 1), t] for x, t in lay.columns], "box": round(lay.box, 1),
                            "width": round(max(lay.width, 300) + 20, 1), "height": round(lay.height + BOTTOM_PX, 1)})
        stop["layout"] = None if key is None else seen[key]
    return {
        "nodes": [node_label(n) for n in nodes],
        "edges": {"label": [e.label for e in table], "kind": [e.kind for e in table],
                  "channel": [channel(e) for e in table], "key_role": [e.key_role for e in table],
                  "score": [_sig(e.score) for e in table], "loss": [_sig(e.loss) for e in table],
                  "exact": [_sig(e.exact) for e in table], "rank_value": [_sig(e.rank_value) for e in table],
                  "segments": [[nodes[n] for segment in segments(e) for n in segment] for e in table]},
        "circuit": circuit, "ranking": ranking, "stops": stops, "initial": initial, "layouts": layouts,
        "channels": {name: list(value) for name, value in CHANNELS.items()},
    }


def circuit_page(published: PublishedCircuit) -> str:
    """The self-contained HTML page of one published circuit, titled by model (a folder by its name) and task.

    >>> from interp.interventions.circuits.circuit import Circuit, CircuitEdge
    >>> c = Circuit("/data/ckpt-7", "UB", "top-k", "roles", (CircuitEdge("residual", "logits", "a1.1", "c", score=2.0),),
    ...             0.9, 1.0, 1.0, 2.0, 0.0, 4, 10)
    >>> page = circuit_page(PublishedCircuit("circuit_ckpt-7_UB_top-k", c, (), "results/circuit_ckpt-7_UB_top-k.json"))
    >>> "<title>Circuit of ckpt-7 on UB (top-k)</title>" in page, "http" in page.replace("http://www.w3.org/2000/svg", "")
    (True, False)
    """
    c = published.circuit
    title = f"Circuit of {model_title(c.model)} on {c.task} ({c.method})"
    subtitle = circuit_title(c).split("<sup>")[1].removesuffix("</sup>")
    legend = "".join(f'<span><i style="border-top:3px {"dashed" if dash == "dash" else "solid"} {colour}"></i>'
                     f"{html.escape(text)}</span>" for colour, dash, text in CHANNELS.values())
    try:  # the description names the model as the title does
        words = replace(c, model=model_title(c.model)).describe()
    except (ValueError, TypeError, KeyError, IndexError, ArithmeticError):
        words = ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>{html.escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>{STYLE}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p>{html.escape(subtitle)}</p>
<p class="describe">{html.escape(words)}</p>
<section id="circuit">
<div class="controls"><label>grid point <input type="range" class="stop" min="0" step="1"></label>
<span class="stop-label"></span><span class="faithfulness"></span>
<svg class="curve" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="faithfulness curve"></svg></div>
<p class="legend">{legend}</p>
<div class="panes">
<div class="scroll"><svg class="graph" xmlns="http://www.w3.org/2000/svg" role="img"
 aria-label="{html.escape(title)}"></svg></div>
<div class="edge-pane"><p class="edge-list-note"></p><table class="edge-list"><thead><tr><th>#</th><th>edge</th>
<th>loss without it</th><th>score</th></tr></thead><tbody></tbody></table></div>
</div>
</section>
<p style="font-size:12px;color:#666">The slider walks the grid of the faithfulness curve (the share of the gap each
top-k of the method's ranking recovers, measured) and the selected circuit, where the page opens; line width is the
share of the gap the circuit loses without the edge (the selected circuit) or |score| (grid points). Hover an edge
for its numbers. Drawn from {html.escape(published.source)} by interp.figures.circuit_view.</p>
<script type="application/json" id="circuit-data">{script_json(page_data(published))}</script>
<script>{SCRIPT}</script>
</body></html>
"""


def save_circuit_view(published: PublishedCircuit, stem: str | Path) -> Path:
    """Write the page as ``stem.html`` (atomically); returns its path.

    >>> save_circuit_view(published, "figures/circuit_m_UF_top-k")  # doctest: +SKIP
    PosixPath('figures/circuit_m_UF_top-k.html')
    """
    from interp.core.tables import atomic_write_text, stem_file

    return atomic_write_text(stem_file(Path(stem), "html"), circuit_page(published))
