"""A slow, obviously correct reference for edge patching: attention re-run once per query, as the paper's code does.

For each batch row, each layer with a patch (in order) and each query ``t`` with an edge there, the model is run
again up to that layer with the source rows of ``hook_k`` (key edges; before RoPE, as in the paper's code) or
``hook_v`` (value edges) replaced for that run only, and ``t``'s row of ``hook_z`` is kept for the patched heads.
Later re-runs and the final pass write every kept row into ``hook_z``. Nothing here shares code with
[`interp.interventions.edges.patching`][interp.interventions.edges.patching] beyond the [`Edges`][interp.interventions.edges.patching.Edges] container: it is the yardstick the batched hooks are
tested against. Cost: one forward pass per (row, layer, query, head group); for tests on tiny models.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from collections.abc import Mapping, Sequence

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.utilities import get_act_name

from interp.interventions.edges.patching import EDGE_KINDS, EdgeKind, Edges
from interp.models.bridge import TransformerBridge


@dataclass(frozen=True)
class ReferencePatch:
    """Like [`EdgePatch`][interp.interventions.edges.patching.EdgePatch], but the replacement is given as whole activations:
    ``rows[layer]`` is ``hook_k`` (key edges, before RoPE) or ``hook_v`` of a counterfactual run, shape
    ``[batch, pos, kv_head, d_head]``, read at each edge's source. ``rows=None`` cuts value edges."""

    kind: EdgeKind
    edges: Edges
    rows: Mapping[int, Float[Tensor, "batch pos kv_head d_head"]] | None = None
    layers: Sequence[int] | None = None
    heads: Sequence[int] | None = None

    def __post_init__(self) -> None:
        if self.kind not in EDGE_KINDS or (self.rows is None and self.kind == "key"):
            raise ValueError(f"reference patch: kind {self.kind!r} with rows={'None' if self.rows is None else '...'}")


# (kind, source position, index of the patch) -- one replaced row in a re-run
Modification = tuple[str, int, int]
# layer -> query -> query head -> the rows to replace when re-running attention for that query
ModificationTable = dict[int, dict[int, dict[int, list[Modification]]]]


def _modifications(patches: Sequence[ReferencePatch], row: int, n_layers: int, n_heads: int) -> ModificationTable:
    table: ModificationTable = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for index, patch in enumerate(patches):
        layers = range(n_layers) if patch.layers is None else patch.layers
        heads = range(n_heads) if patch.heads is None else patch.heads
        for query, source in zip(patch.edges.query[row].tolist(), patch.edges.source[row].tolist()):
            for layer in layers:
                for head in heads:
                    table[layer][query][head].append((patch.kind, source, index))
    return table


def _override_hooks(overrides: Mapping[int, Mapping[tuple[int, int], Tensor]], below: int | None = None) -> list:
    """Hooks writing the kept ``hook_z`` rows of every layer (below ``below``, if given)."""
    hooks = []
    for layer, rows in overrides.items():
        if below is not None and layer >= below:
            continue

        def write(z, hook, rows=rows):
            z = z.clone()
            for (query, head), value in rows.items():
                z[0, query, head] = value
            return z

        hooks.append((get_act_name("z", layer), write))
    return hooks


def _replace_rows_hook(modifications: Sequence[Modification], kind: str, patches: Sequence[ReferencePatch], row: int, layer: int):
    def replace(acts, hook):
        acts = acts.clone()
        for mod_kind, source, index in modifications:
            if mod_kind != kind:
                continue
            rows = patches[index].rows
            acts[0, source] = 0.0 if rows is None else rows[layer][row, source].to(acts.device, acts.dtype)
        return acts

    return replace


def _rerun_layer(model: TransformerBridge, tokens: Int[Tensor, "1 pos"], layer: int, modifications: Sequence[Modification],
                 patches: Sequence[ReferencePatch], row: int, overrides) -> Float[Tensor, "pos head d_head"]:
    """``hook_z`` of ``layer`` when attention there sees the replaced source rows (and earlier layers' kept rows)."""
    kept: dict[str, Tensor] = {}

    def keep(z, hook):
        kept["z"] = z[0].detach().clone()

    hooks = _override_hooks(overrides, below=layer)
    hooks.append((get_act_name("k", layer), _replace_rows_hook(modifications, "key", patches, row, layer)))
    hooks.append((get_act_name("v", layer), _replace_rows_hook(modifications, "value", patches, row, layer)))
    hooks.append((get_act_name("z", layer), keep))
    model.run_with_hooks(tokens, fwd_hooks=hooks, stop_at_layer=layer + 1)
    return kept["z"]


def reference_run(model: TransformerBridge, tokens: Int[Tensor, "batch pos"], patches: Sequence[ReferencePatch],
                  cache_names: Sequence[str] = ()) -> tuple[Float[Tensor, "batch pos vocab"], dict[str, Tensor]]:
    """Logits of ``tokens`` with every patch applied by per-query re-runs, and the activations named in
    ``cache_names`` from the final (patched) pass, stacked over rows.

    >>> import torch
    >>> from interp.models import load_model
    >>> from interp.interventions.edges.patching import cut, edge_patch_hooks
    >>> model = load_model("tiny-gpt2", device="cpu")
    >>> tokens, edges = torch.arange(6)[None], Edges.shared(query=[4], source=[2], batch=1)
    >>> z = "blocks.1.attn.hook_z"
    >>> logits, cache = reference_run(model, tokens, [ReferencePatch("value", edges, layers=[0])], [z])
    >>> tuple(logits.shape), tuple(cache[z].shape)
    ((1, 6, 354), (1, 6, 4, 16))
    >>> batched = model.run_with_hooks(tokens, fwd_hooks=edge_patch_hooks(model, [cut(edges, layers=[0])]))
    >>> bool(torch.allclose(logits, batched, atol=1e-5))   # the batched hooks agree with the re-runs
    True
    """
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    logits_rows, cached = [], defaultdict(list)
    with torch.no_grad():
        for row in range(tokens.shape[0]):
            single = tokens[row : row + 1].to(model.cfg.device)
            overrides: dict[int, dict[tuple[int, int], Tensor]] = defaultdict(dict)
            for layer, queries in sorted(_modifications(patches, row, n_layers, n_heads).items()):
                for query, per_head in sorted(queries.items()):
                    groups: dict[tuple[Modification, ...], list[int]] = defaultdict(list)
                    for head, modifications in per_head.items():
                        groups[tuple(sorted(modifications))].append(head)
                    for modifications, heads in groups.items():
                        z = _rerun_layer(model, single, layer, modifications, patches, row, overrides)
                        for head in heads:
                            overrides[layer][(query, head)] = z[query, head]
            final = {}

            def keep(acts, hook):
                final[hook.name] = acts[0].detach().clone()

            hooks = _override_hooks(overrides) + [(name, keep) for name in cache_names]
            logits_rows.append(model.run_with_hooks(single, fwd_hooks=hooks)[0])
            for name in cache_names:
                cached[name].append(final[name])
    return torch.stack(logits_rows), {name: torch.stack(acts) for name, acts in cached.items()}
