"""Everything one model and task need to measure circuits exactly: the graph, the removal state of each chunk
of prompts (computed once), the clean run, and batched measurement of many circuits side by side.

A circuit is a set of edge indices of the role graph; measuring it removes every other edge
(`interp.interventions.circuits.masking`). ``recovered`` is MIB's faithfulness: ``(m(C) - m(empty)) /
(m(full) - m(empty))``, ``m`` the task metric averaged over prompts; ``accuracy`` the share of prompts whose
every answer token is the argmax.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from interp.core.stats import MIN_GAP
from interp.interventions.circuits.graph import graph_hooks_enabled
from interp.interventions.circuits.masking import masked_logits, sparse_plan
from interp.interventions.circuits.removal_state import RemovalState, mean_state, removal_state
from interp.interventions.circuits.role_graph import RoleGraph, role_graph
from interp.interventions.circuits.task import COUNTERFACTUALS, CircuitTask
from interp.interventions.edges.layout import AttentionLayout, attention_layout
from interp.models.bridge import TransformerBridge, logits_at

ROWS_PER_PASS = 32  # rows of one forward pass (circuits x prompts): the dense sums hold rows x writers x d_model
# A task whose clean-vs-counterfactual gap (`interp.core.stats.MIN_GAP`) or clean accuracy is below these
# cannot carry a circuit: it would explain noise.
MIN_ACCURACY = 0.25  # share of clean prompts copied exactly


class WeakTaskError(ValueError):
    """The model does not do the task well enough for a circuit to explain it."""


@dataclass(frozen=True)
class Goal:
    """What a circuit must keep: ``recovered`` of the gap and ``accuracy`` times the clean accuracy.

    >>> Goal(0.8, 0.75).describe()
    '0.8 of the gap and 0.75 of the clean accuracy'
    """

    recovered: float = 0.8
    accuracy: float = 0.0

    def describe(self) -> str:
        return f"{self.recovered:g} of the gap" + (f" and {self.accuracy:g} of the clean accuracy" if self.accuracy else "")

    def kept_by(self, recovered: float, accuracy: float, clean_accuracy: float) -> bool:
        """Whether a circuit measured at ``recovered`` and ``accuracy`` keeps the goal.

        >>> Goal(0.8, 0.5).kept_by(0.85, 0.5, 1.0), Goal(0.8, 0.5).kept_by(0.85, 0.25, 1.0)
        (True, False)
        """
        return recovered >= self.recovered and accuracy >= self.accuracy * clean_accuracy


def as_goal(target: "Goal | float") -> Goal:
    return target if isinstance(target, Goal) else Goal(float(target))


@dataclass(frozen=True)
class Measured:
    """Per circuit: the task metric and exact-copy accuracy, averaged over prompts."""

    metric: Float[Tensor, " circuit"]
    accuracy: Float[Tensor, " circuit"]


@dataclass
class CircuitRunner:
    """One model, task and graph, ready to measure circuits (see `circuit_runner`)."""

    model: TransformerBridge
    task: CircuitTask
    graph: RoleGraph
    layout: AttentionLayout
    counterfactual: str
    batch_size: int
    states: list[RemovalState] = field(repr=False)
    clean_logits: list[Float[Tensor, "_batch slot vocab"]] = field(repr=False)  # the last chunk may be shorter
    empty: Measured | None = None

    @property
    def chunks(self) -> list[slice]:
        return [slice(s, min(self.task.n, s + self.batch_size)) for s in range(0, self.task.n, self.batch_size)]

    @property
    def clean_metric(self) -> float:
        return float(torch.cat([self.task.rows(c).scored_metric(lg) for c, lg in zip(self.chunks, self.clean_logits)]).mean())

    @property
    def clean_accuracy(self) -> float:
        return float(torch.cat([self.task.rows(c).scored_correct(lg) for c, lg in zip(self.chunks, self.clean_logits)]).float().mean())

    @property
    def empty_metric(self) -> float:
        if self.empty is None:
            self.empty = self.measure([torch.zeros(0, dtype=torch.long)])
        return float(self.empty.metric[0])

    @property
    def gap(self) -> float:
        return self.clean_metric - self.empty_metric

    def recovered(self, metric: Tensor | float) -> Tensor | float:
        return (metric - self.empty_metric) / self.gap

    def meets(self, circuit: Int[Tensor, " k"], goal: "Goal | float") -> tuple[bool, float, float]:
        """Whether ``circuit`` keeps ``goal``, with its recovered share and accuracy (one measurement)."""
        goal, measured = as_goal(goal), self.measure([circuit])
        recovered, accuracy = float(self.recovered(measured.metric[0])), float(measured.accuracy[0])
        return goal.kept_by(recovered, accuracy, self.clean_accuracy), recovered, accuracy

    def logits(self, chunk: int, edges: Int[Tensor, " k"], coef: Float[Tensor, "group k"], kept_by_default: bool = False,
               dense: bool | None = None, plan=None) -> Float[Tensor, "row slot vocab"]:
        """The scored logits of chunk ``chunk`` with ``edges`` weighted by ``coef`` (`masking.masked_logits`;
        ``plan``: `plan` of ``edges``, for a loop over one edge list)."""
        rows = self.chunks[chunk]
        return masked_logits(self.model, self.graph, self.layout, self.states[chunk], self.task.clean[rows], edges, coef,
                             kept_by_default=kept_by_default, dense=dense, plan=plan)

    def plan(self, edges: Int[Tensor, " k"]):
        """The sparse index lists of ``edges`` (`masking.sparse_plan` of its residual edges)."""
        return sparse_plan(self.graph, edges[edges < self.graph.n_residual])

    def measure(self, circuits: Sequence[Tensor], *, kept_by_default: bool = False,
                on_pass: Callable[[], None] | None = None) -> Measured:
        """The metric and accuracy of each circuit (edge index sets; with ``kept_by_default``: the edges removed).

        >>> import torch
        >>> from interp.models import load_model
        >>> from interp.interventions.circuits.task import copying_task
        >>> model = load_model("planted-ub", device="cpu")
        >>> runner = circuit_runner(model, copying_task(model.tokenizer, "UB", 3, 4))
        >>> out = runner.measure([torch.arange(len(runner.graph)), torch.arange(0)])
        >>> out.accuracy.tolist()                                  # everything kept, nothing kept
        [1.0, 0.0]
        """
        metric, correct = torch.zeros(len(circuits)), torch.zeros(len(circuits))
        for chunk, rows in enumerate(self.chunks):
            task = self.task.rows(rows)
            per_pass = max(1, ROWS_PER_PASS // task.n)
            for start in range(0, len(circuits), per_pass):
                group = circuits[start:start + per_pass]
                edges, coef = _stack(group, kept_by_default)
                with torch.no_grad():
                    scored = self.logits(chunk, edges, coef, kept_by_default)
                metric[start:start + len(group)] += task.scored_metric(scored).view(len(group), -1).sum(1)
                correct[start:start + len(group)] += task.scored_correct(scored).view(len(group), -1).float().sum(1)
                if on_pass is not None:
                    on_pass()
        return Measured(metric / self.task.n, correct / self.task.n)

    def passes(self, n_circuits: int) -> int:
        """Forward passes `measure` takes for ``n_circuits`` circuits (a progress bar's total)."""
        return sum(-(-n_circuits // max(1, ROWS_PER_PASS // (c.stop - c.start))) for c in self.chunks)

    def check_task(self) -> str | None:
        """Why the model does the task too weakly for a circuit to explain it (`MIN_GAP`, `MIN_ACCURACY`), or None."""
        n_answers = self.task.targets.shape[1]
        if self.gap < MIN_GAP:
            return (f"the clean-vs-counterfactual gap is {self.gap:.3g} ({self.task.metric_kind}, mean over {n_answers} answer "
                    f"tokens and {self.task.n} prompts), below {MIN_GAP}: shares of it would be noise")
        if self.clean_accuracy < MIN_ACCURACY:
            return (f"clean accuracy is {self.clean_accuracy:.2f} ({self.task.n} prompts), below {MIN_ACCURACY}: the model "
                    "does not do the task")
        return None


def _stack(circuits: Sequence[Tensor], kept_by_default: bool) -> tuple[Tensor, Tensor]:
    """Every circuit's edges as one edge list with a 0/1 (removed: -1/0) weight row per circuit."""
    edges = torch.unique(torch.cat([c.long() for c in circuits])) if circuits else torch.zeros(0, dtype=torch.long)
    coef = torch.zeros(len(circuits), len(edges))
    for g, c in enumerate(circuits):
        coef[g, torch.searchsorted(edges, c.long())] = -1.0 if kept_by_default else 1.0
    return edges, coef


def circuit_runner(model: TransformerBridge, task: CircuitTask, *, grain: str = "roles", counterfactual: str = "corrupt",
                   batch_size: int = 8, graph: RoleGraph | None = None) -> CircuitRunner:
    """Build the graph, the removal state of each chunk of ``batch_size`` prompts and the clean run.

    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> model = load_model("planted-ub", device="cpu")
    >>> runner = circuit_runner(model, copying_task(model.tokenizer, "UB", 3, 4))
    >>> round(runner.clean_accuracy, 2), runner.gap > 10, runner.check_task()
    (1.0, True, None)
    """
    if counterfactual not in COUNTERFACTUALS:
        raise ValueError(f"counterfactual={counterfactual!r}; expected one of {', '.join(COUNTERFACTUALS)}")
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size}: at least 1")
    graph = graph or role_graph(model, task, grain)
    layout = attention_layout(model)
    means = mean_state(model, graph, layout, task.corrupt, batch_size) if counterfactual == "mean" else None
    states, clean = [], []
    for start in range(0, task.n, batch_size):
        rows = slice(start, min(task.n, start + batch_size))
        states.append(removal_state(model, graph, layout, task.clean[rows], task.corrupt[rows], counterfactual, means))
        with torch.no_grad(), graph_hooks_enabled(model):
            clean.append(logits_at(model, task.clean[rows, :graph.n_pos], graph.scored).float())
    return CircuitRunner(model, task, graph, layout, counterfactual, batch_size, states, clean)


def top_k(ranking: Float[Tensor, " edge"], k: int) -> Int[Tensor, " k"]:
    """The ``k`` edges ranked first (largest ``ranking``; ties by index).

    >>> top_k(torch.tensor([0.5, 3.0, -1.0, 3.0]), 2).tolist()
    [1, 3]
    """
    return ranking.argsort(descending=True, stable=True)[:k].sort().values


def as_mask(edges: Int[Tensor, " k"], n: int) -> Bool[Tensor, " edge"]:
    mask = torch.zeros(n, dtype=torch.bool)
    mask[edges] = True
    return mask
