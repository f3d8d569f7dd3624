"""The rows of the from-scratch table ([`interp.experiments.from_scratch`][interp.experiments.from_scratch]): exact match per model and
length bin, and the verdict of each task and encoding against the theory's prediction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

from interp.data.tasks import get_task


@dataclass(frozen=True)
class ScratchRow:
    """Exact match of one from-scratch model in one length bin (a row of ``from_scratch``)."""

    task: str
    positional: str
    split: str  # id (the training lengths) or ood
    lengths: str  # the bin, "lo-hi"
    accuracy: float
    expressible: bool
    predicted: str
    n_examples: int
    steps: int
    seconds: float  # wall time of the whole run, resumed parts included
    cpu_seconds: float
    timed_from_step: int | None


SCRATCH_COLUMNS = [f.name for f in fields(ScratchRow)]


@dataclass(frozen=True)
class ScratchVerdictRow:
    """One task and encoding: accuracy per bin, the theory's prediction and what happened."""

    task: str
    positional: str
    accuracies: tuple[tuple[str, float], ...]  # ("id 1-20", accuracy), ("ood 21-40", ...), ...
    predicted: str
    observed: str  # generalizes, fails OOD or not learned
    agrees: bool | None  # None when not learned: the run says nothing about length generalization

    def as_row(self) -> dict[str, object]:
        """The table row: one column per bin."""
        return {"task": self.task, "positional": self.positional, **dict(self.accuracies),
                "predicted": self.predicted, "observed": self.observed, "agrees": self.agrees}


def verdict(rows: Sequence[ScratchRow], threshold: float = 0.9) -> list[ScratchVerdictRow]:
    """One row per task and encoding: accuracy per bin, the theory's prediction, what happened.

    ``observed`` is "generalizes" (in-distribution and every OOD bin >= threshold), "fails OOD"
    (learned in distribution, not beyond) or "not learned" (in-distribution accuracy below the
    threshold: the run says nothing about length generalization, and ``agrees`` is None).

    >>> from dataclasses import replace
    >>> learned = ScratchRow("UL", "absolute", "id", "1-20", 1.0, True, "generalizes", 200, 500, 30.0, 30.0, 0)
    >>> beyond = replace(learned, split="ood", lengths="21-40", accuracy=0.4)
    >>> (row,) = verdict([learned, beyond])
    >>> row.accuracies, row.observed, row.agrees
    ((('id 1-20', 1.0), ('ood 21-40', 0.4)), 'fails OOD', False)
    """
    out = []
    for task, positional in dict.fromkeys((r.task, r.positional) for r in rows):
        mine = [r for r in rows if r.task == task and r.positional == positional]
        iid = [r.accuracy for r in mine if r.split == "id"]
        ood = [r.accuracy for r in mine if r.split == "ood"]
        expressible = get_task(task).expressible
        if not iid or iid[0] < threshold:
            observed, agrees = "not learned", None
        else:
            observed = "generalizes" if ood and min(ood) >= threshold else "fails OOD"
            agrees = (observed == "generalizes") == expressible
        out.append(ScratchVerdictRow(task, positional, tuple((f"{r.split} {r.lengths}", r.accuracy) for r in mine),
                                     "generalizes" if expressible else "fails OOD", observed, agrees))
    return out
