"""Is a read needed for the copy? One `Reading` per removal of one read -- a route's value or key read under
one counterfactual of the route table (`interp.experiments.routes`), or the paper's edge patching -- and how the
readings of one read combine (`kind_verdict`) and the reads of one route (`route_verdict`).

A reading's verdict is the route table's (`interp.experiments.routes.summary.verdict`): with ``a`` the clean
exact-copy accuracy and ``[lo, hi]`` the 95% Wilson interval of the accuracy with the read removed, *needed*
when ``hi < a / 2``, *not needed* when ``lo > a / 2``, *unclear* otherwise, and *cannot test* below a clean
accuracy of 0.2. The drop (``a`` minus the accuracy without the read) takes its interval from the same Wilson
interval: the clean run is the same prompts', a reference rather than a second sample.

Combining: a read (one kind, value or key) is *needed* when some removal finds it needed and none finds it not
needed, *not needed* the other way round, *mixed* when removals disagree (they take different information
away: the previous-token cut only what previous-token heads wrote, mean and zero everything), *unclear* when
none decides. A route is *needed* when one of its reads is, *not needed* when every read that could be tested
is not, else *mixed* or *unclear*.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from interp.experiments.routes.removal import REMOVAL_ONLY, removal_only

ROUTE_ORDER = ("o-1", "o", "o+1")
KINDS = ("value", "key")
COUNTERFACTUAL_NAMES = {"previous_token_cut": "previous-token cut", "mean": "mean", "zero": "zero", "corrupt": "corrupt"}
EDGE_PATCHING = "edge patching"
# what a necessity row of the route table must hold (interp.experiments.routes.summary.NEEDED)
NEEDED = ("clean_metric", "counterfactual_metric", "patched_metric", "clean_margin", "patched_margin", "clean_logprob",
          "patched_logprob", "correct", "patched_correct", "kind")
UNTESTED = ("cannot test", "not measured")


@dataclass(frozen=True)
class Reading:
    """One removal of one read: the clean accuracy, the accuracy without the read (95% Wilson interval),
    over ``n`` prompts, and its verdict."""

    instrument: str  # "routes" or "edge patching"
    route: str
    kind: str
    counterfactual: str
    clean: float
    accuracy: float
    lo: float
    hi: float
    n: int
    verdict: str  # needed | not needed | unclear | cannot test
    source: str
    lengths: str = ""

    @property
    def drop(self) -> tuple[float, float, float]:
        """Clean accuracy minus the accuracy without the read, and its interval."""
        return self.clean - self.accuracy, self.clean - self.hi, self.clean - self.lo

    @property
    def helps(self) -> bool:
        """The read is not needed, yet its removal loses copies (the drop's interval lies above 0)."""
        return self.drop[1] > 0

    @property
    def removal(self) -> str:
        """How the read was removed, in words: ``value, mean`` or ``edge patching``."""
        if self.instrument == EDGE_PATCHING:
            return EDGE_PATCHING
        return f"{self.kind}, {COUNTERFACTUAL_NAMES.get(self.counterfactual, self.counterfactual)}"

    def text(self) -> str:
        """``value, mean 0.03 [0.00, 0.11]``, or for edge patching its clean accuracy too."""
        interval = f"{self.accuracy:.2f} [{self.lo:.2f}, {self.hi:.2f}]"
        if self.instrument == EDGE_PATCHING:
            return f"edge patching ({self.kind} read at {self.route}) {self.clean:.2f} -> {interval}"
        return f"{self.removal} {interval}"


def necessity_verdict(clean: float, lo: float, hi: float) -> str:
    """The route table's necessity verdict (needed, not needed, unclear, cannot test).

    >>> necessity_verdict(1.0, 0.0, 0.3), necessity_verdict(1.0, 0.8, 1.0), necessity_verdict(0.1, 0.0, 0.1)
    ('needed', 'not needed', 'cannot test')
    """
    from interp.experiments.routes import verdict

    return verdict("necessity", clean, lo, hi)


def kind_verdict(readings: Sequence[Reading]) -> str:
    """The verdict of one read (all ``readings`` of one kind) over its removals.

    >>> r = lambda v: Reading("routes", "o", "value", "zero", 1.0, 0.0, 0.0, 0.2, 16, v, "x.csv")
    >>> kind_verdict([r("needed"), r("unclear")]), kind_verdict([r("needed"), r("not needed")]), kind_verdict([])
    ('needed', 'mixed', 'not measured')
    """
    verdicts = {r.verdict for r in readings}
    if "needed" in verdicts:
        return "mixed" if "not needed" in verdicts else "needed"
    if "not needed" in verdicts:
        return "not needed"
    if "unclear" in verdicts:
        return "unclear"
    return "cannot test" if verdicts else "not measured"


def kind_verdicts(readings: Sequence[Reading]) -> dict[str, str]:
    """Each read kind's verdict (`kind_verdict`), for the kinds ``readings`` hold."""
    return {kind: kind_verdict([r for r in readings if r.kind == kind]) for kind in KINDS
            if any(r.kind == kind for r in readings)}


def route_verdict(readings: Sequence[Reading]) -> str:
    """The verdict of one route over its reads (``readings`` of one route, any kind).

    >>> r = lambda k, v: Reading("routes", "o", k, "zero", 1.0, 0.0, 0.0, 0.2, 16, v, "x.csv")
    >>> route_verdict([r("value", "needed"), r("key", "not needed")]), route_verdict([r("value", "not needed")])
    ('needed', 'not needed')
    >>> route_verdict([r("value", "not needed"), r("key", "unclear")]), route_verdict([r("value", "cannot test")])
    ('unclear', 'cannot test')
    """
    per = kind_verdicts(readings)
    tested = [v for v in per.values() if v not in UNTESTED]
    if not tested:
        return "cannot test" if per else "not measured"
    if "needed" in tested:
        return "needed"
    if all(v == "not needed" for v in tested):
        return "not needed"
    return "mixed" if "mixed" in tested else "unclear"


# Removals from the least information taken away to the most: the paper's edge patching and the previous-token cut
# take only what previous-token heads wrote, mean and zero everything the read brings.
STRENGTH = {"previous_token_cut": 0, "mean": 1, "zero": 2, "corrupt": 3}


def representative(readings: Sequence[Reading], verdict: str) -> Reading | None:
    """The reading that shows ``verdict`` best: among those that gave it (all, for mixed or unclear), the one
    with the least accuracy left; on a tie, for *needed* the removal that takes the least away (the paper's
    edge patching first), for *not needed* the one that takes the most.

    >>> r = lambda c, v, acc: Reading("routes", "o", "value", c, 1.0, acc, acc, acc, 16, v, "x.csv")
    >>> representative([r("zero", "not needed", 1.0), r("previous_token_cut", "not needed", 1.0)], "not needed").counterfactual
    'zero'
    """
    pool = [r for r in readings if r.verdict == verdict] or [r for r in readings if r.verdict not in UNTESTED]
    pool = pool or list(readings)
    sign = -1 if verdict == "not needed" else 1

    def key(r: Reading) -> tuple:
        strength = -1 if r.instrument == EDGE_PATCHING else STRENGTH.get(r.counterfactual, 3)
        return r.accuracy, sign * strength, KINDS.index(r.kind) if r.kind in KINDS else 2

    return min(pool, key=key) if pool else None


def split_text(readings: Sequence[Reading]) -> str:
    """Where removals of one route disagree, per kind: ``value needed under zero, not under previous-token cut``.

    >>> r = lambda c, v: Reading("routes", "o", "value", c, 1.0, 0.0, 0.0, 0.2, 16, v, "x.csv")
    >>> split_text([r("zero", "needed"), r("mean", "needed"), r("previous_token_cut", "not needed")])
    'value needed under mean, zero, not under previous-token cut'
    """
    parts = []
    for kind, verdict in kind_verdicts(readings).items():
        if verdict != "mixed":
            continue
        mine = [r for r in readings if r.kind == kind]

        def names(v: str) -> str:
            found = sorted({r.instrument if r.instrument == EDGE_PATCHING else
                            COUNTERFACTUAL_NAMES.get(r.counterfactual, r.counterfactual) for r in mine if r.verdict == v})
            return ", ".join(found)

        parts.append(f"{kind} needed under {names('needed')}, not under {names('not needed')}")
    return "; ".join(parts)


def route_readings(tables: Sequence[tuple[str, Sequence[Mapping]]], head_set: str = "all",
                   counterfactuals: Sequence[str] = REMOVAL_ONLY) -> list[Reading]:
    """The necessity readings of every route and read kind in route tables of one model and task (``(file name,
    rows)`` each, in the route table's layout), their prompts pooled over lengths and tables; rows of
    ``head_set`` only, under ``counterfactuals``. Tables of shares alone (no ``test`` column) give none.

    >>> rows = [{"model": "m", "task": "UB", "length": 4, "format": "single-shot", "shots": 1, "head_set": "all",
    ...          "prompt": i, "route": "o", "kind": "value", "test": "necessity", "counterfactual": "zero",
    ...          "clean_metric": 4.0, "counterfactual_metric": -4.0, "patched_metric": 0.0, "clean_margin": 4.0,
    ...          "patched_margin": -1.0, "clean_logprob": -0.1, "patched_logprob": -3.0, "correct": True,
    ...          "patched_correct": False} for i in range(10)]
    >>> [(r.route, r.kind, r.accuracy, r.verdict, r.n) for r in route_readings([("t.csv", rows)])]
    [('o', 'value', 0.0, 'needed', 10)]
    """
    from interp.experiments.routes import route_summary

    prompts: dict[tuple, int] = {}
    pooled, lengths, sources = [], set(), []
    for source, rows in tables:
        mine = [r for r in rows if r.get("test") == "necessity" and r.get("head_set") == head_set
                and r.get("counterfactual") in counterfactuals and r.get("route") in (*ROUTE_ORDER, "o-1+o")
                and (r.get("counterfactual") not in REMOVAL_ONLY or removal_only(r["counterfactual"], r.get("kind", "value")))]
        if mine:
            sources.append(source)
        for r in mine:
            if missing := [c for c in NEEDED if r.get(c) is None]:
                raise ValueError(f"results file {source}: a necessity row (prompt {r['prompt']}, route {r['route']}) "
                                 f"without {', '.join(missing)}; expected every column of the route table")
            index = prompts.setdefault((source, int(r["length"]), int(r["prompt"])), len(prompts))
            lengths.add(int(r["length"]))
            pooled.append({**r, "length": 0, "format": "", "shots": 1, "prompt": index})
    if not pooled:
        return []
    source, pooled_lengths = ", ".join(sources), ",".join(str(n) for n in sorted(lengths))
    out = []
    for s in route_summary(pooled, n_boot=200):
        if math.isfinite(s.accuracy_lo) and math.isfinite(s.accuracy_hi):
            out.append(Reading("routes", s.route, s.kind, s.counterfactual, s.clean_accuracy, s.accuracy, s.accuracy_lo,
                               s.accuracy_hi, s.n, s.verdict, source, pooled_lengths))
    return out


def edge_reading(rows: Sequence[Mapping], task: str, condition: str, route: str, kind: str, source: str) -> Reading | None:
    """The paper's edge patching as a necessity reading: the accuracy on ``task`` with the ``condition`` edges
    removed (every layer and head) against no intervention, pooled over the lengths both were measured at.

    >>> rows = [{"task": "UB", "length": 5, "condition": c, "accuracy": a, "n_examples": 32}
    ...         for c, a in (("none", 1.0), ("anti_induction", 0.875))]
    >>> r = edge_reading(rows, "UB", "anti_induction", "o", "value", "e.csv")
    >>> r.text(), r.verdict, r.helps
    ('edge patching (value read at o) 1.00 -> 0.88 [0.72, 0.95]', 'not needed', True)
    """
    from interp.core.stats import wilson_interval

    def pick(name: str) -> list[Mapping]:
        return [r for r in rows if r.get("task") == task and r.get("condition") == name
                and str(r.get("layers") or "all") == "all" and str(r.get("heads") or "all") == "all"]

    clean, hit = pick("none"), pick(condition)
    lengths = {int(r["length"]) for r in clean} & {int(r["length"]) for r in hit}
    if not lengths:
        return None

    def pooled(mine: list[Mapping]) -> tuple[int, int]:
        mine = [r for r in mine if int(r["length"]) in lengths]
        n = sum(int(r.get("n_examples") or r.get("n")) for r in mine)
        return sum(round(float(r["accuracy"]) * int(r.get("n_examples") or r.get("n"))) for r in mine), n

    (k0, n0), (k1, n1) = pooled(clean), pooled(hit)
    lo, hi = wilson_interval(k1, n1)
    return Reading(EDGE_PATCHING, route, kind, "previous_token_cut", k0 / n0, k1 / n1, lo, hi, n1,
                   necessity_verdict(k0 / n0, lo, hi), source, ",".join(str(n) for n in sorted(lengths)))
