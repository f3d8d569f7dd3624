"""Faithfulness over a fixed grid of edge fractions, as MIB measures it, and the smallest circuit reaching a target.

Every method ranks the graph's edges; the circuit at fraction ``f`` is the top ``round(f * N)`` edges. Each grid
point is measured exactly (`interp.interventions.circuits.runner`), from the empty circuit (``f = 0``, the
counterfactual run) to the whole graph (``f = 1``, the model), so the areas are taken over measured points only:
CPR, the area under recovered(f) (higher is better), and CMD, the area under ``|1 - recovered(f)|`` (lower is
better), by the trapezoid rule over the grid. A random ranking (seeded) gives the baseline at every point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from interp.interventions.circuits.runner import CircuitRunner, Goal, top_k

# MIB's grid, with the finer fractions a pretrained model's circuits live at (its graph has ~10^5 edges).
FRACTIONS: tuple[float, ...] = (0.0, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
LADDER: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000)


@dataclass(frozen=True)
class CurvePoint:
    """One grid fraction: its circuit's size, recovered share of the gap and accuracy, and a random circuit's."""

    fraction: float
    edges: int
    recovered: float
    accuracy: float
    random_recovered: float
    random_accuracy: float


def _area(xs: Sequence[float], ys: Sequence[float]) -> float:
    return float(sum((xs[i + 1] - xs[i]) * (ys[i + 1] + ys[i]) / 2 for i in range(len(xs) - 1)))


@dataclass(frozen=True)
class Curve:
    """The measured grid and the clean / empty runs it is relative to."""

    points: tuple[CurvePoint, ...]
    total_edges: int
    clean_metric: float
    empty_metric: float
    clean_accuracy: float
    empty_accuracy: float

    @property
    def _xs(self) -> list[float]:
        return [p.edges / self.total_edges for p in self.points]

    @property
    def cpr(self) -> float:
        """Area under recovered over the fraction of edges kept (trapezoids between measured points)."""
        return _area(self._xs, [p.recovered for p in self.points])

    @property
    def cmd(self) -> float:
        """Area under ``|1 - recovered|``: how far, over the grid, the circuits are from the model."""
        return _area(self._xs, [abs(1 - p.recovered) for p in self.points])

    @property
    def random_cpr(self) -> float:
        return _area(self._xs, [p.random_recovered for p in self.points])

    def as_rows(self) -> list[dict]:
        return [vars(p).copy() for p in self.points]


def grid_sizes(total: int, fractions: Sequence[float] = FRACTIONS) -> list[int]:
    """Circuit sizes of the grid for a graph of ``total`` edges.

    >>> grid_sizes(844, (0.0, 0.01, 0.5, 1.0))
    [0, 8, 422, 844]
    """
    if any(not 0 <= f <= 1 for f in fractions) or list(fractions) != sorted(fractions) or fractions[0] != 0 or fractions[-1] != 1:
        raise ValueError(f"fractions {list(fractions)}: increasing, from 0 to 1")
    return [round(f * total) for f in fractions]


def faithfulness_curve(runner: CircuitRunner, ranking: Float[Tensor, " edge"], *, fractions: Sequence[float] = FRACTIONS,
                       n_random: int = 1, seed: int = 0, progress: bool = False) -> Curve:
    """Top-``k`` circuits of ``ranking`` at each grid fraction, and ``n_random`` random circuits of each size.

    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> from interp.interventions.circuits.runner import circuit_runner
    >>> from interp.interventions.circuits.role_scores import role_edge_scores
    >>> model = load_model("planted-ub", device="cpu")
    >>> runner = circuit_runner(model, copying_task(model.tokenizer, "UB", 3, 4))
    >>> curve = faithfulness_curve(runner, role_edge_scores(runner, "eap").abs(), fractions=(0, 0.01, 0.1, 1))
    >>> [(p.edges, round(p.recovered, 2)) for p in curve.points]
    [(0, 0.0), (8, 0.67), (83, 0.92), (828, 1.0)]
    """
    total = len(runner.graph)
    if ranking.shape != (total,):
        raise ValueError(f"ranking of shape {tuple(ranking.shape)}: expected one value per edge ({total})")
    sizes = grid_sizes(total, fractions)
    unique = sorted(set(sizes))
    generator = torch.Generator().manual_seed(seed)
    randoms = [torch.rand(total, generator=generator) for _ in range(n_random)]
    circuits = [top_k(ranking, k) for k in unique]
    circuits += [top_k(noise, k) for noise in randoms for k in unique if 0 < k < total]
    with tqdm(total=runner.passes(len(circuits)), desc="faithfulness curve", disable=not progress) as bar:
        measured = runner.measure(circuits, on_pass=bar.update)
    recovered = runner.recovered(measured.metric)
    top = {k: (float(recovered[i]), float(measured.accuracy[i])) for i, k in enumerate(unique)}
    inner = [k for k in unique if 0 < k < total]
    random: dict[int, tuple[float, float]] = {k: top[k] for k in unique if k in (0, total)}
    for k in inner:
        picks = [len(unique) + j * len(inner) + inner.index(k) for j in range(n_random)]
        random[k] = (float(recovered[picks].mean()), float(measured.accuracy[picks].mean())) if picks else (float("nan"),) * 2
    points = tuple(CurvePoint(f, k, *top[k], *random[k]) for f, k in zip(fractions, sizes))
    return Curve(points, total, runner.clean_metric, runner.empty_metric, runner.clean_accuracy, top[0][1])


@dataclass(frozen=True)
class Selected:
    """The circuit a ranking gives: its edges, recovered share and accuracy, and the sizes tried."""

    edges: Int[Tensor, " k"]
    recovered: float
    accuracy: float
    tried: tuple[tuple[int, float], ...]


def smallest_circuit(runner: CircuitRunner, ranking: Float[Tensor, " edge"], target: Goal | float, max_edges: int) -> Selected:
    """The smallest top-``k`` of ``ranking`` keeping ``target`` (a `Goal`, or a share of the gap), ``k <= max_edges``: the
    `LADDER` sizes first, then bisection between the last that missed and the first that reached it; the top
    ``max_edges`` when none does.

    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> from interp.interventions.circuits.runner import circuit_runner
    >>> from interp.interventions.circuits.role_scores import role_edge_scores
    >>> model = load_model("planted-ub", device="cpu")
    >>> runner = circuit_runner(model, copying_task(model.tokenizer, "UB", 3, 4))
    >>> chosen = smallest_circuit(runner, role_edge_scores(runner, "eap").abs(), 0.9, 100)
    >>> len(chosen.edges) <= 10, chosen.recovered >= 0.9
    (True, True)
    """
    total = len(runner.graph)
    max_edges = min(max_edges, total)
    tried: dict[int, tuple[float, float]] = {}
    met: dict[int, bool] = {}

    def meets(k: int) -> bool:
        if k not in met:
            met[k], *tried[k] = runner.meets(top_k(ranking, k), target)
        return met[k]

    low, high = 0, None
    for k in [k for k in LADDER if k < max_edges] + [max_edges]:
        if meets(k):
            high = k
            break
        low = k
    if high is None:
        high = max_edges
    else:
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if meets(middle) else (middle, high)
    return Selected(top_k(ranking, high), *tried[high], tuple(sorted((k, v[0]) for k, v in tried.items())))
