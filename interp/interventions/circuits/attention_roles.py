"""Attention entries grouped by role: which (query, key) position pairs a set patches (`AttentionEdgeSet`), the
pairs of each (query role, key role), and the attention table's rows (`RoleEdge`: a head, or every head at once,
reading one role from another through its key or its value) with their first-order scores.

Roles are those of `interp.interventions.circuits.roles` without their index (``s3`` -> ``s``, ``c0`` -> ``c``); a
key position seen from a copy position is ``o``, ``o-1``, ``o+1``, ``t``, ``t-1`` where it is one. The paper's
hypotheses are the every-head rows ``all / key / c / o+1`` (induction) and ``all / value / c / o`` (anti-induction).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.interventions.circuits.roles import relative_role
from interp.interventions.circuits.task import CircuitTask
from interp.interventions.edges.layout import AttentionLayout, attention_layout  # noqa: F401 (the examples use it)
from interp.interventions.edges.patching import EDGE_KINDS

ALL_HEADS = "all"
# the paper's two hypotheses as (kind, query role, key role) of an every-head row
HYPOTHESES: dict[str, tuple[str, str, str]] = {"induction": ("key", "c", "o+1"), "anti_induction": ("value", "c", "o")}


@dataclass(frozen=True)
class AttentionEdgeSet:
    """Attention entries patched together: one ``kind``, the (``query``, ``source``) position pairs shared by
    every prompt, in each of ``layers`` x ``heads`` (query heads; ``None``: all)."""

    kind: str
    query: Int[Tensor, " entry"]
    source: Int[Tensor, " entry"]
    layers: tuple[int, ...] | None = None
    heads: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.kind not in EDGE_KINDS:
            raise ValueError(f"kind={self.kind!r}; expected one of {', '.join(EDGE_KINDS)}")
        if self.query.shape != self.source.shape or self.query.dim() != 1 or not len(self.query):
            raise ValueError("an attention edge set needs query and source positions as two 1-d tensors of one, non-zero length")


def role_group(role: str) -> str:
    """A position's role without its index: the string, the copy, the context are one role each.

    >>> [role_group(r) for r in ("s3", "c0", "x12", "o+1", "sep", "t-1")]
    ['s', 'c', 'x', 'o+1', 'sep', 't-1']
    """
    match = re.fullmatch(r"([a-z]+)\d+", role)
    return match.group(1) if match else role


def entry_role_pairs(task: CircuitTask) -> dict[tuple[str, str], tuple[Tensor, Tensor]]:
    """Every (query, source) pair that can move the metric (query at or before the last scored position),
    grouped by (query role, key role), in position order.

    >>> from interp.models import tiny_tokenizer
    >>> from interp.interventions.circuits.task import copying_task
    >>> task = copying_task(tiny_tokenizer(), "UF", 3, 1)
    >>> query, source = entry_role_pairs(task)[("c", "o+1")]
    >>> (source - task.prompts.string_start).tolist()   # copy position k reads the string's letter k + 1
    [1, 2]
    """
    last = int(task.positions.max())
    pairs: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for t in range(last + 1):
        for s in range(t + 1):
            if task.prompts is not None:
                key_role = relative_role(task.prompts, t, s, task.roles)
            else:
                key_role = "t" if s == t else "t-1" if s == t - 1 else task.roles[s]
            pairs.setdefault((role_group(task.roles[t]), role_group(key_role)), []).append((t, s))
    return {roles: (torch.tensor([t for t, _ in entries]), torch.tensor([s for _, s in entries]))
            for roles, entries in pairs.items()}


@dataclass(frozen=True)
class RoleEdge:
    """One row of the attention table: a head (``layer``, ``head``; both ``-1`` for every head at once), a
    kind and a (query role, key role) pair, with the entries it patches."""

    layer: int
    head: int
    kind: str
    query_role: str
    key_role: str
    edge_set: AttentionEdgeSet

    @property
    def label(self) -> str:
        """``a1.2`` or ``all``."""
        return ALL_HEADS if self.head < 0 else f"a{self.layer}.{self.head}"

    @property
    def hypothesis(self) -> str:
        """``induction`` / ``anti_induction`` for the paper's two every-head rows, else empty."""
        if self.head >= 0:
            return ""
        return next((name for name, spec in HYPOTHESES.items() if spec == (self.kind, self.query_role, self.key_role)), "")


def role_edges(task: CircuitTask, layout: AttentionLayout) -> list[RoleEdge]:
    """Every (head, kind, query role, key role) group of ``task``'s entries, and the same over every head.

    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> model = load_model("planted-ub", device="cpu")
    >>> rows = role_edges(copying_task(model.tokenizer, "UB", 3, 1), attention_layout(model))
    >>> sorted(r.hypothesis for r in rows if r.hypothesis)
    ['anti_induction', 'induction']
    """
    out = []
    for (query_role, key_role), (query, source) in entry_role_pairs(task).items():
        for kind in EDGE_KINDS:
            out.append(RoleEdge(-1, -1, kind, query_role, key_role, AttentionEdgeSet(kind, query, source)))
            out += [RoleEdge(layer, head, kind, query_role, key_role, AttentionEdgeSet(kind, query, source, (layer,), (head,)))
                    for layer in range(layout.n_layers) for head in range(layout.n_heads)]
    return out


def role_scores(dense: Float[Tensor, "kind layer head query source"], edges: Sequence[RoleEdge]) -> Float[Tensor, " edge"]:
    """Each group's first-order score: the sum of its entries' (first-order effects add)."""
    out = torch.zeros(len(edges))
    for i, edge in enumerate(edges):
        kind = EDGE_KINDS.index(edge.kind)
        picked = dense[kind][:, :, edge.edge_set.query, edge.edge_set.source]  # [layer, head, entry]
        out[i] = picked.sum() if edge.head < 0 else picked[edge.layer, edge.head].sum()
    return out
