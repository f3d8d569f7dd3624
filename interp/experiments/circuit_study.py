"""Circuit discovery on one model and copying task: score every edge (EAP / EAP-IG), verify
exactly, select circuits over edge budgets, measure their faithfulness and accuracy, and (for
planted models) recover the planted circuit. One journaled cell per copy length, so a long run resumes.

Tables (names from `interp.core.naming.result_stem`):
``circuit_edges_<model>_<task>`` every position-resolved edge with its roles and scores (at most
``MAX_EDGE_ROWS``, the largest by any score, where a model has more);
``circuit_components_<model>_<task>`` every component-level edge (all positions at once), scores and exact effect
(also at most ``MAX_EDGE_ROWS``);
``circuit_curve_<model>_<task>`` the faithfulness curve; ``circuit_<model>_<task>`` the circuit chosen
(the smallest budget recovering ``target`` of the gap) and ``circuit_summary_<model>_<task>`` one row per length;
``circuit_attention_<model>_<task>`` the attention-level edges (`interp.interventions.circuits.attention`):
one row per (head, kind, query role, key role) and per (kind, query role, key role) over every head at once,
first-order scores and, unless ``exact="none"``, the exact effect of patching the row's entries together.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import torch
from tqdm.auto import tqdm

from interp.core.journal import RowJournal
from interp.interventions.circuits.attention import attention_edge_scores, attention_exact_scores, role_edges, role_scores
from interp.interventions.circuits.faithfulness import FaithfulnessCurve, default_budgets, faithfulness_curve
from interp.interventions.circuits.graph import CircuitGraph, circuit_graph
from interp.interventions.circuits.known import planted_edges
from interp.interventions.circuits.patching import GraphEdges
from interp.interventions.circuits.scores import PassCount, check_method, edge_scores, exact_scores
from interp.interventions.circuits.selection import roc_auc
from interp.interventions.circuits.task import RETRIEVAL_TASKS, CircuitTask, copying_task, retrieval_task
from interp.interventions.edges.data import check_format, check_length, check_task
from interp.interventions.edges.layout import attention_layout
from interp.measure.head_scores import spearman
from interp.models.bridge import TransformerBridge
from interp.models.planted import is_planted

EXACT_SCOPES: tuple[str, ...] = ("none", "components", "positions")
MAX_EDGE_ROWS = 20_000  # rows of the position-resolved edge table
MAX_ATTENTION_EXACT = 2_000  # attention rows given an exact effect: every-head rows first, then the largest by any score


@dataclass(frozen=True)
class CircuitStudyConfig:
    task: str = "UB"
    lengths: tuple[int, ...] = (4,)
    n: int = 16
    method: str = "eap-ig"  # the score circuits are selected by
    steps: int = 8
    counterfactual: str = "corrupt"
    exact: str = "components"  # which edges also get their exact effect
    budgets: tuple[int, ...] | None = None  # None: 1, 2, 4, ... edges
    target: float = 0.9  # the circuit: the smallest budget recovering this share of the gap
    n_random: int = 2
    prompt_format: str = "single-shot"
    n_shots: int = 1
    seed: int = 0
    batch_size: int = 8
    prepend_bos: bool = False
    metric: str = "logit_diff"
    edges_per_pass: int = 16  # exact effects: edges patched side by side in one forward pass
    attention: bool = True  # also score attention-level edges (query position -> key position in a head)
    attention_exact: bool = False  # with exact "none": the every-head attention rows' exact effects all the same
    verify: int = 0  # exact effects of the top `verify` edges by the primary score (where exact is not "positions")

    def __post_init__(self) -> None:
        if self.task not in RETRIEVAL_TASKS:
            check_task(self.task)
        check_format(self.prompt_format)
        for length in self.lengths:
            check_length(length)
        check_method(self.method, self.counterfactual, self.steps)
        if self.exact not in EXACT_SCOPES:
            raise ValueError(f"exact={self.exact!r}; expected one of {', '.join(EXACT_SCOPES)}")
        if self.method == "exact" and self.exact != "positions":
            raise ValueError("method='exact' selects circuits by exact effects of every edge: it needs exact='positions'")
        if self.verify < 0:
            raise ValueError(f"verify={self.verify}: a number of edges, >= 0")
        if self.n < 1 or self.batch_size < 1:
            raise ValueError(f"n={self.n}, batch_size={self.batch_size}: both must be >= 1")
        if not 0 < self.target <= 1:
            raise ValueError(f"target={self.target} must be in (0, 1]")


def _pearson(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.corrcoef(torch.stack([a.double(), b.double()]))[0, 1])


def _number(x: torch.Tensor) -> float | None:
    """A table cell: None where an exact effect was not measured (NaN)."""
    value = float(x)
    return None if value != value else value


def _top_edges(primary: torch.Tensor, graph: CircuitGraph, k: int) -> GraphEdges:
    """The ``k`` position-resolved edges with the largest ``|primary|``, in the order a circuit takes them."""
    valid = graph.valid.expand(primary.shape[0], -1, -1)
    flat = torch.where(valid, primary.abs(), torch.tensor(-1.0)).flatten()
    order = flat.argsort(descending=True, stable=True)[:k]
    n_r, n_w = len(graph.readers), len(graph.writers)
    return GraphEdges(order // (n_r * n_w), order % (n_r * n_w) // n_w, order % n_w)


def _position_edges(scores: dict[str, torch.Tensor], exact: torch.Tensor | None, graph: CircuitGraph, task: CircuitTask,
                    meta: dict, primary: str, selected: int) -> list[dict]:
    """The position-resolved edge rows: every edge, or where a model has more than ``MAX_EDGE_ROWS``, the
    ``selected`` largest by the ``primary`` score (the curve's largest circuit, which the view redraws)
    and then the largest by any score."""
    valid = graph.valid.expand(task.clean.shape[1], -1, -1)
    limit = max(MAX_EDGE_ROWS, selected)
    if int(valid.sum()) > limit:  # a pretrained model has millions
        size = torch.stack([s.abs() for s in scores.values()]).amax(0).masked_fill(~valid, -1.0)
        curve = _top_edges(scores[primary], graph, selected)
        size[curve.pos, curve.reader, curve.writer] = float("inf")
        kept = torch.zeros(size.numel(), dtype=torch.bool)
        kept[size.flatten().argsort(descending=True, stable=True)[:limit]] = True
        valid = kept.view(size.shape)
    edges = GraphEdges.from_mask(valid)
    rows = []
    for i, (p, r, w) in enumerate(zip(edges.pos.tolist(), edges.reader.tolist(), edges.writer.tolist())):
        row = meta | {"pos": p, "role": task.roles[p], "reader": graph.readers[r].label, "writer": graph.writers[w].label}
        row |= {name.replace("-", "_"): float(s[p, r, w]) for name, s in scores.items()}
        row["exact"] = _number(exact[p, r, w]) if exact is not None else None
        rows.append(row)
    return rows


def _attention_rows(model: TransformerBridge, task: CircuitTask, config: CircuitStudyConfig, meta: dict,
                    passes: PassCount, progress: bool) -> list[dict]:
    """The attention table of one length: every role row's first-order scores and (if measured) exact effect,
    ranked within the per-head rows and within the every-head rows by |exact| where that scope was measured,
    else by |the primary score|."""
    layout = attention_layout(model)
    edges = role_edges(task, layout)
    common = dict(counterfactual=config.counterfactual, batch_size=config.batch_size, layout=layout, passes=passes,
                  progress=progress)
    scores = {method: role_scores(attention_edge_scores(model, task, method, steps=config.steps, **common), edges)
              for method in ("eap", "eap-ig") if method == "eap" or config.counterfactual == "corrupt"}
    exact = None
    if config.exact != "none" or config.attention_exact:
        every_head = torch.tensor([edge.head < 0 for edge in edges])
        size = torch.where(every_head, float("inf"), torch.stack([s.abs() for s in scores.values()]).amax(0))
        # --exact none: the every-head rows alone (a few dozen passes; per-head rows cost an hour on a CPU)
        limit = MAX_ATTENTION_EXACT if config.exact != "none" else int(every_head.sum())
        chosen = size.argsort(descending=True)[:limit]
        exact = torch.full((len(edges),), float("nan"))
        exact[chosen] = attention_exact_scores(model, task, [edges[i].edge_set for i in chosen.tolist()],
                                               sets_per_pass=config.edges_per_pass, **common)
    first_order = scores.get(config.method, scores["eap"])
    rank = torch.zeros(len(edges), dtype=torch.long)
    for scope in (True, False):
        members = torch.tensor([(edge.head < 0) == scope for edge in edges]).nonzero()[:, 0]
        # by |exact| where this scope was measured (unmeasured rows last), else by the first-order score
        measured = exact is not None and bool(exact[members].isfinite().any())
        primary = exact if measured else first_order
        order = primary[members].abs().nan_to_num(-1.0).argsort(descending=True, stable=True)
        rank[members[order]] = torch.arange(1, len(members) + 1)
    rows = []
    for i, edge in enumerate(edges):
        row = meta | {"rank": int(rank[i]), "head": edge.label, "kind": edge.kind, "query_role": edge.query_role,
                      "key_role": edge.key_role, "hypothesis": edge.hypothesis, "entries": len(edge.edge_set.query)}
        row |= {name.replace("-", "_"): float(s[i]) for name, s in scores.items()}
        row["exact"] = None if exact is None or exact[i].isnan() else float(exact[i])
        rows.append(row)
    return sorted(rows, key=lambda r: (r["head"] != "all", r["rank"]))


def _attention_summary(rows: list[dict]) -> dict:
    """The top per-head attention row, and the paper's two hypotheses' exact effects (else first-order scores)."""
    out = {}
    top = next((r for r in rows if r["head"] != "all" and r["rank"] == 1), None)
    if top is not None:
        out["attention_top"] = f"{top['head']} {top['kind']} {top['query_role']}->{top['key_role']}"
    for row in rows:
        if row["hypothesis"]:
            out[f"attention_{row['hypothesis']}"] = row["exact"] if row["exact"] is not None else row["eap"]
    return out


def _curve_rows(curve: FaithfulnessCurve, meta: dict) -> list[dict]:
    return [meta | asdict(p) for p in curve.points]


def _circuit_rows(curve: FaithfulnessCurve, primary: torch.Tensor, exact: torch.Tensor | None, graph: CircuitGraph,
                  task: CircuitTask, meta: dict, target: float) -> tuple[list[dict], int]:
    point = curve.smallest(target) or curve.points[-1]
    valid = graph.valid.expand(primary.shape[0], -1, -1)
    flat = torch.where(valid, primary.abs(), torch.tensor(-1.0)).flatten()
    order = flat.argsort(descending=True, stable=True)[:point.edges]
    rows = []
    n_r, n_w = len(graph.readers), len(graph.writers)
    for rank, index in enumerate(order.tolist(), 1):
        p, rest = divmod(index, n_r * n_w)
        r, w = divmod(rest, n_w)
        rows.append(meta | {"rank": rank, "pos": p, "role": task.roles[p], "reader": graph.readers[r].label,
                            "writer": graph.writers[w].label, "score": float(primary[p, r, w]),
                            "exact": _number(exact[p, r, w]) if exact is not None else None})
    return rows, point.edges


def _cell(model: TransformerBridge, graph: CircuitGraph, config: CircuitStudyConfig, length: int, model_label: str,
          progress: bool) -> dict:
    started = time.perf_counter()
    passes = PassCount()
    if config.task in RETRIEVAL_TASKS:
        task = retrieval_task(model.tokenizer, config.task, length, config.n, seed=config.seed,
                              prepend_bos=config.prepend_bos, metric_kind=config.metric)
    else:
        task = copying_task(model.tokenizer, config.task, length, config.n, seed=config.seed, fmt=config.prompt_format,
                            n_shots=config.n_shots, prepend_bos=config.prepend_bos, metric_kind=config.metric)
    meta = {"model": model_label, "task": config.task, "length": length, "counterfactual": config.counterfactual}
    common = dict(counterfactual=config.counterfactual, batch_size=config.batch_size, graph=graph)
    scores: dict[str, torch.Tensor] = {}
    timings: dict[str, float] = {}
    methods = ["eap"] + (["eap-ig"] if config.counterfactual == "corrupt" else []) \
        + ([config.method] if config.method == "eap-ig-act" else [])
    for method in methods:
        t = time.perf_counter()
        scores[method] = edge_scores(model, task, method, steps=config.steps, passes=passes, progress=progress, **common)
        timings[method] = time.perf_counter() - t
    n_pos = task.clean.shape[1]
    exact_positions = exact_components = None
    t = time.perf_counter()
    if config.exact == "positions":
        edges = GraphEdges.from_mask(graph.valid.expand(n_pos, -1, -1))
        values = exact_scores(model, task, edges, passes=passes, progress=progress, edges_per_pass=config.edges_per_pass,
                              **common)
        exact_positions = torch.zeros(n_pos, len(graph.readers), len(graph.writers))
        exact_positions[edges.pos, edges.reader, edges.writer] = values
        scores["exact"] = exact_positions
    components = GraphEdges.components(graph.valid)
    if config.exact in ("components", "positions"):
        exact_components = exact_scores(model, task, components, passes=passes, progress=progress,
                                        edges_per_pass=config.edges_per_pass, **common)
    primary = scores[config.method]
    if config.verify and exact_positions is None:  # only the top edges: NaN (no cell) elsewhere
        top = _top_edges(primary, graph, config.verify)
        values = exact_scores(model, task, top, passes=passes, progress=progress, edges_per_pass=config.edges_per_pass,
                              **common)
        exact_positions = torch.full((n_pos, len(graph.readers), len(graph.writers)), float("nan"))
        exact_positions[top.pos, top.reader, top.writer] = values
    timings["exact"] = time.perf_counter() - t
    budgets = list(config.budgets) if config.budgets else None
    curve = faithfulness_curve(model, task, primary, budgets=budgets, n_random=config.n_random, seed=config.seed,
                               passes=passes, progress=progress, **common)
    circuit_rows, circuit_size = _circuit_rows(curve, primary, exact_positions, graph, task, meta, config.target)
    component_rows = []
    kept = torch.arange(len(components))
    if len(components) > MAX_EDGE_ROWS:  # the largest by any score
        size = torch.stack([s.sum(0)[components.reader, components.writer].abs() for s in scores.values()]).amax(0)
        kept = size.argsort(descending=True)[:MAX_EDGE_ROWS].sort().values
    summed = {name: s.sum(0) for name, s in scores.items()}  # once: a pretrained model has 20,000 rows here
    for i in kept.tolist():
        r, w = int(components.reader[i]), int(components.writer[i])
        row = meta | {"reader": graph.readers[r].label, "writer": graph.writers[w].label}
        row |= {name.replace("-", "_"): float(total[r, w]) for name, total in summed.items()}
        row["exact_component"] = float(exact_components[i]) if exact_components is not None else None
        component_rows.append(row)
    summary = meta | {"method": config.method, "steps": config.steps, "n": config.n, "edges": curve.total_edges,
                      "clean_metric": curve.clean_metric, "empty_metric": curve.empty_metric,
                      "clean_accuracy": curve.clean_accuracy, "circuit_edges": circuit_size,
                      "circuit_recovered": next((p.recovered for p in curve.points if p.edges == circuit_size), 1.0),
                      "circuit_accuracy": next((p.accuracy for p in curve.points if p.edges == circuit_size), curve.clean_accuracy),
                      "cpr": curve.cpr, "cmd": curve.cmd, "random_cpr": curve.random_cpr,
                      "forward_passes": passes.forward, "backward_passes": passes.backward,
                      "seconds": time.perf_counter() - started}
    summary |= {f"seconds_{k.replace('-', '_')}": v for k, v in timings.items()}
    if exact_positions is not None:  # every edge measured, or only the top ``verify`` (NaN elsewhere)
        top_only = bool(config.verify) and config.exact != "positions"
        measured = exact_positions.isfinite() if top_only else graph.valid.expand(n_pos, -1, -1)
        prefix = "top_" if top_only else ""
        if top_only:
            summary["verified_edges"] = int(measured.sum())
        for method in methods:
            a, b = scores[method][measured], exact_positions[measured]
            summary[f"pearson_{prefix}{method.replace('-', '_')}"] = _pearson(a, b)
            summary[f"spearman_{prefix}{method.replace('-', '_')}"] = spearman(a, b)
    if exact_components is not None:
        for method in methods:
            a = scores[method].sum(0)[components.reader, components.writer]
            summary[f"pearson_components_{method.replace('-', '_')}"] = _pearson(a, exact_components)
    if is_planted(model_label):
        truth_set = planted_edges(model_label, config.task)
        truth = torch.tensor([(graph.readers[r].label, graph.writers[w].label) in truth_set
                              for r, w in zip(components.reader.tolist(), components.writer.tolist())])
        for name, s in scores.items():
            summary[f"auc_{name.replace('-', '_')}"] = roc_auc(s.sum(0)[components.reader, components.writer], truth)
        if exact_components is not None:
            summary["auc_exact_component"] = roc_auc(exact_components, truth)
    attention = []
    if config.attention:
        t, attention_passes = time.perf_counter(), PassCount()
        attention = _attention_rows(model, task, config, meta, attention_passes, progress)
        summary |= _attention_summary(attention) | {"seconds_attention": time.perf_counter() - t,
                                                    "attention_forward_passes": attention_passes.forward,
                                                    "attention_backward_passes": attention_passes.backward}
    return {"length": length, "summary": summary, "curve": _curve_rows(curve, meta), "circuit": circuit_rows,
            "components": component_rows, "edges": _position_edges(scores, exact_positions, graph, task, meta, config.method,
                                                             max(p.edges for p in curve.points)),
            "attention": attention}


def circuit_study(model: TransformerBridge, config: CircuitStudyConfig = CircuitStudyConfig(), *, model_label: str = "",
                  journal: RowJournal | None = None, progress: bool = False) -> dict[str, list[dict]]:
    """Every length's tables, concatenated: ``summary``, ``curve``, ``circuit``, ``components``, ``edges``, ``attention``.

    >>> from interp.models import load_model
    >>> model = load_model("planted-ub", device="cpu")
    >>> out = circuit_study(model, CircuitStudyConfig(lengths=(3,), n=2, steps=1, n_random=0, edges_per_pass=64), model_label="planted-ub",
    ...                     progress=False)
    >>> out["summary"][0]["auc_exact_component"], out["summary"][0]["circuit_accuracy"]
    (1.0, 1.0)
    """
    graph = circuit_graph(model)
    done = {row["length"]: row for row in (journal.done() if journal else [])}
    tables: dict[str, list[dict]] = {"summary": [], "curve": [], "circuit": [], "components": [], "edges": [], "attention": []}
    for length in tqdm(config.lengths, desc="circuit lengths", disable=not progress or len(config.lengths) < 2):
        cell = done.get(length)
        if cell is None:
            cell = _cell(model, graph, config, length, model_label, progress)
            if journal is not None:
                journal.add(cell)
        tables["summary"].append(cell["summary"])
        for key in ("curve", "circuit", "components", "edges"):
            tables[key] += cell[key]
        tables["attention"] += cell.get("attention", [])  # absent from lengths journaled before it existed
    return tables
