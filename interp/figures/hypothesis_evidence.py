"""What each instrument measured of the paper's two edge hypotheses, per model: UF copies through induction (the
reads at ``o + 1``), UB through anti-induction (the reads at ``o``). `gather` reads a results folder into one
`Evidence` per (model, task):

* the paper's edge patching (``edge_patching_*``): the accuracy with its edges removed (`necessity.edge_reading`;
  induction: the key read at ``o + 1``, anti-induction: the value read at ``o``, from a run without
  previous-token edges);
* route necessity (``circuit_routes_*`` with necessity rows): every route's value and key reads removed under
  the removal-only counterfactuals, and under corrupt patching beside them (`necessity.route_readings`, every
  head);
* route share (``circuit_routes_*``, value reads patched to the corrupt prompt's): the route's share of the
  logit-difference gap against the largest other route's (`share_reading`);
* the circuit's role edges (``circuit_*.json``, a saved `Circuit`): is the read in the circuit, and what does
  the circuit lose without it (`circuit_reading`).

A table that is absent leaves its instrument unused (``Evidence.missing`` says so); a damaged one is refused by
the validating reader, naming the file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from interp.core.naming import model_label, result_files, split_result_stem
from interp.core.published import read_published
from interp.core.stats import MIN_GAP
from interp.figures.necessity import EDGE_PATCHING, ROUTE_ORDER, Reading, edge_reading, route_readings

FLOOR = 0.2  # clean exact-copy accuracy below which there is no copy to route
MIN_ROUTE_GAP = MIN_GAP  # mean logit-difference gap (interp.core.stats) below which a share is noise
MIN_ROUTE_PROMPTS = 8  # a bootstrap over fewer prompts has no spread to speak of
MAX_ROUTE_SHARE = 2.0  # a "share" moving the metric beyond twice the gap is not a share of it
FAITHFUL = 0.8  # a circuit keeping less of the gap says little by leaving a read out
MIN_LOSS = 0.05  # a read whose removal costs the circuit less than this share of the gap is a minor part
Rows = list[dict]


@dataclass(frozen=True)
class Hypothesis:
    """One of the paper's edge hypotheses: ``task`` copies through the reads at ``route``; its edge patching
    removes the ``condition`` edges, the ``edge_kind`` read at that route."""

    task: str
    route: str
    condition: str
    edge_kind: str
    claim: str


HYPOTHESES = {"UF": Hypothesis("UF", "o+1", "induction", "key", "UF's copy runs through induction (reads at o+1)"),
              "UB": Hypothesis("UB", "o", "anti_induction", "value", "UB's copy runs through anti-induction (reads at o)")}


@dataclass(frozen=True)
class ShareReading:
    """The route's share of the gap and the largest other route's, the difference with its bootstrap interval,
    and a verdict: ``largest`` (difference above 0), ``smaller`` (below), ``unclear`` or ``cannot test``."""

    verdict: str
    route: str
    share: float
    other: str
    other_share: float
    preference: float
    lo: float
    hi: float
    n: int
    clean: float  # the clean exact-copy accuracy over the prompts
    text: str
    source: str
    why: str = ""  # why no share, in a few words (cannot test)


@dataclass(frozen=True)
class CircuitReading:
    """The hypothesis's reads in the most faithful usable circuit: ``in`` (with a loss of at least `MIN_LOSS`, or
    not measured), ``minor`` (in, losing less), ``absent`` (from a circuit keeping at least `FAITHFUL` of the
    gap) or ``cannot say``."""

    verdict: str
    loss: float
    text: str
    source: str


@dataclass
class Evidence:
    """Everything measured of one hypothesis on one model."""

    model: str
    hypothesis: Hypothesis
    necessity: list[Reading] = field(default_factory=list)  # removal-only: every route (routes), its own (edges)
    corrupt: list[Reading] = field(default_factory=list)
    share: ShareReading | None = None
    circuit: CircuitReading | None = None
    missing: list[str] = field(default_factory=list)

    def of_route(self, route: str) -> list[Reading]:
        return [r for r in self.necessity if r.route == route]


def table_model(rows: Sequence[Mapping], path: Path) -> str:
    """The model a table's rows name (a model loaded from a folder by the folder's name), else its file name's."""
    raw = str(rows[0].get("model") or split_result_stem(path.stem)[1])
    return model_label(raw) if "/" in raw else raw


def share_reading(tables: Sequence[tuple[str, Rows]], route: str) -> ShareReading | None:
    """The share rows (one route's value reads patched to the corrupt prompt's) of one model and task, pooled
    over lengths and tables: ``route``'s share against the largest other's (every head, else the circuit's).
    Too few prompts, too small a gap, a share beyond any route's reach or a copy below `FLOOR` give
    ``cannot test``, with the reason and no share.

    >>> rows = [{"task": "UB", "length": 5, "head_set": "all", "prompt": i, "route": r, "clean_metric": 2.0,
    ...          "counterfactual_metric": -2.0, "correct": True,
    ...          "patched_metric": {"o": 1.5, "o-1": -2.0, "o+1": 1.5 + 0.1 * (i % 2)}[r]} for i in range(8)
    ...         for r in ("o-1", "o", "o+1")]
    >>> s = share_reading([("circuit_routes_m_UB.csv", rows)], "o")
    >>> s.verdict, s.other, round(s.share, 2), round(s.other_share, 2)
    ('smaller', 'o-1', 0.12, 1.0)
    """
    from interp.experiments.routes import is_share_row, route_preference, route_shares

    by_set: dict[str, list[tuple[str, Rows]]] = {}
    for source, rows in tables:
        for head_set in ("all", "circuit"):
            mine = [r for r in rows if r.get("head_set") == head_set and is_share_row(r)]
            if mine:
                by_set.setdefault(head_set, []).append((source, mine))
    if not by_set:
        return None
    head_set = "all" if "all" in by_set else "circuit"
    units: dict[tuple, Rows] = {}
    for index, (source, rows) in enumerate(by_set[head_set]):
        for key, unit in _route_units(rows, source).items():
            units[(index, *key)] = unit
    sources = ", ".join(source for source, _ in by_set[head_set])
    # one resampling unit per (table, length, prompt)
    pooled = [{**r, "prompt": i} for i, unit in enumerate(units.values()) for r in unit]
    gaps = [float(u[0]["clean_metric"]) - float(u[0]["counterfactual_metric"]) for u in units.values()]
    accuracy = sum(bool(u[0]["correct"]) for u in units.values()) / len(units)
    lengths = ",".join(str(n) for n in sorted({key[1] for key in units}))
    context = f"{head_set} heads; {accuracy:.2f} clean, lengths {lengths}, {len(units)} prompts"
    mean_gap = sum(gaps) / len(gaps)
    nan = math.nan

    def untestable(text: str, why: str) -> ShareReading:
        return ShareReading("cannot test", route, nan, "", nan, nan, nan, nan, len(units), accuracy, f"share: {text}",
                            sources, why)

    if len(units) < MIN_ROUTE_PROMPTS:
        return untestable(f"{len(units)} prompt(s); a share needs at least {MIN_ROUTE_PROMPTS}", "too few prompts for a share")
    if not mean_gap >= MIN_ROUTE_GAP:
        return untestable(f"mean gap (clean - counterfactual metric) {mean_gap:.3g} logits; a share of it needs at "
                          f"least {MIN_ROUTE_GAP:g}", "gap too small for a share")
    shares = route_shares(pooled)
    preference = route_preference(pooled, route)
    if wild := [s for s in shares.values() if not abs(s.share) <= MAX_ROUTE_SHARE]:
        return untestable(f"route {wild[0].route}'s share lies beyond +-{MAX_ROUTE_SHARE:g}: the patch "
                          "moves the metric further than the whole gap it would be a share of", "shares beyond reach")
    if accuracy < FLOOR:
        return untestable(f"{accuracy:.2f} clean: no copy to route", "no copy to route")
    other = max((s for s in shares.values() if s.route != route), key=lambda s: s.share)
    verdict = "largest" if preference.lo > 0 else "smaller" if preference.hi < 0 else "unclear"
    text = ("share of the gap " + ", ".join(f"{r} {shares[r].share:.2f} [{shares[r].lo:.2f}, {shares[r].hi:.2f}]"
                                           for r in ROUTE_ORDER if r in shares) + f" ({context})")
    return ShareReading(verdict, route, shares[route].share, other.route, other.share, preference.share, preference.lo,
                        preference.hi, preference.n, accuracy, text, sources)


def _route_units(rows: Rows, source: str) -> dict[tuple[int, int], Rows]:
    """The share rows of each (length, prompt): every route once, one clean and one counterfactual run."""
    units: dict[tuple[int, int], Rows] = {}
    for r in rows:
        units.setdefault((int(r["length"]), int(r["prompt"])), []).append(r)
    for (length, prompt), mine in units.items():
        where = f"results file {source}: prompt {prompt} of length {length} ({mine[0]['head_set']} heads)"
        if sorted(str(r["route"]) for r in mine) != sorted(ROUTE_ORDER):
            raise ValueError(f"{where} has routes {', '.join(str(r['route']) for r in mine)}; expected each of "
                             f"{', '.join(ROUTE_ORDER)} once")
        for column in ("clean_metric", "counterfactual_metric", "correct"):
            if len({r[column] for r in mine}) > 1:
                raise ValueError(f"{where}: {column} differs between its routes ({', '.join(str(r[column]) for r in mine)}); "
                                 "expected one value per prompt (one clean and one counterfactual run)")
    return units


def circuit_reading(circuits: Sequence[tuple[str, object]], hypothesis: Hypothesis) -> CircuitReading | None:
    """The hypothesis's reads (value and key reads of the copy position ``c`` at its route) in the most faithful
    usable circuit of ``circuits`` (``(file name, Circuit)`` of one model and task).

    >>> from interp.interventions.circuits.circuit import Circuit, CircuitEdge
    >>> c = Circuit("m", "UB", "masks", "roles", (CircuitEdge("value", "a1.1", "a1.1.v", "c", "o", loss=0.9),), 0.98,
    ...             1.0, 1.0, 29.0, -29.0, 8, 1049)
    >>> r = circuit_reading([("circuit_m_UB_masks.json", c)], HYPOTHESES["UB"])
    >>> r.verdict, r.loss
    ('in', 0.9)
    """
    usable, reasons = [], []
    for source, c in circuits:
        why = _circuit_problem(c)
        if why:
            reasons.append(f"{source}: {why}")
        else:
            usable.append((source, c))
    if not usable:
        return CircuitReading("cannot say", math.nan, "circuit: " + "; ".join(reasons), circuits[0][0]) if circuits else None
    source, c = max(usable, key=lambda sc: (sc[1].recovered, -len(sc[1])))
    reads = [e for e in c.edges if e.kind in ("value", "key") and e.role == "c" and e.key_role == hypothesis.route]
    length = c.config.get("length") if isinstance(c.config, dict) else None
    where = (f"circuit ({c.method}{f', L{length}' if length else ''}; {len(c)} of {c.total_edges:,} edges, recovered "
             f"{c.recovered:.2f})")
    if not reads:
        if c.recovered < FAITHFUL:
            return CircuitReading("cannot say", math.nan, f"{where}: no read at {hypothesis.route}, but the circuit keeps "
                                  f"under {FAITHFUL:g} of the gap", source)
        return CircuitReading("absent", math.nan, f"{where}: no read at {hypothesis.route}", source)
    losses = [e.loss for e in reads if e.loss is not None and math.isfinite(e.loss)]
    loss = max(losses) if losses else math.nan
    shown = ", ".join(f"{e.reader} {e.kind}" for e in reads[:4]) + (f" and {len(reads) - 4} more" if len(reads) > 4 else "")
    verdict = "minor" if losses and loss < MIN_LOSS else "in"
    lost = f", largest loss {loss:.2f}" if losses else ", loss not measured"
    return CircuitReading(verdict, loss, f"{where}: reads at {hypothesis.route} by {shown}{lost}", source)


def check_circuit(c, path: Path) -> None:
    """Refuse, naming the file, a saved circuit whose numbers no circuit has (it would give a verdict)."""
    numbers = {"recovered": c.recovered, "accuracy": c.accuracy, "clean_accuracy": c.clean_accuracy,
               "clean_metric": c.clean_metric, "empty_metric": c.empty_metric}
    for name, x in numbers.items():
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) \
                or (name.endswith("accuracy") and not 0 <= x <= 1):
            raise ValueError(f"results file {path}: {name} is {x!r}, expected a finite number"
                             + (" in [0, 1]" if name.endswith("accuracy") else ""))
    if isinstance(c.n_prompts, bool) or not isinstance(c.n_prompts, int) or c.n_prompts < 1:
        raise ValueError(f"results file {path}: n_prompts is {c.n_prompts!r}, expected an integer >= 1")
    for e in c.edges:
        if e.loss is not None and (isinstance(e.loss, bool) or not isinstance(e.loss, (int, float))
                                   or not math.isfinite(e.loss)):
            raise ValueError(f"results file {path}: edge {e.label!r} has loss {e.loss!r}, expected a finite number")


def _circuit_problem(c) -> str:
    """Why a (sound) circuit cannot speak to a hypothesis ("" if it can)."""
    if c.clean_accuracy < FLOOR:
        return f"{c.task} at {c.clean_accuracy:.2f} clean"
    if not c.clean_metric - c.empty_metric >= MIN_GAP:
        return f"gap {c.clean_metric - c.empty_metric:.3g} logits, under {MIN_GAP:g}"
    if any("weak task" in str(note) for note in c.notes):
        return "found on a weak task"
    if c.grain != "roles":
        return f"a circuit of the {c.grain} grain has no attention reads"
    return ""


def gather(results_dir: str | Path) -> list[Evidence]:
    """One `Evidence` per (model, hypothesis) that some table in ``results_dir`` measured, models in the order
    their tables are first met (edge patching, routes, circuits).

    >>> [(e.model, e.hypothesis.task) for e in gather("results")][:2]  # doctest: +SKIP
    [('gemma-3-270m', 'UF'), ('gemma-3-270m', 'UB')]
    """
    from interp.figures.circuit_files import read_circuit

    results_dir = Path(results_dir)
    edges: dict[str, list[tuple[str, Rows]]] = {}
    routes: dict[tuple[str, str], list[tuple[str, Rows]]] = {}
    circuits: dict[tuple[str, str], list[tuple[str, object]]] = {}
    order: dict[str, None] = {}
    for path in result_files(results_dir, "edge_patching"):
        rows = read_published(path, "edge_patching")
        order.setdefault(model := table_model(rows, path))
        edges.setdefault(model, []).append((path.name, rows))
    for path in result_files(results_dir, "circuit_routes"):
        rows = read_published(path, "circuit_routes")
        order.setdefault(model := table_model(rows, path))
        for task in sorted({str(r["task"]) for r in rows}):
            routes.setdefault((model, task), []).append((path.name, [r for r in rows if r["task"] == task]))
    for path in result_files(results_dir, "circuit", ".json"):
        circuit = read_circuit(path)  # None: a table of an earlier format, not a saved circuit
        if circuit is not None:
            check_circuit(circuit, path)
            model = model_label(circuit.model) if "/" in circuit.model else circuit.model
            rest = split_result_stem(path.stem)[1]
            if not (rest == model or rest.startswith(model + "_")) or circuit.task not in rest.split("_"):
                raise ValueError(f"results file {path}: a circuit of {circuit.model} {circuit.task}; expected the model "
                                 "and task its file name says")
            order.setdefault(model)
            circuits.setdefault((model, circuit.task), []).append((path.name, circuit))
    out = []
    for model in order:
        for task, hypothesis in HYPOTHESES.items():
            mine_edges = [(s, [r for r in rows if r.get("task") == task]) for s, rows in edges.get(model, [])]
            mine_edges = [(s, rows) for s, rows in mine_edges if rows]
            mine_routes, mine_circuits = routes.get((model, task), []), circuits.get((model, task), [])
            if mine_edges or mine_routes or mine_circuits:
                out.append(_evidence(model, hypothesis, mine_edges, mine_routes, mine_circuits))
    return out


def _evidence(model: str, hypothesis: Hypothesis, edges: list[tuple[str, Rows]], routes: list[tuple[str, Rows]],
              circuits: list[tuple[str, object]]) -> Evidence:
    evidence = Evidence(model, hypothesis)
    for source, rows in edges:
        found = edge_reading(rows, hypothesis.task, hypothesis.condition, hypothesis.route, hypothesis.edge_kind, source)
        if found is not None:
            evidence.necessity.append(found)
    if not evidence.necessity:
        evidence.missing.append(f"no {EDGE_PATCHING} table")
    if routes:
        evidence.necessity += route_readings(routes)
        evidence.corrupt = route_readings(routes, counterfactuals=("corrupt",))
        if not any(r.instrument == "routes" for r in evidence.necessity):
            evidence.missing.append("route necessity not measured (a route table of shares alone)")
        evidence.share = share_reading(routes, hypothesis.route)
    else:
        evidence.missing.append("no route table")
    evidence.circuit = circuit_reading(circuits, hypothesis)
    if evidence.circuit is None:
        evidence.missing.append("no saved circuit")
    return evidence


__all__ = ["FAITHFUL", "FLOOR", "HYPOTHESES", "MAX_ROUTE_SHARE", "MIN_LOSS", "MIN_ROUTE_GAP", "MIN_ROUTE_PROMPTS",
           "CircuitReading", "Evidence", "Hypothesis", "ShareReading", "circuit_reading", "gather",
           "share_reading", "table_model", "check_circuit"]
