"""The planted-circuit sensitivity figure: share of noise seeds on which each instrument still
finds the planted heads, against the strength of the plant (one panel per circuit)."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .rows import Rows, number, require_columns
from .style import OKABE_ITO, PALETTE, style

SENSITIVITY_COLUMNS = ("circuit", "instrument", "strength", "found", "mean_clean_accuracy")


def planted_sensitivity_figure(summary: Rows, source: str = "planted_sensitivity_summary.csv") -> go.Figure:
    """Lines of ``found`` (share of seeds) against ``strength``, one per instrument, and the
    circuit's clean accuracy (dashed grey), one panel per circuit.

    >>> fig = planted_sensitivity_figure(read_csv("results/planted_sensitivity_summary.csv"))  # doctest: +SKIP
    """
    require_columns(summary, SENSITIVITY_COLUMNS, source)
    circuits = sorted({r["circuit"] for r in summary})
    instruments = sorted({r["instrument"] for r in summary})
    colours = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(instruments)}
    dashes = ("solid", "dot", "dashdot", "longdash")
    fig = make_subplots(rows=1, cols=len(circuits), subplot_titles=[f"planted {c}" for c in circuits],
                        shared_yaxes=True, horizontal_spacing=0.06)
    for col, circuit in enumerate(circuits, 1):
        rows = sorted((r for r in summary if r["circuit"] == circuit), key=lambda r: number(r, "strength", source))
        for i, name in enumerate(instruments):
            line = [r for r in rows if r["instrument"] == name]
            if not line:
                continue
            fig.add_trace(go.Scatter(
                x=[number(r, "strength", source) for r in line], y=[number(r, "found", source) for r in line],
                mode="lines+markers", name=name, legendgroup=name, showlegend=col == 1 or circuit != circuits[0],
                line=dict(color=colours[name], dash=dashes[i // len(PALETTE) % len(dashes)])), row=1, col=col)
        clean = [r for r in rows if r["instrument"] == instruments[0]]
        fig.add_trace(go.Scatter(
            x=[number(r, "strength", source) for r in clean], y=[number(r, "mean_clean_accuracy", source) for r in clean],
            mode="lines", name="clean accuracy", legendgroup="clean", showlegend=col == 1,
            line=dict(color=OKABE_ITO["grey"], dash="dash", width=3)), row=1, col=col)
        fig.update_xaxes(title_text="strength of the plant", autorange="reversed", row=1, col=col)
    fig.update_yaxes(title_text="share of seeds found", range=[-0.05, 1.05], row=1, col=1)
    fig.update_layout(legend=dict(x=1.02, y=1.0, xanchor="left"))
    return style(fig, "Planted circuits: where each instrument stops finding them", 420 * len(circuits) + 330, 560,
                 note="Strength s: every planted weight is s x planted + (1 - s) x seeded noise of the same norm. "
                      "Found: the instrument names the planted head(s) strictly ahead of every other head "
                      "(scores, sweep, screen) or halves the accuracy (ablation of the carrying head, edge cuts).")
