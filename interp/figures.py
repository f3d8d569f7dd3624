"""Paper figures from the results tables: plotly figures, one style, HTML + static export.

Every ``*_figure`` function takes rows (``interp.results.read_csv``) and returns a plotly
``Figure``; no model is needed to redraw. ``save_figure(fig, stem)`` writes ``stem.html``
(interactive) and static files (PDF/SVG/PNG) through kaleido and a local Chromium; pass one
``StaticExporter`` to many calls to start the browser once. ``load_results(path, kind)`` reads a
results file and checks it has the columns that figure needs, naming the file otherwise.

Style: Okabe-Ito colours (colour-blind safe), Cividis / RdBu colour scales, DejaVu Sans,
accuracy in percent, error bars explained in a note under each figure.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import shutil
import statistics
import textwrap
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from .results import atomic_write_bytes, atomic_write_text, read_csv
from .tasks import DIRECTIONAL_PAIRS, TASK_NAMES, get_task

Rows = Sequence[Mapping[str, Any]]

# --------------------------------------------------------------------------- style

OKABE_ITO = {
    "black": "#000000", "orange": "#E69F00", "sky_blue": "#56B4E9", "green": "#009E73",
    "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "purple": "#CC79A7", "grey": "#999999",
}
PALETTE = [OKABE_ITO[c] for c in ("blue", "vermillion", "green", "orange", "sky_blue", "purple", "yellow", "black")]
FONT = "DejaVu Sans, Arial, Helvetica, sans-serif"
SCORE_SCALE = "Cividis"  # sequential, designed for colour-vision deficiency
DELTA_SCALE = "RdBu"  # diverging (ColorBrewer, colour-blind safe); red = accuracy lost
FIRST_OF_PAIR, SECOND_OF_PAIR = OKABE_ITO["blue"], OKABE_ITO["vermillion"]  # right/forward vs left/backward
CONDITION_STYLE = {  # ablation condition -> (legend name, colour)
    "baseline": ("no ablation", OKABE_ITO["grey"]),
    "induction": ("induction heads", OKABE_ITO["blue"]),
    "anti_induction": ("anti-induction heads", OKABE_ITO["vermillion"]),
    "random": ("random heads (control)", OKABE_ITO["orange"]),
}
SPLIT_STYLE = {"id": ("in distribution", OKABE_ITO["blue"], "solid"),
               "ood": ("out of distribution", OKABE_ITO["vermillion"], "dash")}

TEMPLATE = go.layout.Template(pio.templates["simple_white"])
TEMPLATE.layout.update(
    font=dict(family=FONT, size=14, color="#222222"),
    colorway=PALETTE,
    title=dict(font=dict(size=18), x=0.0, xanchor="left", xref="paper"),
    legend=dict(bgcolor="rgba(255,255,255,0.8)", font=dict(size=13)),
    hoverlabel=dict(font=dict(family=FONT)),
    margin=dict(l=80, r=30, t=90, b=110),
)
TEMPLATE.layout.xaxis.update(ticks="outside", showline=True, linecolor="#444", zeroline=False, title=dict(standoff=8))
TEMPLATE.layout.yaxis.update(ticks="outside", showline=True, linecolor="#444", zeroline=False, showgrid=True,
                             gridcolor="#e6e6e6", title=dict(standoff=8))
pio.templates["interp"] = TEMPLATE

# Columns each figure needs (results files may carry more).
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "directional_bias": ("model", "task", "length", "accuracy", "stderr"),
    "head_scores": ("model", "layer", "head", "induction", "anti_induction"),
    "ablation": ("model", "condition", "ablation", "task", "length", "accuracy"),
    "head_sweep": ("model", "task", "length", "layer", "head", "accuracy", "delta_accuracy"),
    "finetune": ("step", "split", "length", "accuracy"),
    "from_scratch": ("task", "positional", "split", "lengths", "accuracy"),
}
ABLATION_CONDITIONS = tuple(CONDITION_STYLE)


def load_results(path: str | Path, kind: str) -> list[dict]:
    """Rows of a results file, with a clear error naming the file when a needed column is missing."""
    if kind not in REQUIRED_COLUMNS:
        raise ValueError(f"kind={kind!r}; expected one of {sorted(REQUIRED_COLUMNS)}")
    rows = read_csv(path, required=REQUIRED_COLUMNS[kind])
    if not rows:
        raise ValueError(f"results file {path} has a header but no rows")
    return rows


def slug(text: str) -> str:
    """A file-name-safe version of a model name (``org/model`` -> ``org_model``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(text)).strip("_") or "model"


def style(fig: go.Figure, title: str, width: int, height: int, note: str | None = None) -> go.Figure:
    """The common look: template, title, size, and an optional note under the plot."""
    fig.update_layout(template=TEMPLATE, title_text=title, width=width, height=height)
    if note:
        chars = max(40, int((width - 100) / 7.0))  # ~7 px per character at 12 px
        note = "<br>".join(textwrap.wrap(note, chars))
        fig.add_annotation(text=note, xref="paper", yref="paper", x=0, y=0, xanchor="left", yanchor="top",
                           yshift=-62, showarrow=False, align="left", font=dict(size=12, color="#555555"))
    return fig


# --------------------------------------------------------------------------- row helpers


def _require(rows: Rows, columns: Iterable[str], source: str) -> None:
    if not rows:
        raise ValueError(f"{source}: no rows to plot")
    have = set().union(*(r.keys() for r in rows))
    missing = [c for c in columns if c not in have]
    if missing:
        raise ValueError(f"{source} lacks column(s) {missing}; it has {sorted(have)}")


def _number(row: Mapping, column: str, source: str, allow_missing: bool = False) -> float | None:
    value = row.get(column)
    if value is None or value == "":
        if allow_missing:
            return None
        raise ValueError(f"{source}: empty {column!r} in row {dict(row)}")
    try:
        number = float(value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{source}: column {column!r} must be numeric, got {value!r}") from err
    if math.isnan(number) and not allow_missing:
        raise ValueError(f"{source}: {column!r} is NaN in row {dict(row)}")
    return None if math.isnan(number) else number


def _accuracy(row: Mapping, source: str, column: str = "accuracy") -> float | None:
    value = _number(row, column, source, allow_missing=True)
    if value is not None and not -1e-9 <= value <= 1 + 1e-9:
        raise ValueError(f"{source}: {column} must be a fraction in [0, 1], got {value} (row {dict(row)})")
    return value


def _task(row: Mapping, source: str) -> str:
    try:
        return get_task(row.get("task")).name
    except ValueError as err:
        raise ValueError(f"{source}: {err}") from None


def _index(row: Mapping, column: str, source: str) -> int:
    value = _number(row, column, source)
    if value != int(value) or value < 0:
        raise ValueError(f"{source}: {column} must be a non-negative integer, got {row.get(column)!r}")
    return int(value)


def select_model(rows: Rows, model: str | None, source: str) -> tuple[str, list[Mapping]]:
    """The rows of ``model``; with ``model=None`` the file must hold exactly one model."""
    models = list(dict.fromkeys(str(r.get("model")) for r in rows))
    if model is None:
        if len(models) != 1:
            raise ValueError(f"{source} holds several models {models}; pass model=")
        model = models[0]
    chosen = [r for r in rows if str(r.get("model")) == str(model)]
    if not chosen:
        raise ValueError(f"{source}: no rows for model {model!r}; it has {models}")
    return str(model), chosen


def models_in(rows: Rows) -> list[str]:
    return list(dict.fromkeys(str(r.get("model")) for r in rows))


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _sd(values: Sequence[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def _task_order(tasks: Iterable[str]) -> list[str]:
    present = set(tasks)
    return [t for t in TASK_NAMES if t in present]


def _grid(n_items: int, max_cols: int = 3) -> tuple[int, int]:
    cols = min(max_cols, n_items)
    return math.ceil(n_items / cols), cols


def _colorbar_x(fig: go.Figure, col: int) -> float:
    axis = fig.layout["xaxis" if col == 1 else f"xaxis{col}"]
    return axis.domain[1] + 0.005


# --------------------------------------------------------------------------- head scores


SCORE_TITLES = {"induction": "Induction score", "anti_induction": "Anti-induction score",
                "previous_token": "Previous-token score"}


def head_scores_figure(rows: Rows, model: str | None = None, scores: Sequence[str] = ("induction", "anti_induction"),
                       top_k: int = 10, source: str = "head_scores.csv") -> go.Figure:
    """Layer x head heatmaps of head scores (one panel per score), top-``top_k`` heads numbered."""
    _require(rows, ("model", "layer", "head", *scores), source)
    model, rows = select_model(rows, model, source)
    n_layers = max(_index(r, "layer", source) for r in rows) + 1
    n_heads = max(_index(r, "head", source) for r in rows) + 1
    panel = max(200, 34 * n_heads)
    gap = 160  # colour bar of the left panel + the y-axis title of the next
    width = 90 + len(scores) * panel + (len(scores) - 1) * gap + 130
    fig = make_subplots(rows=1, cols=len(scores), subplot_titles=[SCORE_TITLES.get(s, s) for s in scores],
                        horizontal_spacing=gap / (width - 220))
    for col, score in enumerate(scores, 1):
        z = [[None] * n_heads for _ in range(n_layers)]
        for r in rows:
            z[_index(r, "layer", source)][_index(r, "head", source)] = _number(r, score, source, allow_missing=True)
        ranked = sorted(((v, l, h) for l, line in enumerate(z) for h, v in enumerate(line) if v is not None),
                        key=lambda t: -t[0])
        text = [[""] * n_heads for _ in range(n_layers)]
        for rank, (_, l, h) in enumerate(ranked[:top_k], 1):
            text[l][h] = str(rank)
        values = [v for v, _, _ in ranked]
        fig.add_trace(go.Heatmap(
            z=z, x=list(range(n_heads)), y=list(range(n_layers)), text=text, texttemplate="%{text}",
            textfont=dict(size=10), coloraxis=f"coloraxis{'' if col == 1 else col}", xgap=1, ygap=1,
            hovertemplate=f"layer %{{y}}, head %{{x}}<br>{SCORE_TITLES.get(score, score).lower()} %{{z:.3f}}"
                          "<br>rank %{text}<extra></extra>"), row=1, col=col)
        fig.update_xaxes(title_text="head", dtick=1 if n_heads <= 16 else None, row=1, col=col, showgrid=False)
        fig.update_yaxes(title_text="layer", dtick=1 if n_layers <= 12 else 2 if n_layers <= 32 else None,
                         row=1, col=col, showgrid=False)
        fig.update_layout({f"coloraxis{'' if col == 1 else col}": dict(
            colorscale=SCORE_SCALE, cmin=min(0.0, min(values, default=0.0)), cmax=max(values, default=1.0) or 1.0,
            colorbar=dict(title=dict(text="score", side="top"), x=_colorbar_x(fig, col), len=0.9,
                          thickness=14))})
    height = max(420, 170 + 19 * n_layers)
    return style(fig, f"Head scores of {model}", width, height,
                 note=f"Mean attention to the token after (induction) / before (anti-induction) the earlier "
                      f"occurrence on repeated random tokens; numbers mark the top {top_k} heads.")


# --------------------------------------------------------------------------- accuracy vs length


def _aggregate(values: Sequence[tuple[float, float | None]]) -> tuple[float, float, str]:
    """Mean accuracy over rows (prompt variants / seeds) and its error bar, with what it means."""
    accs = [a for a, _ in values]
    if len(values) == 1:
        se = values[0][1]
        return accs[0], se if se is not None else 0.0, "binomial s.e."
    return _mean(accs), _sd(accs), f"s.d. over {len(values)} variants"


def accuracy_length_figure(rows: Rows, model: str | None = None, source: str = "directional_bias.csv") -> go.Figure:
    """Accuracy vs length, one panel per directional pair (UR/UL, NRFirst/NLFirst, ..., UF/UB, NF/NB)."""
    _require(rows, REQUIRED_COLUMNS["directional_bias"], source)
    model, rows = select_model(rows, model, source)
    cells: dict[tuple[str, int], list[tuple[float, float | None]]] = defaultdict(list)
    for r in rows:
        acc = _accuracy(r, source)
        if acc is None:
            continue
        cells[(_task(r, source), _index(r, "length", source))].append((acc, _accuracy(r, source, "stderr")))
    tasks = {t for t, _ in cells}
    pairs = [p for p in DIRECTIONAL_PAIRS if tasks & set(p)]
    if not pairs:
        raise ValueError(f"{source}: no accuracy values to plot for model {model!r}")
    n_rows, n_cols = _grid(len(pairs))
    titles = []
    for a, b in pairs:
        expr = get_task(a).expressible
        titles.append(f"{a} vs {b} · {'expressible' if expr else 'not expressible'}")
    fig = make_subplots(rows=n_rows, cols=n_cols, subplot_titles=titles, horizontal_spacing=0.07,
                        vertical_spacing=0.2 if n_rows > 1 else 0.1)
    error_kinds = set()
    for i, pair in enumerate(pairs):
        row, col = divmod(i, n_cols)
        for task, colour, symbol in zip(pair, (FIRST_OF_PAIR, SECOND_OF_PAIR), ("circle", "square")):
            lengths = sorted(n for t, n in cells if t == task)
            if not lengths:
                continue
            stats = [_aggregate(cells[(task, n)]) for n in lengths]
            error_kinds |= {s[2].split(" over")[0] for s in stats}
            fig.add_trace(go.Scatter(
                x=lengths, y=[100 * s[0] for s in stats], name=task, legendgroup=task, mode="lines+markers",
                line=dict(color=colour, width=2.5, dash="solid" if get_task(task).expressible else "dash"),
                marker=dict(symbol=symbol, size=8, color=colour),
                error_y=dict(type="data", array=[100 * s[1] for s in stats], thickness=1.5, width=4, color=colour),
                customdata=[[s[2]] for s in stats],
                hovertemplate=f"{task}, length %{{x}}<br>accuracy %{{y:.1f}}% ± %{{error_y.array:.1f}} (%{{customdata[0]}})"
                              "<extra></extra>"), row=row + 1, col=col + 1)
        fig.update_xaxes(title_text="length (items)", row=row + 1, col=col + 1)
        fig.update_yaxes(title_text="accuracy (%)" if col == 0 else None, range=[-3, 103], row=row + 1, col=col + 1)
    width = 120 + 360 * n_cols
    height = 190 + 320 * n_rows
    fig.update_layout(legend=dict(title_text="task", orientation="v", x=1.01, y=1, xanchor="left"))
    return style(fig, f"Accuracy vs length: directional pairs ({model})", width, height,
                 note="Exact-match accuracy; error bars: binomial standard error (one prompt variant) or s.d. over "
                      "variants. Solid: expressible in C-RASP[pos]; dashed: not expressible.")


# --------------------------------------------------------------------------- ablation


def ablation_figure(rows: Rows, model: str | None = None, source: str = "ablation.csv") -> go.Figure:
    """Accuracy per task under each ablation condition; one panel per ablation kind (zero / mean).

    Bars are means over rows; the random-head control has one row per seed: its bar is the mean,
    the error bar the s.d. over seeds, and the dots the seeds."""
    _require(rows, REQUIRED_COLUMNS["ablation"], source)
    model, rows = select_model(rows, model, source)
    for r in rows:
        if r.get("condition") not in ABLATION_CONDITIONS:
            raise ValueError(f"{source}: unknown condition {r.get('condition')!r}; expected one of {ABLATION_CONDITIONS}")
    lengths_per_task: dict[str, set[int]] = defaultdict(set)
    for r in rows:
        lengths_per_task[_task(r, source)].add(_index(r, "length", source))

    def label(r: Mapping) -> str:
        task = _task(r, source)
        return f"{task} (n={_index(r, 'length', source)})" if len(lengths_per_task[task]) > 1 else task

    kinds = [k for k in ("zero", "mean") if any(r.get("ablation") == k for r in rows)]
    kinds += sorted({str(r.get("ablation")) for r in rows} - {"zero", "mean", "none", "None", ""})
    if not kinds:
        kinds = ["none"]
    baseline = [r for r in rows if r.get("condition") == "baseline"]
    x_order = [label(r) for t in _task_order(lengths_per_task) for r in rows if _task(r, source) == t]
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
                    acc = _accuracy(r, source)
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
            means = [100 * _mean(groups[x]) for x in xs]
            spread = [100 * _sd(groups[x]) for x in xs]
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


# --------------------------------------------------------------------------- single-head sweep


def head_sweep_figure(rows: Rows, model: str | None = None, metric: str = "delta_accuracy",
                      source: str = "head_sweep.csv") -> go.Figure:
    """Layer x head heatmap of the change caused by ablating each head alone, one panel per task."""
    if metric not in ("delta_accuracy", "delta_logprob"):
        raise ValueError(f"metric={metric!r}; expected 'delta_accuracy' or 'delta_logprob'")
    _require(rows, (*REQUIRED_COLUMNS["head_sweep"], metric), source)
    model, rows = select_model(rows, model, source)
    panels = sorted({(_task(r, source), _index(r, "length", source)) for r in rows},
                    key=lambda p: (TASK_NAMES.index(p[0]), p[1]))
    n_layers = max(_index(r, "layer", source) for r in rows) + 1
    n_heads = max(_index(r, "head", source) for r in rows) + 1
    scale = 100.0 if metric == "delta_accuracy" else 1.0
    unit = "Δ accuracy<br>(points)" if metric == "delta_accuracy" else "Δ mean<br>log-prob"
    n_rows, n_cols = _grid(len(panels), 4)
    fig = make_subplots(rows=n_rows, cols=n_cols, subplot_titles=[f"{t}, length {n}" for t, n in panels],
                        horizontal_spacing=0.05, vertical_spacing=0.12 if n_rows > 1 else 0.1)
    extreme = 0.0
    for i, (task, length) in enumerate(panels):
        z = [[None] * n_heads for _ in range(n_layers)]
        custom = [[[None, None] for _ in range(n_heads)] for _ in range(n_layers)]
        for r in rows:
            if _task(r, source) == task and _index(r, "length", source) == length:
                l, h = _index(r, "layer", source), _index(r, "head", source)
                value = _number(r, metric, source, allow_missing=True)
                z[l][h] = None if value is None else scale * value
                acc = _accuracy(r, source)
                custom[l][h] = [None if acc is None else 100 * acc, _number(r, "delta_logprob", source, True)
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


# --------------------------------------------------------------------------- fine-tuning


def finetune_figure(rows: Rows, model: str = "", task: str = "", source: str = "finetune.csv") -> go.Figure:
    """In- vs out-of-distribution accuracy (and loss) over fine-tuning steps."""
    _require(rows, REQUIRED_COLUMNS["finetune"], source)
    if task:
        try:
            task = get_task(task).name
        except ValueError as err:
            raise ValueError(f"{source}: {err}") from None
    has_loss = any(_number(r, "loss", source, True) is not None for r in rows if "loss" in r)
    fig = make_subplots(rows=1, cols=2 if has_loss else 1, horizontal_spacing=0.12,
                        subplot_titles=["accuracy", "loss on the answer"] if has_loss else None)
    splits = list(dict.fromkeys(str(r["split"]) for r in rows))
    for split in splits:
        by_step: dict[int, list[Mapping]] = defaultdict(list)
        for r in rows:
            if str(r["split"]) == split:
                by_step[_index(r, "step", source)].append(r)
        steps = sorted(by_step)
        name, colour, dash = SPLIT_STYLE.get(split, (split, PALETTE[len(SPLIT_STYLE) % len(PALETTE)], "dot"))
        accs, lens, losses = [], [], []
        for s in steps:
            values = [a for a in (_accuracy(r, source) for r in by_step[s]) if a is not None]
            accs.append(100 * _mean(values) if values else None)
            lengths = sorted({_index(r, "length", source) for r in by_step[s]})
            lens.append(f"{lengths[0]}–{lengths[-1]}" if len(lengths) > 1 else str(lengths[0]))
            loss_values = [v for v in (_number(r, "loss", source, True) for r in by_step[s] if "loss" in r) if v is not None]
            losses.append(_mean(loss_values) if loss_values else None)
        fig.add_trace(go.Scatter(x=steps, y=accs, name=name, legendgroup=split, mode="lines+markers",
                                 line=dict(color=colour, dash=dash, width=2.5), marker=dict(size=7),
                                 customdata=[[x] for x in lens],
                                 hovertemplate=f"{name}<br>step %{{x}}: %{{y:.1f}}% (lengths %{{customdata[0]}})<extra></extra>"),
                      row=1, col=1)
        if has_loss:
            fig.add_trace(go.Scatter(x=steps, y=losses, name=name, legendgroup=split, showlegend=False,
                                     mode="lines+markers", line=dict(color=colour, dash=dash, width=2.5),
                                     marker=dict(size=7),
                                     hovertemplate=f"{name}<br>step %{{x}}: loss %{{y:.3f}}<extra></extra>"), row=1, col=2)
    fig.update_xaxes(title_text="training step")
    fig.update_yaxes(title_text="accuracy (%)", range=[-3, 103], row=1, col=1)
    if has_loss:
        fig.update_yaxes(title_text="cross-entropy (nats / token)", rangemode="tozero", row=1, col=2)
    label = " ".join(x for x in (task, model and f"({model})") if x)
    return style(fig, f"Fine-tuning {label}".strip(), 1000 if has_loss else 620, 460,
                 note="Exact-match accuracy averaged over the evaluated lengths of each split; "
                      "in distribution = training lengths, out of distribution = longer inputs.")


def finetune_summary_figure(runs: Mapping[tuple[str, str], Rows], source: str = "finetune files") -> go.Figure:
    """Accuracy at the last step of each fine-tuning run, in vs out of distribution, per task."""
    if not runs:
        raise ValueError(f"{source}: no fine-tuning results")
    labels, per_split = [], defaultdict(dict)
    models = sorted({m for m, _ in runs})
    for (model, task), rows in sorted(runs.items(), key=lambda kv: (kv[0][0], TASK_NAMES.index(kv[0][1]))):
        _require(rows, REQUIRED_COLUMNS["finetune"], f"{source} ({model}, {task})")
        last = max(_index(r, "step", source) for r in rows)
        label = task if len(models) == 1 else f"{task} ({model})"
        labels.append(label)
        for r in rows:
            if _index(r, "step", source) == last:
                acc = _accuracy(r, source)
                if acc is not None:
                    per_split[str(r["split"])].setdefault(label, []).append(acc)
    fig = go.Figure()
    for split, values in per_split.items():
        name, colour, _ = SPLIT_STYLE.get(split, (split, OKABE_ITO["green"], "dot"))
        xs = [l for l in labels if l in values]
        fig.add_trace(go.Bar(x=xs, y=[100 * _mean(values[x]) for x in xs], name=name, marker_color=colour,
                             hovertemplate=f"{name}<br>%{{x}}: %{{y:.1f}}%<extra></extra>"))
    fig.update_layout(barmode="group")
    fig.update_xaxes(title_text="task", categoryorder="array", categoryarray=labels)
    fig.update_yaxes(title_text="accuracy at the last step (%)", range=[0, 103])
    title = f"Fine-tuned accuracy by task ({models[0]})" if len(models) == 1 else "Fine-tuned accuracy by task"
    return style(fig, title, max(560, 160 + 90 * len(labels)), 460,
                 note="Exact-match accuracy at the final step, averaged over the lengths of each split.")


# --------------------------------------------------------------------------- from scratch


def _bin_start(text: str) -> float:
    match = re.match(r"\s*(\d+)", str(text))
    return float(match.group(1)) if match else math.inf


def from_scratch_figure(rows: Rows, source: str = "from_scratch.csv") -> go.Figure:
    """Accuracy of small transformers trained from scratch, per task and length bin; one panel per
    positional encoding. Tick marks show C-RASP[pos] expressibility."""
    _require(rows, REQUIRED_COLUMNS["from_scratch"], source)
    positionals = list(dict.fromkeys(str(r["positional"]) for r in rows))
    tasks = _task_order(_task(r, source) for r in rows)
    bins = sorted({(str(r["split"]), str(r["lengths"])) for r in rows}, key=lambda b: (_bin_start(b[1]), b[0]))
    bin_colours = [OKABE_ITO[c] for c in ("blue", "orange", "vermillion", "purple", "green", "sky_blue")]
    expressible: dict[str, bool] = {}
    for r in rows:
        value = r.get("expressible")
        task = _task(r, source)
        if isinstance(value, str):
            value = value.strip().lower() in ("true", "1", "yes")
        expressible[task] = bool(value) if value is not None else get_task(task).expressible
    ticktext = [f"{t} {'✓' if expressible[t] else '✗'}" for t in tasks]
    names = {"absolute": "absolute positions", "rope": "RoPE", "nope": "no positional encoding"}
    fig = make_subplots(rows=len(positionals), cols=1, shared_xaxes=True, vertical_spacing=0.12,
                        subplot_titles=[names.get(p.lower(), p) for p in positionals])
    for row, positional in enumerate(positionals, 1):
        for (split, lengths), colour in zip(bins, bin_colours * 3):
            values: dict[str, list[float]] = defaultdict(list)
            for r in rows:
                if str(r["positional"]) == positional and (str(r["split"]), str(r["lengths"])) == (split, lengths):
                    acc = _accuracy(r, source)
                    if acc is not None:
                        values[_task(r, source)].append(acc)
            xs = [t for t in tasks if t in values]
            if not xs:
                continue
            name = f"{lengths} ({'in distribution' if split == 'id' else 'out of distribution' if split == 'ood' else split})"
            fig.add_trace(go.Bar(x=xs, y=[100 * _mean(values[t]) for t in xs], name=name, legendgroup=name,
                                 showlegend=row == 1, marker_color=colour, offsetgroup=name,
                                 hovertemplate=f"{positional}, lengths {name}<br>%{{x}}: %{{y:.1f}}%<extra></extra>"),
                          row=row, col=1)
        fig.update_xaxes(categoryorder="array", categoryarray=tasks, tickvals=tasks, ticktext=ticktext,
                         showticklabels=True, tickangle=0, row=row, col=1)
        fig.update_yaxes(title_text="accuracy (%)", range=[0, 103], row=row, col=1)
    fig.update_xaxes(title_text="task", row=len(positionals), col=1)
    fig.update_layout(barmode="group", legend=dict(title_text="test lengths", x=1.02, y=1, xanchor="left"))
    width = 330 + 78 * len(tasks)
    return style(fig, "Trained from scratch: accuracy by length", max(720, width), 170 + 300 * len(positionals),
                 note="✓ expressible in C-RASP[pos] (predicted to length-generalise), ✗ not expressible. "
                      "Exact-match accuracy on test lengths inside (in distribution) and beyond the training range.")


# --------------------------------------------------------------------------- saving


class BrowserNotFoundError(RuntimeError):
    """Static export needs a Chromium/Chrome; none was found."""


BROWSER_HINT = ("static figure export (PDF/SVG/PNG) needs Chromium: run scripts/install_chromium.sh "
                "(apt-get install -y chromium) or set BROWSER_PATH to a Chrome/Chromium executable; "
                "or write HTML only (--formats html)")
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome-stable", "google-chrome", "chrome")


def find_browser() -> str | None:
    """``$BROWSER_PATH`` if set, else the first Chromium/Chrome on ``PATH`` (never downloads one)."""
    env = os.environ.get("BROWSER_PATH")
    if env:
        return env if os.access(env, os.X_OK) else None
    for name in BROWSER_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


STATIC_FORMATS = ("pdf", "svg", "png")
HTML_FORMATS = ("html",)


class StaticExporter:
    """One headless Chromium (through kaleido) that renders many figures to PDF/SVG/PNG.

    Use as a context manager so the browser starts once; ``export`` also works without (then
    each call starts and stops a browser). MathJax is disabled and plotly.js comes from the
    installed plotly package, so nothing is fetched from the network."""

    def __init__(self, browser: str | None = None, timeout: float = 120, png_scale: float = 2.0):
        self.browser = browser or find_browser()
        if self.browser is None:
            raise BrowserNotFoundError(BROWSER_HINT)
        self.timeout = timeout
        self.png_scale = png_scale
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._kaleido = None

    # The browser lives in an event loop on its own thread, so callers need not be async (and
    # may themselves run inside an event loop, e.g. Jupyter).
    def __enter__(self) -> "StaticExporter":
        import kaleido

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="interp-kaleido")
        self._thread.start()
        k = kaleido.Kaleido(path=self.browser, mathjax=False, timeout=self.timeout)
        try:
            self._run(k.open())
        except Exception as err:
            self.__exit__(None, None, None)
            raise BrowserNotFoundError(f"could not start {self.browser} for static export: {err}. {BROWSER_HINT}") from err
        self._kaleido = k
        return self

    def __exit__(self, *exc) -> None:
        if self._kaleido is not None:
            try:
                self._run(self._kaleido.close())
            finally:
                self._kaleido = None
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=30)
            self._loop.close()
            self._loop, self._thread = None, None

    def _run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def render(self, fig: go.Figure, fmt: str) -> bytes:
        """The figure as ``fmt`` bytes, at the figure's own width and height."""
        if fmt not in STATIC_FORMATS:
            raise ValueError(f"format {fmt!r}; expected one of {STATIC_FORMATS}")
        if self._kaleido is None:
            with self:
                return self.render(fig, fmt)
        opts = dict(format=fmt, width=fig.layout.width or 800, height=fig.layout.height or 500,
                    scale=self.png_scale if fmt == "png" else 1)
        data = self._run(self._kaleido.calc_fig(fig, opts=opts))
        if not data:
            raise RuntimeError(f"kaleido returned an empty {fmt} image")
        return data

    def export(self, fig: go.Figure, path: str | Path, fmt: str | None = None) -> Path:
        path = Path(path)
        return atomic_write_bytes(path, self.render(fig, fmt or path.suffix.lstrip(".")))


PLOTLY_JS = "plotly.min.js"


def _write_plotlyjs(directory: Path) -> None:
    """plotly.js next to the HTML files (once), so each page works offline without a 4.7 MB copy."""
    from plotly.offline import get_plotlyjs

    target = directory / PLOTLY_JS
    script = get_plotlyjs()
    if not target.exists() or target.stat().st_size != len(script.encode()):
        atomic_write_text(target, script)


def figure_html(fig: go.Figure, inline_js: bool = False) -> str:
    config = {"displaylogo": False, "responsive": True,
              "toImageButtonOptions": {"format": "svg", "filename": "figure"}}
    return fig.to_html(full_html=True, include_plotlyjs=True if inline_js else PLOTLY_JS, include_mathjax=False,
                       config=config)


def save_figure(fig: go.Figure, stem: str | Path, formats: Sequence[str] = ("html", "pdf", "png"),
                exporter: StaticExporter | None = None, inline_js: bool = False) -> list[Path]:
    """Write ``fig`` as ``stem.<fmt>`` for each format, atomically; returns the paths.

    ``html`` is interactive (plotly.js written once as ``plotly.min.js`` beside it, or inlined
    with ``inline_js=True``); ``pdf`` / ``svg`` / ``png`` are static, rendered by a local
    Chromium (``exporter``, or one started for this call)."""
    stem = Path(stem)
    unknown = [f for f in formats if f not in HTML_FORMATS + STATIC_FORMATS]
    if unknown:
        raise ValueError(f"formats {unknown} unknown; expected some of {HTML_FORMATS + STATIC_FORMATS}")
    stem.parent.mkdir(parents=True, exist_ok=True)
    written = []
    static = [f for f in formats if f in STATIC_FORMATS]
    if "html" in formats:
        if not inline_js:
            _write_plotlyjs(stem.parent)
        written.append(atomic_write_text(stem.with_suffix(".html"), figure_html(fig, inline_js)))
    if static:
        if exporter is None:
            with StaticExporter() as own:
                return written + [own.export(fig, stem.with_suffix("." + f), f) for f in static]
        written += [exporter.export(fig, stem.with_suffix("." + f), f) for f in static]
    return written


# --------------------------------------------------------------------------- everything from results/

RESULT_FILES = {  # kind -> (file name, the analysis that writes it)
    "head_scores": ("head_scores.csv", "head scoring (analyses/score_heads.py)"),
    "directional_bias": ("directional_bias.csv", "the directional-bias evaluation"),
    "ablation": ("ablation.csv", "head ablation (analyses/ablate_heads.py)"),
    "head_sweep": ("head_sweep.csv", "the single-head sweep"),
    "from_scratch": ("from_scratch.csv", "from-scratch training"),
}


def _finetune_key(path: Path, rows: Rows) -> tuple[str, str]:
    """(model, task) of a ``finetune_<model>_<task>[_tag].csv`` file, from its columns if present."""
    model = str(rows[0].get("model") or "") if rows else ""
    task = str(rows[0].get("task") or "") if rows else ""
    parts = path.stem[len("finetune_"):].split("_")
    if not task:
        found = [i for i, p in enumerate(parts) if p.lower() in {t.lower() for t in TASK_NAMES}]
        if not found:
            raise ValueError(f"results file {path}: cannot tell the task from the name (expected "
                             f"finetune_<model>_<task>.csv with a task in {', '.join(TASK_NAMES)}) and it has no task column")
        task = parts[found[-1]]
        model = model or "_".join(parts[: found[-1]])
    try:
        task = get_task(task).name
    except ValueError as err:
        raise ValueError(f"results file {path}: {err}") from None
    return model or "_".join(parts[:-1]) or "model", task


def build_figures(results_dir: str | Path, model: str | None = None,
                  log=print) -> tuple[list[tuple[str, go.Figure]], list[str]]:
    """Every figure the files in ``results_dir`` allow, as ``(file stem, figure)``; missing files are
    skipped with a note through ``log``. Returns the figures and the errors (bad files)."""
    results_dir = Path(results_dir)
    figures: list[tuple[str, go.Figure]] = []
    errors: list[str] = []

    def models_of(rows: Rows) -> list[str]:
        names = models_in(rows)
        return [m for m in names if model is None or m == model]

    builders = {
        "head_scores": lambda rows, path: [(f"head_scores_{slug(m)}", head_scores_figure(rows, m, source=str(path)))
                                           for m in models_of(rows)],
        "directional_bias": lambda rows, path: [(f"accuracy_vs_length_{slug(m)}",
                                                 accuracy_length_figure(rows, m, source=str(path))) for m in models_of(rows)],
        "ablation": lambda rows, path: [(f"ablation_{slug(m)}", ablation_figure(rows, m, source=str(path)))
                                        for m in models_of(rows)],
        "head_sweep": lambda rows, path: [(f"head_sweep_{slug(m)}", head_sweep_figure(rows, m, source=str(path)))
                                          for m in models_of(rows)],
        "from_scratch": lambda rows, path: [("from_scratch", from_scratch_figure(rows, source=str(path)))],
    }
    for kind, (name, writer) in RESULT_FILES.items():
        path = results_dir / name
        if not path.exists():
            log(f"note: skipping {kind} figures: {path} not found (written by {writer})")
            continue
        try:
            made = builders[kind](load_results(path, kind), path)
        except ValueError as err:
            errors.append(str(err))
            continue
        if not made:
            log(f"note: {path} has no rows for model {model!r}")
        figures += made

    finetune_files = sorted(results_dir.glob("finetune_*.csv"))
    if not finetune_files:
        log(f"note: skipping fine-tuning figures: no {results_dir}/finetune_<model>_<task>.csv (written by fine-tuning)")
    runs: dict[tuple[str, str], Rows] = {}
    for path in finetune_files:
        try:
            rows = load_results(path, "finetune")
            key = _finetune_key(path, rows)
            if model is not None and key[0] != model:
                continue
            figures.append((path.stem, finetune_figure(rows, *key, source=str(path))))
            runs[key] = rows
        except ValueError as err:
            errors.append(str(err))
    for m in sorted({m for m, _ in runs}):
        mine = {k: v for k, v in runs.items() if k[0] == m}
        if len(mine) > 1:
            figures.append((f"finetune_summary_{slug(m)}", finetune_summary_figure(mine)))
    return figures, errors


def make_figures(results_dir: str | Path = "results", out_dir: str | Path = "figures",
                 formats: Sequence[str] = ("html", "pdf", "png"), model: str | None = None, inline_js: bool = False,
                 log=print) -> tuple[list[Path], list[str]]:
    """Draw every figure ``results_dir`` allows into ``out_dir``; returns (paths written, errors)."""
    figures, errors = build_figures(results_dir, model, log)
    out_dir = Path(out_dir)
    written: list[Path] = []
    if not figures:
        return written, errors
    static = [f for f in formats if f in STATIC_FORMATS]
    exporter = StaticExporter() if static else None
    if exporter is not None:
        exporter.__enter__()
    try:
        for stem, fig in figures:
            paths = save_figure(fig, out_dir / stem, formats, exporter=exporter, inline_js=inline_js)
            log(f"wrote {', '.join(str(p) for p in paths)}")
            written += paths
    finally:
        if exporter is not None:
            exporter.__exit__(None, None, None)
    return written, errors
