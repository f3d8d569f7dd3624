"""Reading results rows for figures: required columns, numbers, tasks, models, with errors that
name the file and the row."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


from interp.core.tables import as_mapping, read_csv
from interp.data.tasks import TASK_NAMES, get_task

Rows = Sequence[Any]  # table rows (column -> value mappings) or a study's dataclass rows: see table_rows

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
    """One line saying which results file could not be drawn, and why.

    >>> table_error("results/x.csv", KeyError("task"))
    "results file results/x.csv: KeyError: 'task'"
    """
    message = str(err) if isinstance(err, ValueError) else f"{type(err).__name__}: {err}"
    return message if str(path) in message else f"results file {path}: {message}"


def load_results(path: str | Path, kind: str) -> list[dict]:
    """Rows of a results file, with a clear error naming the file when a needed column is missing.

    >>> rows = load_results("tests/fixtures/results/ablation.csv", "ablation")  # from the repository's root
    >>> len(rows), models_in(rows)
    (33, ['tiny-model'])
    """
    if kind not in REQUIRED_COLUMNS:
        raise ValueError(f"kind={kind!r}; expected one of {sorted(REQUIRED_COLUMNS)}")
    rows = read_csv(path, required=REQUIRED_COLUMNS[kind])
    if not rows:
        raise ValueError(f"results file {path} has a header but no rows")
    return rows


def table_rows(rows: Iterable[Any]) -> list[Mapping[str, Any]]:
    """``rows`` as column -> value mappings: rows read from a table stay as they are, a study's
    dataclass rows (``AblationRow``, ...) are read by their fields, so a study's result feeds a figure.

    >>> from interp.experiments.head_ablation import AblationRow
    >>> row = AblationRow("m", "baseline", "none", None, "UF", 5, 10, 0.5, 0.2, 0.8, 0.0, None, "", "")
    >>> table_rows([row])[0]["accuracy"], table_rows([{"accuracy": "0.5"}])
    (0.5, [{'accuracy': '0.5'}])
    """
    return [as_mapping(r) for r in rows]


def require_columns(rows: Rows, columns: Iterable[str], source: str) -> None:
    """Fail, naming ``source``, when ``rows`` is empty or lacks one of ``columns``.

    >>> require_columns([{"task": "UF"}], ["task", "accuracy"], "ablation.csv")
    Traceback (most recent call last):
    ...
    ValueError: ablation.csv lacks column(s) ['accuracy']; it has ['task']
    """
    if not rows:
        raise ValueError(f"{source}: no rows to plot")
    have = set().union(*(r.keys() for r in rows))
    missing = [c for c in columns if c not in have]
    if missing:
        raise ValueError(f"{source} lacks column(s) {missing}; it has {sorted(have)}")


def number(row: Mapping, column: str, source: str, allow_missing: bool = False) -> float | None:
    """``row[column]`` as a float, with an error naming ``source`` when it is not a number (empty or NaN: None when ``allow_missing``).

    >>> number({"accuracy": "0.5"}, "accuracy", "ablation.csv"), number({"accuracy": ""}, "accuracy", "x", allow_missing=True)
    (0.5, None)
    """
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
    """``row[column]`` as a fraction in [0, 1] (None when empty), with an error naming ``source`` otherwise.

    >>> accuracy_value({"accuracy": "0.75"}, "ablation.csv")
    0.75
    """
    value = number(row, column, source, allow_missing=True)
    if value is not None and not -1e-9 <= value <= 1 + 1e-9:
        raise ValueError(f"{source}: {column} must be a fraction in [0, 1], got {value} (row {dict(row)})")
    return value


def task_name(row: Mapping, source: str) -> str:
    """The row's task under its canonical name, with an error naming ``source`` for an unknown one.

    >>> task_name({"task": "uf"}, "ablation.csv")
    'UF'
    """
    try:
        return get_task(row.get("task")).name
    except ValueError as err:
        raise ValueError(f"{source}: {err}") from None


def index_value(row: Mapping, column: str, source: str) -> int:
    """``row[column]`` as a non-negative integer (a length, a layer), with an error naming ``source``.

    >>> index_value({"length": "10.0"}, "length", "ablation.csv")
    10
    """
    value = number(row, column, source)
    if value != int(value) or value < 0:
        raise ValueError(f"{source}: {column} must be a non-negative integer, got {row.get(column)!r}")
    return int(value)


def select_model(rows: Rows, model: str | None, source: str) -> tuple[str, list[Mapping]]:
    """The rows of ``model``; with ``model=None`` the file must hold exactly one model.

    >>> select_model([{"model": "a", "x": 1}, {"model": "b", "x": 2}], "b", "t.csv")
    ('b', [{'model': 'b', 'x': 2}])
    """
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
    """The models of ``rows``, in order of first appearance.

    >>> models_in([{"model": "b"}, {"model": "a"}, {"model": "b"}])
    ['b', 'a']
    """
    return list(dict.fromkeys(str(r.get("model")) for r in rows))


def mean(values: Sequence[float]) -> float:
    """The arithmetic mean (of a non-empty sequence).

    >>> mean([1.0, 2.0, 6.0])
    3.0
    """
    return sum(values) / len(values)


def sd(values: Sequence[float]) -> float:
    """The sample standard deviation; 0 for a single value.

    >>> sd([1.0, 3.0]), sd([5.0])
    (1.4142135623730951, 0.0)
    """
    return statistics.stdev(values) if len(values) > 1 else 0.0


def task_order(tasks: Iterable[str]) -> list[str]:
    """The tasks present, in the paper's order (`interp.data.tasks.TASK_NAMES`).

    >>> task_order({"UB", "UF", "UL"})
    ['UL', 'UF', 'UB']
    """
    present = set(tasks)
    return [t for t in TASK_NAMES if t in present]


def grid(n_items: int, max_cols: int = 3) -> tuple[int, int]:
    """(rows, columns) of a panel grid for ``n_items``, at most ``max_cols`` wide.

    >>> grid(5), grid(2)
    ((2, 3), (1, 2))
    """
    cols = min(max_cols, n_items)
    return math.ceil(n_items / cols), cols

