"""Which route a copy reads its answer through: the exact effect of patching, at every copy position
``t``, the value each head reads from ``o(t) - 1``, ``o(t)`` or ``o(t) + 1`` (``o(t)``: the earlier
occurrence of ``t``'s token), per prompt, and each route's share of the metric gap with a bootstrap
interval over prompts.

The paper's edges (`interp.interventions.edges.data.CopyingPrompts`): induction reads the token after
the earlier occurrence, ``o + 1``, the answer itself for UF; anti-induction reads ``o``, whose residual
holds its previous token (written there by a previous-token head), the answer for UB. Reading ``o - 1``
directly is a third route, and a model can use yet others (scratch-ub reads ``o + 1``, where a
two-back head wrote the answer). A route's value reads are patched to the counterfactual prompt's values
at the same positions (the circuit study's ``corrupt`` counterfactual), with `interp.interventions.edges`
value edges. The metric is taken over the answers a route can carry: every copied token after the first
(the first is predicted at the separator, which has no earlier occurrence), so a share of 1 means the
route alone carries the whole difference between the clean and the counterfactual run there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import torch

from interp.interventions.circuits.task import CircuitTask
from interp.interventions.edges.layout import attention_layout
from interp.interventions.edges.patching import EdgePatch, Edges, capture_source_hooks, edge_patch_hooks
from interp.models.bridge import TransformerBridge

ROUTES: dict[str, int] = {"o-1": -1, "o": 0, "o+1": 1}  # source offset from the earlier occurrence
EXPECTED_ROUTE: dict[str, str] = {"UF": "o+1", "UB": "o"}  # the paper's induction / anti-induction edges


@dataclass(frozen=True)
class RouteEffect:
    """One prompt's metric clean, on the counterfactual prompt, and with one route's value reads patched."""

    prompt: int
    route: str
    heads: str  # "all", or the heads patched as "layer.head;layer.head"
    clean_metric: float
    counterfactual_metric: float
    patched_metric: float
    correct: bool  # the clean prompt is copied exactly (teacher-forced)

    def as_row(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class RouteShare:
    """A route's share of the metric gap (mean over prompts of clean - patched, over clean - counterfactual),
    with its percentile bootstrap interval over prompts."""

    route: str
    share: float
    lo: float
    hi: float
    n: int


def route_edges(task: CircuitTask, offset: int) -> Edges:
    """Every copy position that holds an earlier token and predicts the next (the copy's last position
    predicts nothing scored) reading ``o + offset``.

    >>> from interp.models import tiny_tokenizer
    >>> from interp.interventions.circuits.task import copying_task
    >>> t = copying_task(tiny_tokenizer(), "UB", 3, 2)
    >>> e = route_edges(t, -1)
    >>> (t.prompts.string_start, t.prompts.copy_start), e.query[0].tolist(), e.source[0].tolist()  # c0 holds s2, c1 s1
    ((5, 9), [9, 10], [6, 5])
    """
    if task.prompts is None:
        raise ValueError(f"task {task.name}: routes need copying prompts (their earlier occurrences)")
    query = task.prompts.copy_positions()[:-1]
    source = task.prompts.occurrences()[:-1] + offset
    return Edges.shared(query, source, task.n)


def route_effects(model: TransformerBridge, task: CircuitTask, heads: Mapping[int, Sequence[int]] | None = None,
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
    layout = attention_layout(model)
    label = "all" if heads is None else ";".join(f"{layer}.{h}" for layer in sorted(heads) for h in sorted(heads[layer]))
    groups = [(None, None)] if heads is None else [((layer,), tuple(sorted(hs))) for layer, hs in sorted(heads.items()) if hs]
    out: list[RouteEffect] = []
    with torch.no_grad():
        for start in range(0, task.n, batch_size):
            chunk = task.rows(slice(start, min(task.n, start + batch_size)))
            # the answers after the first: each predicted at a copy position with an earlier occurrence
            chunk = CircuitTask(chunk.name, chunk.clean, chunk.corrupt, chunk.positions[1:], chunk.targets[:, 1:],
                                chunk.roles, task.prompts, chunk.metric_kind)
            clean_logits = model(chunk.clean)
            clean, correct = chunk.metric(clean_logits), chunk.correct(clean_logits)
            every = torch.arange(chunk.clean.shape[1]).expand(chunk.n, -1)
            capture, store = capture_source_hooks(layout, every)
            counterfactual = chunk.metric(model.run_with_hooks(chunk.corrupt, fwd_hooks=capture))
            for route, offset in ROUTES.items():
                edges = route_edges(chunk, offset)
                values = store.at("value", edges.source)
                patches = [EdgePatch("value", edges, values, layers, hs) for layers, hs in groups]
                patched = chunk.metric(model.run_with_hooks(chunk.clean, fwd_hooks=edge_patch_hooks(layout, patches)))
                for i in range(chunk.n):
                    out.append(RouteEffect(start + i, route, label, float(clean[i]), float(counterfactual[i]),
                                           float(patched[i]), bool(correct[i])))
    return out


def _gap_and_drops(effects: Sequence[Mapping | RouteEffect]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per prompt, clean - counterfactual, and per route clean - patched (prompts in sorted order)."""
    rows = [e.as_row() if isinstance(e, RouteEffect) else dict(e) for e in effects]
    prompts = sorted({int(r["prompt"]) for r in rows})
    if not prompts:
        raise ValueError("route effects: none given")
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


def route_shares(effects: Sequence[Mapping | RouteEffect], n_boot: int = 2000, seed: int = 0) -> dict[str, RouteShare]:
    """Each route's share of the metric gap, ``mean(clean - patched) / mean(clean - counterfactual)``, with
    a 95% percentile interval from ``n_boot`` resamples of the prompts (the same resample for every route).

    >>> rows = [{"prompt": i, "route": r, "clean_metric": 2.0, "counterfactual_metric": -2.0,
    ...          "patched_metric": {"o-1": -2.0 + 0.1 * (i % 2), "o": 2.0, "o+1": 1.0}[r]} for i in range(8) for r in ROUTES]
    >>> {r: round(s.share, 2) for r, s in route_shares(rows).items()}
    {'o-1': 0.99, 'o': 0.0, 'o+1': 0.25}
    """
    gap, drops = _gap_and_drops(effects)
    generator = torch.Generator().manual_seed(seed)
    resample = torch.randint(0, len(gap), (n_boot, len(gap)), generator=generator)
    shares = {}
    for route, drop in drops.items():
        boot = drop[resample].mean(1) / gap[resample].mean(1)
        lo, hi = torch.quantile(boot, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
        shares[route] = RouteShare(route, float(drop.mean() / gap.mean()), lo, hi, len(gap))
    return shares


def route_preference(effects: Sequence[Mapping | RouteEffect], expected: str, n_boot: int = 2000,
                     seed: int = 0) -> RouteShare:
    """How much more of the gap ``expected`` carries than the strongest other route: the share difference
    with its bootstrap interval (the same resamples for both), named ``expected``.

    >>> rows = [{"prompt": i, "route": r, "clean_metric": 2.0, "counterfactual_metric": -2.0,
    ...          "patched_metric": {"o-1": -2.0, "o": 2.0, "o+1": 1.0 + 0.1 * (i % 2)}[r]} for i in range(8) for r in ROUTES]
    >>> d = route_preference(rows, "o-1")
    >>> round(d.share, 2), d.lo > 0
    (0.76, True)
    """
    gap, drops = _gap_and_drops(effects)
    if expected not in drops:
        raise ValueError(f"route_preference: no route {expected!r} among {sorted(drops)}")
    others = [route for route in drops if route != expected]
    generator = torch.Generator().manual_seed(seed)
    resample = torch.randint(0, len(gap), (n_boot, len(gap)), generator=generator)

    def difference(sample: torch.Tensor) -> torch.Tensor:
        g = gap[sample].mean(-1)
        best_other = torch.stack([drops[o][sample].mean(-1) / g for o in others]).amax(0)
        return drops[expected][sample].mean(-1) / g - best_other

    boot = difference(resample)
    lo, hi = torch.quantile(boot, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    point = float(difference(torch.arange(len(gap))[None])[0])
    return RouteShare(expected, point, lo, hi, len(gap))
