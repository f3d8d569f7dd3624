"""Fine-tuning curves and summaries, and from-scratch training by length bin."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.data.tasks import TASK_NAMES, get_task
from interp.figures.rows import (REQUIRED_COLUMNS, Rows, accuracy_value, index_value, mean, number, require_columns, table_rows, task_name,
                   task_order)
from interp.figures.style import OKABE_ITO, PALETTE, SPLIT_STYLE, style


def finetune_figure(rows: Rows, model: str = "", task: str = "", source: str = "finetune.csv") -> go.Figure:
    """In- vs out-of-distribution accuracy (and loss) over fine-tuning steps.

    >>> from interp.core.tables import read_csv
    >>> fig = finetune_figure(read_csv("tests/fixtures/results/finetune_tiny-model_UB.csv"), "tiny-model", "UB")
    >>> len(fig.data) > 0
    True
    """
    rows = table_rows(rows)
    require_columns(rows, REQUIRED_COLUMNS["finetune"], source)
    if task:
        try:
            task = get_task(task).name
        except ValueError as err:
            raise ValueError(f"{source}: {err}") from None
    has_loss = any(number(r, "loss", source, True) is not None for r in rows if "loss" in r)
    fig = make_subplots(rows=1, cols=2 if has_loss else 1, horizontal_spacing=0.12,
                        subplot_titles=["accuracy", "loss on the answer"] if has_loss else None)
    splits = list(dict.fromkeys(str(r["split"]) for r in rows))
    for split in splits:
        by_step: dict[int, list[Mapping]] = defaultdict(list)
        for r in rows:
            if str(r["split"]) == split:
                by_step[index_value(r, "step", source)].append(r)
        steps = sorted(by_step)
        name, colour, dash = SPLIT_STYLE.get(split, (split, PALETTE[len(SPLIT_STYLE) % len(PALETTE)], "dot"))
        accs, lens, losses = [], [], []
        for s in steps:
            values = [a for a in (accuracy_value(r, source) for r in by_step[s]) if a is not None]
            accs.append(100 * mean(values) if values else None)
            lengths = sorted({index_value(r, "length", source) for r in by_step[s]})
            lens.append(f"{lengths[0]}–{lengths[-1]}" if len(lengths) > 1 else str(lengths[0]))
            loss_values = [v for v in (number(r, "loss", source, True) for r in by_step[s] if "loss" in r) if v is not None]
            losses.append(mean(loss_values) if loss_values else None)
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
    """Accuracy at the last step of each fine-tuning run, in vs out of distribution, per task.

    >>> from interp.core.tables import read_csv
    >>> rows = read_csv("tests/fixtures/results/finetune_tiny-model_UB.csv")
    >>> fig = finetune_summary_figure({("tiny-model", "UB"): rows, ("tiny-model", "UF"): rows})
    >>> len(fig.data) > 0
    True
    """
    if not runs:
        raise ValueError(f"{source}: no fine-tuning results")
    labels, per_split = [], defaultdict(dict)
    models = sorted({m for m, _ in runs})
    for (model, task), rows in sorted(runs.items(), key=lambda kv: (kv[0][0], TASK_NAMES.index(kv[0][1]))):
        rows = table_rows(rows)
        require_columns(rows, REQUIRED_COLUMNS["finetune"], f"{source} ({model}, {task})")
        last = max(index_value(r, "step", source) for r in rows)
        label = task if len(models) == 1 else f"{task} ({model})"
        labels.append(label)
        for r in rows:
            if index_value(r, "step", source) == last:
                acc = accuracy_value(r, source)
                if acc is not None:
                    per_split[str(r["split"])].setdefault(label, []).append(acc)
    fig = go.Figure()
    for split, values in per_split.items():
        name, colour, _ = SPLIT_STYLE.get(split, (split, OKABE_ITO["green"], "dot"))
        xs = [l for l in labels if l in values]
        fig.add_trace(go.Bar(x=xs, y=[100 * mean(values[x]) for x in xs], name=name, marker_color=colour,
                             hovertemplate=f"{name}<br>%{{x}}: %{{y:.1f}}%<extra></extra>"))
    fig.update_layout(barmode="group")
    fig.update_xaxes(title_text="task", categoryorder="array", categoryarray=labels)
    fig.update_yaxes(title_text="accuracy at the last step (%)", range=[0, 103])
    title = f"Fine-tuned accuracy by task ({models[0]})" if len(models) == 1 else "Fine-tuned accuracy by task"
    return style(fig, title, max(560, 160 + 90 * len(labels)), 460,
                 note="Exact-match accuracy at the final step, averaged over the lengths of each split.")


def _bin_start(text: str) -> float:
    match = re.match(r"\s*(\d+)", str(text))
    return float(match.group(1)) if match else math.inf


def from_scratch_figure(rows: Rows, source: str = "from_scratch.csv") -> go.Figure:
    """Accuracy of small transformers trained from scratch, per task and length bin; one panel per
    positional encoding. Tick marks show C-RASP[pos] expressibility.

    >>> from interp.core.tables import read_csv
    >>> fig = from_scratch_figure(read_csv("tests/fixtures/results/from_scratch.csv"))  # from the repository's root
    >>> len(fig.data) > 0
    True
    """
    rows = table_rows(rows)
    require_columns(rows, REQUIRED_COLUMNS["from_scratch"], source)
    positionals = list(dict.fromkeys(str(r["positional"]) for r in rows))
    tasks = task_order(task_name(r, source) for r in rows)
    bins = sorted({(str(r["split"]), str(r["lengths"])) for r in rows}, key=lambda b: (_bin_start(b[1]), b[0]))
    bin_colours = [OKABE_ITO[c] for c in ("blue", "orange", "vermillion", "purple", "green", "sky_blue")]
    expressible: dict[str, bool] = {}
    for r in rows:
        value = r.get("expressible")
        task = task_name(r, source)
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
                    acc = accuracy_value(r, source)
                    if acc is not None:
                        values[task_name(r, source)].append(acc)
            xs = [t for t in tasks if t in values]
            if not xs:
                continue
            name = f"{lengths} ({'in distribution' if split == 'id' else 'out of distribution' if split == 'ood' else split})"
            fig.add_trace(go.Bar(x=xs, y=[100 * mean(values[t]) for t in xs], name=name, legendgroup=name,
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
