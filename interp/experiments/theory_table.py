"""The paper's theory table, executed: every task's C-RASP[pos] program run on random instances.

Expressible tasks (UL, UR, NLFirst, NRFirst, UF, UB) get their length-independent program from
[`interp.crasp`][interp.crasp]; it must be exact at every length. The others (NLLast, NRLast, NF, NB) have
no such program (the paper's reasons live in ``interp.data.tasks.TASKS[...].theory_reason``); in their
place the table runs a *bounded* C-RASP[pos] program, sized to be exact on the training lengths
of the paper's from-scratch models (1-50), to show what the theory predicts: exact up to the
bound, wrong beyond it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from interp.crasp import PAPER_LEMMA, PROGRAMS, Program, Vocabulary, accuracy, bound_needed, bounded_program
from interp.crasp.running import Mode
from interp.core.tables import to_markdown
from interp.data.tasks import ALNUM, TASKS, check_vocabulary, generate_examples, get_task

DEFAULT_LENGTHS = (10, 50, 100, 200, 500)
TRAIN_LENGTH = 50  # the paper trains its from-scratch models on lengths 1-50 (App. B)
WIDE_ITEMS = 600  # enough distinct items for unique copying up to length 600

DEFINITION = "C-RASP[pos] as in Jobanputra et al. 2025, App. A.1 (Huang et al. 2025's C-RASP[periodic, local])"


def _wide_vocabulary(size: int = WIDE_ITEMS) -> tuple[str, ...]:
    return tuple(f"t{i}" for i in range(size))


def vocabulary_for(task: str, length: int) -> tuple[str, ...]:
    """The paper's 62 alphanumerics where they suffice, else ``t0, t1, ...`` items (copying long
    strings of distinct items needs more symbols than 62).

    >>> len(vocabulary_for("UF", 10)), vocabulary_for("UF", 100)[:3]  # 100 distinct items need the wide set
    (62, ('t0', 't1', 't2'))
    """
    spec = get_task(task)
    try:
        check_vocabulary(spec, length, ALNUM)
        return ALNUM
    except ValueError:
        wide = _wide_vocabulary(max(WIDE_ITEMS, length))
        check_vocabulary(spec, length, wide)  # a length too short for the task still raises
        return wide


def _table_program(task: str, train_length: int = TRAIN_LENGTH) -> Program:
    """The expressible task's program, or the bounded program exact up to ``train_length``."""
    spec = get_task(task)
    if spec.expressible:
        return PROGRAMS[spec.name]
    return bounded_program(spec.name, bound_needed(spec.name, train_length))


def _program_accuracy(program: Program, task: str, length: int, n: int, seed: int = 0,
                     mode: Mode = "teacher-forced") -> float:
    """Exact-match accuracy of ``program`` on ``n`` generated instances of ``task`` at ``length``."""
    items = vocabulary_for(task, length)
    examples = generate_examples(task, length, n, seed, items)
    return accuracy(program, examples, Vocabulary(items), mode)


def _observed(accs: dict[int, float], train_length: int, bounded: bool) -> str:
    if all(a == 1.0 for a in accs.values()):
        return "exact at every length"
    if not bounded:
        wrong = ", ".join(f"{a:.3f} at {L}" for L, a in accs.items() if a < 1.0)
        return f"not exact: {wrong}"
    within = [L for L in accs if L <= train_length]
    beyond = ", ".join(f"{accs[L]:.3f} at {L}" for L in accs if L > train_length)
    exact_within = within and all(accs[L] == 1.0 for L in within)
    return f"{'exact up to ' + str(train_length) if exact_within else 'not exact within the bound'}; {beyond}"


@dataclass(frozen=True)
class TheoryRow:
    """One task of the theory table: its program, that program's accuracy per length, the paper's
    prediction and whether the run agrees with it."""

    task: str
    family: str
    expressible: bool
    program: str  # "<name> (bounded)" for a non-expressible task's bounded program
    accuracies: tuple[tuple[int, float | None], ...]  # (length, accuracy); None: no instance that short
    predicted: str
    observed: str
    agrees: bool | None  # None: no length beyond the bound was run
    lemma: str
    reason: str

    def accuracy_at(self, length: int) -> float | None:
        return dict(self.accuracies)[length]

    def as_row(self) -> dict[str, object]:
        """The table row: one ``acc@<length>`` column per length."""
        return {"task": self.task, "family": self.family, "expressible": self.expressible, "program": self.program,
                **{f"acc@{length}": acc for length, acc in self.accuracies}, "predicted": self.predicted,
                "observed": self.observed, "agrees": self.agrees, "lemma": self.lemma, "reason": self.reason}


def theory_rows(lengths: Sequence[int] = DEFAULT_LENGTHS, n: int = 100, seed: int = 0,
                train_length: int = TRAIN_LENGTH, mode: Mode = "teacher-forced",
                tasks: Sequence[str] | None = None) -> list[TheoryRow]:
    """One row per task: expressibility, the program, its accuracy per length, the paper's
    prediction and whether the run agrees with it.

    Agreement: an expressible task's program is length-independent and exact at every length; a
    non-expressible task's bounded program is exact at lengths <= ``train_length`` and not exact
    at some longer length (None when no longer length was run).

    >>> (row,) = theory_rows(lengths=(10,), n=4, tasks=["UF"])
    >>> row.accuracy_at(10), row.agrees
    (1.0, True)
    """
    if not lengths or any(L < 1 for L in lengths):
        raise ValueError(f"lengths must be positive, got {list(lengths)}")
    if n < 1:
        raise ValueError(f"n={n} must be at least 1")
    return [_theory_row(name, sorted(set(lengths)), n, seed, train_length, mode) for name in tasks or list(TASKS)]


def _theory_row(name: str, lengths: Sequence[int], n: int, seed: int, train_length: int, mode: Mode) -> TheoryRow:
    spec = get_task(name)
    program = _table_program(spec.name, train_length)
    accs: dict[int, float] = {}
    for length in lengths:
        try:
            accs[length] = _program_accuracy(program, spec.name, length, n, seed, mode)
        except ValueError:
            continue  # the task has no instances this short
    if spec.expressible:
        agrees = program.length_independent and all(a == 1.0 for a in accs.values())
    else:
        within = [a for L, a in accs.items() if L <= train_length]
        beyond = [a for L, a in accs.items() if L > train_length]
        agrees = (all(a == 1.0 for a in within) and any(a < 1.0 for a in beyond)) if beyond else None
    return TheoryRow(
        task=spec.name, family=spec.family, expressible=spec.expressible,
        program=program.name if program.length_independent else f"{program.name} (bounded)",
        accuracies=tuple((L, accs.get(L)) for L in lengths),
        predicted="length-generalizes" if spec.expressible else "fails beyond trained lengths",
        observed=_observed(accs, train_length, not program.length_independent), agrees=agrees,
        lemma=PAPER_LEMMA[spec.name], reason=spec.theory_reason)


def legend(rows: Sequence[TheoryRow], train_length: int = TRAIN_LENGTH) -> str:
    """What the rows mean, and each task's reason from the paper, as printable lines.

    >>> print(legend(theory_rows(lengths=(10,), n=4, tasks=["UF"])))
    Expressible tasks run one C-RASP[pos] program at every length. The others have none: they run a
    bounded C-RASP[pos] program, exact up to length 50, whose size grows with that bound.
    <BLANKLINE>
    - UF (Lemma 7): each output token has a unique earlier occurrence whose successor is found by counting
    """
    lines = ["Expressible tasks run one C-RASP[pos] program at every length. The others have none: they run a",
             f"bounded C-RASP[pos] program, exact up to length {train_length}, whose size grows with that bound.", ""]
    lines += [f"- {row.task} ({row.lemma}): {row.reason}" for row in rows]
    return "\n".join(lines)


def disagreements(rows: Sequence[TheoryRow]) -> list[str]:
    """Rows whose run does not agree with the paper (or could not be checked), explained.

    >>> disagreements(theory_rows(lengths=(10,), n=4, tasks=["UF", "NF"]))  # NF's failure lies beyond 50
    ['NF: no length beyond the bound was run, so the predicted failure is untested']
    """
    notes = []
    for row in rows:
        if row.agrees is None:
            notes.append(f"{row.task}: no length beyond the bound was run, so the predicted failure is untested")
        elif not row.agrees:
            notes.append(f"{row.task}: the paper predicts '{row.predicted}', observed '{row.observed}'")
    return notes


def format_theory_table(rows: Sequence[TheoryRow], with_reason: bool = False) -> str:
    """The table as Markdown (the long reason column only when asked).

    >>> print(format_theory_table(theory_rows(lengths=(10,), n=4, tasks=["UF"])))
    | task | expressible | program | acc@10 | predicted | observed | agrees | lemma |
    |---|---|---|---|---|---|---|---|
    | UF | True | UF | 1.000 | length-generalizes | exact at every length | True | Lemma 7 |
    """
    columns = [c for c in rows[0].as_row() if c != "family" and (with_reason or c != "reason")] if rows else None
    return to_markdown(rows, columns)
