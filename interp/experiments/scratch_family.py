"""What decides the route a copying model learns: a family of small transformers trained from scratch on
UF and UB with rotary, learned absolute (GPT-2, no random offset) and no position encoding (NoPE), several
seeds, each kept at two training lengths ([`interp.experiments.scratch_family_train`][interp.experiments.scratch_family_train]),
and for every model its route table and the paper's edge patching
([`interp.experiments.scratch_family_measure`][interp.experiments.scratch_family_measure]).

One cell per training run (task, encoding, seed): train what is missing, then measure each of its models
loaded by name. Cells run on an executor; each finished cell is journalled, so a killed study started
again measures only the runs it had not finished and trains only the models that are not built.

The learned-route rule (`learned_route`): a model that copies its training lengths with exact match below
`LEARNED_AT` has learned no route ("not learned"). Otherwise, at each route length, the learned route is
the reads the copy *needs*: the routes whose value read, removed alone (replaced by its mean over the
prompts at that position: information taken away, no competitor brought in), leaves an exact-match
interval wholly below half the clean accuracy (the routes module's verdict "needed"), joined by ``+``
(each needed: an AND); "o-1 or o" when neither is needed alone but removing both is; "other" when none
of ``o-1``, ``o``, ``o+1`` is needed (the copy reads elsewhere, or through reads that stand in for each
other). Beside it, `carrying_routes` lists the routes whose share of the gap (corrupt patching of the
value read) has a 95% interval starting at `CARRIES` or more. The edge column (`edges_needed`) says which
of the paper's edge removals lower the copy's exact match: the removal's Wilson interval lies wholly
below the unpatched one's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import torch
from tqdm.auto import tqdm

from interp.core.executor import Executor, SerialExecutor
from interp.core.journal import RowJournal, RowShape
from interp.core.stats import MIN_GAP
from interp.experiments.scratch_family_measure import MeasureConfig, measure_model
from interp.experiments.scratch_family_train import FamilyConfig, FamilyRun, train_run

LEARNED_AT = 0.9  # in-distribution exact match of a model that learned its task
CARRIES = 0.2  # lower end of a route share's interval for the route to count as carrying the copy
NECESSITY_BY = "mean"  # the removal-only counterfactual the learned route is decided by
ROUTE_COLUMNS = {"o-1": "om1", "o": "o", "o+1": "op1"}  # table columns may hold letters, digits and _ only
JOINT = "o-1+o"
EDGE_COLUMNS = {"none": "none", "induction": "ind", "anti_induction": "anti"}
# A journal line: one finished run with the rows of every table.
FAMILY_ROW_SHAPE: RowShape = {"run": str, "models": list, "routes": list, "edges": list, "circuits": list}
TABLES = ("models", "routes", "edges", "circuits")


@dataclass(frozen=True)
class _Shared:
    family: FamilyConfig
    measure: MeasureConfig
    progress: bool


def _family_cell(_model: None, shared: _Shared, run: FamilyRun) -> dict:
    """Train one run's missing models and measure each (module-level, so that it pickles)."""
    from interp.models import load_model

    if shared.family.scratch.threads:
        torch.set_num_threads(shared.family.scratch.threads)
    rows = train_run(run, shared.family, progress=shared.progress)
    out = {"run": run.label, "models": [asdict(row) for row in rows], "routes": [], "edges": [], "circuits": []}
    for row in rows:
        measured = measure_model(load_model(row.model, device="cpu"), row.model, run.task, shared.measure)
        for kind, part in measured.items():
            out[kind] += part
    return out


def family_study(family: FamilyConfig = FamilyConfig(), measure: MeasureConfig = MeasureConfig(), *,
                 journal: RowJournal | None = None, executor: Executor | None = None,
                 progress: bool = False) -> dict[str, list[dict]]:
    """Every run of ``family``, trained where missing and measured; returns the rows of each table
    (`TABLES`). With a ``journal``, runs an earlier study finished are taken from it.

    >>> tables = family_study(FamilyConfig(seeds=(1,)))  # doctest: +SKIP
    >>> sorted(tables)  # doctest: +SKIP
    ['circuits', 'edges', 'models', 'routes']
    """
    longest = family.scratch.train_range[1]
    if max(measure.edge_lengths) > longest:
        raise ValueError(f"edge_lengths={measure.edge_lengths}: the family is measured in distribution, on lengths up "
                         f"to {longest} (its training range {family.scratch.train_range})")
    runs = family.runs()
    done = {row["run"]: row for row in (journal.done() if journal is not None else [])}
    todo = [run for run in runs if run.label not in done]
    executor = executor or SerialExecutor()
    shared = _Shared(family, measure, progress and executor.name == "serial")
    with tqdm(total=len(runs), initial=len(runs) - len(todo), desc="scratch family", unit="run",
              disable=not progress) as bar:
        for index, result in executor.map(_family_cell, todo, shared=shared):
            if journal is not None:
                journal.add(result)
            done[todo[index].label] = result
            bar.update()
    return {kind: [row for run in runs for row in done[run.label][kind]] for kind in TABLES}


def learned_route(id_accuracy: float, verdicts: Mapping[str, str]) -> str:
    """The rule of this module's docstring: ``verdicts`` maps a route (and ``o-1+o``) to the necessity
    verdict of its value read at one length.

    >>> learned_route(1.0, {"o-1": "needed", "o": "needed", "o+1": "not needed"})
    'o-1 + o'
    >>> learned_route(1.0, {"o-1": "unclear", "o": "not needed", "o+1": "not needed", "o-1+o": "needed"})
    'o-1 or o'
    >>> learned_route(1.0, {"o-1": "not needed"}), learned_route(0.5, {"o-1": "needed"})
    ('other', 'not learned')
    """
    if id_accuracy < LEARNED_AT:
        return "not learned"
    needed = [route for route in ROUTE_COLUMNS if verdicts.get(route) == "needed"]
    if needed:
        return " + ".join(needed)
    return "o-1 or o" if verdicts.get(JOINT) == "needed" else "other"


def carrying_routes(shares: Mapping[str, tuple[float, float, float]], gap: float) -> str:
    """The routes whose share of the gap, ``(share, lo, hi)``, has an interval starting at `CARRIES` or
    more, in route order; "no gap" when the gap is under `interp.core.stats.MIN_GAP` logits (no share to
    speak of).

    >>> carrying_routes({"o-1": (0.7, 0.6, 0.8), "o": (0.3, 0.25, 0.35), "o+1": (0.0, -0.1, 0.1)}, 9.0)
    'o-1 + o'
    >>> carrying_routes({"o-1": (0.1, -0.1, 0.3)}, 9.0), carrying_routes({"o-1": (1.0, 0.9, 1.0)}, 0.1)
    ('none', 'no gap')
    """
    if gap < MIN_GAP:
        return "no gap"
    return " + ".join(route for route in ROUTE_COLUMNS if route in shares and shares[route][1] >= CARRIES) or "none"


def edges_needed(edges: Mapping[str, Mapping]) -> str:
    """Which edge removals lower exact match (Wilson interval wholly below the unpatched one's).

    >>> row = lambda lo, hi: {"ci_low": lo, "ci_high": hi}
    >>> edges_needed({"none": row(0.9, 1.0), "induction": row(0.85, 0.99), "anti_induction": row(0.0, 0.05)})
    'anti-induction'
    """
    if "none" not in edges:
        return ""
    needed = [label for name, label in (("induction", "induction"), ("anti_induction", "anti-induction"))
              if name in edges and edges[name]["ci_high"] < edges["none"]["ci_low"]]
    return " + ".join(needed) or "neither"


def _is(row: Mapping, kind: str, test: str, counterfactual: str) -> bool:
    return (row["kind"], row["test"], row["counterfactual"]) == (kind, test, counterfactual)


def summary_rows(models: Sequence[Mapping], routes: Sequence[Mapping], edges: Sequence[Mapping]) -> list[dict]:
    """One row per model and route length: in-distribution accuracy; each route's share of the gap with its
    interval (``share_<om1|o|op1>[_lo|_hi]``, value reads, corrupt patching) and the gap; the exact match
    with each route's value read removed (``need_<om1|o|op1|om1_o>[_lo|_hi]``, `NECESSITY_BY` removal,
    Wilson intervals); the edge-patching accuracies with their Wilson intervals (``acc_<none|ind|anti>[_lo|_hi]``)
    at that length; the learned route, the carrying routes and the edges needed.

    >>> models = [{"model": "m", "task": "UB", "positional": "rope", "seed": 1, "steps": 8, "id_accuracy": 1.0,
    ...            "id_lo": 0.9, "id_hi": 1.0, "id_n": 40}]
    >>> routes = [{"model": "m", "length": 5, "route": r, "kind": "value", "test": "necessity", "counterfactual": c,
    ...            "share": v, "share_lo": v - 0.1, "share_hi": v + 0.1, "accuracy": 1 - v, "accuracy_lo": 0.9 - v,
    ...            "accuracy_hi": 1.1 - v, "verdict": "needed" if v > 0.5 else "not needed", "gap": 9.0}
    ...           for r, v in (("o-1", 0.0), ("o", 0.1), ("o+1", 0.9), ("o-1+o", 0.1)) for c in ("corrupt", "mean")]
    >>> edges = [{"model": "m", "length": 5, "condition": c, "accuracy": a, "ci_low": a - 0.05, "ci_high": a + 0.05,
    ...           "n_examples": 100} for c, a in (("none", 0.95), ("induction", 0.9), ("anti_induction", 0.5))]
    >>> row = summary_rows(models, routes, edges)[0]
    >>> row["learned_route"], row["carrying_routes"], row["share_op1"], round(row["need_op1"], 2), row["edges_needed"]
    ('o+1', 'o+1', 0.9, 0.1, 'anti-induction')
    """
    shares: dict[tuple, dict] = defaultdict(dict)
    needs: dict[tuple, dict] = defaultdict(dict)
    for r in routes:
        key = (r["model"], int(r["length"]))
        if _is(r, "value", "necessity", "corrupt") and r["route"] in ROUTE_COLUMNS:
            shares[key][r["route"]] = r
        if _is(r, "value", "necessity", NECESSITY_BY):
            needs[key][r["route"]] = r
    by_edge: dict[tuple, dict] = defaultdict(dict)
    for e in edges:
        by_edge[(e["model"], int(e["length"]))][e["condition"]] = e
    rows = []
    for model in models:
        keys = ("model", "task", "positional", "seed", "steps", "id_accuracy", "id_lo", "id_hi", "id_n")
        for length in sorted(length for name, length in shares if name == model["model"]):
            key = (model["model"], length)
            row = {k: model[k] for k in keys} | {"length": length}
            for route, column in ROUTE_COLUMNS.items():
                if (r := shares[key].get(route)) is not None:
                    row |= {f"share_{column}": r["share"], f"share_{column}_lo": r["share_lo"], f"share_{column}_hi": r["share_hi"]}
            row["gap"] = next(iter(shares[key].values()))["gap"]
            for route, column in (*ROUTE_COLUMNS.items(), (JOINT, "om1_o")):
                if (r := needs[key].get(route)) is not None:
                    row |= {f"need_{column}": r["accuracy"], f"need_{column}_lo": r["accuracy_lo"],
                            f"need_{column}_hi": r["accuracy_hi"]}
            for condition, column in EDGE_COLUMNS.items():
                if (e := by_edge[key].get(condition)) is not None:
                    row |= {f"acc_{column}": e["accuracy"], f"acc_{column}_lo": e["ci_low"], f"acc_{column}_hi": e["ci_high"]}
                    row["edge_n"] = e["n_examples"]
            row["learned_route"] = learned_route(model["id_accuracy"], {r: v["verdict"] for r, v in needs[key].items()})
            row["carrying_routes"] = carrying_routes(
                {r: (v["share"], v["share_lo"], v["share_hi"]) for r, v in shares[key].items()}, row["gap"])
            row["edges_needed"] = edges_needed(by_edge[key])
            rows.append(row)
    return rows


def verdict_rows(summary: Sequence[Mapping]) -> list[dict]:
    """Which route each task, position encoding and training length learns: one row per (task, positional,
    steps, length) with the seeds' learned routes (``seed:route`` joined by ``;``) and how many seeds share
    the most common one.

    >>> rows = [{"task": "UB", "positional": "rope", "steps": 8, "length": 5, "seed": s, "learned_route": r}
    ...         for s, r in ((1, "o+1"), (2, "o+1"), (3, "o-1"))]
    >>> row = verdict_rows(rows)[0]
    >>> row["routes"], row["most_common"], row["agreeing"]
    ('1:o+1; 2:o+1; 3:o-1', 'o+1', 2)
    """
    groups: dict[tuple, list[Mapping]] = defaultdict(list)
    for row in summary:
        groups[(row["task"], row["positional"], row["steps"], row["length"])].append(row)
    out = []
    for (task, positional, steps, length), group in groups.items():
        group = sorted(group, key=lambda r: r["seed"])
        counts: dict[str, int] = defaultdict(int)
        for r in group:
            counts[r["learned_route"]] += 1
        common = max(counts, key=lambda k: counts[k])
        out.append({"task": task, "positional": positional, "steps": steps, "length": length, "seeds": len(group),
                    "routes": "; ".join(f"{r['seed']}:{r['learned_route']}" for r in group),
                    "most_common": common, "agreeing": counts[common]})
    return out
