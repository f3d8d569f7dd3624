"""Accuracy under head ablation, per condition and ablation kind."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.data.tasks import TASK_NAMES
from interp.figures.rows import (ABLATION_CONDITIONS, REQUIRED_COLUMNS, Rows, accuracy_value, index_value, mean, require_columns, sd,
                   select_model, task_name, task_order)
from interp.figures.style import CONDITION_STYLE, style


def ablation_figure(rows: Rows, model: str | None = None, source: str = "ablation.csv") -> go.Figure:
    """Accuracy per task under each ablation condition; one panel per ablation kind (zero / mean).

    Bars are means over rows; the random-head control has one row per seed: its bar is the mean,
    the error bar the s.d. over seeds, and the dots the seeds."""
    require_columns(rows, REQUIRED_COLUMNS["ablation"], source)
    model, rows = select_model(rows, model, source)
    for r in rows:
        if r.get("condition") not in ABLATION_CONDITIONS:
            raise ValueError(f"{source}: unknown condition {r.get('condition')!r}; expected one of {ABLATION_CONDITIONS}")
    lengths_per_task: dict[str, set[int]] = defaultdict(set)
    for r in rows:
        lengths_per_task[task_name(r, source)].add(index_value(r, "length", source))

    def label(r: Mapping) -> str:
        task = task_name(r, source)
        return f"{task} (n={index_value(r, 'length', source)})" if len(lengths_per_task[task]) > 1 else task

    kinds = [k for k in ("zero", "mean") if any(r.get("ablation") == k for r in rows)]
    kinds += sorted({str(r.get("ablation")) for r in rows} - {"zero", "mean", "none", "None", ""})
    if not kinds:
        kinds = ["none"]
    baseline = [r for r in rows if r.get("condition") == "baseline"]
    x_order = [label(r) for t in task_order(lengths_per_task) for r in rows if task_name(r, source) == t]
    x_order = sorted(dict.fromkeys(x_order), key=lambda s: (TASK_NAMES.index(s.split(" ")[0]), s))
    fig = make_subplots(rows=1, cols=len(kinds), shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=[f"{k} ablation" for k in kinds])
    n_heads_text = {}
    for col, kind in enumerate(kinds, 1):
        kind_rows = baseline + [r for r in rows if r.get("ablation") == kind and r.get("condition") != "baseline"]
        for condition in ABLATION_CONDITIONS:
            groups: dict[str, list[float]] = defaultdict(list)
            for r in kind_rows:
                if r.get("condition") == condition:
                    acc = accuracy_value(r, source)
                    if acc is not None:
                        groups[label(r)].append(acc)
                    heads = str(r.get("heads") or "")
                    if heads and condition not in n_heads_text:
                        n_heads_text[condition] = len([h for h in re.split(r"[;,\s]+", heads) if h])
            if not groups:
                continue
            xs = [x for x in x_order if x in groups]
            name, colour = CONDITION_STYLE[condition]
            if condition in n_heads_text:
                name = f"{name} ({n_heads_text[condition]})"
            means = [100 * mean(groups[x]) for x in xs]
            spread = [100 * sd(groups[x]) for x in xs]
            has_spread = any(len(groups[x]) > 1 for x in xs)
            fig.add_trace(go.Bar(
                x=xs, y=means, name=name, legendgroup=condition, showlegend=col == 1, marker_color=colour,
                offsetgroup=condition,
                error_y=dict(type="data", array=spread, visible=has_spread, thickness=1.5, width=5, color="#222222"),
                customdata=[[len(groups[x]), 100 * min(groups[x]), 100 * max(groups[x])] for x in xs],
                hovertemplate=f"{name}<br>%{{x}}: %{{y:.1f}}%<br>n=%{{customdata[0]}} "
                              "(min %{customdata[1]:.1f}, max %{customdata[2]:.1f})<extra></extra>"),
                row=1, col=col)
            if has_spread:
                px_, py_ = [], []
                for x in xs:
                    for v in groups[x]:
                        px_.append(x)
                        py_.append(100 * v)
                fig.add_trace(go.Scatter(
                    x=px_, y=py_, mode="markers", offsetgroup=condition, legendgroup=condition, showlegend=False,
                    marker=dict(color="#222222", size=5, symbol="circle-open"), name=f"{name} (seeds)",
                    hovertemplate=f"{name}, one seed<br>%{{x}}: %{{y:.1f}}%<extra></extra>"), row=1, col=col)
        fig.update_xaxes(title_text="task", categoryorder="array", categoryarray=x_order, row=1, col=col)
    fig.update_yaxes(title_text="accuracy (%)", range=[0, 103], row=1, col=1)
    fig.update_layout(barmode="group", scattermode="group", bargap=0.22,
                      legend=dict(title_text="heads ablated", x=1.02, y=1, xanchor="left", yanchor="top"))
    width = max(560, 140 + len(kinds) * (80 + 110 * max(1, len(x_order)))) + 260
    return style(fig, f"Head ablations ({model})", width, 520,
                 note="Exact-match accuracy. Random-head control: bar = mean over seeds, error bar = s.d., "
                      "circles = individual seeds.")
