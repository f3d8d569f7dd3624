"""The planted-circuit sensitivity figure: share of noise seeds on which each instrument still
finds the planted heads, against the strength of the plant (one panel per circuit)."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.figures.rows import Rows, number, require_columns, table_rows
from interp.figures.style import OKABE_ITO, PALETTE, style

SENSITIVITY_COLUMNS = ("circuit", "instrument", "strength", "found", "mean_clean_accuracy")


def planted_sensitivity_figure(summary: Rows, source: str = "planted_sensitivity_summary.csv") -> go.Figure:
    """Lines of ``found`` (share of seeds) against ``strength``, one per instrument, and the
    circuit's clean accuracy (dashed grey), one panel per circuit.

    >>> fig = planted_sensitivity_figure(read_csv("results/planted_sensitivity_summary.csv"))  # doctest: +SKIP
    """
    summary = table_rows(summary)
    require_columns(summary, SENSITIVITY_COLUMNS, source)
    circuits = sorted({r["circuit"] for r in summary})
    instruments = sorted({r["instrument"] for r in summary})
    colours = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(instruments)}
    dashes = ("solid", "dot", "dashdot", "longdash")
    fig = make_subplots(rows=2, cols=len(circuits), shared_yaxes=True, horizontal_spacing=0.06, vertical_spacing=0.14,
                        subplot_titles=[*(f"planted {c}: found" for c in circuits),
                                        *(f"planted {c}: score of the planted head" for c in circuits)])
    shown: set[str] = set()
    for col, circuit in enumerate(circuits, 1):
        rows = sorted((r for r in summary if r["circuit"] == circuit), key=lambda r: number(r, "strength", source))
        for i, name in enumerate(instruments):
            line = [r for r in rows if r["instrument"] == name]
            if not line:
                continue
            strengths = [number(r, "strength", source) for r in line]
            look = dict(color=colours[name], dash=dashes[i // len(PALETTE) % len(dashes)])
            fig.add_trace(go.Scatter(x=strengths, y=[number(r, "found", source) for r in line], mode="lines+markers",
                                     name=name, legendgroup=name, showlegend=name not in shown, line=look), row=1, col=col)
            shown.add(name)
            if name.startswith("score:") and not name.endswith("composition"):  # attention scores, 0 to 1
                fig.add_trace(go.Scatter(x=strengths, y=[number(r, "mean_value", source) for r in line],
                                         mode="lines+markers", name=name, legendgroup=name, showlegend=False,
                                         line=look), row=2, col=col)
        clean = [r for r in rows if r["instrument"] == instruments[0]]
        fig.add_trace(go.Scatter(
            x=[number(r, "strength", source) for r in clean], y=[number(r, "mean_clean_accuracy", source) for r in clean],
            mode="lines", name="clean accuracy", legendgroup="clean", showlegend=col == 1,
            line=dict(color=OKABE_ITO["grey"], dash="dash", width=3)), row=1, col=col)
        for row in (1, 2):
            fig.update_xaxes(title_text="strength of the plant", autorange="reversed", row=row, col=col)
    fig.update_yaxes(title_text="share of seeds found", range=[-0.05, 1.05], row=1, col=1)
    fig.update_yaxes(title_text="score of the planted head", range=[-0.05, 1.05], row=2, col=1)
    fig.update_layout(legend=dict(x=1.02, y=1.0, xanchor="left"))
    return style(fig, "Planted circuits: where each instrument stops finding them", 420 * len(circuits) + 330, 980,
                 note="Strength s: every planted weight is s x planted + (1 - s) x seeded noise of the same norm. "
                      "Found: the instrument names the planted head(s) strictly ahead of every other head "
                      "(scores, sweep, screen) or halves the accuracy (ablation of the carrying head, edge cuts). "
                      "Grey dashes: the planted model's own accuracy on its task.")
