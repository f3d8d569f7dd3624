"""Head-score tables on disk, reused only when they are whole and were made the same way.

A table ``head_scores_<model>.csv/.json`` is read back for a re-run only when its metadata
matches what the run would compute (model, dtype, probe, prompts), every layer x head of the
model has exactly one row with finite scores, and the CSV agrees with the rows kept in the JSON.
Anything else (a truncated CSV, a deleted CSV, fp32 scores offered to a bf16 run, a NaN) is a
reason to compute the scores again, which the caller logs in one line."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from torch import nn

from interp.core.tables import json_ready, read_csv, stem_file
from interp.measure.head_scores import HeadScores


def model_dtype(model: nn.Module) -> str:
    """The dtype of a model's weights as tables record it (``"float32"``, ``"bfloat16"``).

    >>> from interp.models import load_model
    >>> model_dtype(load_model("tiny-llama", device="cpu"))
    'float32'
    """
    return str(next(model.parameters()).dtype).removeprefix("torch.")


def _metadata_problem(stored: object, wanted: Mapping) -> str | None:
    if not isinstance(stored, dict):
        return "its metadata is not readable"
    for key, value in wanted.items():
        if stored.get(key) != json_ready(value):
            return f"it was made with another {key} ({stored.get(key)!r}, this run: {json_ready(value)!r})"
    return None


def _rows_problem(rows: Sequence[dict], n_layers: int, n_heads: int, names: Sequence[str], model: str) -> str | None:
    missing = [n for n in ("layer", "head", *names) if rows and n not in rows[0]]
    if not rows or missing:
        return f"it lacks columns {missing}" if rows else "it has no rows"
    seen = set()
    for row in rows:
        key = (row.get("layer"), row.get("head"))
        if not all(isinstance(i, int) for i in key) or not (0 <= key[0] < n_layers and 0 <= key[1] < n_heads):
            return f"it has a row for head {key[0]}.{key[1]}, which this model ({n_layers} x {n_heads}) lacks"
        if key in seen:
            return f"head {key[0]}.{key[1]} appears twice"
        seen.add(key)
        if row.get("model") != model:
            return f"a row names model {row.get('model')!r}, not {model!r}"
        bad = [n for n in names if not isinstance(row.get(n), (int, float)) or not math.isfinite(row[n])]
        if bad:
            return f"head {key[0]}.{key[1]} has no finite {bad[0]} score"
    if len(seen) != n_layers * n_heads:
        return f"it has {len(seen)} of the model's {n_layers * n_heads} heads"
    return None


def _same_rows(csv_rows: Sequence[dict], json_rows: object, names: Sequence[str]) -> bool:
    if not isinstance(json_rows, list) or len(json_rows) != len(csv_rows):
        return False
    try:
        return all(a["layer"] == b["layer"] and a["head"] == b["head"]
                   and all(math.isclose(float(a[n]), float(b[n]), abs_tol=1e-9) for n in names)
                   for a, b in zip(csv_rows, json_rows))
    except (KeyError, TypeError, ValueError):
        return False


def read_head_scores(stem: str | Path, wanted: Mapping, n_layers: int, n_heads: int,
                     names: Sequence[str]) -> tuple[HeadScores | None, str]:
    """The scores stored at ``stem`` when they can be trusted, else ``(None, why not)``.

    >>> scores, why = read_head_scores("results/head_scores_tiny-llama", {"model": "tiny-llama"}, 2, 4,
    ...                                ["induction", "anti_induction"])
    """
    csv_path, json_path = stem_file(stem, "csv"), stem_file(stem, "json")
    if not json_path.exists() and not csv_path.exists():
        return None, f"there is no {csv_path.name} yet"
    try:
        stored = json.loads(json_path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as err:
        return None, f"{json_path.name} is not readable ({err})"
    problem = _metadata_problem(stored.get("metadata") if isinstance(stored, dict) else None, wanted)
    if problem is not None:
        return None, problem
    try:
        rows = read_csv(csv_path)
    except (OSError, ValueError) as err:
        return None, str(err)
    problem = _rows_problem(rows, n_layers, n_heads, names, str(wanted.get("model", "")))
    if problem is None and not _same_rows(rows, stored.get("rows"), names):
        problem = f"{csv_path.name} disagrees with the rows kept in {json_path.name}"
    if problem is not None:
        return None, f"{csv_path.name}: {problem}"
    return HeadScores.from_rows(rows), ""
