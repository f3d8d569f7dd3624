"""The edge-patching study's table rows (`EdgeRow`: one condition of a (task, length) cell; `EdgeSweepRow`: one edge
kind patched in one layer alone), their column order, and the rows in short: one line per cell for printing
(`summary_table`), the claim per task with lengths pooled (`claim_summary`), and the layers whose edges alone
matter most (`sweep_summary`). `interp.experiments.edge_study` measures them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

from interp.core.naming import CONDITION_LABELS
from interp.core.stats import mean_and_sem
from interp.core.tables import as_mapping
from interp.measure.teacher_forcing import Accuracy, AnswerScores


def branch_summary(scores: AnswerScores) -> dict:
    """``Accuracy``'s columns, and the standard error of the mean log-prob (the figures' error bars).

    >>> sorted(branch_summary(AnswerScores.from_rows([(True, 1.0, -0.5, ()), (False, 0.5, -1.5, ())])))[:3]
    ['accuracy', 'ci_high', 'ci_low']
    """
    return Accuracy.of(scores).as_row() | {"mean_logprob_se": mean_and_sem(scores.mean_logprob.tolist())[1]}


def layers_label(layers: Sequence[int] | None) -> str:
    """``"all"`` or ``"0;5"``.

    >>> layers_label((0, 5))
    '0;5'
    """
    return "all" if layers is None else ";".join(map(str, layers))


@dataclass(frozen=True)
class _EdgeMeasurement:
    """What every edge-table row holds: the run's settings, the cell, and the copy's exact match with
    its binomial standard error and Wilson interval ([`Accuracy`][interp.measure.teacher_forcing.Accuracy])
    and mean log-prob with its standard error."""

    model: str
    adapter: str | None
    format: str
    shots: int
    seed: int
    bos: bool
    task: str
    length: int
    n_examples: int
    accuracy: float
    stderr: float
    ci_low: float
    ci_high: float
    mean_logprob: float
    token_accuracy: float
    mean_logprob_se: float


@dataclass(frozen=True)
class EdgeRow(_EdgeMeasurement):
    """One condition of one (task, length) cell."""

    condition: str  # none, induction or anti_induction (edges removed)
    layers: str  # the patched layers ("all" or "0;5")
    heads: str


@dataclass(frozen=True)
class EdgeSweepRow(_EdgeMeasurement):
    """One edge kind patched in one layer alone, on the sweep's prompts of a cell, with the change from
    the clean continuation of the same prompts."""

    edge: str  # induction or anti_induction
    layer: int
    delta_accuracy: float
    delta_mean_logprob: float
    heads: str


# The tables' column order: the cell, what was patched, then the measurement.
_SETTINGS = ["model", "adapter", "format", "shots", "seed", "bos", "task", "length"]
_MEASURED = [f.name for f in fields(_EdgeMeasurement) if f.name not in _SETTINGS]
EDGE_COLUMNS = [*_SETTINGS, "condition", *_MEASURED, "layers", "heads"]
EDGE_SWEEP_COLUMNS = [*_SETTINGS, "edge", "layer", *_MEASURED, "delta_accuracy", "delta_mean_logprob", "heads"]


def summary_table(rows: Sequence[EdgeRow | Mapping]) -> list[dict]:
    """One line per (task, length): accuracy [95% CI] and mean log-prob +- s.e. per condition, for printing.

    >>> row = {"task": "UF", "length": 3, "n_examples": 4, "condition": "none", "accuracy": 0.5, "ci_low": 0.15,
    ...        "ci_high": 0.85, "mean_logprob": -1.5, "mean_logprob_se": 0.25}
    >>> summary_table([row])[0]["acc none"]
    '0.50 [0.15, 0.85]'
    """
    rows = [as_mapping(row) for row in rows]
    lines: dict[tuple, dict] = {}
    for row in rows:
        line = lines.setdefault((row["task"], row["length"]), {"task": row["task"], "L": row["length"], "n": row["n_examples"]})
        line[f"acc {row['condition']}"] = f"{row['accuracy']:.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}]"
    for row in rows:
        line = lines[(row["task"], row["length"])]
        line[f"log-prob {row['condition']}"] = f"{row['mean_logprob']:.2f} ± {row['mean_logprob_se']:.2f}"
    return list(lines.values())


def claim_summary(rows: Sequence[EdgeRow | Mapping]) -> list[str]:
    """One line per task: accuracy pooled over lengths under each condition, and the change from none.

    >>> rows = [{"task": "UF", "condition": c, "accuracy": a, "n_examples": 10}
    ...         for c, a in (("none", 1.0), ("induction", 0.2), ("anti_induction", 0.9))]
    >>> claim_summary(rows)[0].split("; ")[1]
    'induction edges removed 0.20 [0.06, 0.51] (-0.80)'
    """
    rows = [as_mapping(row) for row in rows]
    pooled: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        counts = pooled[(row["task"], row["condition"])]
        counts[0] += round(row["accuracy"] * row["n_examples"])
        counts[1] += row["n_examples"]
    lines = []
    for task in dict.fromkeys(row["task"] for row in rows):
        base = pooled[(task, "none")]
        base_acc = base[0] / base[1]
        parts = [f"{task}: no intervention {base_acc:.2f}"]
        for condition in ("induction", "anti_induction"):
            pooled_accuracy = Accuracy.of_counts(*pooled[(task, condition)])
            acc, lo, hi = pooled_accuracy.accuracy, pooled_accuracy.ci_low, pooled_accuracy.ci_high
            parts.append(f"{CONDITION_LABELS[condition]} {acc:.2f} [{lo:.2f}, {hi:.2f}] ({acc - base_acc:+.2f})")
        lines.append("; ".join(parts) + f" (all lengths pooled, n = {base[1]})")
    return lines


def sweep_summary(rows: Sequence[EdgeSweepRow | Mapping], top: int = 3) -> list[dict]:
    """Per (task, length, edge kind): the layers whose edges alone lower the copy's mean log-prob most.

    >>> rows = [{"task": "UF", "length": 5, "edge": "induction", "layer": layer, "n_examples": 2,
    ...          "delta_mean_logprob": delta, "delta_accuracy": 0.0} for layer, delta in enumerate((-0.1, -2.0, 0.3))]
    >>> sweep_summary(rows, top=2)[0]["top layers (Δ log-prob)"]
    '1 (-2.00), 0 (-0.10)'
    """
    groups: dict[tuple, list[Mapping]] = defaultdict(list)
    for row in map(as_mapping, rows):
        groups[(row["task"], row["length"], row["edge"])].append(row)
    lines = []
    for (task, length, edge), group in groups.items():
        best = sorted(group, key=lambda r: r["delta_mean_logprob"])[:top]
        lines.append({"task": task, "L": length, "edges": edge, "n": group[0]["n_examples"],
                      "top layers (Δ log-prob)": ", ".join(f"{r['layer']} ({r['delta_mean_logprob']:+.2f})" for r in best),
                      "largest Δ accuracy": f"{min(r['delta_accuracy'] for r in group):+.2f}"})
    return lines
