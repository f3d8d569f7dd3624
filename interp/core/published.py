"""What each published results table may hold, and the one reader that checks it.

A table read back (to decide the paper's claims, to draw a figure, to publish it) is data that may
have been damaged or tampered with since it was written: a row appended twice doubles n and narrows
an interval, an accuracy of 7.5 or a score of ``inf`` becomes a confident verdict, a model name
``=cmd|...`` becomes a spreadsheet formula in the next table, a cell ``[a](javascript:...)`` a live
link on the site. `read_published` refuses all of these with one line naming the file and the row,
so nothing downstream decides on them. Every kind of table has a rule: a `Schema` where its columns
are known (`SCHEMAS`), else `GENERIC` (names plain and unique, numbers finite, text plain).

Besides each cell, a table as a whole must be possible:

* an accuracy is a count of successes: ``accuracy x n_examples`` is an integer (to 1e-6 per example,
  what a float32 accuracy keeps);
* an interval is one: ``ci_low <= ci_high`` (``lo``/``hi``, ``x_low``/``x_high``), and holds its
  estimate where the schema pairs them;
* a file named for a model (``ablation_<model>...``) holds that model's rows only, and one named for a
  task (``circuit_<model>_<task>...``) that task's;
* one cell is measured once: two rows with one key (the seed aside, unless the kind repeats cells over
  seeds: the random-head control of an ablation) would count twice;
* a head-score table covers every head: layers x heads, no gap.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from interp.core.cells import COLUMN_NAME, COUNT, HEADER, MAX_COUNT, NAME, PLAIN, PROPORTION, RANK, TEXT, Column
from interp.core.naming import RESULT_KINDS, model_label, split_result_stem
from interp.core.tables import csv_lines

__all__ = ["COLUMN_NAME", "GENERIC", "NAME", "PLAIN", "SCHEMAS", "TASK_NAMES", "TEXT", "VERDICTS", "Column", "Schema",
           "published_lines", "read_published", "schema_for"]

VERDICTS = ("supports", "contradicts", "inconclusive", "cannot test")
# The paper's tasks, as `interp.data.tasks.TASK_NAMES` spells them (core imports nothing above it; a test
# keeps the two equal): a row of another spelling ("uf") would be left out of every claim.
TASK_NAMES = ("UL", "UR", "NLFirst", "NRFirst", "NLLast", "NRLast", "UF", "UB", "NF", "NB")
# Tables that span models: a file name's part after the kind is a variant (circuit_sensitivity_planted), not a model.
SPANS_MODELS = frozenset({"claims", "claims_matrix", "circuit_sensitivity", "circuit_sensitivity_summary",
                          "circuit_sensitivity_stops", "planted_sensitivity", "planted_sensitivity_summary"})
COUNT_TOLERANCE = 1e-6  # per example: a float32 accuracy k / n is within 1e-7 of it


@dataclass(frozen=True)
class Schema:
    """A kind of table: its columns, the columns naming a cell (``key``: two rows with one key are
    one measurement written twice), the rule for number columns it does not list (for every
    column it does not list, with ``numbers_only``) and for text columns it does not list, what its
    column names may be, the (proportion, count) pairs that must give whole counts, the (estimate,
    low, high) triples whose estimate lies in its interval, the rows that may repeat a cell under
    several seeds (``seeded``: column, value), and whether it must cover a full grid of heads."""

    columns: Mapping[str, Column]
    key: Sequence[str] = ()
    other_numbers: Column = field(default_factory=Column)
    numbers_only: bool = False
    other_text: Column = field(default_factory=lambda: Column("text"))
    header: object = COLUMN_NAME  # a compiled pattern
    counts: Sequence[tuple[str, str]] = (("accuracy", "n_examples"),)
    estimates: Sequence[tuple[str, str, str]] = ()
    seeded: tuple[str, str] | None = None
    head_grid: bool = False

    def rule(self, name: str, value: object) -> Column:
        """The rule for column ``name`` (``value`` decides for a column the schema does not list).

        >>> rank = SCHEMAS["head_scores"].rule("induction_rank", 3)
        >>> rank.kind, rank.lo
        ('int', 1)
        """
        if name in self.columns:
            return self.columns[name]
        if name.endswith("_rank"):
            return RANK
        is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return self.other_numbers if is_number or self.numbers_only else self.other_text


_MODEL, _TASK = Column("name", required=True), Column("choice", required=True, choices=TASK_NAMES)
_SEED = Column("int", lo=0)
_ACCURACY = {"model": _MODEL, "task": _TASK, "length": Column("int", lo=1, hi=MAX_COUNT, required=True),
             "n_examples": COUNT, "accuracy": PROPORTION, "token_accuracy": Column(lo=0, hi=1), "stderr": Column(lo=0),
             "seed": _SEED}
_CI = {"ci_low": Column(lo=0, hi=1), "ci_high": Column(lo=0, hi=1)}
_SCORE = Column(lo=0, hi=1)  # head scores are mean attention (or a ratio of norms): 0 to 1
_METRIC = Column(lo=-1e4, hi=1e4, required=True)  # a logit difference: no model's reaches 10^4
_OPTIONAL_METRIC = Column(lo=-1e4, hi=1e4)
_LOGPROB = Column(lo=-1e4, hi=0)
_GIT_TASKS = ("revert", "cherry-pick")
# A claim's short reason, as the claims grid shows it: words, numbers and . , ; : ( ) + - only (no markup).
WHY = re.compile(r"[A-Za-z0-9 .,;:()+-]+")
SCHEMAS: dict[str, Schema] = {
    "directional_bias": Schema(_ACCURACY | {"template": Column("name"), "protocol": Column("name"),
                                            "n_shots": Column("int", lo=0, hi=MAX_COUNT), "note": Column("text")},
                               key=("model", "task", "length", "template", "n_shots", "protocol")),
    "head_scores": Schema({"model": _MODEL, "layer": Column("int", lo=0, hi=MAX_COUNT, required=True),
                           "head": Column("int", lo=0, hi=MAX_COUNT, required=True)},
                          key=("model", "layer", "head"), other_numbers=_SCORE, numbers_only=True, head_grid=True),
    # the seed of an ablation row is the random-head control's: its draws repeat a cell, one per seed
    "ablation": Schema(_ACCURACY | _CI | {"condition": Column("name", required=True), "ablation": Column("name"),
                                          "heads": Column("text"), "selected_by": Column("name"),
                                          "delta_accuracy": Column(lo=-1, hi=1), "mean_logprob": Column(hi=0)},
                       key=("model", "condition", "ablation", "task", "length", "heads", "selected_by"),
                       estimates=(("accuracy", "ci_low", "ci_high"),), seeded=("condition", "random")),
    "edge_patching": Schema(_ACCURACY | _CI | {"condition": Column("name", required=True), "adapter": Column("name"),
                                               "format": Column("name"), "shots": Column("int", lo=0, hi=MAX_COUNT),
                                               "bos": Column("bool"), "layers": Column("text"), "heads": Column("text")},
                            key=("model", "adapter", "format", "shots", "bos", "task", "length", "condition",
                                 "layers", "heads"), estimates=(("accuracy", "ci_low", "ci_high"),)),
    "git_history": Schema({"model": _MODEL, "task": Column("choice", required=True, choices=_GIT_TASKS),
                           "order": Column("name"), "n_commits": Column("int", lo=1, hi=MAX_COUNT, required=True),
                           "n_examples": COUNT, "accuracy": PROPORTION, "stderr": Column(lo=0),
                           "token_accuracy": Column(lo=0, hi=1), "mean_logprob": Column(hi=0),
                           "generate_accuracy": Column(lo=0, hi=1), "natural_split": Column(lo=0, hi=1),
                           "n_shots": Column("int", lo=0, hi=MAX_COUNT), "seed": _SEED},
                          key=("model", "task", "n_commits", "n_shots")),
    "lorem_ipsum_summary": Schema({"model": _MODEL, "n_paragraphs": COUNT,
                                   "accuracy": PROPORTION, "tf_accuracy_ambiguous": Column(lo=0, hi=1, nan_allowed=True),
                                   "tf_accuracy_unambiguous": Column(lo=0, hi=1, nan_allowed=True),
                                   "n_ambiguous_positions": Column("int", lo=0, hi=MAX_COUNT),
                                   "n_unambiguous_positions": Column("int", lo=0, hi=MAX_COUNT),
                                   "n_shots": Column("int", lo=0, hi=MAX_COUNT), "seed": _SEED},
                                  key=("model", "n_shots"), other_numbers=Column(nan_allowed=True),
                                  counts=(("accuracy", "n_paragraphs"), ("tf_accuracy_ambiguous", "n_ambiguous_positions"),
                                          ("tf_accuracy_unambiguous", "n_unambiguous_positions"))),
    # model text (the tokens copied, expected and produced) is kept as written and shown escaped
    "lorem_ipsum": Schema({"model": _MODEL, "paragraph": Column("int", lo=0, hi=MAX_COUNT, required=True),
                           **{c: Column("token") for c in ("last_copied", "expected", "produced")},
                           "context": Column("plain")},
                          key=("model", "paragraph"), other_numbers=Column(nan_allowed=True), counts=()),
    "circuit_routes": Schema({"model": _MODEL, "task": _TASK, "length": Column("int", lo=1, hi=MAX_COUNT, required=True),
                              "format": Column("name"), "shots": Column("int", lo=1, hi=MAX_COUNT),
                              "head_set": Column("name", required=True),
                              "prompt": Column("int", lo=0, hi=MAX_COUNT, required=True),
                              "route": Column("name", required=True), "heads": Column("text"), "clean_metric": _METRIC,
                              "counterfactual_metric": _METRIC, "patched_metric": _METRIC,
                              "correct": Column("bool", required=True), "kind": Column("name"), "test": Column("name"),
                              "counterfactual": Column("name"), "removed": Column("int", lo=0, hi=MAX_COUNT),
                              "skipped": Column("int", lo=0, hi=MAX_COUNT),
                              "clean_margin": _OPTIONAL_METRIC, "counterfactual_margin": _OPTIONAL_METRIC,
                              "patched_margin": _OPTIONAL_METRIC, "clean_logprob": _LOGPROB,
                              "counterfactual_logprob": _LOGPROB, "patched_logprob": _LOGPROB,
                              "patched_correct": Column("bool")},
                             key=("model", "task", "length", "format", "shots", "head_set", "route", "kind", "test",
                                  "counterfactual", "prompt")),
    "from_scratch": Schema({"task": _TASK, "positional": Column("name", required=True),
                            "split": Column("name", required=True), "lengths": Column("text", required=True),
                            "accuracy": PROPORTION, "expressible": Column("bool", required=True),
                            "predicted": Column("text"), "n_examples": Column("int", lo=1, hi=MAX_COUNT),
                            "seed": _SEED},
                           key=("task", "positional", "split", "lengths", "size", "steps")),
    "claims": Schema({"claim": Column("plain", required=True), "model": Column("plain", required=True),
                      "value": Column("plain"), "estimate": Column(nan_allowed=True), "lo": Column(nan_allowed=True),
                      "hi": Column(nan_allowed=True), "n": Column("int", lo=0), "verdict": Column("choice", required=True,
                                                                                                  choices=VERDICTS),
                      "source": Column("name"), "note": Column("plain"), "why": Column("text", pattern=WHY)},
                     key=("claim", "model"), counts=()),
    # one column per model: each cell a verdict mark, the number compared and, for a hypothesis, why
    # ("yes +0.80", "- +0.00", "-", "NO +0.12: carried by o-1 directly; o not needed", "- (UB at 0.00 clean)")
    "claims_matrix": Schema({"claim": Column("plain", required=True)}, key=("claim",), header=HEADER, counts=(),
                            other_text=Column("text", pattern=re.compile(
                                rf"(?:yes|NO|\?|-)(?: [+-][0-9]+\.[0-9]{{2}}(?:: {WHY.pattern})?| \({WHY.pattern}\))?"))),
}
# Every other kind (circuit tables, summaries): plain names and text, finite numbers (NaN marks a
# statistic a row does not have), intervals in order, whole counts.
GENERIC = Schema({"model": Column("name"), "task": Column("name")}, other_numbers=Column(nan_allowed=True),
                 other_text=Column("plain"), header=HEADER)


def schema_for(kind: str) -> Schema:
    """The rule for tables of ``kind``: its `Schema`, or `GENERIC` for any other kind the toolkit writes.

    >>> schema_for("circuit_summary") is GENERIC, schema_for("claims").key
    (True, ('claim', 'model'))
    """
    if kind in SCHEMAS:
        return SCHEMAS[kind]
    if kind in RESULT_KINDS:
        return GENERIC
    raise ValueError(f"no tables of kind {kind!r}; expected one of {sorted(RESULT_KINDS)}")


def read_published(path: str | Path, kind: str | None = None) -> list[dict]:
    """The rows of a published table of ``kind`` (by default the kind its file name says), each
    cell checked against the kind's rule (`schema_for`) and the table against the checks above; a
    damaged table is refused with one ``ValueError`` naming the file and the line.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "head_scores_m.csv"
    >>> _ = path.write_text("model,layer,head,induction\\nm,0,0,0.93\\nm,0,1,0.02\\n")
    >>> read_published(path)
    [{'model': 'm', 'layer': 0, 'head': 0, 'induction': 0.93}, {'model': 'm', 'layer': 0, 'head': 1, 'induction': 0.02}]
    >>> _ = path.write_text("model,layer,head,induction\\nm,0,0,inf\\n")
    >>> read_published(path)
    Traceback (most recent call last):
    ValueError: results file ...head_scores_m.csv, line 2: induction is inf, expected a number in [0, 1]
    """
    return [row for _, row in published_lines(path, kind)]


def published_lines(path: str | Path, kind: str | None = None) -> list[tuple[int, dict]]:
    """`read_published`, each row with its line number (for errors of a reader of its own)."""
    path = Path(path)
    stem = path.name.removesuffix(".csv")
    kind = kind or split_result_stem(stem)[0]
    try:
        schema = schema_for(kind)
    except ValueError as err:
        raise ValueError(f"results file {path}: {err}") from None
    if (rest := _named_model(stem, kind)) and not NAME.fullmatch(rest):
        raise ValueError(f"results file {path}: {rest!r} is not a model name or variant (letters, digits and . _ + -)")
    required = [name for name, column in schema.columns.items() if column.required]
    lines = csv_lines(path, required)
    if not lines:
        raise ValueError(f"results file {path} has a header but no rows; re-run the analysis that writes it")
    header = list(lines[0][1])
    if odd := [name for name in header if not schema.header.fullmatch(name)]:
        raise ValueError(f"results file {path}, line 1: column name {odd[0]!r} is not a column of interp's tables")
    rest = rest if "model" in header and kind not in SPANS_MODELS else None
    task = _named_task(rest) if rest is not None and "task" in header else None
    label: str | None = None  # the model's label, once the first row has named it
    pairs = _intervals(header)
    seen: dict[tuple, int] = {}
    sound: set[tuple[str, str]] = set()
    for line, row in lines:
        problem = _cell_problem(schema, row, sound) or _row_problem(schema, row, pairs)
        if problem is None and rest is not None:
            label, problem = _model_problem(rest, label, row, path.name)
        if problem is None and task is not None and row["task"] != task:
            problem = f"task is {row['task']!r}, expected {task!r}, the task the file name says"
        if problem:
            raise ValueError(f"results file {path}, line {line}: {problem}")
        cell = tuple(row.get(c) for c in _key(schema, row) if c in row)
        if schema.key and cell in seen:
            shown = ", ".join(c for c in _key(schema, row) if c in row)
            raise ValueError(f"results file {path}, lines {seen[cell]} and {line}: the same ({shown}) twice, so it "
                             "would count twice; re-run the analysis that writes it")
        seen[cell] = line
    if schema.head_grid:
        _check_grid(path, [row for _, row in lines])
    return lines


def _cell_problem(schema: Schema, row: Mapping, sound: set) -> str | None:
    for name, value in row.items():
        if isinstance(value, str) and (name, value) in sound:
            continue  # labels repeat down a column: each is checked once
        if problem := schema.rule(name, value).problem(value):
            return f"{name} is {problem}"
        if isinstance(value, str):
            sound.add((name, value))
    return None


def _number(value: object) -> float | None:
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if is_number and math.isfinite(value) else None


def _intervals(header: Sequence[str]) -> list[tuple[str, str]]:
    """The (low, high) column pairs of a header: ci_low/ci_high, lo/hi, x_low/x_high, x_lo/x_hi."""
    return [(low, low[:-len(a)] + b) for low in header for a, b in (("low", "high"), ("lo", "hi"))
            if (low == a or low.endswith("_" + a)) and low[:-len(a)] + b in header]


def _row_problem(schema: Schema, row: Mapping, pairs: Sequence[tuple[str, str]]) -> str | None:
    """Whether the row's numbers are possible together: whole counts, intervals in order, estimates inside."""
    for proportion, count in schema.counts:
        p, n = _number(row.get(proportion)), _number(row.get(count))
        if p is not None and n is not None and abs(p * n - round(p * n)) > COUNT_TOLERANCE * max(n, 1):
            return (f"{proportion} is {row[proportion]!r}, expected a whole number of successes out of {count} "
                    f"{row[count]!r} (k / {row[count]!r} for an integer k)")
    for low, high in pairs:
        lo, hi = _number(row.get(low)), _number(row.get(high))
        if lo is not None and hi is not None and lo > hi:
            return f"{low} {row[low]!r} is above {high} {row[high]!r}; expected {low} <= {high}"
    for estimate, low, high in schema.estimates:
        x, lo, hi = (_number(row.get(c)) for c in (estimate, low, high))
        if x is not None and lo is not None and hi is not None and not lo - 1e-9 <= x <= hi + 1e-9:
            return (f"{estimate} {row[estimate]!r} lies outside [{low}, {high}] = [{lo:g}, {hi:g}]; expected an "
                    "interval that holds its estimate")
    return None


def _key(schema: Schema, row: Mapping) -> Sequence[str]:
    if schema.seeded and row.get(schema.seeded[0]) == schema.seeded[1]:
        return (*schema.key, "seed")
    return schema.key


def _named_model(stem: str, kind: str) -> str | None:
    """The part of a file name after its kind, which starts with the model's label (None: no model named)."""
    rest = stem[len(kind) + 1:] if stem.startswith(kind + "_") else ""
    return rest or None


def _fits(label: str, rest: str) -> bool:
    return rest == label or rest.startswith(label + "_")


def _model_problem(rest: str, label: str | None, row: Mapping, file: str) -> tuple[str | None, str | None]:
    """The model's label (fixed by the first row, which must fit the file name's part after the kind,
    ``rest``), and why ``row`` names another model, if it does."""
    mine = model_label(str(row["model"]))
    if label is None and _fits(mine, rest):
        return mine, None
    if mine == label:
        return label, None
    expected = label or rest.split("_")[0]
    return label, f"model is {row['model']!r}, expected {expected!r}, the model the file name says"


def _named_task(rest: str) -> str | None:
    """The task a file name gives after its model (``circuit_<model>_<task>[_...]``), if it gives one."""
    parts = [p for p in rest.split("_")[1:] if p in TASK_NAMES]
    return parts[0] if len(parts) == 1 else None


def _check_grid(path: Path, rows: Sequence[Mapping]) -> None:
    """Every (layer, head) of layers 0..L-1 x heads 0..H-1 once: a score table of some heads would let
    its best head stand for a model it never scored."""
    have = {(int(r["layer"]), int(r["head"])) for r in rows}
    layers, heads = max(l for l, _ in have) + 1, max(h for _, h in have) + 1
    missing = [(l, h) for l in range(layers) for h in range(heads) if (l, h) not in have]
    if missing:
        raise ValueError(f"results file {path}: {len(have)} of the {layers} x {heads} heads (layers 0-{layers - 1}, "
                         f"heads 0-{heads - 1}); missing e.g. {missing[0][0]}.{missing[0][1]}; expected every head of "
                         "the model (re-run analyses/score_heads.py)")
