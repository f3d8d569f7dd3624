"""Figures of the edge-patching results: accuracy and loss per condition x task x length, and the per-layer sweep.

The tables hold the copy's mean log-prob (``mean_logprob``, ``delta_mean_logprob``); the figures plot the loss
the paper plots, its negative.

Both take rows as written by ``analyses/patch_edges.py`` (``interp.core.tables.read_csv``) and return plotly figures
in the project's style; [`edge_figures`][interp.figures.edges.edge_figures] finds every edge-patching table in a results folder, for
``make figures``.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.core.naming import CONDITION_LABELS, result_files, slug
from interp.core.stats import Z_95
from interp.core.tables import read_csv
from interp.figures.rows import BAD_TABLE_ERRORS, table_error, table_rows
from interp.figures.style import OKABE_ITO, style

Rows = Sequence[Mapping]
MAIN_COLUMNS = ("model", "task", "length", "condition", "n_examples", "accuracy", "ci_low", "ci_high", "mean_logprob",
                "mean_logprob_se")
LAYER_COLUMNS = ("model", "task", "length", "edge", "layer", "delta_accuracy", "delta_mean_logprob", "mean_logprob_se")
CONDITION_COLOURS = {"none": OKABE_ITO["grey"], "induction": OKABE_ITO["blue"], "anti_induction": OKABE_ITO["vermillion"]}


def _check(rows: Rows, columns: Sequence[str], source: str) -> None:
    if not rows:
        raise ValueError(f"{source}: no rows to plot")
    missing = [c for c in columns if c not in rows[0]]
    if missing:
        hint = (" (a table with the earlier columns: rewrite it with `python -m interp.experiments.edge_tables upgrade "
                f"{source}`)" if "loss" in rows[0] or "delta_loss" in rows[0] else "")
        raise ValueError(f"{source} lacks column(s) {missing}; it has {sorted(rows[0])}{hint}")
    unknown = {str(r.get("condition", r.get("edge"))) for r in rows} - set(CONDITION_LABELS)
    if unknown:
        raise ValueError(f"{source}: unknown condition(s) {sorted(unknown)}; expected {sorted(CONDITION_LABELS)}")


def _title_model(rows: Rows) -> str:
    model = str(rows[0].get("model") or "model")
    adapter = str(rows[0].get("adapter") or "")
    return f"{model} + adapter {adapter}" if adapter else model


def _tasks(rows: Rows) -> list[str]:
    return [t for t in ("UF", "UB") if any(r["task"] == t for r in rows)]


def edge_patching_figure(rows: Rows, source: str = "edge_patching.csv") -> go.Figure:
    """Accuracy (Wilson 95% CI) and loss (mean +- 1.96 s.e.) vs length, per task, one line per condition.

    >>> fig = edge_patching_figure(read_csv("results/edge_patching_smollm2-135m.csv"))  # doctest: +SKIP
    """
    rows = table_rows(rows)
    _check(rows, MAIN_COLUMNS, source)
    tasks = _tasks(rows)
    fig = make_subplots(rows=2, cols=len(tasks), shared_xaxes=True, shared_yaxes=True, vertical_spacing=0.08, horizontal_spacing=0.08,
                        subplot_titles=[f"{t}: {'forward' if t == 'UF' else 'backward'} copying" for t in tasks])
    for col, task in enumerate(tasks, 1):
        for condition, label in CONDITION_LABELS.items():
            points = sorted((int(r["length"]), r) for r in rows if r["task"] == task and r["condition"] == condition)
            if not points:
                continue
            lengths = [n for n, _ in points]
            colour = CONDITION_COLOURS[condition]
            acc = [100 * float(r["accuracy"]) for _, r in points]
            fig.add_trace(go.Scatter(
                x=lengths, y=acc, name=label, legendgroup=condition, showlegend=col == 1, mode="lines+markers",
                line=dict(color=colour, width=2.5), marker=dict(size=8, color=colour),
                error_y=dict(type="data", symmetric=False, thickness=1.5, width=4, color=colour,
                             array=[100 * float(r["ci_high"]) - a for (_, r), a in zip(points, acc)],
                             arrayminus=[a - 100 * float(r["ci_low"]) for (_, r), a in zip(points, acc)]),
                hovertemplate=f"{task} {label}<br>length %{{x}}: %{{y:.1f}}%<extra></extra>"), row=1, col=col)
            fig.add_trace(go.Scatter(
                x=lengths, y=[-float(r["mean_logprob"]) for _, r in points], name=label, legendgroup=condition, showlegend=False,
                mode="lines+markers", line=dict(color=colour, width=2.5, dash="dot"), marker=dict(size=7, color=colour),
                error_y=dict(type="data", array=[Z_95 * float(r["mean_logprob_se"] or 0) for _, r in points], thickness=1.5,
                             width=4, color=colour),
                hovertemplate=f"{task} {label}<br>length %{{x}}: loss %{{y:.3f}}<extra></extra>"), row=2, col=col)
        fig.update_xaxes(title_text="copy length L (letters)", row=2, col=col)
        fig.update_yaxes(range=[-3, 103], title_text="all-correct accuracy (%)" if col == 1 else None, row=1, col=col)
        fig.update_yaxes(title_text="cross-entropy over the copy" if col == 1 else None, row=2, col=col)
    fig.update_layout(legend=dict(title_text="condition", x=1.02, y=1, xanchor="left", yanchor="top"))
    n = sorted({int(r["n_examples"]) for r in rows if r.get("n_examples") not in (None, "")})
    shots = sorted({int(r["shots"]) for r in rows if r.get("shots") not in (None, "")}) or ["few"]
    return style(fig, f"Edge patching ({_title_model(rows)})", 220 + 380 * len(tasks), 640,
                 note=f"Teacher-forced copy of the last shot of {'/'.join(map(str, shots))}-shot prompts, "
                      f"n = {', '.join(map(str, n))} per point. "
                      "Induction edges: key of the token after the earlier occurrence replaced; anti-induction: value of "
                      "the earlier occurrence replaced; both from a run without previous-token edges, all layers and "
                      "heads. Error bars: Wilson 95% interval (accuracy), mean ± 1.96 s.e. (loss).")


def edge_layer_figure(rows: Rows, source: str = "edge_patching_layers.csv") -> go.Figure:
    """Change in loss and accuracy when the edges are patched in one layer only, per layer, task and length.

    >>> fig = edge_layer_figure(read_csv("results/edge_patching_layers_smollm2-135m.csv"))  # doctest: +SKIP
    """
    rows = table_rows(rows)
    _check(rows, LAYER_COLUMNS, source)
    tasks = _tasks(rows)
    lengths = sorted({int(r["length"]) for r in rows})
    dashes = ["solid", "dash", "dot", "dashdot", "longdash"]
    fig = make_subplots(rows=2, cols=len(tasks), shared_xaxes=True, shared_yaxes=True, vertical_spacing=0.08, horizontal_spacing=0.08,
                        subplot_titles=list(tasks))
    for col, task in enumerate(tasks, 1):
        for edge in ("induction", "anti_induction"):
            for i, length in enumerate(lengths):
                points = sorted((int(r["layer"]), r) for r in rows
                                if r["task"] == task and r["edge"] == edge and int(r["length"]) == length)
                if not points:
                    continue
                colour, name = CONDITION_COLOURS[edge], f"{CONDITION_LABELS[edge].split(' removed')[0]}, L={length}"
                layers = [layer for layer, _ in points]
                line = dict(color=colour, width=2, dash=dashes[i % len(dashes)])
                fig.add_trace(go.Scatter(
                    x=layers, y=[-float(r["delta_mean_logprob"]) for _, r in points], name=name, legendgroup=f"{edge}{length}",
                    showlegend=col == 1, mode="lines+markers", line=line, marker=dict(size=5, color=colour),
                    error_y=dict(type="data", array=[Z_95 * float(r["mean_logprob_se"] or 0) for _, r in points], thickness=1,
                                 width=2, color=colour),
                    hovertemplate=f"{task} {name}<br>layer %{{x}}: Δ loss %{{y:.3f}}<extra></extra>"), row=1, col=col)
                fig.add_trace(go.Scatter(
                    x=layers, y=[100 * float(r["delta_accuracy"]) for _, r in points], name=name,
                    legendgroup=f"{edge}{length}", showlegend=False, mode="lines+markers", line=line,
                    marker=dict(size=5, color=colour),
                    hovertemplate=f"{task} {name}<br>layer %{{x}}: Δ accuracy %{{y:.1f}} points<extra></extra>"),
                    row=2, col=col)
        fig.update_xaxes(title_text="layer patched (alone)", row=2, col=col)
        fig.update_yaxes(title_text="Δ cross-entropy" if col == 1 else None, row=1, col=col)
        fig.update_yaxes(title_text="Δ accuracy (points)" if col == 1 else None, row=2, col=col)
    fig.update_layout(legend=dict(title_text="edges patched", x=1.02, y=1, xanchor="left", yanchor="top"))
    return style(fig, f"Edge patching one layer at a time ({_title_model(rows)})", 260 + 420 * len(tasks), 640,
                 note="Change from no intervention on the same prompts when only one layer's induction (key) or "
                      "anti-induction (value) edges are patched, all heads. Error bars: ± 1.96 s.e. of the patched loss.")


def _stem(kind: str, rows: Rows) -> str:
    model = str(rows[0].get("model") or "model")
    adapter = str(rows[0].get("adapter") or "")
    return f"{kind}_{slug(model)}" + (f"_{slug(adapter)}" if adapter else "")


def edge_figures(results_dir: str | Path, model: str | None = None) -> tuple[list[tuple[str, go.Figure]], list[str]]:
    """Every edge-patching figure the tables in ``results_dir`` allow, as (file stem, figure), and the errors
    (one per unreadable table). Partial tables of unfinished runs are skipped.

    >>> figures, errors = edge_figures("results")  # doctest: +SKIP
    """
    figures, errors = [], []
    tables = [(path, False) for path in result_files(results_dir, "edge_patching")]
    tables += [(path, True) for path in result_files(results_dir, "edge_patching_layers")]
    for path, layered in tables:
        if path.stem.endswith("_partial"):
            continue
        try:
            by_model: dict[tuple[str, str], list[dict]] = defaultdict(list)
            for row in read_csv(path):
                by_model[(str(row.get("model")), str(row.get("adapter") or ""))].append(row)
            for (name, _), rows in by_model.items():
                if model is not None and name != model:
                    continue
                if layered:
                    figures.append((_stem("edge_patching_layers", rows), edge_layer_figure(rows, str(path))))
                else:
                    figures.append((_stem("edge_patching", rows), edge_patching_figure(rows, str(path))))
        except BAD_TABLE_ERRORS as err:
            errors.append(table_error(path, err))
    return figures, errors
