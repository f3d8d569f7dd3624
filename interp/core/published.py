"""What each published results table may hold, and the one reader that checks it.

A table read back (to decide the paper's claims, to draw a figure) is data that may have been
damaged or tampered with since it was written: a row appended twice doubles n and narrows an
interval, an accuracy of 7.5 or a score of ``inf`` becomes a confident verdict, a model name
``=cmd|...`` becomes a spreadsheet formula in the next table. `read_published` refuses all
of these with one line naming the file and the row, so nothing downstream decides on them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from interp.core.naming import split_result_stem
from interp.core.tables import csv_lines

# Names that label rows (models, tasks, conditions): what the file-naming scheme allows, plus "/"
# for a model loaded from a folder (named by its last part).
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+/-]*")
COLUMN_NAME = re.compile(r"[A-Za-z0-9_]+")
# Free text a table may carry (head lists, length ranges, notes): no markup, no formula, no line break.
TEXT = re.compile(r"[A-Za-z0-9 ._+;,:()/-]*")


@dataclass(frozen=True)
class Column:
    """What one column may hold: ``kind`` is ``number``, ``int``, ``name``, ``text`` or ``bool``;
    numbers lie in ``[lo, hi]`` and are finite; ``required`` columns are present and never empty."""

    kind: str = "number"
    lo: float = -math.inf
    hi: float = math.inf
    required: bool = False
    nan_allowed: bool = False  # a statistic that is undefined for some rows (a share of no events)

    def problem(self, value: object) -> str | None:
        """Why ``value`` (as parsed from CSV) does not fit, or None.

        >>> Column(lo=0, hi=1).problem(7.5), Column("int", lo=1).problem(0.5)
        ('7.5, expected a number in [0, 1]', '0.5, expected an integer >= 1')
        """
        if value is None:
            return "empty, expected a value" if self.required else None
        if self.kind in ("number", "int"):
            is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
            integral = is_number and math.isfinite(value) and float(value).is_integer()
            if is_number and math.isnan(value) and self.nan_allowed and self.kind == "number":
                return None
            if not is_number or not math.isfinite(value) or not self.lo <= value <= self.hi \
                    or (self.kind == "int" and not integral):
                return f"{value!r}, expected {self._expected()}"
            return None
        if self.kind == "bool":
            return None if isinstance(value, bool) else f"{value!r}, expected True or False"
        pattern = NAME if self.kind == "name" else TEXT
        if not pattern.fullmatch(str(value)):
            what = "a name (letters, digits and . _ + - /)" if self.kind == "name" else "plain text"
            return f"{str(value)!r}, expected {what}"
        return None

    def _expected(self) -> str:
        what = "an integer" if self.kind == "int" else "a number"
        if math.isfinite(self.lo) and math.isfinite(self.hi):
            return f"{what} in [{_g(self.lo)}, {_g(self.hi)}]"
        if math.isfinite(self.lo):
            return f"{what} >= {_g(self.lo)}"
        return f"a finite {what.split()[-1]}"


def _g(x: float) -> str:
    return f"{x:g}"


PROPORTION = Column(lo=0, hi=1, required=True)
COUNT = Column("int", lo=1, required=True)
RANK = Column("int", lo=1)


@dataclass(frozen=True)
class Schema:
    """A kind of table: its columns, the columns naming a cell (``key``: two rows with one key are
    one measurement written twice), and the rule for number columns it does not list (for every
    column it does not list, with ``numbers_only``)."""

    columns: Mapping[str, Column]
    key: Sequence[str] = ()
    other_numbers: Column = field(default_factory=Column)
    numbers_only: bool = False

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
        return self.other_numbers if is_number or self.numbers_only else Column("text")


_ACCURACY = {"model": Column("name", required=True), "task": Column("name", required=True),
             "length": Column("int", lo=1, required=True), "n_examples": COUNT, "accuracy": PROPORTION,
             "token_accuracy": Column(lo=0, hi=1), "stderr": Column(lo=0), "seed": Column("int", lo=0)}
_SCORE = Column(lo=0, hi=1)  # head scores are mean attention (or a ratio of norms): 0 to 1
SCHEMAS: dict[str, Schema] = {
    "directional_bias": Schema(_ACCURACY | {"template": Column("name"), "protocol": Column("name"),
                                            "n_shots": Column("int", lo=0), "note": Column("text")},
                               key=("model", "task", "length", "template", "n_shots", "protocol", "seed")),
    "head_scores": Schema({"model": Column("name", required=True), "layer": Column("int", lo=0, required=True),
                           "head": Column("int", lo=0, required=True)},
                          key=("model", "layer", "head"), other_numbers=_SCORE, numbers_only=True),
    "ablation": Schema(_ACCURACY | {"condition": Column("name", required=True), "ablation": Column("name"),
                                    "heads": Column("text"), "selected_by": Column("name"),
                                    "delta_accuracy": Column(lo=-1, hi=1), "ci_low": Column(lo=0, hi=1),
                                    "ci_high": Column(lo=0, hi=1), "mean_logprob": Column(hi=0)},
                       key=("model", "condition", "ablation", "seed", "task", "length", "heads", "selected_by")),
    "edge_patching": Schema(_ACCURACY | {"condition": Column("name", required=True), "adapter": Column("name"),
                                         "format": Column("name"), "shots": Column("int", lo=0), "bos": Column("bool"),
                                         "layers": Column("text"), "heads": Column("text"),
                                         "ci_low": Column(lo=0, hi=1), "ci_high": Column(lo=0, hi=1)},
                            key=("model", "adapter", "format", "shots", "seed", "bos", "task", "length", "condition",
                                 "layers", "heads")),
    "git_history": Schema({"model": Column("name", required=True), "task": Column("name", required=True),
                           "order": Column("name"), "n_commits": Column("int", lo=1, required=True), "n_examples": COUNT,
                           "accuracy": PROPORTION, "stderr": Column(lo=0), "token_accuracy": Column(lo=0, hi=1),
                           "mean_logprob": Column(hi=0), "generate_accuracy": Column(lo=0, hi=1),
                           "natural_split": Column(lo=0, hi=1), "n_shots": Column("int", lo=0),
                           "seed": Column("int", lo=0)},
                          key=("model", "task", "n_commits", "n_shots", "seed")),
    "lorem_ipsum_summary": Schema({"model": Column("name", required=True), "n_paragraphs": COUNT,
                                   "accuracy": PROPORTION, "tf_accuracy_ambiguous": Column(lo=0, hi=1, nan_allowed=True),
                                   "tf_accuracy_unambiguous": Column(lo=0, hi=1, nan_allowed=True),
                                   "n_ambiguous_positions": Column("int", lo=0),
                                   "n_unambiguous_positions": Column("int", lo=0), "n_shots": Column("int", lo=0),
                                   "seed": Column("int", lo=0)},
                                  key=("model", "n_shots", "seed"), other_numbers=Column(nan_allowed=True)),
    "circuit_routes": Schema({"model": Column("name", required=True), "task": Column("name", required=True),
                              "length": Column("int", lo=1, required=True), "format": Column("name"),
                              "shots": Column("int", lo=1), "head_set": Column("name", required=True),
                              "prompt": Column("int", lo=0, required=True), "route": Column("name", required=True),
                              "heads": Column("text"), "clean_metric": Column(required=True),
                              "counterfactual_metric": Column(required=True), "patched_metric": Column(required=True),
                              "correct": Column("bool", required=True)},
                             key=("model", "task", "length", "format", "shots", "head_set", "route", "prompt")),
    "from_scratch": Schema({"task": Column("name", required=True), "positional": Column("name", required=True),
                            "split": Column("name", required=True), "lengths": Column("text", required=True),
                            "accuracy": PROPORTION, "expressible": Column("bool", required=True),
                            "predicted": Column("text"), "n_examples": Column("int", lo=1), "seed": Column("int", lo=0)},
                           key=("task", "positional", "split", "lengths", "seed", "size", "steps")),
}


def read_published(path: str | Path, kind: str | None = None) -> list[dict]:
    """The rows of a published table of ``kind`` (by default the kind its file name says), each
    cell checked against the kind's `Schema`; a damaged table is refused with one
    ``ValueError`` naming the file and the line.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "head_scores_m.csv"
    >>> _ = path.write_text("model,layer,head,induction\\nm,0,1,0.93\\n")
    >>> read_published(path)
    [{'model': 'm', 'layer': 0, 'head': 1, 'induction': 0.93}]
    >>> _ = path.write_text("model,layer,head,induction\\nm,0,1,inf\\n")
    >>> read_published(path)
    Traceback (most recent call last):
    ValueError: results file ...head_scores_m.csv, line 2: induction is inf, expected a number in [0, 1]
    """
    path = Path(path)
    kind = kind or split_result_stem(path.name.split(".csv")[0])[0]
    if kind not in SCHEMAS:
        raise ValueError(f"results file {path}: no schema for tables of kind {kind!r}; expected one of {sorted(SCHEMAS)}")
    schema = SCHEMAS[kind]
    required = [name for name, column in schema.columns.items() if column.required]
    lines = csv_lines(path, required)
    if not lines:
        raise ValueError(f"results file {path} has a header but no rows; re-run the analysis that writes it")
    if odd := [name for name in lines[0][1] if not COLUMN_NAME.fullmatch(name)]:
        raise ValueError(f"results file {path}, line 1: column name {odd[0]!r} is not a column of interp's tables")
    seen: dict[tuple, int] = {}
    key = [c for c in schema.key if c in lines[0][1]]
    for line, row in lines:
        for name, value in row.items():
            problem = schema.rule(name, value).problem(value)
            if problem:
                raise ValueError(f"results file {path}, line {line}: {name} is {problem}")
        cell = tuple(row[c] for c in key)
        if cell in seen:
            raise ValueError(f"results file {path}, lines {seen[cell]} and {line}: the same "
                             f"({', '.join(key)}) twice, so it would count twice; re-run the analysis that writes it")
        seen[cell] = line
    return [row for _, row in lines]
