"""Hooks that read the graph's writers and rebuild its readers' inputs.

Removing edge (reader ``r``, writer ``w``) at position ``p`` replaces what ``w`` gives ``r`` there by
the counterfactual's: ``x_r[p] += a'_w[p] - a_w[p]``, exact because each reader's input is a plain
sum of writer outputs before the LayerNorm. Two forms share that rule: *dense* (a circuit: remove
every edge a mask names, with the writers' live values, as TransformerLens' ``faithfulness`` does)
and *sparse* (single edges, many at once in one pass, one group of batch rows per edge).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import einops
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from interp.interventions.circuits.graph import CircuitGraph
from interp.measure.batching import Hook
from interp.models.bridge import TransformerBridge

ALL_POSITIONS = -1  # an edge at every position at once (a component-level edge)


@dataclass(frozen=True)
class GraphEdges:
    """Edges as index tensors: position (``ALL_POSITIONS`` for every position), reader, writer."""

    pos: Int[Tensor, " edge"]
    reader: Int[Tensor, " edge"]
    writer: Int[Tensor, " edge"]

    def __post_init__(self) -> None:
        if not self.pos.shape == self.reader.shape == self.writer.shape or self.pos.dim() != 1:
            raise ValueError("edges: pos, reader and writer must be 1-d tensors of one length")

    def __len__(self) -> int:
        return self.pos.shape[0]

    def __getitem__(self, index) -> "GraphEdges":
        return GraphEdges(self.pos[index], self.reader[index], self.writer[index])

    @classmethod
    def from_mask(cls, mask: Bool[Tensor, "pos reader writer"]) -> "GraphEdges":
        pos, reader, writer = mask.nonzero(as_tuple=True)
        return cls(pos, reader, writer)

    @classmethod
    def components(cls, mask: Bool[Tensor, "reader writer"]) -> "GraphEdges":
        """Component-level edges (every position at once)."""
        reader, writer = mask.nonzero(as_tuple=True)
        return cls(torch.full_like(reader, ALL_POSITIONS), reader, writer)


def _as_slots(x: Tensor, per_head: bool) -> Tensor:
    return x if per_head else x[:, :, None]


def capture_writer_hooks(graph: CircuitGraph, store: Tensor) -> list[Hook]:
    """Hooks copying every writer's output into ``store`` (``[batch, pos, writer, d_model]``) as it fires."""

    def keep(start: int, stop: int, per_head: bool) -> Callable:
        def hook(x, hook):
            store[:, :, start:stop] = _as_slots(x, per_head).detach()
        return hook

    return [(h.name, keep(h.start, h.stop, h.per_head)) for h in graph.writer_hooks]


def writer_activations(model: TransformerBridge, graph: CircuitGraph, tokens: Int[Tensor, "batch pos"],
                       extra_hooks: list[Hook] = ()) -> tuple[Float[Tensor, "batch pos writer d_model"], Tensor]:
    """Every writer's output on ``tokens`` and the logits, in one forward pass without gradients."""
    store = torch.zeros(*tokens.shape, len(graph.writers), model.cfg.d_model)
    with torch.no_grad():
        logits = model.run_with_hooks(tokens, fwd_hooks=capture_writer_hooks(graph, store) + list(extra_hooks))
    return store, logits


def removal_hooks(graph: CircuitGraph, counterfactual: Float[Tensor, "batch pos writer d_model"],
                  removed: Bool[Tensor, "group pos reader writer"]) -> list[Hook]:
    """Dense removal for ``group`` circuits at once (rows ``g * batch + i``): each reader input loses
    ``a_w - a'_w`` of every removed writer, ``a_w`` the writer's live value in this very pass."""
    groups, batch = removed.shape[0], counterfactual.shape[0]
    live = torch.zeros(groups * batch, *counterfactual.shape[1:])
    mask = (removed & graph.valid).to(counterfactual.dtype)
    counter = counterfactual.repeat(groups, 1, 1, 1)

    def rebuild(start: int, stop: int, per_head: bool) -> Callable:
        def hook(x, hook):
            diff = einops.rearrange(live - counter, "(g b) p w d -> g b p w d", g=groups)
            change = torch.einsum("gbpwd,gprw->gbprd", diff, mask[:, :, start:stop])
            change = einops.rearrange(change, "g b p r d -> (g b) p r d").to(x.dtype)
            return x - (change if per_head else change[:, :, 0])
        return hook

    return capture_writer_hooks(graph, live) + [(h.name, rebuild(h.start, h.stop, h.per_head)) for h in graph.reader_hooks]


def single_edge_hooks(graph: CircuitGraph, delta: Float[Tensor, "batch pos writer d_model"], edges: GraphEdges) -> list[Hook]:
    """Sparse removal of one edge per group of batch rows (rows ``e * batch + i`` patch edge ``e``):
    its reader input gains ``delta = a'_w - a_w`` (clean values: a writer upstream of the only patched
    reader keeps its clean output, so this is exact)."""
    batch, n_pos = delta.shape[0], delta.shape[1]
    hooks = []
    for slots in graph.reader_hooks:
        chosen = ((edges.reader >= slots.start) & (edges.reader < slots.stop)).nonzero()[:, 0]
        if not len(chosen):
            continue
        rows, positions, slot_index, values = [], [], [], []
        for e in chosen.tolist():
            p, r, w = int(edges.pos[e]), int(edges.reader[e]), int(edges.writer[e])
            pos = torch.arange(n_pos) if p == ALL_POSITIONS else torch.tensor([p])
            row = einops.repeat(torch.arange(batch) + e * batch, "b -> (b p)", p=len(pos))
            pos_rep = einops.repeat(pos, "p -> (b p)", b=batch)
            rows.append(row)
            positions.append(pos_rep)
            slot_index.append(torch.full_like(row, r - slots.start))
            values.append(delta[row - e * batch, pos_rep, w])
        index = (torch.cat(rows), torch.cat(positions), torch.cat(slot_index))
        vals = torch.cat(values)

        def add(x, hook, index=index, vals=vals, per_head=slots.per_head):
            x = x.clone()
            idx = index if per_head else index[:2]
            return x.index_put(tuple(i.to(x.device) for i in idx), vals.to(x.dtype), accumulate=True)

        hooks.append((slots.name, add))
    return hooks
