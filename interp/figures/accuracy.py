"""Accuracy against length for the directional task pairs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.data.tasks import DIRECTIONAL_PAIRS, get_task
from interp.figures.rows import (REQUIRED_COLUMNS, Rows, accuracy_value, grid, index_value, mean, require_columns, table_rows, sd, select_model,
                   task_name)
from interp.figures.style import FIRST_OF_PAIR, SECOND_OF_PAIR, style


def _aggregate(values: Sequence[tuple[float, float | None]]) -> tuple[float, float, str]:
    """Mean accuracy over rows (prompt variants / seeds) and its error bar, with what it means."""
    accs = [a for a, _ in values]
    if len(values) == 1:
        se = values[0][1]
        return accs[0], se if se is not None else 0.0, "binomial s.e."
    return mean(accs), sd(accs), f"s.d. over {len(values)} variants"


def accuracy_length_figure(rows: Rows, model: str | None = None, source: str = "directional_bias.csv") -> go.Figure:
    """Accuracy vs length, one panel per directional pair (UR/UL, NRFirst/NLFirst, ..., UF/UB, NF/NB).

    >>> from interp.core.tables import read_csv
    >>> fig = accuracy_length_figure(read_csv("tests/fixtures/results/directional_bias.csv"))  # from the repository's root
    >>> len(fig.data) > 0
    True
    """
    rows = table_rows(rows)
    require_columns(rows, REQUIRED_COLUMNS["directional_bias"], source)
    model, rows = select_model(rows, model, source)
    cells: dict[tuple[str, int], list[tuple[float, float | None]]] = defaultdict(list)
    for r in rows:
        acc = accuracy_value(r, source)
        if acc is None:
            continue
        cells[(task_name(r, source), index_value(r, "length", source))].append((acc, accuracy_value(r, source, "stderr")))
    tasks = {t for t, _ in cells}
    pairs = [p for p in DIRECTIONAL_PAIRS if tasks & set(p)]
    if not pairs:
        raise ValueError(f"{source}: no accuracy values to plot for model {model!r}")
    n_rows, n_cols = grid(len(pairs))
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
