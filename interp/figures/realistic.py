"""The realistic tasks: git-history accuracy against history length (revert, a forward copy, vs
cherry-pick, a backward one), and Lorem Ipsum copy accuracy at unambiguous vs ambiguous positions
beside the paper's Llama-3.1-8B reference."""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go

from interp.core.naming import result_files, slug
from interp.core.stats import wilson_interval
from interp.core.tables import read_csv
from interp.figures.rows import (BAD_TABLE_ERRORS, Rows, accuracy_value, index_value, number, require_columns, select_model,
                                 table_error)
from interp.figures.style import FIRST_OF_PAIR, OKABE_ITO, SECOND_OF_PAIR, style

GIT_COLUMNS = ("model", "task", "n_commits", "n_examples", "accuracy")
LOREM_COLUMNS = ("model", "n_paragraphs", "accuracy", "tf_accuracy_unambiguous", "tf_accuracy_ambiguous",
                 "n_unambiguous_positions", "n_ambiguous_positions")
# The paper's Lorem Ipsum scores at unambiguous / ambiguous transitions (Llama-3.1-8B).
LOREM_REFERENCE = ("Llama-3.1-8B (paper)", 0.9996, 0.9643)
GIT_STYLE = {"revert": ("revert (forward copy)", FIRST_OF_PAIR, "circle"),
             "cherry-pick": ("cherry-pick (backward copy)", SECOND_OF_PAIR, "square")}


def _fraction(row: dict, column: str, source: str) -> float:
    value = accuracy_value(row, source, column)
    if value is None:
        raise ValueError(f"{source}: empty {column!r} in row {dict(row)}")
    return value


def _wilson_bars(accuracy: float, n: int) -> tuple[float, float]:
    """The Wilson interval of ``accuracy`` measured on ``n`` trials, as (minus, plus) bar lengths."""
    lo, hi = wilson_interval(round(accuracy * n), n)
    return accuracy - lo, hi - accuracy


def git_history_figure(rows: Rows, model: str | None = None, source: str = "git_history.csv") -> go.Figure:
    """Exact-match accuracy against history length N, revert and cherry-pick, with 95% Wilson intervals.

    >>> rows = [{"model": "m", "task": t, "n_commits": n, "n_examples": 10, "accuracy": a}
    ...         for t, a in (("revert", 0.8), ("cherry-pick", 0.1)) for n in (10, 20)]
    >>> [trace.name for trace in git_history_figure(rows).data]
    ['revert (forward copy)', 'cherry-pick (backward copy)']
    """
    require_columns(rows, GIT_COLUMNS, source)
    model, rows = select_model(rows, model, source)
    fig = go.Figure()
    for task, (name, colour, symbol) in GIT_STYLE.items():
        mine = sorted((index_value(r, "n_commits", source), _fraction(r, "accuracy", source), index_value(r, "n_examples", source))
                      for r in rows if r["task"] == task)
        if not mine:
            continue
        bars = [_wilson_bars(acc, n) for _, acc, n in mine]
        fig.add_trace(go.Scatter(
            x=[length for length, _, _ in mine], y=[100 * acc for _, acc, _ in mine], name=name, mode="lines+markers",
            line=dict(color=colour, width=2.5), marker=dict(symbol=symbol, size=9, color=colour),
            error_y=dict(type="data", symmetric=False, array=[100 * b[1] for b in bars],
                         arrayminus=[100 * b[0] for b in bars], thickness=1.5, width=4, color=colour),
            customdata=[[n] for _, _, n in mine],
            hovertemplate=f"{name}, N=%{{x}}<br>accuracy %{{y:.1f}}% (n=%{{customdata[0]}})<extra></extra>"))
    if not fig.data:
        raise ValueError(f"{source}: no revert or cherry-pick rows for model {model!r}")
    n_examples = sorted({index_value(r, "n_examples", source) for r in rows})
    fig.update_xaxes(title_text="history length N (commits)", tickvals=sorted({index_value(r, "n_commits", source) for r in rows}))
    fig.update_yaxes(title_text="exact-match accuracy (%)", range=[-3, 103])
    return style(fig, f"Git history: forward vs backward copy ({model})", 640, 470,
                 note=f"Teacher-forced exact match of every line and <end>; n = {', '.join(map(str, n_examples))} "
                      "histories per point (the same histories for both orders); bars: 95% Wilson intervals.")


def lorem_figure(rows: Rows, source: str = "lorem_ipsum_summary.csv") -> go.Figure:
    """Copy accuracy at unambiguous vs ambiguous positions, one group per model, and the paper's
    Llama-3.1-8B scores beside them.

    >>> row = {"model": "m", "n_paragraphs": 4, "accuracy": 0.5, "tf_accuracy_unambiguous": 0.99,
    ...        "tf_accuracy_ambiguous": 0.9, "n_unambiguous_positions": 700, "n_ambiguous_positions": 100}
    >>> [trace.name for trace in lorem_figure([row]).data]
    ['unambiguous positions', 'ambiguous positions']
    """
    require_columns(rows, LOREM_COLUMNS, source)
    models = [str(r["model"]) for r in rows] + [LOREM_REFERENCE[0]]
    fig = go.Figure()
    for column, count, name, colour, reference in (
            ("tf_accuracy_unambiguous", "n_unambiguous_positions", "unambiguous positions", FIRST_OF_PAIR, LOREM_REFERENCE[1]),
            ("tf_accuracy_ambiguous", "n_ambiguous_positions", "ambiguous positions", SECOND_OF_PAIR, LOREM_REFERENCE[2])):
        values = [_fraction(r, column, source) for r in rows]
        bars = [_wilson_bars(v, index_value(r, count, source)) for v, r in zip(values, rows)]
        fig.add_trace(go.Bar(
            x=models, y=[100 * v for v in values] + [100 * reference], name=name, marker_color=colour,
            error_y=dict(type="data", symmetric=False, array=[100 * b[1] for b in bars] + [0],
                         arrayminus=[100 * b[0] for b in bars] + [0], thickness=1.5, width=4, color=OKABE_ITO["black"]),
            customdata=[[index_value(r, count, source)] for r in rows] + [["?"]],
            hovertemplate=f"%{{x}}, {name}<br>accuracy %{{y:.2f}}% (n=%{{customdata[0]}} positions)<extra></extra>"))
    low = min(min(t.y) for t in fig.data)
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="copy accuracy (%)", range=[max(0.0, low - 10), 103])
    paragraphs = ", ".join(f"{r['model']} {int(number(r, 'n_paragraphs', source))}" for r in rows)
    return style(fig, "Lorem Ipsum copying: unambiguous vs ambiguous positions", 300 + 170 * len(models), 560,
                 note="Teacher-forced argmax at every copy position (ambiguous: the previous token has several "
                      f"successors in the paragraph); paragraphs: {paragraphs}. Bars: 95% Wilson intervals over "
                      "pooled positions (not independent within a paragraph). Llama-3.1-8B: the paper's scores.")


def realistic_figures(results_dir: str | Path, model: str | None = None,
                      log=print) -> tuple[list[tuple[str, go.Figure]], list[str]]:
    """``git_history_<model>`` per git table (``model`` only, when given) and one ``lorem_ipsum``
    figure over every Lorem Ipsum summary; returns the figures and the errors (bad files).

    >>> figures, errors = realistic_figures("tests/fixtures/results", log=lambda line: None)  # doctest: +SKIP
    """
    results_dir = Path(results_dir)
    figures: list[tuple[str, go.Figure]] = []
    errors: list[str] = []
    git_tables = result_files(results_dir, "git_history")
    if not git_tables:
        log(f"note: skipping git history figures: no {results_dir}/git_history_*.csv (written by analyses/git_history.py)")
    for path in git_tables:
        try:
            rows = read_csv(path, required=GIT_COLUMNS)
            if not rows:
                raise ValueError(f"results file {path} has a header but no rows")
            label = str(rows[0]["model"])
            if model is None or label == model:
                figures.append((f"git_history_{slug(label)}", git_history_figure(rows, label, source=str(path))))
        except BAD_TABLE_ERRORS as err:
            errors.append(table_error(path, err))
    summaries: list[dict] = []
    lorem_tables = result_files(results_dir, "lorem_ipsum_summary")
    if not lorem_tables:
        log(f"note: skipping the Lorem Ipsum figure: no {results_dir}/lorem_ipsum_summary_*.csv (written by analyses/lorem_ipsum.py)")
    for path in lorem_tables:
        try:
            rows = read_csv(path, required=LOREM_COLUMNS)
            require_columns(rows, LOREM_COLUMNS, str(path))
            summaries += [r for r in rows if model is None or str(r["model"]) == model]
        except BAD_TABLE_ERRORS as err:
            errors.append(table_error(path, err))
    if summaries:
        figures.append(("lorem_ipsum", lorem_figure(summaries, source=", ".join(p.name for p in lorem_tables))))
    return figures, errors
