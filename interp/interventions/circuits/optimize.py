"""Mask optimization in the manner of Edge Pruning (Bhaskar et al., 2024): a continuous mask per edge, trained
so that the masked model keeps the clean model's answers while the expected number of kept edges falls; the
circuit is read off the masks along the way.

Each candidate edge ``e`` has a log-odds ``alpha_e``; a training step samples hard-concrete masks
``z = clamp(sigmoid((log u - log(1 - u) + alpha) / beta) (zeta - gamma) + gamma, 0, 1)`` (Louizos et al., 2018),
runs the model with every edge weighted by its mask and every other edge removed (the counterfactual carries
what a removed edge carried), and descends ``L + l1 g + l2 g^2``: ``L`` the share of the clean-vs-counterfactual
gap lost per prompt (``objective="metric"``, the default: what the circuit is judged by) or the KL divergence from
the clean model's next-token distributions (``"kl"``, Edge Pruning's), ``g = d / d_t - 1`` with ``d`` the expected
share of candidates kept and ``d_t`` a target falling geometrically from every candidate to ``edges`` over the
first half of the steps and on towards one edge over the second, the two multipliers ascended (a Lagrangian, as
Edge Pruning does). Every ``check_every`` steps where at most ``edges`` masks have a positive log-odds, those edges
are measured exactly as a circuit: the smallest that recovers the target share of the gap is the circuit (a sparsity path in one run, where Edge Pruning trains once per sparsity). Edges are ranked by the last
check they survived, then by log-odds; edges no check kept follow, by the first-order score.

On a CPU the graph of a pretrained model is too large to train every edge, so the candidates are the top edges by
a first-order score (EAP-IG) and the rest stay removed; how much the candidates alone recover is reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from interp.interventions.circuits.runner import CircuitRunner, Goal, top_k

BETA, GAMMA, ZETA = 2 / 3, -0.1, 1.1  # the hard-concrete stretch of Louizos et al.
RANKED_FIRST = 1e3
# what the masked model is held to: the clean model's next-token distributions (KL, as Edge Pruning), or the task
# metric (the share of the clean-vs-counterfactual gap lost, per prompt)
OBJECTIVES: tuple[str, ...] = ("kl", "metric")  # candidates rank above every other edge, by their learned log-odds


@dataclass(frozen=True)
class MaskConfig:
    """``edges``: the budget (no circuit is larger); ``candidates``: edges trained (0: automatic,
    ``max(20 x edges, 2000)``); ``steps`` of Adam at ``lr``; masks start on (``init`` log-odds: near 1, not
    saturated, so that the metric's gradient reaches every mask from the first step); the circuit is checked every
    ``check_every`` steps once at most ``edges`` masks are open."""

    edges: int = 200
    candidates: int = 0
    steps: int = 100
    lr: float = 0.1
    lagrange_lr: float = 1.0
    init: float = 1.0
    check_every: int = 5
    objective: str = "metric"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.edges < 1 or self.steps < 2 or self.candidates < 0 or self.check_every < 1:
            raise ValueError(f"edges={self.edges}, steps={self.steps}, candidates={self.candidates}, check_every="
                             f"{self.check_every}: edges and check_every >= 1, steps >= 2, candidates >= 0")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective={self.objective!r}; expected one of {', '.join(OBJECTIVES)}")
        if self.lr <= 0 or self.lagrange_lr <= 0:
            raise ValueError(f"lr={self.lr}, lagrange_lr={self.lagrange_lr}: both > 0")

    def n_candidates(self, total: int) -> int:
        return min(total, self.candidates or max(20 * self.edges, 2000))


@dataclass(frozen=True)
class PathPoint:
    """One check along the sparsity path: the step, the circuit's size, recovered share and accuracy."""

    step: int
    edges: int
    recovered: float
    accuracy: float
    meets: bool


@dataclass(frozen=True)
class MaskResult:
    """The circuit chosen on the path, a ranking of every edge (candidates first), the candidates, their final
    log-odds, the KL per step, the path and how much the candidates alone recover."""

    circuit: Int[Tensor, " k"]
    ranking: Float[Tensor, " edge"]
    candidates: Int[Tensor, " candidate"]
    log_alpha: Float[Tensor, " candidate"]
    losses: tuple[float, ...]
    path: tuple[PathPoint, ...]
    candidates_recovered: float


def hard_concrete(log_alpha: Tensor, generator: torch.Generator | None) -> Tensor:
    """A sample of the stretched, clamped hard-concrete mask (``generator`` None: its deterministic value)."""
    if generator is None:
        return (torch.sigmoid(log_alpha) * (ZETA - GAMMA) + GAMMA).clamp(0, 1)
    u = torch.rand(log_alpha.shape, generator=generator).clamp(1e-6, 1 - 1e-6)
    s = torch.sigmoid((u.log() - (1 - u).log() + log_alpha) / BETA)
    return (s * (ZETA - GAMMA) + GAMMA).clamp(0, 1)


def expected_kept(log_alpha: Tensor) -> Tensor:
    """The probability each hard-concrete mask is non-zero."""
    return torch.sigmoid(log_alpha - BETA * math.log(-GAMMA / ZETA))


def _target(step: int, steps: int, total: int, budget: int) -> float:
    """The expected number of kept candidates at ``step``: geometric from ``total`` to ``budget`` over the first
    half, then from ``budget`` to 1."""
    half = steps / 2
    if step < half:
        return total * (budget / total) ** (step / half)
    return budget * (1 / budget) ** ((step - half) / half)


def _better(point: PathPoint, best: PathPoint | None) -> bool:
    """The smallest circuit keeping the goal; while none does, the most faithful."""
    if best is None:
        return True
    if point.meets:
        return not best.meets or point.edges <= best.edges
    return not best.meets and point.recovered > best.recovered


def optimize_masks(runner: CircuitRunner, scores: Float[Tensor, " edge"], config: MaskConfig = MaskConfig(),
                   target: Goal | float = 0.8, *, progress: bool = False) -> MaskResult:
    """Train masks over the top candidates by ``|scores|`` and read the smallest circuit recovering ``target`` off
    the path (see the module text).

    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> from interp.interventions.circuits.runner import circuit_runner
    >>> from interp.interventions.circuits.role_scores import role_edge_scores
    >>> model = load_model("planted-ub", device="cpu")
    >>> runner = circuit_runner(model, copying_task(model.tokenizer, "UB", 3, 4))
    >>> result = optimize_masks(runner, role_edge_scores(runner, "eap"), MaskConfig(edges=20, candidates=64, steps=60), 0.9)
    >>> result.path[-1].edges <= result.path[0].edges <= 20
    True
    """
    total = len(runner.graph)
    n_candidates = config.n_candidates(total)
    budget = min(config.edges, n_candidates)
    candidates = top_k(scores.abs(), n_candidates)
    candidates_recovered = float(runner.recovered(runner.measure([candidates]).metric[0]))
    log_alpha = torch.full((n_candidates,), config.init, requires_grad=True)
    lagrange = torch.zeros(2, requires_grad=True)
    optimizer = torch.optim.Adam([log_alpha], lr=config.lr)
    ascent = torch.optim.Adam([lagrange], lr=config.lagrange_lr, maximize=True)
    generator = torch.Generator().manual_seed(config.seed)
    clean_logprobs = [logits.log_softmax(-1) for logits in runner.clean_logits]
    plan = runner.plan(candidates)
    survived = torch.full((n_candidates,), -1.0)
    losses, path, best = [], [], None
    for step in tqdm(range(config.steps), desc="mask optimization", disable=not progress):
        chunk = step % len(runner.chunks)
        expected = _target(step, config.steps, n_candidates, budget)
        z = hard_concrete(log_alpha, generator)[None]
        logits = runner.logits(chunk, candidates, z, dense=False, plan=plan)
        clean = clean_logprobs[chunk]
        if config.objective == "kl":
            kl = (clean.exp() * (clean - logits.float().log_softmax(-1))).sum(-1).mean()
        else:
            task = runner.task.rows(runner.chunks[chunk])
            lost = (task.scored_metric(runner.clean_logits[chunk]) - task.scored_metric(logits)) / runner.gap
            kl = lost.clamp(min=0).mean()
        gap = expected_kept(log_alpha).sum() / expected - 1  # relative: the budget is a small share of the candidates
        loss = kl + lagrange[0] * gap + lagrange[1] * gap ** 2
        optimizer.zero_grad()
        ascent.zero_grad()
        loss.backward()
        optimizer.step()
        ascent.step()
        losses.append(float(kl.detach()))
        last = step == config.steps - 1
        if step % config.check_every == 0 or last:
            kept = (log_alpha.detach() > 0).nonzero()[:, 0]
            if 0 < len(kept) <= budget:
                meets, recovered, accuracy = runner.meets(candidates[kept], target)
                point = PathPoint(step, len(kept), recovered, accuracy, meets)
                path.append(point)
                survived[kept] = step
                if _better(point, None if best is None else best[0]):
                    best = (point, candidates[kept].sort().values)
    alpha = log_alpha.detach().clone()
    ranking = scores.abs() / scores.abs().max().clamp(min=1e-12)
    # the last check an edge survived, then its log-odds (squashed below one step); an edge no check kept keeps
    # its place by |score|, so that cutting this order further down is never worse informed than the scores
    kept_once = survived >= 0
    ranking[candidates[kept_once]] = RANKED_FIRST + survived[kept_once] + torch.sigmoid(alpha[kept_once])
    if best is None:  # no check kept an edge within the budget: the budget's top log-odds
        circuit = candidates[alpha.argsort(descending=True)[:budget]].sort().values
    else:
        circuit = best[1]
    return MaskResult(circuit, ranking, candidates, alpha, tuple(losses), tuple(path), candidates_recovered)
