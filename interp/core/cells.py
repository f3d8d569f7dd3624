"""What one cell of a published table may hold: `Column`, and the patterns its text must match.

A cell read back is data that may have been damaged or tampered with since it was written; these
rules say what a sound one looks like, so `interp.core.published.read_published` can refuse the rest.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# Names that label rows (models, tasks, conditions): what the file-naming scheme allows, plus "/"
# for a model loaded from a folder (named by its last part).
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+/-]*")
COLUMN_NAME = re.compile(r"[A-Za-z0-9_]+")
# Column names of tables with a column per model or per task and length (claims_matrix, ablation_summary).
HEADER = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._+@,:()/-]*")
# Free text a table may carry (head lists, length ranges, notes): no markup, no formula, no line break.
TEXT = re.compile(r"[A-Za-z0-9 ._+;,:()/-]*")
# Sentences and labels of the claims and of tables without a schema ("UF 0.90 -> 0.00", "[0.47-0.93]",
# "a0.0.v<-embed"): TEXT and ' [ ] @ * ? % = < >, never a tag, a link or a formula (below).
PLAIN = re.compile(r"[A-Za-z0-9 ._+;,:()/'\[\]@*?%=<>-]*")
# Markup these characters can still spell: a tag or comment (<b, </, <!, <?), a link ([a](x), [a][x], [a]: x)
# and the script schemes a link would run.
MARKUP = re.compile(r"<[A-Za-z/!?]|\][(\[:]|(?:javascript|vbscript|data):", re.IGNORECASE)
# How a spreadsheet formula starts (also after the ' that escapes one when a table is written).
FORMULA = re.compile(r"'?(?:[=+@]|-(?![0-9. ]|$))")
# A token of model text as the tables write it: Python's repr of a string.
TOKEN = re.compile(r"'[^']*'|\"[^\"]*\"")
MAX_COUNT = 1_000_000  # examples, positions or prompts in one row: beyond any study these machines run


@dataclass(frozen=True)
class Column:
    """What one column may hold: ``kind`` is ``number``, ``int``, ``bool``, ``name`` (`NAME`), ``text``
    (`TEXT`, or ``pattern``), ``plain`` (`PLAIN`, no markup or formula), ``token`` (a quoted string of
    model text, shown escaped) or ``choice`` (one of ``choices``, case and all); numbers lie in
    ``[lo, hi]`` and are finite; ``required`` columns are present and never empty."""

    kind: str = "number"
    lo: float = -math.inf
    hi: float = math.inf
    required: bool = False
    nan_allowed: bool = False  # a statistic that is undefined for some rows (a share of no events)
    choices: tuple[str, ...] = ()
    pattern: re.Pattern | None = None

    def problem(self, value: object) -> str | None:
        """Why ``value`` (as parsed from CSV) does not fit, or None.

        >>> Column(lo=0, hi=1).problem(7.5), Column("int", lo=1).problem(0.5)
        ('7.5, expected a number in [0, 1]', '0.5, expected an integer >= 1')
        >>> Column("choice", choices=("UF", "UB")).problem("uf")
        "'uf', expected one of UF, UB"
        >>> Column("plain").problem("[a](javascript:alert(1))")
        "'[a](javascript:alert(1))', expected plain text (no markup, no formula)"
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
        text = str(value)
        if self.kind == "choice":
            return None if isinstance(value, str) and text in self.choices else \
                f"{value!r}, expected one of {', '.join(self.choices)}"
        if self.kind == "token":
            return None if TOKEN.fullmatch(text) and text.isprintable() else \
                f"{text!r}, expected a quoted token ('...') without control characters"
        if self.kind == "plain":
            if not PLAIN.fullmatch(text) or MARKUP.search(text) or FORMULA.match(text):
                return f"{text!r}, expected plain text (no markup, no formula)"
            return None
        pattern = self.pattern or (NAME if self.kind == "name" else TEXT)
        if not pattern.fullmatch(text):
            what = "a name (letters, digits and . _ + - /)" if self.kind == "name" else "plain text"
            return f"{text!r}, expected {what}"
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
COUNT = Column("int", lo=1, hi=MAX_COUNT, required=True)
RANK = Column("int", lo=1)
