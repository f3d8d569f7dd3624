"""What removing an edge of a role graph puts in, for one chunk of prompts: every writer's counterfactual output,
each reader's counterfactual input and each layer's counterfactual keys and values (`RemovalState`), from the
corrupt prompts, zeros, or means over prompts; and the check that a model's reader inputs are plain sums of its
writers' outputs (without it, removing edges one by one would not add up: post-norms, as in Gemma, break it).
`interp.interventions.circuits.masking` runs the model with edges swapped between clean and this state.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.utilities import get_act_name

from interp.interventions.circuits.graph import HookSlots, graph_hooks_enabled
from interp.interventions.circuits.role_graph import RoleGraph
from interp.interventions.edges.layout import AttentionLayout
from interp.models.bridge import TransformerBridge

ADDITIVE_TOLERANCE = 1e-3  # relative misfit of "reader input = sum of writers" that refuses a model


@dataclass(frozen=True)
class RemovalState:
    """What removing an edge puts in, for one chunk of prompts, at the graph's positions: every writer's
    counterfactual output, each reader's counterfactual input (by reader hook) and each layer's
    counterfactual keys (as scored) and values."""

    writers: Float[Tensor, "batch pos writer d_model"]
    bases: dict[str, Float[Tensor, "batch pos d_model"]]
    keys: dict[int, Float[Tensor, "batch pos kv_head d_head"]]
    values: dict[int, Float[Tensor, "batch pos kv_head d_head"]]


def _capture(model: TransformerBridge, graph: RoleGraph, layout: AttentionLayout, tokens: Tensor) -> tuple[Tensor, dict, dict, dict]:
    """Writers, reader inputs (one slot: q/k/v inputs repeat the residual per head), keys and values."""
    components = graph.components
    writers = torch.zeros(*tokens.shape, len(components.writers), model.cfg.d_model)
    readers, keys, values = {}, {}, {}

    def keep_writer(slots: HookSlots):
        def hook(x, hook):
            writers[:, :, slots.start:slots.stop] = (x if slots.per_head else x[:, :, None]).detach().float().cpu()
        return hook

    def keep(table: dict, key, per_head: bool = False):
        def hook(x, hook):
            table[key] = (x[:, :, 0] if per_head else x).detach().float().cpu()
        return hook

    hooks = [(h.name, keep_writer(h)) for h in components.writer_hooks]
    hooks += [(h.name, keep(readers, h.name, h.per_head)) for h in components.reader_hooks]
    for layer in range(layout.n_layers):
        hooks += [(layout.key_hook(layer), keep(keys, layer)), (get_act_name("v", layer), keep(values, layer))]
    with torch.no_grad(), graph_hooks_enabled(model):
        model.run_with_hooks(tokens.to(model.cfg.device), fwd_hooks=hooks)
    return writers, readers, keys, values


def removal_state(model: TransformerBridge, graph: RoleGraph, layout: AttentionLayout, clean: Int[Tensor, "batch pos"],
                  corrupt: Int[Tensor, "batch pos"] | None, counterfactual: str = "corrupt",
                  means: RemovalState | None = None) -> RemovalState:
    """The removal state of ``clean`` prompts: the ``corrupt`` prompts' run, zeros, or ``means`` (a state of one
    row, `mean_state`). A model whose reader inputs are not the sum of the graph's writers (post-attention norms,
    parallel blocks) is refused: its edges could not be removed exactly.

    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> from interp.interventions.circuits.role_graph import role_graph
    >>> from interp.interventions.edges.layout import attention_layout
    >>> model = load_model("planted-ub", device="cpu")
    >>> task = copying_task(model.tokenizer, "UB", 3, 2)
    >>> graph = role_graph(model, task)
    >>> state = removal_state(model, graph, attention_layout(model), task.clean, task.corrupt)
    >>> tuple(state.writers.shape), len(state.bases)
    ((2, 9, 12, 720), 9)
    """
    n_pos = graph.n_pos
    clean_w, clean_r, _, _ = _capture(model, graph, layout, clean[:, :n_pos])
    if counterfactual == "corrupt":
        writers, corrupt_r, keys, values = _capture(model, graph, layout, corrupt[:, :n_pos])
    elif counterfactual == "zero":
        writers = torch.zeros_like(clean_w)
        zeros = torch.zeros(*clean.shape[:1], n_pos, layout.n_kv_heads, layout.d_head)
        keys = values = {layer: zeros for layer in range(layout.n_layers)}
    elif counterfactual == "mean":
        if means is None:
            raise ValueError("counterfactual='mean' needs the means (mean_state)")
        rows = clean.shape[0]
        writers = means.writers.expand(rows, -1, -1, -1)
        keys = {layer: t.expand(rows, -1, -1, -1) for layer, t in means.keys.items()}
        values = {layer: t.expand(rows, -1, -1, -1) for layer, t in means.values.items()}
    else:
        raise ValueError(f"counterfactual={counterfactual!r}; expected corrupt, zero or mean")
    bases = _bases(graph, clean_w - writers, clean_r)
    if counterfactual == "corrupt":
        _check_additive(bases, corrupt_r)
    return RemovalState(writers, bases, keys, values)


def _bases(graph: RoleGraph, delta: Tensor, clean_readers: dict[str, Tensor]) -> dict[str, Tensor]:
    """``x'_r = x_r - sum over upstream writers of (a_w - a'_w)``: each reader's input with every writer removed."""
    components = graph.components
    stage = torch.tensor([w.stage for w in components.writers])
    bases = {}
    for h in components.reader_hooks:
        upstream = stage < components.readers[h.start].stage
        bases[h.name] = clean_readers[h.name] - delta[:, :, upstream].sum(2)
    return bases


def _check_additive(bases: dict[str, Tensor], corrupt_readers: dict[str, Tensor]) -> None:
    for name, base in bases.items():
        misfit = float((base - corrupt_readers[name]).abs().max() / corrupt_readers[name].abs().max().clamp(min=1e-12))
        if misfit > ADDITIVE_TOLERANCE:
            raise NotImplementedError(f"{name}: the reader's input is not the sum of the graph's writers (relative misfit "
                                      f"{misfit:.1e}; post-attention norms or parallel blocks?): edges cannot be removed "
                                      "exactly in this model")


def mean_state(model: TransformerBridge, graph: RoleGraph, layout: AttentionLayout, corrupt: Int[Tensor, "batch pos"],
               batch_size: int = 8) -> RemovalState:
    """Writers, keys and values averaged over the ``corrupt`` prompts, one row (for ``counterfactual='mean'``)."""
    total = None
    for start in range(0, corrupt.shape[0], batch_size):
        writers, _, keys, values = _capture(model, graph, layout, corrupt[start:start + batch_size, :graph.n_pos])
        part = (writers.sum(0, keepdim=True), {l: t.sum(0, keepdim=True) for l, t in keys.items()},
                {l: t.sum(0, keepdim=True) for l, t in values.items()})
        total = part if total is None else (total[0] + part[0], {l: total[1][l] + t for l, t in part[1].items()},
                                            {l: total[2][l] + t for l, t in part[2].items()})
    n = corrupt.shape[0]
    return RemovalState(total[0] / n, {}, {l: t / n for l, t in total[1].items()}, {l: t / n for l, t in total[2].items()})


# --------------------------------------------------------------------------- sparse sums

