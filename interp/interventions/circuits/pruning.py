"""Greedy pruning verified exactly. Start from the smallest top-``k`` of a first-order ranking that keeps the goal
(at most ``start`` edges); drop edges in halving batches, each batch the edges whose removal costs least by the
gradient inside the current circuit (`circuit_gradients`, one forward and backward pass), each batch measured
exactly before it goes (`attribution_prune`); then measure what removing each remaining edge alone costs (the
circuit's minimality) and drop the cheapest while the goal holds, the largest such set found by bisection
(`prune`). Exact single-edge losses cost one pass of the prompts per edge, so they come last, on the small circuit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.interventions.circuits.curve import smallest_circuit
from interp.interventions.circuits.role_scores import removal_losses
from interp.interventions.circuits.runner import CircuitRunner, Goal

RANKED_FIRST = 1e3
MAX_GRADIENT_EDGES = 50_000


@dataclass(frozen=True)
class PruneResult:
    """The pruned circuit, each kept edge's loss when removed alone, and a ranking of every edge (kept edges by
    loss, then pruned ones in reverse order of pruning, then the rest by the starting ranking)."""

    circuit: Int[Tensor, " k"]
    losses: Float[Tensor, " k"]
    ranking: Float[Tensor, " edge"]
    rounds: int


def prune(runner: CircuitRunner, circuit: Int[Tensor, " k"], target: Goal | float, *, max_rounds: int = 4,
          on_pass: Callable[[], None] | None = None) -> tuple[Tensor, Tensor, list[int], int]:
    """Drop from ``circuit`` the cheapest edges (by loss when removed alone) while it recovers ``target``:
    the pruned circuit, its edges' losses, the edges dropped (in order) and the rounds taken. A circuit that
    misses the target keeps every edge (its losses are still measured)."""
    pruned: list[int] = []
    losses = removal_losses(runner, circuit, on_pass=on_pass)
    rounds = 0
    for rounds in range(1, max_rounds + 1):
        order = losses.argsort(stable=True)  # cheapest first
        low, high = 0, len(circuit)  # largest m with the m cheapest removed still reaching the target

        def reaches(m: int) -> bool:
            return runner.meets(circuit[order[m:]], target)[0]

        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if reaches(middle) else (low, middle - 1)
        if low == 0:
            break
        pruned += circuit[order[:low]].tolist()
        circuit = circuit[order[low:]].sort().values
        losses = removal_losses(runner, circuit, on_pass=on_pass)
    return circuit, losses, pruned, rounds


def greedy_prune(runner: CircuitRunner, ranking: Float[Tensor, " edge"], target: Goal | float, start: int, *,
                 max_rounds: int = 1, on_pass: Callable[[], None] | None = None,
                 on_round: Callable[[int], None] | None = None) -> PruneResult:
    """Prune the top of ``ranking`` down while it recovers ``target`` of the gap (see the module text).

    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> from interp.interventions.circuits.runner import circuit_runner
    >>> from interp.interventions.circuits.role_scores import role_edge_scores
    >>> model = load_model("planted-ub", device="cpu")
    >>> runner = circuit_runner(model, copying_task(model.tokenizer, "UB", 3, 4))
    >>> result = greedy_prune(runner, role_edge_scores(runner, "eap").abs(), 0.9, 40)
    >>> len(result.circuit) <= 10, bool(runner.recovered(runner.measure([result.circuit]).metric[0]) >= 0.9)
    (True, True)
    """
    start_circuit = smallest_circuit(runner, ranking, target, start).edges
    if on_round is not None:
        on_round(len(start_circuit))
    circuit, by_gradient = attribution_prune(runner, start_circuit, target, on_round=on_round)
    circuit, losses, pruned, rounds = prune(runner, circuit, target, max_rounds=max_rounds, on_pass=on_pass)
    return PruneResult(circuit, losses, pruned_ranking(ranking, circuit, losses, by_gradient + pruned), rounds)


def pruned_ranking(ranking: Tensor, circuit: Tensor, losses: Tensor, pruned: list[int]) -> Tensor:
    """Kept edges first (by loss), then the pruned ones (pruned later ranks higher), then ``ranking``."""
    out = ranking / ranking.abs().max().clamp(min=1e-12)
    for i, edge in enumerate(pruned):
        out[edge] = RANKED_FIRST / 2 + i / max(1, len(pruned))
    out[circuit] = RANKED_FIRST + losses
    return out


def circuit_gradients(runner: CircuitRunner, circuit: Int[Tensor, " k"]) -> Float[Tensor, " k"]:
    """``d metric / d m_e`` of each edge's weight at the circuit (every other edge removed), averaged over the
    prompts: removing edge ``e`` changes the metric by about ``-gradient[e]`` (EAP inside the circuit)."""
    if len(circuit) > MAX_GRADIENT_EDGES:
        raise ValueError(f"gradients inside a circuit of {len(circuit):,} edges: at most {MAX_GRADIENT_EDGES:,} (each edge's "
                         "positions are summed one by one); start from a smaller circuit")
    plan = runner.plan(circuit)
    total = torch.zeros(len(circuit))
    for chunk, rows in enumerate(runner.chunks):
        coef = torch.ones(1, len(circuit), requires_grad=True)
        logits = runner.logits(chunk, circuit, coef, dense=False, plan=plan)
        runner.task.rows(rows).scored_metric(logits).sum().backward()
        total += coef.grad[0]
    return total / runner.task.n


def attribution_prune(runner: CircuitRunner, circuit: Int[Tensor, " k"], target: Goal | float, *,
                      on_round: Callable[[int], None] | None = None) -> tuple[Tensor, list[int]]:
    """Drop edges from ``circuit`` in halving batches while it recovers ``target``: each batch the edges whose
    removal costs least by the gradient inside the current circuit (`circuit_gradients`), each batch verified
    exactly before it goes; returns the pruned circuit and the dropped edges in order. Cheap where `prune`'s exact
    single-edge losses are not (one forward and backward pass a round instead of one pass an edge)."""
    pruned: list[int] = []
    share = 0.5
    gradients = None
    while share * len(circuit) >= 1:
        if gradients is None:
            gradients = circuit_gradients(runner, circuit)
        batch = max(1, int(share * len(circuit)))
        drop = gradients.argsort(stable=True)[:batch]  # removing costs about -gradient: smallest gradients first
        keep = torch.ones(len(circuit), dtype=torch.bool)
        keep[drop] = False
        if runner.meets(circuit[keep], target)[0]:
            pruned += circuit[drop].tolist()
            circuit, gradients = circuit[keep], None
            if on_round is not None:
                on_round(len(circuit))
        else:
            share /= 2
    return circuit, pruned
