"""Each route's share of the metric gap: how much of ``clean - counterfactual prompt`` (logit difference)
removing the route's reads alone takes away, with a bootstrap interval over prompts.

A share is read from the route table's *share rows*: one route removed alone (``test`` necessity), its
value reads (``kind`` value) patched to the counterfactual prompt's (``counterfactual`` corrupt), the
rows the table held before it held anything else; `route_shares` takes another kind or counterfactual
when asked. Tables without those columns are share rows throughout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import torch

from interp.experiments.routes.measure import RouteRow, route_rows
from interp.experiments.routes.reads import JOINT_ROUTES, ROUTES, Removal, RouteRead
from interp.experiments.routes.removal import Heads
from interp.interventions.circuits.task import CircuitTask
from interp.models.bridge import TransformerBridge

@dataclass(frozen=True)
class RouteEffect:
    """One prompt's metric clean, on the counterfactual prompt, and with one route's value reads patched
    to the counterfactual prompt's (a share row without the other columns)."""

    prompt: int
    route: str
    heads: str  # "all", or the heads patched as "layer.head;layer.head"
    clean_metric: float
    counterfactual_metric: float
    patched_metric: float
    correct: bool  # the clean prompt is copied exactly (teacher-forced, every answer token)

    def as_row(self) -> dict:
        return asdict(self)


Effects = Sequence[Mapping | RouteRow | RouteEffect]


@dataclass(frozen=True)
class RouteShare:
    """A route's share of the metric gap (mean over prompts of clean - patched, over clean - counterfactual),
    with its percentile bootstrap interval over prompts."""

    route: str
    share: float
    lo: float
    hi: float
    n: int


def route_effects(model: TransformerBridge, task: CircuitTask, heads: Heads | None = None,
                  batch_size: int = 8) -> list[RouteEffect]:
    """Per prompt and route (`ROUTES`), the metric with that route's value reads patched to the
    counterfactual prompt's values; ``heads`` (layer -> query heads) restricts the patch, default every head.

    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> model = load_model("planted-ub", device="cpu")
    >>> effects = route_effects(model, copying_task(model.tokenizer, "UB", 4, 2))
    >>> drop = {e.route: e.clean_metric - e.patched_metric for e in effects if e.prompt == 0}
    >>> drop["o"] > 10, abs(drop["o-1"]) < 0.1, abs(drop["o+1"]) < 0.1   # its planted anti-induction edge
    (True, True, True)
    """
    removals = [Removal((RouteRead(route, "value"),)) for route in ROUTES]
    rows = route_rows(model, task, heads=heads, removals=removals, counterfactuals=["corrupt"], batch_size=batch_size)
    return [RouteEffect(r.prompt, r.route, r.heads, r.clean_metric, r.counterfactual_metric, r.patched_metric, r.correct)
            for r in sorted(rows, key=lambda r: (r.prompt, list(ROUTES).index(r.route)))]


def is_share_row(row: Mapping, kind: str = "value", counterfactual: str = "corrupt") -> bool:
    """Whether ``row`` removes one route alone, through ``kind`` reads, under ``counterfactual``
    (a row without those columns is one; a route the toolkit does not know is left to the reader to refuse).

    >>> is_share_row({"route": "o"}), is_share_row({"route": "o", "counterfactual": "zero"})
    (True, False)
    >>> is_share_row({"route": "o-1+o", "kind": "value", "test": "necessity", "counterfactual": "corrupt"})
    False
    """
    return (row["route"] not in {"+".join(j) for j in JOINT_ROUTES}
            and row.get("kind", "value") == kind and row.get("test", "necessity") == "necessity"
            and row.get("counterfactual", "corrupt") == counterfactual)


def _gap_and_drops(effects: Effects, kind: str = "value",
                   counterfactual: str = "corrupt") -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per prompt, clean - counterfactual, and per route clean - patched (prompts in sorted order), from
    the share rows of ``kind`` and ``counterfactual``."""
    rows = [e.as_row() if hasattr(e, "as_row") else dict(e) for e in effects]
    rows = [r for r in rows if is_share_row(r, kind, counterfactual)]
    prompts = sorted({int(r["prompt"]) for r in rows})
    if not prompts:
        raise ValueError(f"route effects: none given (no rows of one route's {kind} reads under {counterfactual})")
    index = {p: i for i, p in enumerate(prompts)}
    gap = torch.zeros(len(prompts), dtype=torch.float64)
    drops: dict[str, torch.Tensor] = {}
    for r in rows:
        i = index[int(r["prompt"])]
        gap[i] = float(r["clean_metric"]) - float(r["counterfactual_metric"])
        drops.setdefault(str(r["route"]), torch.full((len(prompts),), float("nan"), dtype=torch.float64))[i] = \
            float(r["clean_metric"]) - float(r["patched_metric"])
    for route, drop in drops.items():
        if drop.isnan().any():
            raise ValueError(f"route effects: route {route!r} lacks some of the prompts")
    return gap, drops


def _quantiles(boot: torch.Tensor) -> tuple[float, float]:
    lo, hi = torch.quantile(boot, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    return lo, hi


def route_shares(effects: Effects, n_boot: int = 2000, seed: int = 0, *, kind: str = "value",
                 counterfactual: str = "corrupt") -> dict[str, RouteShare]:
    """Each route's share of the metric gap, ``mean(clean - patched) / mean(clean - counterfactual)``, with
    a 95% percentile interval from ``n_boot`` resamples of the prompts (the same resample for every route).

    >>> rows = [{"prompt": i, "route": r, "clean_metric": 2.0, "counterfactual_metric": -2.0,
    ...          "patched_metric": {"o-1": -2.0 + 0.1 * (i % 2), "o": 2.0, "o+1": 1.0}[r]} for i in range(8) for r in ROUTES]
    >>> {r: round(s.share, 2) for r, s in route_shares(rows).items()}
    {'o-1': 0.99, 'o': 0.0, 'o+1': 0.25}
    """
    gap, drops = _gap_and_drops(effects, kind, counterfactual)
    generator = torch.Generator().manual_seed(seed)
    resample = torch.randint(0, len(gap), (n_boot, len(gap)), generator=generator)
    shares = {}
    for route, drop in drops.items():
        lo, hi = _quantiles(drop[resample].mean(1) / gap[resample].mean(1))
        shares[route] = RouteShare(route, float(drop.mean() / gap.mean()), lo, hi, len(gap))
    return shares


def route_preference(effects: Effects, expected: str, n_boot: int = 2000, seed: int = 0, *, kind: str = "value",
                     counterfactual: str = "corrupt") -> RouteShare:
    """How much more of the gap ``expected`` carries than the strongest other route: the share difference
    with its bootstrap interval (the same resamples for both), named ``expected``.

    >>> rows = [{"prompt": i, "route": r, "clean_metric": 2.0, "counterfactual_metric": -2.0,
    ...          "patched_metric": {"o-1": -2.0, "o": 2.0, "o+1": 1.0 + 0.1 * (i % 2)}[r]} for i in range(8) for r in ROUTES]
    >>> d = route_preference(rows, "o-1")
    >>> round(d.share, 2), d.lo > 0
    (0.76, True)
    """
    gap, drops = _gap_and_drops(effects, kind, counterfactual)
    if expected not in drops:
        raise ValueError(f"route_preference: no route {expected!r} among {sorted(drops)}")
    others = [route for route in drops if route != expected]
    generator = torch.Generator().manual_seed(seed)
    resample = torch.randint(0, len(gap), (n_boot, len(gap)), generator=generator)

    def difference(sample: torch.Tensor) -> torch.Tensor:
        g = gap[sample].mean(-1)
        best_other = torch.stack([drops[o][sample].mean(-1) / g for o in others]).amax(0)
        return drops[expected][sample].mean(-1) / g - best_other

    lo, hi = _quantiles(difference(resample))
    point = float(difference(torch.arange(len(gap))[None])[0])
    return RouteShare(expected, point, lo, hi, len(gap))
