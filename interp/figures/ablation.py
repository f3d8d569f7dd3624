"""Accuracy under head ablation, per condition and ablation kind."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.data.tasks import TASK_NAMES
from interp.figures.rows import (ABLATION_CONDITIONS, REQUIRED_COLUMNS, Rows, accuracy_value, index_value, mean, require_columns, table_rows, sd,
                   select_model, task_name)
from interp.figures.style import CONDITION_STYLE, style


def ablation_figure(rows: Rows, model: str | None = None, source: str = "ablation.csv") -> go.Figure:
    """Accuracy per task under each ablation condition; one panel per ablation kind (zero / mean).

    Bars are means over rows; the random-head control has one row per seed: its bar is the mean,
    the error bar the s.d. over seeds, and the dots the seeds.

    >>> fig = ablation_figure(read_csv("results/ablation.csv"))  # doctest: +SKIP
    """
    rows = table_rows(rows)
    require_columns(rows, REQUIRED_COLUMNS["ablation"], source)
    model, rows = select_model(rows, model, source)
    for r in rows:
        if r.get("condition") not in ABLATION_CONDITIONS:
            raise ValueError(f"{source}: unknown condition {r.get('condition')!r}; expected one of {ABLATION_CONDITIONS}")
    label = _task_labeller(rows, source)
    kinds = _ablation_kinds(rows)
    baseline = [r for r in rows if r.get("condition") == "baseline"]
    x_order = sorted(dict.fromkeys(label(r) for r in rows), key=lambda s: (TASK_NAMES.index(s.split(" ")[0]), s))
    fig = make_subplots(rows=1, cols=len(kinds), shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=[f"{k} ablation" for k in kinds])
    n_heads: dict[str, int] = {}  # heads ablated per condition, from the first row that names them
    for col, kind in enumerate(kinds, 1):
        kind_rows = baseline + [r for r in rows if r.get("ablation") == kind and r.get("condition") != "baseline"]
        for condition in ABLATION_CONDITIONS:
            groups = _condition_groups(kind_rows, condition, label, n_heads, source)
            if groups:
                _add_condition_traces(fig, condition, groups, x_order, n_heads.get(condition), col)
        fig.update_xaxes(title_text="task", categoryorder="array", categoryarray=x_order, row=1, col=col)
    fig.update_yaxes(title_text="accuracy (%)", range=[0, 103], row=1, col=1)
    fig.update_layout(barmode="group", scattermode="group", bargap=0.22,
                      legend=dict(title_text="heads ablated", x=1.02, y=1, xanchor="left", yanchor="top"))
    width = max(560, 140 + len(kinds) * (80 + 110 * max(1, len(x_order)))) + 260
    return style(fig, f"Head ablations ({model})", width, 520,
                 note="Exact-match accuracy. Random-head control: bar = mean over seeds, error bar = s.d., "
                      "circles = individual seeds.")


def _task_labeller(rows: Rows, source: str) -> Callable[[Mapping], str]:
    """A row's x label: its task, with the length added when the task appears at several lengths."""
    lengths_per_task: dict[str, set[int]] = defaultdict(set)
    for r in rows:
        lengths_per_task[task_name(r, source)].add(index_value(r, "length", source))

    def label(r: Mapping) -> str:
        task = task_name(r, source)
        return f"{task} (n={index_value(r, 'length', source)})" if len(lengths_per_task[task]) > 1 else task

    return label


def _ablation_kinds(rows: Rows) -> list[str]:
    """The panels: zero and mean first when present, then any other kind; ``["none"]`` when none."""
    kinds = [k for k in ("zero", "mean") if any(r.get("ablation") == k for r in rows)]
    kinds += sorted({str(r.get("ablation")) for r in rows} - {"zero", "mean", "none", "None", ""})
    return kinds or ["none"]


def _condition_groups(kind_rows: Rows, condition: str, label: Callable[[Mapping], str], n_heads: dict[str, int],
                      source: str) -> dict[str, list[float]]:
    """The accuracies of ``condition``'s rows grouped by x label; records in ``n_heads`` how many
    heads the condition ablates the first time a row names them."""
    groups: dict[str, list[float]] = defaultdict(list)
    for r in kind_rows:
        if r.get("condition") != condition:
            continue
        acc = accuracy_value(r, source)
        if acc is not None:
            groups[label(r)].append(acc)
        heads = str(r.get("heads") or "")
        if heads and condition not in n_heads:
            n_heads[condition] = len([h for h in re.split(r"[;,\s]+", heads) if h])
    return groups


def _add_condition_traces(fig: go.Figure, condition: str, groups: dict[str, list[float]], x_order: list[str],
                          n_heads: int | None, col: int) -> None:
    """One condition's bars (mean, s.d. error bars when there are seeds) and its seeds as circles."""
    xs = [x for x in x_order if x in groups]
    name, colour = CONDITION_STYLE[condition]
    if n_heads is not None:
        name = f"{name} ({n_heads})"
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
        seeds = [(x, 100 * v) for x in xs for v in groups[x]]
        fig.add_trace(go.Scatter(
            x=[x for x, _ in seeds], y=[y for _, y in seeds], mode="markers", offsetgroup=condition,
            legendgroup=condition, showlegend=False,
            marker=dict(color="#222222", size=5, symbol="circle-open"), name=f"{name} (seeds)",
            hovertemplate=f"{name}, one seed<br>%{{x}}: %{{y:.1f}}%<extra></extra>"), row=1, col=col)
