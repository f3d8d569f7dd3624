"""The route table summarised: per (length, head set, route, kind, test, counterfactual), the exact-copy
accuracy with its Wilson interval, each metric's mean with a bootstrap interval over prompts, the share
of the gap, and a verdict.

Verdict rule (`verdict`): with ``a`` the clean accuracy and ``[lo, hi]`` the accuracy's interval after
the removal, a read is *needed* (necessity) when ``hi < a / 2`` and *not needed* when ``lo > a / 2``; it
is *enough* (sufficiency: the copy survives on it alone) when ``lo > a / 2`` and *not enough* when
``hi < a / 2``; otherwise *unclear*. Below a clean accuracy of `FLOOR` there is no copy to remove a read
from: *cannot test*. `route_report` puts a whole table in words, as ``analyses/circuit_routes.py`` prints it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import torch

from interp.core.stats import MIN_GAP, wilson_interval
from interp.experiments.routes.measure import RouteRow
from interp.experiments.routes.reads import ROUTES
from interp.experiments.routes.shares import route_shares

FLOOR = 0.2  # clean exact-copy accuracy below which no read can be needed (the claims' floor)
GROUP = ("model", "task", "length", "format", "shots", "head_set", "route", "kind", "test", "counterfactual")
NEEDED = ("prompt", "clean_metric", "counterfactual_metric", "patched_metric", "clean_margin", "patched_margin",
          "clean_logprob", "patched_logprob", "correct", "patched_correct")


@dataclass(frozen=True)
class RouteSummary:
    """One removal under one counterfactual, over the prompts of one length and head set."""

    model: str
    task: str
    length: int
    format: str
    shots: int
    head_set: str
    route: str
    kind: str
    test: str
    counterfactual: str
    n: int
    clean_accuracy: float
    accuracy: float
    accuracy_lo: float
    accuracy_hi: float
    clean_margin: float
    margin: float
    margin_lo: float
    margin_hi: float
    clean_logprob: float
    logprob: float
    logprob_lo: float
    logprob_hi: float
    clean_metric: float
    metric: float
    metric_lo: float
    metric_hi: float
    share: float  # mean(clean - patched) / mean(clean - counterfactual prompt), logit difference
    share_lo: float
    share_hi: float
    verdict: str

    def as_row(self) -> dict:
        return asdict(self)


def verdict(test: str, clean_accuracy: float, lo: float, hi: float) -> str:
    """The module's rule.

    >>> verdict("necessity", 1.0, 0.0, 0.3), verdict("sufficiency", 1.0, 0.0, 0.3), verdict("necessity", 1.0, 0.3, 0.8)
    ('needed', 'not enough', 'unclear')
    >>> verdict("sufficiency", 0.1, 0.0, 0.3)
    'cannot test'
    """
    if clean_accuracy < FLOOR:
        return "cannot test"
    half = clean_accuracy / 2
    if hi < half:
        return "needed" if test == "necessity" else "not enough"
    if lo > half:
        return "not needed" if test == "necessity" else "enough"
    return "unclear"


def _bootstrap(values: torch.Tensor, resample: torch.Tensor) -> tuple[float, float, float]:
    """The mean and its 95% percentile interval."""
    lo, hi = torch.quantile(values[resample].mean(1), torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    return float(values.mean()), lo, hi


def route_summary(rows: Sequence[Mapping | RouteRow], n_boot: int = 2000, seed: int = 0) -> list[RouteSummary]:
    """One `RouteSummary` per group of rows (`GROUP`), in the rows' order; every group's prompts are
    resampled with the same seed, so groups of one cell share their resamples.

    >>> rows = [{"model": "m", "task": "UB", "length": 4, "format": "single-shot", "shots": 1, "head_set": "all",
    ...          "prompt": i, "route": "o", "kind": "value", "test": "necessity", "counterfactual": "zero",
    ...          "clean_metric": 4.0, "counterfactual_metric": -4.0, "patched_metric": 0.0, "clean_margin": 4.0,
    ...          "patched_margin": -1.0, "clean_logprob": -0.1, "patched_logprob": -3.0, "correct": True,
    ...          "patched_correct": False} for i in range(10)]
    >>> s = route_summary(rows)[0]
    >>> s.accuracy, round(s.accuracy_hi, 2), s.share, s.verdict
    (0.0, 0.28, 0.5, 'needed')
    """
    groups: dict[tuple, list[Mapping]] = {}
    for row in rows:
        row = row.as_row() if hasattr(row, "as_row") else row
        if missing := [c for c in (*GROUP, *NEEDED) if c not in row]:
            raise ValueError(f"route rows lack {', '.join(missing)}: a table of shares alone (written before necessity "
                             "and sufficiency were measured); run analyses/circuit_routes.py again")
        groups.setdefault(tuple(row[c] for c in GROUP), []).append(row)
    out = []
    for key, members in groups.items():
        prompts = sorted({int(r["prompt"]) for r in members})
        if len(prompts) != len(members):
            raise ValueError(f"route rows: a prompt appears twice in {dict(zip(GROUP, key))}")

        def column(name: str) -> torch.Tensor:
            return torch.tensor([float(r[name]) for r in members], dtype=torch.float64)

        n = len(members)
        resample = torch.randint(0, n, (n_boot, n), generator=torch.Generator().manual_seed(seed))
        clean_accuracy = float(column("correct").mean())
        hits = int(column("patched_correct").sum())
        lo, hi = wilson_interval(hits, n)
        gap, drop = column("clean_metric") - column("counterfactual_metric"), column("clean_metric") - column("patched_metric")
        share = drop[resample].mean(1) / gap[resample].mean(1)
        share_lo, share_hi = torch.quantile(share, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
        group = dict(zip(GROUP, key))
        out.append(RouteSummary(
            **group, n=n, clean_accuracy=clean_accuracy, accuracy=hits / n, accuracy_lo=lo, accuracy_hi=hi,
            clean_margin=float(column("clean_margin").mean()),
            **dict(zip(("margin", "margin_lo", "margin_hi"), _bootstrap(column("patched_margin"), resample))),
            clean_logprob=float(column("clean_logprob").mean()),
            **dict(zip(("logprob", "logprob_lo", "logprob_hi"), _bootstrap(column("patched_logprob"), resample))),
            clean_metric=float(column("clean_metric").mean()),
            **dict(zip(("metric", "metric_lo", "metric_hi"), _bootstrap(column("patched_metric"), resample))),
            share=float(drop.mean() / gap.mean()), share_lo=share_lo, share_hi=share_hi,
            verdict=verdict(str(group["test"]), clean_accuracy, lo, hi)))
    return out


def summary_lines(summaries: Sequence[RouteSummary]) -> list[str]:
    """The summary in words, one line per removal: what was removed or kept, the exact copies left, the
    competitor-aware margin, and the share of the gap (necessity rows).

    >>> s = RouteSummary("m", "UB", 4, "single-shot", 1, "all", "o", "value", "necessity", "zero", 10, 1.0, 0.0, 0.0,
    ...                  0.28, 4.0, -1.0, -1.2, -0.8, -0.1, -3.0, -3.1, -2.9, 4.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5, "needed")
    >>> summary_lines([s])[0]
    'o value read removed (zero): 0/10 exact copies [0.00, 0.28] (clean 1.00), margin -1.00 [-1.20, -0.80] (clean 4.00), share of the gap 0.50 [0.50, 0.50]: needed'
    """
    lines = []
    for s in summaries:
        what = f"{s.route} {s.kind} read{'s' if s.route not in ROUTES else ''}"
        what += " removed" if s.test == "necessity" else " kept alone"
        line = (f"{what} ({s.counterfactual}): {round(s.accuracy * s.n)}/{s.n} exact copies "
                f"[{s.accuracy_lo:.2f}, {s.accuracy_hi:.2f}] (clean {s.clean_accuracy:.2f}), margin {s.margin:.2f} "
                f"[{s.margin_lo:.2f}, {s.margin_hi:.2f}] (clean {s.clean_margin:.2f})")
        if s.test == "necessity":
            line += f", share of the gap {s.share:.2f} [{s.share_lo:.2f}, {s.share_hi:.2f}]"
        lines.append(f"{line}: {s.verdict}")
    return lines


def route_report(rows: Sequence[Mapping], expected: str, n_boot: int = 2000, seed: int = 0) -> list[str]:
    """The route table in words, per cell (length and head set): its prompts and clean copies, the reads
    skipped, the value reads' shares of the gap under corrupt patching (marked where the gap is too small
    to share, `MIN_GAP`), then every removal (`summary_lines`).

    >>> rows = [{"model": "m", "task": "UB", "length": 4, "format": "single-shot", "shots": 1, "head_set": "all",
    ...          "heads": "all", "prompt": i, "route": r, "kind": "value", "test": "necessity",
    ...          "counterfactual": "corrupt", "skipped": 0, "clean_metric": 0.2, "counterfactual_metric": 0.0,
    ...          "patched_metric": 0.0, "clean_margin": 1.0, "patched_margin": 1.0, "clean_logprob": -0.1,
    ...          "patched_logprob": -0.1, "correct": True, "patched_correct": True} for i in range(4) for r in ROUTES]
    >>> route_report(rows, "o")[1]
    '  share of the logit-difference gap (value reads, corrupt): none: the mean gap is 0.2 logits, under 0.5'
    """
    rows = [row.as_row() if hasattr(row, "as_row") else row for row in rows]
    summaries = route_summary(rows, n_boot=n_boot, seed=seed)
    lines = []
    for length, head_set in dict.fromkeys((r["length"], r["head_set"]) for r in rows):
        mine = [r for r in rows if (r["length"], r["head_set"]) == (length, head_set)]
        clean = {r["prompt"]: r["correct"] for r in mine}
        heads = "; ".join(sorted({f"{r['kind']} reads in {r['heads']}" for r in mine}))
        lines.append(f"{mine[0]['model']} {mine[0]['task']} length {length}, head set {head_set} ({heads}): {len(clean)} "
                     f"prompts, {sum(clean.values())}/{len(clean)} copied exactly, expected route {expected}")
        skipped = {r["route"]: r["skipped"] for r in mine if r["test"] == "necessity" and r["skipped"]}
        if skipped:
            lines.append("  skipped (source before the prompt): "
                         + ", ".join(f"{n} read(s) of {route}" for route, n in skipped.items()) + " per prompt")
        corrupt = [r for r in mine if r["kind"] == "value" and r["counterfactual"] == "corrupt"]
        if corrupt:
            gap = sum(r["clean_metric"] - r["counterfactual_metric"] for r in corrupt) / len(corrupt)
            shares = route_shares(corrupt, n_boot=n_boot, seed=seed).values() if gap >= MIN_GAP else []
            lines.append("  share of the logit-difference gap (value reads, corrupt): "
                         + (", ".join(f"{s.route} {s.share:+.2f} [{s.lo:+.2f}, {s.hi:+.2f}]" for s in shares)
                            or f"none: the mean gap is {gap:.2g} logits, under {MIN_GAP:g}"))
        lines += [f"  {line}" for line in summary_lines([s for s in summaries if (s.length, s.head_set) == (length, head_set)])]
    return lines
