"""Layer x head heatmaps: head scores, and the single-head ablation sweep."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.data.tasks import TASK_NAMES
from interp.figures.rows import (REQUIRED_COLUMNS, Rows, accuracy_value, grid, index_value, number, require_columns, table_rows,
                   select_model, task_name)
from interp.figures.style import DELTA_SCALE, SCORE_SCALE, style

SCORE_TITLES = {"induction": "Induction score", "anti_induction": "Anti-induction score",
                "previous_token": "Previous-token score"}


def head_scores_figure(rows: Rows, model: str | None = None, scores: Sequence[str] = ("induction", "anti_induction"),
                       top_k: int = 10, source: str = "head_scores.csv") -> go.Figure:
    """Layer x head heatmaps of head scores (one panel per score), top-``top_k`` heads numbered.

    >>> from interp.core.tables import read_csv
    >>> fig = head_scores_figure(read_csv("tests/fixtures/results/head_scores.csv"))  # from the repository's root
    >>> len(fig.data)  # one heatmap per score
    2
    """
    rows = table_rows(rows)
    require_columns(rows, ("model", "layer", "head", *scores), source)
    model, rows = select_model(rows, model, source)
    n_layers = max(index_value(r, "layer", source) for r in rows) + 1
    n_heads = max(index_value(r, "head", source) for r in rows) + 1
    panel = max(200, 34 * n_heads)
    gap = 90  # the y-axis title of the next panel
    width = 90 + len(scores) * panel + (len(scores) - 1) * gap + 150
    fig = make_subplots(rows=1, cols=len(scores), subplot_titles=[SCORE_TITLES.get(s, s) for s in scores],
                        horizontal_spacing=gap / (width - 240))
    values: list[float] = []
    for col, score in enumerate(scores, 1):
        z = [[None] * n_heads for _ in range(n_layers)]
        for r in rows:
            z[index_value(r, "layer", source)][index_value(r, "head", source)] = number(r, score, source, allow_missing=True)
        ranked = sorted(((v, l, h) for l, line in enumerate(z) for h, v in enumerate(line) if v is not None),
                        key=lambda t: -t[0])
        text = [[""] * n_heads for _ in range(n_layers)]
        for rank, (_, l, h) in enumerate(ranked[:top_k], 1):
            text[l][h] = str(rank)
        values += [v for v, _, _ in ranked]
        fig.add_trace(go.Heatmap(
            z=z, x=list(range(n_heads)), y=list(range(n_layers)), text=text, texttemplate="%{text}",
            textfont=dict(size=10), coloraxis="coloraxis", xgap=1, ygap=1,
            hovertemplate=f"layer %{{y}}, head %{{x}}<br>{SCORE_TITLES.get(score, score).lower()} %{{z:.3f}}"
                          "<br>rank %{text}<extra></extra>"), row=1, col=col)
        fig.update_xaxes(title_text="head", dtick=1 if n_heads <= 16 else None, row=1, col=col, showgrid=False)
        fig.update_yaxes(title_text="layer", dtick=1 if n_layers <= 12 else 2 if n_layers <= 32 else None,
                         row=1, col=col, showgrid=False)
    # Every score is a share of attention: one 0-1 scale for all panels, so a near-zero score never
    # glows as bright as a strong head (a score outside [0, 1] widens the scale instead of clipping).
    fig.update_layout(coloraxis=dict(
        colorscale=SCORE_SCALE, cmin=min(0.0, min(values, default=0.0)), cmax=max(1.0, max(values, default=1.0)),
        colorbar=dict(title=dict(text="share of<br>attention", side="top"), len=0.9, thickness=14)))
    height = max(420, 170 + 19 * n_layers)
    return style(fig, f"Head scores of {model}", width, height,
                 note=f"Mean attention to the token after (induction) / before (anti-induction) the earlier "
                      f"occurrence on repeated random tokens; one colour scale (0 to 1) for every panel; "
                      f"numbers mark the top {top_k} heads of each panel.")


def head_sweep_figure(rows: Rows, model: str | None = None, metric: str = "delta_accuracy",
                      source: str = "head_sweep.csv") -> go.Figure:
    """Layer x head heatmap of the change caused by ablating each head alone, one panel per task.

    >>> from interp.core.tables import read_csv
    >>> fig = head_sweep_figure(read_csv("tests/fixtures/results/head_sweep.csv"))  # from the repository's root
    >>> len(fig.data) > 0
    True
    """
    if metric not in ("delta_accuracy", "delta_logprob"):
        raise ValueError(f"metric={metric!r}; expected 'delta_accuracy' or 'delta_logprob'")
    rows = table_rows(rows)
    require_columns(rows, (*REQUIRED_COLUMNS["head_sweep"], metric), source)
    model, rows = select_model(rows, model, source)
    panels = sorted({(task_name(r, source), index_value(r, "length", source)) for r in rows},
                    key=lambda p: (TASK_NAMES.index(p[0]), p[1]))
    n_layers = max(index_value(r, "layer", source) for r in rows) + 1
    n_heads = max(index_value(r, "head", source) for r in rows) + 1
    scale = 100.0 if metric == "delta_accuracy" else 1.0
    unit = "Δ accuracy<br>(points)" if metric == "delta_accuracy" else "Δ mean<br>log-prob"
    n_rows, n_cols = grid(len(panels), 4)
    fig = make_subplots(rows=n_rows, cols=n_cols, subplot_titles=[f"{t}, length {n}" for t, n in panels],
                        horizontal_spacing=0.05, vertical_spacing=0.12 if n_rows > 1 else 0.1)
    extreme = 0.0
    for i, (task, length) in enumerate(panels):
        z = [[None] * n_heads for _ in range(n_layers)]
        custom = [[[None, None] for _ in range(n_heads)] for _ in range(n_layers)]
        for r in rows:
            if task_name(r, source) == task and index_value(r, "length", source) == length:
                l, h = index_value(r, "layer", source), index_value(r, "head", source)
                value = number(r, metric, source, allow_missing=True)
                z[l][h] = None if value is None else scale * value
                acc = accuracy_value(r, source)
                custom[l][h] = [None if acc is None else 100 * acc, number(r, "delta_logprob", source, True)
                                if "delta_logprob" in r else None]
                if value is not None:
                    extreme = max(extreme, abs(scale * value))
        row, col = divmod(i, n_cols)
        fig.add_trace(go.Heatmap(
            z=z, x=list(range(n_heads)), y=list(range(n_layers)), coloraxis="coloraxis", customdata=custom,
            xgap=1, ygap=1,
            hovertemplate=f"{task}: layer %{{y}}, head %{{x}}<br>{metric} %{{z:.2f}}<br>accuracy %{{customdata[0]:.1f}}%"
                          "<br>Δ log-prob %{customdata[1]:.3f}<extra></extra>"), row=row + 1, col=col + 1)
        fig.update_xaxes(title_text="head", dtick=1 if n_heads <= 16 else None, showgrid=False, row=row + 1, col=col + 1)
        fig.update_yaxes(title_text="layer" if col == 0 else None, dtick=1 if n_layers <= 12 else 2 if n_layers <= 32 else None,
                         showgrid=False, row=row + 1, col=col + 1)
    extreme = extreme or 1.0
    fig.update_layout(coloraxis=dict(colorscale=DELTA_SCALE, cmid=0, cmin=-extreme, cmax=extreme,
                                     colorbar=dict(title=dict(text=unit, side="top"), thickness=14, len=0.9)))
    width = 160 + n_cols * (70 + 30 * n_heads)
    height = 170 + n_rows * (40 + 17 * n_layers)
    what = "accuracy (percentage points)" if metric == "delta_accuracy" else "mean answer log-probability"
    return style(fig, f"Single-head ablation sweep ({model})", max(width, 520), max(height, 420),
                 note=f"Change in {what} when one head is ablated; red = worse than the unablated model.")
