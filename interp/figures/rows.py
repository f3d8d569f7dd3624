"""Reading results rows for figures: required columns, numbers, tasks, models, with errors that
name the file and the row."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from interp.core.tables import read_csv
from interp.data.tasks import TASK_NAMES, get_task

Rows = Sequence[Mapping[str, Any]]

# Columns each figure needs (results files may carry more).
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "directional_bias": ("model", "task", "length", "accuracy", "stderr"),
    "head_scores": ("model", "layer", "head", "induction", "anti_induction"),
    "ablation": ("model", "condition", "ablation", "task", "length", "accuracy"),
    "head_sweep": ("model", "task", "length", "layer", "head", "accuracy", "delta_accuracy"),
    "finetune": ("step", "split", "length", "accuracy"),
    "from_scratch": ("task", "positional", "split", "lengths", "accuracy"),
}


ABLATION_CONDITIONS = ("baseline", "induction", "anti_induction", "random")

# What a malformed table can raise while its figure is drawn: each is reported for that file alone.
BAD_TABLE_ERRORS: tuple[type[Exception], ...] = (ValueError, TypeError, KeyError, IndexError, ArithmeticError)


def table_error(path: str | Path, err: Exception) -> str:
    """One line saying which results file could not be drawn, and why."""
    message = str(err) if isinstance(err, ValueError) else f"{type(err).__name__}: {err}"
    return message if str(path) in message else f"results file {path}: {message}"


def load_results(path: str | Path, kind: str) -> list[dict]:
    """Rows of a results file, with a clear error naming the file when a needed column is missing."""
    if kind not in REQUIRED_COLUMNS:
        raise ValueError(f"kind={kind!r}; expected one of {sorted(REQUIRED_COLUMNS)}")
    rows = read_csv(path, required=REQUIRED_COLUMNS[kind])
    if not rows:
        raise ValueError(f"results file {path} has a header but no rows")
    return rows


def require_columns(rows: Rows, columns: Iterable[str], source: str) -> None:
    if not rows:
        raise ValueError(f"{source}: no rows to plot")
    have = set().union(*(r.keys() for r in rows))
    missing = [c for c in columns if c not in have]
    if missing:
        raise ValueError(f"{source} lacks column(s) {missing}; it has {sorted(have)}")


def number(row: Mapping, column: str, source: str, allow_missing: bool = False) -> float | None:
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


def accuracy_value(row: Mapping, source: str, column: str = "accuracy") -> float | None:
    value = number(row, column, source, allow_missing=True)
    if value is not None and not -1e-9 <= value <= 1 + 1e-9:
        raise ValueError(f"{source}: {column} must be a fraction in [0, 1], got {value} (row {dict(row)})")
    return value


def task_name(row: Mapping, source: str) -> str:
    try:
        return get_task(row.get("task")).name
    except ValueError as err:
        raise ValueError(f"{source}: {err}") from None


def index_value(row: Mapping, column: str, source: str) -> int:
    value = number(row, column, source)
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


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def sd(values: Sequence[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def task_order(tasks: Iterable[str]) -> list[str]:
    present = set(tasks)
    return [t for t in TASK_NAMES if t in present]


def grid(n_items: int, max_cols: int = 3) -> tuple[int, int]:
    cols = min(max_cols, n_items)
    return math.ceil(n_items / cols), cols


def colorbar_x(fig: go.Figure, col: int) -> float:
    axis = fig.layout["xaxis" if col == 1 else f"xaxis{col}"]
    return axis.domain[1] + 0.005
