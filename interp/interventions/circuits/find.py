"""`find_circuit`: one call from a model and a task to a `Circuit`.

Stages, each saved (``stages``) before the next starts, so a stopped run resumes where it stopped: the model's
gap and accuracy are checked (`runner.MIN_GAP`, `runner.MIN_ACCURACY`: a task the model does not do is refused,
or marked with ``allow_weak``); every edge is scored (EAP-IG by default); the method selects the circuit
(``masks``: mask optimization; ``greedy``: greedy pruning verified exactly; ``top-k``: the smallest top-k of the
scores) -- the smallest circuit of at most ``max_edges`` keeping ``target`` of the gap (and ``accuracy`` times the
clean accuracy: ``keep_accuracy``); the method's ranking
is measured over the fixed grid of edge fractions (`curve.FRACTIONS`); each circuit edge's loss when removed
alone (minimality) and, for ``verify`` edges, its exact effect in the whole model.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace

import torch
from tqdm.auto import tqdm

from interp.core.stages import StageStore
from interp.interventions.circuits.circuit import Circuit, CircuitEdge
from interp.interventions.circuits.curve import FRACTIONS, Curve, CurvePoint, faithfulness_curve, grid_sizes, smallest_circuit
from interp.interventions.circuits.optimize import MaskConfig, optimize_masks
from interp.interventions.circuits.pruning import greedy_prune, prune, pruned_ranking
from interp.interventions.circuits.role_graph import GRAINS
from interp.interventions.circuits.role_scores import ROLE_METHODS, exact_effects, removal_losses, role_edge_scores
from interp.interventions.circuits.runner import CircuitRunner, Goal, WeakTaskError, circuit_runner
from interp.interventions.circuits.task import COUNTERFACTUALS, METRICS, RETRIEVAL_TASKS, CircuitTask, copying_task, retrieval_task
from interp.interventions.edges.data import FORMATS, check_length, check_task
from interp.models.bridge import TransformerBridge

SELECTIONS: tuple[str, ...] = ("masks", "greedy", "top-k")
RANKED_ROWS = 2_000  # edges of a ranking kept with a circuit (a view draws grid points up to this size)


@dataclass(frozen=True)
class CircuitConfig:
    """The prompts (``length``, ``n``, ``prompt_format``, ``n_shots``, ``prepend_bos`` (None: as the model's
    tokenizer does), ``seed``, ``metric``) and the search (see the module text)."""

    length: int = 5
    n: int = 16
    prompt_format: str = "single-shot"
    n_shots: int = 1
    prepend_bos: bool | None = None
    seed: int = 0
    metric: str = "logit_diff"
    method: str = "masks"
    grain: str = "roles"
    target: float = 0.8
    keep_accuracy: float = 0.0
    max_edges: int = 200
    score: str = "eap-ig"
    steps: int = 4
    counterfactual: str = "corrupt"
    batch_size: int = 8
    mask_steps: int = 100
    candidates: int = 0
    greedy_start: int = 0
    fractions: tuple[float, ...] = FRACTIONS
    n_random: int = 1
    minimality: bool = True
    prune: bool = True
    verify: int = 0
    allow_weak: bool = False

    def __post_init__(self) -> None:
        checks = [("method", self.method in SELECTIONS, f"one of {', '.join(SELECTIONS)}"),
                  ("grain", self.grain in GRAINS, f"one of {', '.join(GRAINS)}"),
                  ("score", self.score in ROLE_METHODS, f"one of {', '.join(ROLE_METHODS)}"),
                  ("counterfactual", self.counterfactual in COUNTERFACTUALS, f"one of {', '.join(COUNTERFACTUALS)}"),
                  ("metric", self.metric in METRICS, f"one of {', '.join(METRICS)}"),
                  ("prompt_format", self.prompt_format in FORMATS, f"one of {', '.join(FORMATS)}"),
                  ("target", 0 < self.target <= 1, "a share in (0, 1]"),
                  ("keep_accuracy", 0 <= self.keep_accuracy <= 1, "a share of the clean accuracy in [0, 1]"),
                  ("n", self.n >= 1, "at least 1 prompt"), ("batch_size", self.batch_size >= 1, "at least 1"),
                  ("max_edges", self.max_edges >= 1, "at least 1"), ("steps", self.steps >= 1, "at least 1"),
                  ("mask_steps", self.mask_steps >= 1, "at least 1"), ("n_shots", self.n_shots >= 1, "at least 1"),
                  ("n_random", self.n_random >= 0, ">= 0"), ("verify", self.verify >= 0, ">= 0"),
                  ("candidates", self.candidates >= 0, ">= 0"), ("greedy_start", self.greedy_start >= 0, ">= 0")]
        for name, ok, expected in checks:
            if not ok:
                raise ValueError(f"{name}={getattr(self, name)!r}: expected {expected}")
        if self.score == "eap-ig" and self.counterfactual != "corrupt":
            raise ValueError("score='eap-ig' interpolates toward the corrupt prompt: use counterfactual='corrupt' or score='eap'")
        grid_sizes(1000, self.fractions)


def build_task(model: TransformerBridge, task: str, config: CircuitConfig) -> CircuitTask:
    """The prompts of ``task`` (UF, UB, UR, UL) with their corrupt twins, as ``config`` says."""
    bos = bool(getattr(model.cfg, "default_prepend_bos", False)) if config.prepend_bos is None else config.prepend_bos
    name = str(task).strip().upper()
    if name in RETRIEVAL_TASKS:
        return retrieval_task(model.tokenizer, name, config.length, config.n, seed=config.seed, prepend_bos=bos,
                              metric_kind=config.metric)
    check_task(name)
    check_length(config.length)
    shots = 1 if config.prompt_format == "single-shot" else config.n_shots
    return copying_task(model.tokenizer, name, config.length, config.n, seed=config.seed, fmt=config.prompt_format,
                        n_shots=shots, prepend_bos=bos, metric_kind=config.metric)


def _select(runner: CircuitRunner, scores: torch.Tensor, config: CircuitConfig, stages: StageStore | None,
            notes: list[str], prefix: str, progress: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The method's ranking of every edge, its circuit, and the circuit's losses when the method measured them."""
    saved = stages.get(f"{prefix}selection") if stages else None
    if saved is not None:
        notes += saved.get("notes", [])
        return saved["ranking"], saved["circuit"], saved.get("losses")
    losses = None
    goal = Goal(config.target, config.keep_accuracy)
    if config.method == "top-k":
        ranking = scores.abs()
        circuit = smallest_circuit(runner, ranking, goal, config.max_edges).edges
    elif config.method == "masks":
        mask_config = MaskConfig(edges=config.max_edges, candidates=config.candidates, steps=config.mask_steps, seed=config.seed)
        result = optimize_masks(runner, scores, mask_config, goal, progress=progress)
        notes.append(f"masks trained over the {len(result.candidates):,} edges of largest |{config.score}|, which alone "
                     f"recover {result.candidates_recovered:.2f} of the gap (every other edge removed)")
        ranking, circuit = result.ranking, result.circuit
        # the masks' own order, cut where the goal holds: smaller than the path's circuit, or the path's circuit
        # grown along the order where no check on the path kept the goal
        threshold = smallest_circuit(runner, ranking, goal, config.max_edges)
        path_meets = runner.meets(circuit, goal)[0]
        threshold_meets = goal.kept_by(threshold.recovered, threshold.accuracy, runner.clean_accuracy)
        if threshold_meets and (not path_meets or len(threshold.edges) < len(circuit)):
            if not path_meets:
                notes.append(f"no circuit on the mask path kept the goal; the top {len(threshold.edges)} edges of the "
                             "masks' order do")
            circuit = threshold.edges
        if config.prune:  # the threshold, verified: drop the mask circuit's edges the target does not need
            with tqdm(desc="pruning the mask circuit (passes)", disable=not progress) as bar:
                pruned_circuit, losses, pruned, _ = prune(runner, circuit, goal, max_rounds=1, on_pass=bar.update)
            if pruned:
                notes.append(f"{len(pruned)} of the mask circuit's {len(circuit)} edges dropped by exact pruning")
            ranking, circuit = pruned_ranking(ranking, pruned_circuit, losses, pruned), pruned_circuit
    else:
        with tqdm(desc="greedy pruning (exact passes)", disable=not progress) as bar:
            result = greedy_prune(runner, scores.abs(), goal, config.greedy_start or min(len(runner.graph), 100 * config.max_edges),
                                  on_pass=bar.update, on_round=lambda size: bar.set_postfix(edges=size))
        ranking, circuit, losses = result.ranking, result.circuit, result.losses
    if stages:
        stages.put(f"{prefix}selection", {"ranking": ranking, "circuit": circuit, "losses": losses, "notes": list(notes)})
    return ranking, circuit, losses


def find_circuit(model: TransformerBridge, task: str | CircuitTask, config: CircuitConfig | None = None, *,
                 model_label: str = "", stages: StageStore | None = None, stage_prefix: str = "", progress: bool = False,
                 **overrides) -> Circuit:
    """The circuit of ``model`` on ``task`` (``"UF"``, ``"UB"``, ``"UR"``, ``"UL"`` or a prepared `CircuitTask`);
    ``overrides`` set fields of `CircuitConfig`. ``stages`` keeps each finished stage (the scores shared by every
    method; the rest under ``stage_prefix/``, with the method's top `RANKED_ROWS` edges as ``ranked``).

    >>> from interp.models import load_model
    >>> model = load_model("planted-ub", device="cpu")
    >>> circuit = find_circuit(model, "UB", length=3, n=4, method="top-k", max_edges=20, minimality=False,
    ...                        fractions=(0.0, 0.01, 1.0), model_label="planted-ub")
    >>> circuit.recovered >= 0.8, "a1.1 @ c reads o by value" in {edge.label for edge in circuit.edges}
    (True, True)
    """
    config = replace(config or CircuitConfig(), **overrides)
    started, timings, notes = time.perf_counter(), {}, []
    prefix = f"{stage_prefix}/" if stage_prefix else ""
    prepared = task if isinstance(task, CircuitTask) else build_task(model, task, config)
    runner = circuit_runner(model, prepared, grain=config.grain, counterfactual=config.counterfactual,
                            batch_size=config.batch_size)
    label = model_label or str(getattr(model.cfg, "model_name", "model"))
    if weak := runner.check_task():
        if not config.allow_weak:
            raise WeakTaskError(f"{label} {prepared.name}: {weak}; a circuit would explain noise "
                                "(allow_weak=True / --allow-weak finds one anyway, marked)")
        notes.append(f"weak task: {weak}")
    t = time.perf_counter()
    scores = stages.get("scores") if stages else None
    if scores is None:
        scores = role_edge_scores(runner, config.score, steps=config.steps, progress=progress)
        if stages:
            stages.put("scores", scores)
    timings["scores"] = time.perf_counter() - t
    t = time.perf_counter()
    ranking, circuit, losses = _select(runner, scores, config, stages, notes, prefix, progress)
    if stages and stages.get(f"{prefix}ranked") is None:
        stages.put(f"{prefix}ranked", ranked_rows(runner, scores, ranking))
    timings["selection"] = time.perf_counter() - t
    t = time.perf_counter()
    curve = _stage(stages, f"{prefix}curve", lambda: _curve_state(faithfulness_curve(
        runner, ranking, fractions=config.fractions, n_random=config.n_random, seed=config.seed, progress=progress)))
    timings["curve"] = time.perf_counter() - t
    t = time.perf_counter()
    if losses is None and config.minimality:
        with tqdm(total=runner.passes(len(circuit)), desc="minimality", disable=not progress) as bar:
            losses = _stage(stages, f"{prefix}losses", lambda: removal_losses(runner, circuit, on_pass=bar.update))
    timings["minimality"] = time.perf_counter() - t
    goal = Goal(config.target, config.keep_accuracy)
    met, recovered, accuracy = runner.meets(circuit, goal)
    if not met:
        notes.append(f"the circuit misses the goal ({goal.describe()}) within {config.max_edges} edges")
    elif len(circuit) > config.max_edges:  # greedy keeps the goal first: pruning stopped above the budget
        notes.append(f"no circuit within {config.max_edges} edges was found that keeps the goal ({goal.describe()}); "
                     f"pruning stopped at {len(circuit)}")
    order = losses.argsort(descending=True, stable=True) if losses is not None \
        else ranking[circuit].argsort(descending=True, stable=True)
    circuit = circuit[order]
    losses = losses[order] if losses is not None else None
    exact = None
    if config.verify:
        t = time.perf_counter()
        chosen = circuit[:config.verify]
        exact = _stage(stages, f"{prefix}verify", lambda: exact_effects(runner, chosen))
        timings["verify"] = time.perf_counter() - t
    edges = tuple(_edge(runner, int(e), scores, ranking, exact, losses, i) for i, e in enumerate(circuit.tolist()))
    record = asdict(config) | {"fractions": list(config.fractions), "seconds": time.perf_counter() - started}
    record |= {f"seconds_{k}": v for k, v in timings.items()}
    return Circuit(label, prepared.name, config.method, config.grain, edges,
                   recovered=recovered, accuracy=accuracy,
                   clean_accuracy=runner.clean_accuracy, clean_metric=runner.clean_metric, empty_metric=runner.empty_metric,
                   n_prompts=prepared.n, total_edges=len(runner.graph), curve=_curve_from_state(curve), config=record,
                   notes=tuple(notes))


def ranked_rows(runner: CircuitRunner, scores: torch.Tensor, ranking: torch.Tensor, limit: int = RANKED_ROWS) -> list[dict]:
    """The top ``limit`` edges of ``ranking`` as table rows (rank, labels, score, ranking value)."""
    graph = runner.graph
    rows = []
    for rank, e in enumerate(ranking.argsort(descending=True, stable=True)[:limit].tolist(), 1):
        edge = graph.edge(e)
        sources = ",".join(graph.source_roles[e - graph.n_residual]) if e >= graph.n_residual else ""
        rows.append({"rank": rank, "kind": edge.kind, "reader": edge.reader, "writer": edge.writer, "role": edge.role,
                     "key_role": edge.key_role, "sources": sources, "score": float(scores[e]),
                     "rank_value": float(ranking[e])})
    return rows


def _stage(stages: StageStore | None, name: str, compute):
    value = stages.get(name) if stages else None
    if value is None:
        value = compute()
        if stages:
            stages.put(name, value)
    return value


def _curve_state(curve: Curve) -> dict:
    """A curve as plain data (what a stage file may hold)."""
    return {"points": [vars(p).copy() for p in curve.points], "total": curve.total_edges,
            "runs": [curve.clean_metric, curve.empty_metric, curve.clean_accuracy, curve.empty_accuracy]}


def _curve_from_state(state: dict) -> Curve:
    return Curve(tuple(CurvePoint(**p) for p in state["points"]), state["total"], *state["runs"])


def _edge(runner: CircuitRunner, index: int, scores, ranking, exact, losses, i: int) -> CircuitEdge:
    graph = runner.graph
    edge = graph.edge(index)
    sources = ""
    if index >= graph.n_residual:
        sources = ",".join(graph.source_roles[index - graph.n_residual])
    return CircuitEdge(edge.kind, edge.reader, edge.writer, edge.role, edge.key_role, score=float(scores[index]),
                       rank_value=float(ranking[index]), exact=None if exact is None or i >= len(exact) else float(exact[i]),
                       loss=None if losses is None else float(losses[i]), sources=sources)
