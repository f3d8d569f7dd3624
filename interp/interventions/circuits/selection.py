"""Circuits from scores: the top ``n`` edges, greedily grown from the logits, and how well a score
ranks a known circuit (ROC AUC, as auto-circuit and ACDC report it)."""

from __future__ import annotations

import heapq

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from interp.interventions.circuits.graph import CircuitGraph


def as_positions(mask: Bool[Tensor, "reader writer"], n_pos: int) -> Bool[Tensor, "pos reader writer"]:
    return mask[None].expand(n_pos, -1, -1)


def top_n(scores: Float[Tensor, "*edge"], n: int, valid: Bool[Tensor, "*edge"]) -> Bool[Tensor, "*edge"]:
    """The ``n`` valid edges with the largest ``|score|`` (ties by position in the tensor).

    >>> top_n(torch.tensor([[0.1, -3.0], [2.0, 5.0]]), 2, torch.tensor([[True, True], [True, False]])).tolist()
    [[False, True], [True, False]]
    """
    flat = torch.where(valid, scores.abs(), torch.tensor(-1.0)).flatten()
    keep = torch.zeros_like(flat, dtype=torch.bool)
    keep[flat.argsort(descending=True, stable=True)[:n]] = True
    return keep.view(scores.shape) & valid


def greedy(scores: Float[Tensor, "reader writer"], graph: CircuitGraph, n: int) -> Bool[Tensor, "reader writer"]:
    """Grow a component-level circuit from the logits: repeatedly add the largest-``|score|`` edge into
    a reader whose owner (head, MLP, the logits) is already in the circuit, so every kept edge lies on
    a path to the logits.

    >>> from interp.interventions.circuits.graph import CircuitGraph
    >>> g = CircuitGraph(1, 1, 1, False)          # embed, a0.0, m0 -> a0.0.q/k/v, m0.in, logits
    >>> s = torch.zeros(len(g.readers), len(g.writers))
    >>> s[g.readers.index(g.readers[-1]), 1] = -2.0      # logits <- a0.0
    >>> s[0, 0] = 1.0                                    # a0.0.q <- embed
    >>> s[3, 0] = 5.0                                    # m0.in <- embed: large, but m0 feeds nothing kept
    >>> [(g.readers[r].label, g.writers[w].label) for r, w in greedy(s, g, 2).nonzero().tolist()]
    [('a0.0.q', 'embed'), ('logits', 'a0.0')]
    """
    valid = graph.valid
    kept = torch.zeros_like(valid)
    in_circuit = set()
    heap: list[tuple[float, int, int]] = []
    readers_of = {}
    for r, reader in enumerate(graph.readers):
        for owner in graph.reader_owner(reader) or [None]:
            readers_of.setdefault(owner, []).append(r)

    def open_reader(r: int) -> None:
        for w in valid[r].nonzero()[:, 0].tolist():
            heapq.heappush(heap, (-abs(float(scores[r, w])), r, w))

    opened = set()
    for r in readers_of[None]:
        open_reader(r)
        opened.add(r)
    while heap and int(kept.sum()) < n:
        _, r, w = heapq.heappop(heap)
        if kept[r, w]:
            continue
        kept[r, w] = True
        writer = graph.writers[w]
        if writer not in in_circuit:
            in_circuit.add(writer)
            for r2 in readers_of.get(writer, []):
                if r2 not in opened:
                    opened.add(r2)
                    open_reader(r2)
    return kept


def roc_auc(scores: Float[Tensor, " edge"], truth: Bool[Tensor, " edge"]) -> float:
    """Probability that a true edge outranks a false one by ``|score|`` (ties count half).

    >>> roc_auc(torch.tensor([3.0, -2.0, 0.5, 0.0]), torch.tensor([True, True, False, False]))
    1.0
    """
    s = scores.abs().double()
    pos, neg = s[truth], s[~truth]
    if not len(pos) or not len(neg):
        raise ValueError("ROC AUC needs at least one true and one false edge")
    greater = (pos[:, None] > neg[None, :]).double().sum()
    ties = (pos[:, None] == neg[None, :]).double().sum()
    return float((greater + 0.5 * ties) / (len(pos) * len(neg)))
