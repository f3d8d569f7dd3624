"""How much of the task a circuit carries, measured exactly: every edge outside it is removed (its
writer's contribution replaced by the counterfactual's), as TransformerLens' ``faithfulness`` does,
batched over prompts and over several circuits at once; as a curve over edge budgets with its two
areas (CPR, higher is better; CMD, lower is better; MIB's names) and a random-circuit baseline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float
from torch import Tensor
from tqdm.auto import tqdm

from interp.interventions.circuits.graph import CircuitGraph, circuit_graph, graph_hooks_enabled
from interp.interventions.circuits.patching import removal_hooks
from interp.interventions.circuits.scores import PassCount, _chunks, check_method, counterfactual_activations, mean_activations
from interp.interventions.circuits.selection import as_positions, top_n
from interp.interventions.circuits.task import CircuitTask
from interp.models.bridge import TransformerBridge


CIRCUITS_PER_PASS = 8  # circuits measured in one forward (the batch grows by this factor)


@dataclass(frozen=True)
class CircuitMetrics:
    """Per circuit: the task metric and the share of prompts answered exactly (mean over prompts)."""

    metric: Float[Tensor, " group"]
    accuracy: Float[Tensor, " group"]


def circuit_metrics(model: TransformerBridge, task: CircuitTask, kept: Bool[Tensor, "group pos reader writer"], *,
                    counterfactual: str = "corrupt", batch_size: int = 8, graph: CircuitGraph | None = None,
                    means: Tensor | None = None, passes: PassCount | None = None,
                    on_chunk: Callable[[], None] | None = None) -> CircuitMetrics:
    """The metric and accuracy of each circuit in ``kept`` (edges outside it removed), one pass per
    chunk of prompts for all circuits together (``on_chunk`` is called after each: a progress bar).

    >>> import torch
    >>> from interp.models import load_model
    >>> from interp.interventions.circuits import circuit_graph, copying_task
    >>> model = load_model("planted-ub", device="cpu")
    >>> task, graph = copying_task(model.tokenizer, "UB", 4, 4), circuit_graph(model)
    >>> full = graph.valid.expand(task.clean.shape[1], -1, -1)
    >>> out = circuit_metrics(model, task, torch.stack([full, ~full]), graph=graph)
    >>> out.accuracy.tolist()                                # everything kept, nothing kept
    [1.0, 0.0]
    """
    check_method("exact", counterfactual)
    graph = graph or circuit_graph(model)
    passes = passes if passes is not None else PassCount()
    groups = kept.shape[0]
    metric, correct = torch.zeros(groups), torch.zeros(groups)
    with graph_hooks_enabled(model):
        if counterfactual == "mean" and means is None:
            means = mean_activations(model, graph, task, batch_size, passes)
        for rows in _chunks(task.n, batch_size):
            chunk = task.rows(rows)
            shape = torch.Size((*chunk.clean.shape, len(graph.writers), model.cfg.d_model))
            counter = counterfactual_activations(model, graph, chunk, counterfactual, means, shape)
            hooks = removal_hooks(graph, counter, ~kept)
            with torch.no_grad():
                logits = model.run_with_hooks(chunk.clean.repeat(groups, 1), fwd_hooks=hooks)
            passes.forward += 1 + (counterfactual == "corrupt")
            metric += chunk.metric(logits).view(groups, -1).sum(1)
            correct += chunk.correct(logits).view(groups, -1).float().sum(1)
            if on_chunk is not None:
                on_chunk()
    return CircuitMetrics(metric / task.n, correct / task.n)


@dataclass(frozen=True)
class CurvePoint:
    """One edge budget: the circuit's metric, the share of the clean-to-empty gap it recovers, its
    accuracy, and the same for random circuits of that size."""

    edges: int
    fraction: float
    metric: float
    recovered: float
    accuracy: float
    random_recovered: float
    random_accuracy: float


@dataclass(frozen=True)
class FaithfulnessCurve:
    points: tuple[CurvePoint, ...]
    clean_metric: float
    empty_metric: float
    clean_accuracy: float
    empty_accuracy: float
    total_edges: int

    @property
    def cpr(self) -> float:
        """Area under recovered(fraction of edges kept), from 0 (nothing) to 1 (everything)."""
        return _area([0.0] + [p.fraction for p in self.points] + [1.0], [0.0] + [p.recovered for p in self.points] + [1.0])

    @property
    def cmd(self) -> float:
        """Area under |1 - recovered|: how far, over all budgets, the circuit is from the full model."""
        ys = [1.0] + [abs(1 - p.recovered) for p in self.points] + [0.0]
        return _area([0.0] + [p.fraction for p in self.points] + [1.0], ys)

    @property
    def random_cpr(self) -> float:
        return _area([0.0] + [p.fraction for p in self.points] + [1.0],
                     [0.0] + [p.random_recovered for p in self.points] + [1.0])

    def smallest(self, share: float) -> CurvePoint | None:
        """The smallest budget recovering at least ``share`` of the gap."""
        return next((p for p in self.points if p.recovered >= share), None)


def _area(xs: list[float], ys: list[float]) -> float:
    order = sorted(range(len(xs)), key=xs.__getitem__)
    xs, ys = [xs[i] for i in order], [ys[i] for i in order]
    return float(sum((xs[i + 1] - xs[i]) * (ys[i + 1] + ys[i]) / 2 for i in range(len(xs) - 1)))


def default_budgets(total: int) -> list[int]:
    """1, 2, 4, ... below ``total``.

    >>> default_budgets(20)
    [1, 2, 4, 8, 16]
    """
    out, b = [], 1
    while b < total:
        out.append(b)
        b *= 2
    return out


def faithfulness_curve(model: TransformerBridge, task: CircuitTask, scores: Float[Tensor, "pos reader writer"], *,
                       budgets: list[int] | None = None, counterfactual: str = "corrupt", batch_size: int = 8,
                       n_random: int = 2, seed: int = 0, graph: CircuitGraph | None = None,
                       passes: PassCount | None = None, progress: bool = False) -> FaithfulnessCurve:
    """Top-``b`` circuits by ``|score|`` for each budget ``b`` (position-resolved edges), their exact
    metric and accuracy, against ``n_random`` random circuits of each size (seeded); ``progress``
    shows a bar over the passes (on a pretrained model this is most of a circuit's time).

    >>> from interp.models import load_model
    >>> from interp.interventions.circuits import circuit_graph, copying_task, edge_scores
    >>> model = load_model("planted-ub", device="cpu")
    >>> task = copying_task(model.tokenizer, "UB", 4, 4)
    >>> curve = faithfulness_curve(model, task, edge_scores(model, task, "eap"), budgets=[8, 16], n_random=1)
    >>> round(curve.points[-1].recovered, 2), curve.points[-1].accuracy
    (1.0, 1.0)
    """
    graph = graph or circuit_graph(model)
    passes = passes if passes is not None else PassCount()
    valid = graph.valid.expand(scores.shape[0], -1, -1)
    total = int(valid.sum())
    budgets = sorted(set(budgets or default_budgets(total)))
    if any(b < 1 or b > total for b in budgets):
        raise ValueError(f"budgets {budgets}: each must be between 1 and the {total} edges of the graph")
    means = None
    if counterfactual == "mean":
        with graph_hooks_enabled(model):
            means = mean_activations(model, graph, task, batch_size, passes)
    generator = torch.Generator().manual_seed(seed)
    circuits = [valid, torch.zeros_like(valid)] + [top_n(scores, b, valid) for b in budgets]
    for _ in range(n_random):
        for b in budgets:
            noise = torch.rand(valid.shape, generator=generator)
            circuits.append(top_n(noise, b, valid))
    kept = torch.stack(circuits)
    measured, starts = [], range(0, len(kept), CIRCUITS_PER_PASS)
    with tqdm(total=len(starts) * -(-task.n // batch_size), desc="faithfulness curve",
              disable=not progress) as bar:
        for start in starts:
            measured.append(circuit_metrics(model, task, kept[start:start + CIRCUITS_PER_PASS],
                                            counterfactual=counterfactual, batch_size=batch_size, graph=graph,
                                            means=means, passes=passes, on_chunk=bar.update))
    metric = torch.cat([m.metric for m in measured])
    accuracy = torch.cat([m.accuracy for m in measured])
    clean, empty = float(metric[0]), float(metric[1])
    gap = clean - empty if clean != empty else float("nan")
    k = len(budgets)
    random_metric = metric[2 + k:].view(max(n_random, 1), k) if n_random else torch.full((1, k), float("nan"))
    random_accuracy = accuracy[2 + k:].view(max(n_random, 1), k) if n_random else torch.full((1, k), float("nan"))
    points = tuple(CurvePoint(b, b / total, float(metric[2 + i]), (float(metric[2 + i]) - empty) / gap,
                              float(accuracy[2 + i]), float((random_metric[:, i].mean() - empty) / gap),
                              float(random_accuracy[:, i].mean()))
                   for i, b in enumerate(budgets))
    return FaithfulnessCurve(points, clean, empty, float(accuracy[0]), float(accuracy[1]), total)
