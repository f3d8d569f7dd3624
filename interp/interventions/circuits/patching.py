"""Hooks that read the graph's writers (`capture_writer_hooks`, `writer_activations`: what the first-order
scores are computed from).

Edges are removed exactly, circuits and single edges alike, by `interp.interventions.circuits.masking`
(through `interp.interventions.circuits.runner`).
"""

from __future__ import annotations

from collections.abc import Callable
import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.interventions.circuits.graph import CircuitGraph
from interp.measure.batching import Hook
from interp.models.bridge import TransformerBridge


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
