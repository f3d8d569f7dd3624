"""One verdict per edge hypothesis and model, from every instrument that measured it
(`interp.figures.hypothesis_evidence`), by the rule below (docs/findings.md, "How a hypothesis is decided").

The instruments that take information away and see whether the copy survives -- the paper's edge patching and
the route table's removal-only counterfactuals (previous-token cut, mean, zero) -- decide; each gives the
hypothesis's reads (value and key at its route) a necessity verdict (`interp.figures.necessity`), combined per
read and over the reads. In order, the first that applies:

| evidence | verdict | the cell says |
|---|---|---|
| a read at the route is needed | supports | needed; the share and the circuit where they disagree (an AND with the route carrying the larger share) |
| every read that could be tested is not needed | contradicts | which route carries it instead, or why a large share is not a need |
| removals disagree on a read, or none decides | inconclusive | which removal needs it and which not |
| no removal could test it: the share decides | as the share | largest: supports; smaller: contradicts; overlapping: inconclusive |
| nor a share: the circuit decides | as the circuit | in (loss >= 0.05): supports; absent from a circuit keeping >= 0.8 of the gap: contradicts |
| nothing measured it on a copy | cannot test | why (task below 0.2 clean, ...) |

Corrupt patching is shown beside and never decides: it brings the corrupt prompt's token in, so a copy it
breaks may have followed a competitor rather than lost the read. The number in the grid is the drop in
exact-copy accuracy when the read is removed (the reading that shows the verdict best, `necessity.representative`);
a verdict the share or the circuit decided has none (the share is in the row's value and note).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from interp.figures.hypothesis_evidence import FLOOR, MIN_LOSS, Evidence
from interp.figures.necessity import (EDGE_PATCHING, KINDS, REMOVAL_ONLY, ROUTE_ORDER, Reading, kind_verdicts,
                                      representative, route_verdict, split_text)

NECESSITY_VERDICT = {"needed": "supports", "not needed": "contradicts", "mixed": "inconclusive", "unclear": "inconclusive"}
SHARE_VERDICT = {"largest": "supports", "smaller": "contradicts", "unclear": "inconclusive"}


@dataclass(frozen=True)
class Decision:
    """A hypothesis's verdict on one model: ``why`` is the grid cell's short reason, ``value`` every instrument's
    numbers, ``note`` the rule that decided; ``estimate`` / ``lo`` / ``hi`` / ``n`` the deciding number."""

    verdict: str
    why: str
    value: str
    note: str
    estimate: float
    lo: float
    hi: float
    n: int
    source: str


def _directly(route: str) -> str:
    return f"{route} directly" if route == "o-1" else route


def _carrier(e: Evidence) -> str:
    """The other route the copy needs (route necessity), else the one carrying the larger share."""
    for route in ROUTE_ORDER:
        if route != e.hypothesis.route and route_verdict(e.of_route(route)) == "needed":
            return route
    if e.share is not None and e.share.verdict == "smaller":
        return e.share.other
    return ""


def _share_clause(e: Evidence, verdict: str) -> str:
    s, route = e.share, e.hypothesis.route
    if s is None:
        return ""
    if verdict == "supports" and s.verdict == "smaller":
        return f", small share: an AND with {s.other}"
    if verdict == "supports" and s.verdict == "largest":
        return ", largest share"
    if verdict == "contradicts" and s.verdict == "largest":
        return ", large share: corrupt patching brings a competitor in"
    return ""


def _corrupt_clause(e: Evidence, verdict: str) -> str:
    """Corrupt patching breaks the copy where removal does not: the corrupt prompt's token took over."""
    broken = any(r.route == e.hypothesis.route and r.verdict == "needed" for r in e.corrupt)
    told = e.share is not None and e.share.verdict == "largest"
    return "; corrupt patching breaks it: a competitor comes in" if verdict == "contradicts" and broken and not told else ""


def _circuit_clause(e: Evidence, verdict: str) -> str:
    c = e.circuit
    if c is None:
        return ""
    if verdict == "supports" and c.verdict == "absent":
        return "; not in the circuit"
    if verdict == "contradicts" and c.verdict == "in":
        return "; in the circuit" + (f" (loss {c.loss:.2f})" if math.isfinite(c.loss) else "")
    return ""


def _value(e: Evidence) -> str:
    """Every instrument's numbers, one clause each."""
    route, parts = e.hypothesis.route, []
    for r in e.necessity:
        if r.instrument == EDGE_PATCHING:
            parts.append(f"{r.text()} (n={r.n}, lengths {r.lengths}): {r.verdict}")
    order = lambda r: (KINDS.index(r.kind), REMOVAL_ONLY.index(r.counterfactual))  # noqa: E731
    mine = sorted((r for r in e.necessity if r.instrument == "routes" and r.route == route), key=order)
    if mine:
        parts.append(f"routes, read at {route} removed ({mine[0].n} prompts, lengths {mine[0].lengths}; clean "
                     f"{mine[0].clean:.2f}): " + ", ".join(f"{r.removal} {r.accuracy:.2f} [{r.lo:.2f}, {r.hi:.2f}]"
                                                           for r in mine))
    corrupt = [r for r in e.corrupt if r.route == route]
    if corrupt:
        parts.append("corrupt patching: " + ", ".join(f"{r.kind} {r.accuracy:.2f} [{r.lo:.2f}, {r.hi:.2f}]" for r in corrupt))
    if e.share is not None:
        parts.append(e.share.text)
    if e.circuit is not None:
        parts.append(e.circuit.text)
    return "; ".join(parts + [f"not used: {m}" for m in e.missing])


def _from_necessity(e: Evidence, verdict: str, readings: list[Reading]) -> tuple[str, Reading | None]:
    route = e.hypothesis.route
    shown = representative(readings, {"needed": "needed", "not needed": "not needed"}.get(verdict, "unclear"))
    if verdict == "needed":
        why = "needed"
    elif verdict == "not needed":
        carrier = _carrier(e)
        why = f"carried by {_directly(carrier)}; {route} not needed" if carrier else f"{route} not needed"
        if any(r.helps for r in readings if r.verdict == "not needed"):
            why += ", though it helps"
    elif verdict == "mixed":
        why = split_text(readings) or f"{route}: removals disagree"
    else:
        why = f"{route} unclear"
        if shown is not None:
            why += f": {shown.accuracy:.2f} of {shown.clean:.2f} left without it"
    return why, shown


def decide(e: Evidence) -> Decision:
    """The hypothesis's verdict on ``e.model`` by the module's rule.

    >>> from interp.figures.hypothesis_evidence import HYPOTHESES
    >>> r = lambda route, v, acc: Reading("routes", route, "value", "mean", 1.0, acc, acc, acc + 0.2, 16, v, "t.csv")
    >>> e = Evidence("m", HYPOTHESES["UB"], [r("o-1", "needed", 0.0), r("o", "not needed", 0.94)])
    >>> d = decide(e)
    >>> d.verdict, d.why, round(d.estimate, 2)
    ('contradicts', 'carried by o-1 directly; o not needed', 0.06)
    """
    route = e.hypothesis.route
    readings = e.of_route(route)
    necessity = route_verdict(readings)
    value, nan = _value(e), math.nan
    if necessity in NECESSITY_VERDICT:
        verdict = NECESSITY_VERDICT[necessity]
        why, shown = _from_necessity(e, necessity, readings)
        why += _share_clause(e, verdict) + _corrupt_clause(e, verdict) + _circuit_clause(e, verdict)
        per = ", ".join(f"{k} {v}" for k, v in kind_verdicts(readings).items())
        note = f"decided by removal ({per}); share and circuit beside"
        drop, lo, hi = shown.drop if shown is not None else (nan, nan, nan)
        return Decision(verdict, why, value, note, drop, lo, hi, shown.n if shown else 0,
                        _source(shown.source if shown else ""))
    untested = _untested(e, readings)
    if e.share is not None and e.share.verdict in SHARE_VERDICT:
        s = e.share
        verdict = SHARE_VERDICT[s.verdict]
        why = {"largest": "largest share", "smaller": f"{_directly(s.other)} carries a larger share",
               "unclear": "shares overlap"}[s.verdict] + f"; no removal {untested}"
        note = (f"decided by the share (no removal {untested}): {route}'s share minus the largest other's "
                f"{s.preference:+.2f} [{s.lo:+.2f}, {s.hi:+.2f}], bootstrap over prompts")
        return Decision(verdict, why, value, note, nan, nan, nan, s.n, _source(s.source))
    c = e.circuit
    if c is not None and c.verdict != "cannot say":
        verdict = {"in": "supports", "absent": "contradicts"}.get(c.verdict, "inconclusive")
        why = {"in": "in the circuit", "absent": "not in the circuit",
               "minor": f"in the circuit, loss under {MIN_LOSS:g}"}[c.verdict] + "; no removal or share"
        return Decision(verdict, why, value, "decided by the circuit's role edges (no removal or share could test it)",
                        nan, nan, nan, 0, _source(c.source))
    reason = _cannot_test_reason(e, readings)
    details = [x.text for x in (e.share, e.circuit) if x is not None and x.verdict in ("cannot test", "cannot say")]
    return Decision("cannot test", reason, value, "; ".join([reason, *details]), nan, nan, nan,
                    max((r.n for r in readings), default=e.share.n if e.share else 0),
                    _source(readings[0].source if readings else (e.share.source if e.share else "")))


def _untested(e: Evidence, readings: list[Reading]) -> str:
    return "could test it" if readings else "measured"


def _cannot_test_reason(e: Evidence, readings: list[Reading]) -> str:
    """Why nothing decided, in a few words: the copy's clean accuracy where it is under the floor everywhere."""
    cleans = [r.clean for r in readings] + [r.clean for r in e.corrupt] + ([e.share.clean] if e.share else [])
    if cleans and max(cleans) < FLOOR:
        return f"{e.hypothesis.task} at {max(cleans):.2f} clean"
    why = [e.share.why] if e.share is not None and e.share.why else []
    why += ["circuit cannot say"] if e.circuit is not None else []
    return "; ".join(why) or "nothing measured it"


def _source(text: str) -> str:
    """One file name (the claims table's ``source`` column holds a name)."""
    return text.split(", ")[0] if text else ""
