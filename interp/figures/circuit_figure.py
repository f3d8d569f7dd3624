"""A circuit as a figure a paper can print: its most important edges (at most `MAX_DRAWN`, by the share of the
gap the circuit loses without each, else by ``|score|``) between labelled nodes (``18.6 @ c``, ``MLP 5 @ s``,
``value 18.2 @ s``), placed by layer and role (`interp.figures.circuit_layout`); the caption says what the
undrawn edges weigh. Attention reads are told apart by line (through the key: dashed; through the value:
solid) and labelled with the role of the keys they read (``o+1``). Never taller than `MAX_PX` pixels, in PNG too.
Text from the circuit is escaped: plotly reads tags (``<a href>``, ``<br>``) in any text it draws.

>>> from interp.interventions.circuits.circuit import Circuit, CircuitEdge
>>> edges = (CircuitEdge("residual", "logits", "a1.1", "c", loss=0.9),
...          CircuitEdge("value", "a1.1", "a1.1.v", "c", "o", sources="s", loss=0.8))
>>> c = Circuit("/data/runs/ckpt-7/", "UB", "masks", "roles", edges, recovered=0.98, accuracy=1.0, clean_accuracy=1.0,
...             clean_metric=29.0, empty_metric=-29.0, n_prompts=8, total_edges=1049)
>>> fig = circuit_figure(c)
>>> fig.layout.title.text.split("<br>")[0], fig.layout.height <= MAX_PX
('Circuit of ckpt-7 on UB (masks)', True)
"""

from __future__ import annotations

import html
import math
import textwrap
from pathlib import Path

import plotly.graph_objects as go

from interp.figures.circuit_layout import (CHANNELS, Layout, bezier, channel, importance_order, layout, node_label,
                                           node_row, segments)
from interp.figures.style import model_title, style

MAX_DRAWN = 40  # edges drawn at most; the caption summarises the rest
MAX_PX = 1600  # height at most, in layout px and in PNG pixels
BOX_PX = 20  # height of a node's box
MARGIN = dict(l=120, r=330, t=110)  # row labels left, legend right, title and subtitle above
NOTE_LINE_PX = 16


def _plain(text) -> str:
    return html.escape(str(text), quote=False)


def circuit_title(circuit) -> str:
    """Model (a folder by its name), task, method, then size, recovered share and accuracy on a second line.

    >>> from interp.interventions.circuits.circuit import Circuit
    >>> print(circuit_title(Circuit("m", "UF", "top-k", "roles", (), recovered=0.5, accuracy=0.25, clean_accuracy=1.0,
    ...                             clean_metric=2.0, empty_metric=0.0, n_prompts=8, total_edges=100)))
    Circuit of m on UF (top-k)<br><sup>0 of 100 role edges; recovers 0.50 of the gap; accuracy 0.25 (clean 1.00); n = 8 prompts</sup>
    """
    names = f"{_plain(model_title(circuit.model))} on {_plain(circuit.task)} ({_plain(circuit.method)})"
    return (f"Circuit of {names}<br><sup>{len(circuit)} of "
            f"{circuit.total_edges:,} {circuit.grain.rstrip('s')} edges; recovers {circuit.recovered:.2f} of the gap; "
            f"accuracy {circuit.accuracy:.2f} (clean {circuit.clean_accuracy:.2f}); n = {circuit.n_prompts} prompts</sup>")


def score_name(circuit) -> str:
    return {"eap": "EAP", "eap-ig": "EAP-IG", "exact": "exact"}.get(str(circuit.config.get("score", "eap-ig")), "score")


def undrawn_summary(circuit, drawn: list[int]) -> str:
    """What the figure leaves out, in one sentence (empty when every edge is drawn).

    >>> from interp.interventions.circuits.circuit import Circuit, CircuitEdge
    >>> edges = tuple(CircuitEdge("residual", "logits", f"a0.{i}", "c", loss=0.01 * i) for i in range(5))
    >>> c = Circuit("m", "UF", "top-k", "roles", edges, 1.0, 1.0, 1.0, 2.0, 0.0, 8, 100)
    >>> undrawn_summary(c, [4, 3])
    'And 3 more edges, each losing at most 0.020 of the gap when removed alone from the circuit (0.030 summed).'
    """
    rest = [e for i, e in enumerate(circuit.edges) if i not in set(drawn)]
    if not rest:
        return ""
    if all(e.loss is not None for e in rest):
        losses = [e.loss for e in rest]
        return (f"And {len(rest)} more edges, each losing at most {max(losses):.3f} of the gap when removed alone from "
                f"the circuit ({sum(losses):.3f} summed).")
    scores = [abs(e.score) for e in rest if e.score is not None]
    total = sum(abs(e.score or 0.0) for e in circuit.edges)
    if not scores or not total:
        return f"And {len(rest)} more edges (not measured one by one)."
    name = score_name(circuit)
    return (f"And {len(rest)} more edges (losses not measured), each with |{name}| at most {max(scores):.3g}, "
            f"together {sum(scores) / total:.0%} of the circuit's summed |{name}|.")


def caption(circuit, drawn: list[int]) -> str:
    by = "the share of the gap the circuit loses without it" if any(circuit.edges[i].loss is not None for i in drawn) \
        else f"|{score_name(circuit)}|"
    text = [f"The {len(drawn)} most important of its {len(circuit)} edges by {by} (line width)."
            if len(drawn) < len(circuit) else f"Every edge, line width by {by}.",
            undrawn_summary(circuit, drawn),
            "Nodes: a component at a position role (18.6 @ c: head 6 of layer 18 at the copy; key / value 18.2: "
            "the key or value input of key/value head 2 of layer 18, shared by its query heads); information flows "
            "upward, and an attention read from a key/value input to the head reading it."]
    return " ".join(t for t in text if t) + "".join(f" Note: {_plain(n)}" for n in circuit.notes)


def _inside(point: tuple[float, float], centre: tuple[float, float], half_width: float) -> bool:
    return abs(point[0] - centre[0]) <= half_width and abs(point[1] - centre[1]) <= BOX_PX / 2


def _clipped(start, end, bend: float, half_width: float) -> list[tuple[float, float]]:
    """The curve from box to box: its ends moved to where it leaves the source's box and enters the target's."""
    full = bezier(start, end, bend, steps=64)
    inner = [p for p in full if not _inside(p, start, half_width) and not _inside(p, end, half_width)]
    if len(inner) < 2:
        return full
    first, last = full.index(inner[0]), full.index(inner[-1])
    return full[first:last + 1:4] + ([inner[-1]] if (last - first) % 4 else [])


def _edge_trace(edge, points, width: float) -> go.Scatter:
    colour, dash, _ = CHANNELS[channel(edge)]
    sizes = [0] * (len(points) - 1) + [7 + width]
    hover = f"{_plain(edge.label)}<br>score {edge.score}<br>loss without it {edge.loss}"
    return go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="lines+markers", showlegend=False,
                      line=dict(color=colour, width=width, dash=dash), hoverinfo="text", hovertext=hover,
                      marker=dict(symbol="arrow", angleref="previous", size=sizes, color=colour))


def _draw(circuit, drawn: list[int], lay: Layout) -> go.Figure:
    """The lines, the key-role labels, the node boxes and the legend (built as lists: adding 100 traces one by one
    to a figure is most of the time otherwise)."""
    values = [abs(e.loss) if e.loss is not None else abs(e.score or 0.0) for e in (circuit.edges[i] for i in drawn)]
    scale = max(values, default=1.0) or 1.0
    half = lay.box / 2
    traces, notes = [], []
    for n, (i, value) in enumerate(zip(drawn, values)):
        edge = circuit.edges[i]
        for a, b in segments(edge):
            bend = (0.1 if n % 2 else -0.1) if lay.nodes[a][0] == lay.nodes[b][0] else 0.06
            points = _clipped(lay.nodes[a], lay.nodes[b], bend, half)
            traces.append(_edge_trace(edge, points, 0.8 + 4.2 * value / scale))
            if edge.kind != "residual":
                x, y = bezier(lay.nodes[a], lay.nodes[b], bend, steps=2)[1]
                notes.append(dict(x=x, y=y, text=_plain(edge.key_role), showarrow=False, bgcolor="rgba(255,255,255,0.85)",
                                  font=dict(size=11, color=CHANNELS[edge.kind][0])))
    for node, (x, y) in lay.nodes.items():  # annotations lie above every line: a box hides what runs under it
        notes.append(dict(x=x, y=y, text=_plain(node_label(node)), showarrow=False, width=lay.box - 6, height=BOX_PX - 6,
                          bgcolor="white", bordercolor="#333333", borderwidth=1, borderpad=2,
                          font=dict(size=11, color="#111111"), name="node"))
    used = list(dict.fromkeys(channel(circuit.edges[i]) for i in drawn))
    for name in [c for c in CHANNELS if c in used]:
        colour, dash, text = CHANNELS[name]
        traces.append(go.Scatter(x=[None], y=[None], mode="lines", name=text, line=dict(color=colour, width=3, dash=dash)))
    return go.Figure(data=traces, layout=dict(annotations=notes))


def circuit_figure(circuit, limit: int = MAX_DRAWN) -> go.Figure:
    """The circuit's ``limit`` most important edges as a static plotly figure (see the module text)."""
    drawn = importance_order(circuit.edges)[:limit]
    nodes = [n for i in drawn for segment in segments(circuit.edges[i]) for n in segment]
    width = int(MARGIN["l"] + MARGIN["r"] + max(layout(nodes, 1).width, 200) + 40)
    note = caption(circuit, drawn)
    note_lines = len(textwrap.wrap(note, max(40, int((width - 100) / 7.0))))
    bottom = 62 + NOTE_LINE_PX * note_lines + 24
    n_rows = max(1, len({node_row(n) for n in nodes}))
    row_px = min(60.0, math.floor((MAX_PX - MARGIN["t"] - bottom - 20) / n_rows))
    lay = layout(nodes, row_px, top=10)
    fig = _draw(circuit, drawn, lay)
    height = int(MARGIN["t"] + lay.height + 20 + bottom)
    style(fig, circuit_title(circuit), width, height, note=note)
    fig.update_layout(margin=dict(MARGIN, b=bottom), plot_bgcolor="white", hovermode="closest",
                      legend=dict(x=1.02, xanchor="left", y=1, yanchor="top", title_text="edges"))
    fig.update_xaxes(range=[-40, max(lay.width, 200) + 20], showgrid=False, showline=False, zeroline=False,
                     tickvals=[x for x, _ in lay.columns], ticktext=[f"role {_plain(r)}" for _, r in lay.columns], ticks="")
    fig.update_yaxes(range=[lay.height + 20, 0], showgrid=False, showline=False, zeroline=False,
                     tickvals=[y for y, _ in lay.rows], ticktext=[r for _, r in lay.rows], ticks="", autorange=False)
    return fig


def png_scale(fig: go.Figure, wanted: float = 2.0) -> float:
    """The PNG scale that keeps the image at most `MAX_PX` pixels tall (``wanted`` where that fits).

    >>> png_scale(go.Figure(layout_height=1000))
    1.6
    """
    return min(wanted, math.floor(1000 * MAX_PX / (fig.layout.height or 500)) / 1000)


def save_circuit_figure(circuit, stem: str | Path, formats=("png", "pdf"), exporter=None) -> list[Path]:
    """Write the figure as ``stem.<format>`` for each static format (through a running
    [`StaticExporter`][interp.figures.export.StaticExporter] or one started here); returns the paths.

    >>> save_circuit_figure(circuit, "figures/circuit_m_UF", ("png", "svg"))  # doctest: +SKIP
    [PosixPath('figures/circuit_m_UF.png'), PosixPath('figures/circuit_m_UF.svg')]
    """
    from interp.core.tables import stem_file
    from interp.figures.export import STATIC_FORMATS, StaticExporter

    static = [f for f in formats if f in STATIC_FORMATS]
    if not static:
        return []
    if exporter is None:
        with StaticExporter() as own:
            return save_circuit_figure(circuit, stem, static, own)
    fig = circuit_figure(circuit)
    scale = png_scale(fig, exporter.png_scale)
    return [exporter.export(fig, stem_file(Path(stem), f), f, png_scale=scale) for f in static]
