"""Batched edge interventions: one query position reading one source position, through its key or its value.

In a query head ``h`` of layer ``l`` the output at position ``t`` is ``z_t = sum_s A[t, s] v_s`` with
``A[t] = softmax(c q_t . k_s)``. An *edge* ``(t, s)`` is the part of that computation in which query ``t`` reads
source ``s``; it can be patched in two ways, for one query at a time, in one forward pass for every edge:

* **key edge** -- ``s``'s key as seen by ``t`` becomes ``k'_s``. Only the pre-softmax score ``S[t, s]`` uses it,
  so the hook on ``hook_attn_scores`` sets ``S[t, s] = c q_t . k'_s`` (``q``, ``k`` after RoPE, where the model has
  it; ``c`` the score scale measured by [`attention_layout`][interp.interventions.edges.layout.attention_layout]), and the model's softmax renormalises row ``t``
  exactly as a re-run of attention with that key row replaced would.
* **value edge** -- ``s``'s value as seen by ``t`` becomes ``v'_s`` (zero for a cut, no renormalisation). The
  pattern is unchanged, so the hook on ``hook_z`` adds ``A[t, s] (v'_s - v_s)`` to ``z_t``; ``A`` is read at
  ``hook_pattern``, after any key patch of the same layer.

Grouped-query attention: ``hook_k`` / ``hook_v`` hold key/value heads and query head ``h`` reads key/value head
``h // (n_heads / n_kv_heads)``. Patches act per *query* head, so any subset of heads (and of layers) can be
patched, also where heads share a key/value head. Every hook is a TransformerLens ``(name, fn)`` pair.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import einops
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from transformer_lens.utilities import get_act_name

from interp.interventions.ablation import HookCounter
from interp.measure.batching import Hook
from interp.interventions.edges.layout import AttentionLayout, attention_layout, check_heads, check_layers
from interp.models.bridge import TransformerBridge

EdgeKind = Literal["key", "value"]
EDGE_KINDS: tuple[str, ...] = ("key", "value")


@dataclass(frozen=True)
class Edges:
    """Query-to-source edges, ``edge`` of them in every batch row, as positions of the forward pass they act in."""

    query: Int[Tensor, "batch edge"]
    source: Int[Tensor, "batch edge"]

    def __post_init__(self) -> None:
        if self.query.shape != self.source.shape or self.query.dim() != 2:
            raise ValueError(f"edges: query {tuple(self.query.shape)} and source {tuple(self.source.shape)} "
                             "must both have shape [batch, edge]")
        if self.query.numel() and (self.source < 0).any():
            raise ValueError("edges: source positions must be >= 0")
        if (self.source > self.query).any():
            raise ValueError("edges: a query can only read a source at or before it (source <= query)")

    @classmethod
    def shared(cls, query: Sequence[int] | Tensor, source: Sequence[int] | Tensor, batch: int) -> "Edges":
        """The same edges in each of ``batch`` rows."""
        query, source = torch.as_tensor(query, dtype=torch.long), torch.as_tensor(source, dtype=torch.long)
        return cls(einops.repeat(query, "edge -> batch edge", batch=batch),
                   einops.repeat(source, "edge -> batch edge", batch=batch))

    @property
    def batch(self) -> int:
        return self.query.shape[0]

    def shifted(self, query_offset: int) -> "Edges":
        """The same edges with every query moved by ``query_offset`` positions (sources stay)."""
        return Edges(self.query + query_offset, self.source)


# --------------------------------------------------------------------------- activations at source positions


@dataclass
class SourceActivations:
    """Keys (as scored: after RoPE where the model has it) and values at ``positions`` of each row, per layer."""

    positions: Int[Tensor, "batch source"]
    keys: dict[int, Float[Tensor, "batch source kv_head d_head"]] = field(default_factory=dict)
    values: dict[int, Float[Tensor, "batch source kv_head d_head"]] = field(default_factory=dict)

    def at(self, kind: EdgeKind, sources: Int[Tensor, "batch edge"]) -> dict[int, Float[Tensor, "batch edge kv_head d_head"]]:
        """The stored key (``kind="key"``) or value of each edge's source, per layer."""
        table = self.keys if kind == "key" else self.values
        if not table:
            raise ValueError(f"no {kind}s were captured (did the capturing forward run?)")
        match = sources[:, :, None] == self.positions[:, None, :]  # [batch, edge, source]
        if not match.any(-1).all():
            missing = sorted(set(sources[~match.any(-1)].tolist()))
            raise ValueError(f"source positions {missing} were not captured; captured {self.positions[0].tolist()}")
        index = match.float().argmax(-1)  # [batch, edge]
        rows = torch.arange(sources.shape[0])[:, None]
        return {layer: acts[rows, index.to(acts.device)] for layer, acts in table.items()}


def _gather_positions(acts: Float[Tensor, "batch pos kv_head d_head"], positions: Int[Tensor, "batch n"]) -> Tensor:
    rows = torch.arange(acts.shape[0], device=acts.device)[:, None]
    return acts[rows, positions.to(acts.device)]


def capture_source_hooks(layout: AttentionLayout, positions: Int[Tensor, "batch source"], layers: Sequence[int] | None = None,
                         counter: HookCounter | None = None) -> tuple[list[Hook], SourceActivations]:
    """Hooks that store the keys and values at ``positions`` in ``layers`` (default all) into the returned
    (still empty) [`SourceActivations`][interp.interventions.edges.patching.SourceActivations] while the forward they are passed to runs.

    >>> import torch
    >>> from interp.models import load_model
    >>> model = load_model("tiny-gpt2", device="cpu")
    >>> hooks, store = capture_source_hooks(attention_layout(model), torch.tensor([[0, 2]]), layers=[1])
    >>> _ = model.run_with_hooks(torch.arange(5)[None], fwd_hooks=hooks)
    >>> tuple(store.keys[1].shape), sorted(store.values)   # [batch, source, kv_head, d_head]
    ((1, 2, 4, 16), [1])
    """
    store = SourceActivations(positions.long())

    def keeper(table: dict[int, Tensor], layer: int):
        def keep(acts, hook):
            if counter is not None:
                counter.calls[hook.name] += 1
            table[layer] = _gather_positions(acts, store.positions).detach().clone()
        return keep

    hooks: list[Hook] = []
    for layer in check_layers(layers, layout.n_layers):
        hooks += [(layout.key_hook(layer), keeper(store.keys, layer)), (get_act_name("v", layer), keeper(store.values, layer))]
    return hooks, store


# --------------------------------------------------------------------------- patches


@dataclass(frozen=True)
class EdgePatch:
    """Replace, for each edge ``(t, s)``, the key or value of ``s`` as seen by ``t``.

    ``replacement[layer]`` holds the new key (as scored, after RoPE) or value of each edge's source,
    ``[batch, edge, kv_head, d_head]``; ``None`` cuts value edges (the value becomes zero). ``layers`` and
    ``heads`` (query heads) default to all. ``batch_rows`` (default: every row) marks the rows of the forward
    pass the patch acts in, so that several patches share one pass, each on its own copy of the prompts;
    ``edges`` and ``replacement`` then hold those rows only, in order."""

    kind: EdgeKind
    edges: Edges
    replacement: Mapping[int, Tensor] | None = None
    layers: tuple[int, ...] | None = None
    heads: tuple[int, ...] | None = None
    batch_rows: Bool[Tensor, " forward_batch"] | None = None

    def __post_init__(self) -> None:
        if self.kind not in EDGE_KINDS:
            raise ValueError(f"kind={self.kind!r}; expected one of {EDGE_KINDS}")
        if self.replacement is None and self.kind == "key":
            raise ValueError("a key edge needs replacement keys (only value edges can be cut with replacement=None)")
        if self.batch_rows is not None and int(self.batch_rows.sum()) != self.edges.batch:
            raise ValueError(f"batch_rows marks {int(self.batch_rows.sum())} rows but the edges have {self.edges.batch}")

    @property
    def forward_batch(self) -> int:
        """Rows of the forward pass the patch is made for."""
        return self.edges.batch if self.batch_rows is None else len(self.batch_rows)

    def acting_rows(self, device) -> Tensor:
        """Indices of the rows of the forward pass the patch acts in."""
        rows = torch.arange(self.forward_batch) if self.batch_rows is None else self.batch_rows.cpu().nonzero()[:, 0]
        return rows.to(device)


def cut(edges: Edges, layers: Sequence[int] | None = None, heads: Sequence[int] | None = None) -> EdgePatch:
    """Zero the value of each edge's source as seen by its query (no renormalisation of the pattern).

    In compatibility mode TransformerLens folds the value bias into the output bias, so ``hook_v`` is ``W_V x``
    and the cut removes that; the paper's code zeroes the full Hugging Face value, ``W_V x + b_V``, which for
    models with value biases (GPT-2, Qwen2) also removes ``A[t, s] b_V``. Replacing a value by another run's
    (a value edge) is the same either way: the bias cancels.

    >>> patch = cut(Edges.shared(query=[2, 3], source=[1, 2], batch=1), layers=[0])
    >>> patch.kind, patch.replacement, patch.layers, patch.heads
    ('value', None, (0,), None)
    """
    return EdgePatch("value", edges, None, None if layers is None else tuple(layers), None if heads is None else tuple(heads))


@dataclass
class _LayerState:
    """What the hooks of one layer pass each other within a forward pass: only the entries the patches need
    (a whole pattern per layer would hold layers x batch x heads x pos^2 floats until the pass ends)."""

    query: Tensor | None = None
    old_values: list[Tensor] = field(default_factory=list)
    weights: list[Tensor] = field(default_factory=list)


def _index_grid(patch: EdgePatch, heads: Tensor, device) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Broadcast ``[batch, edge, head]`` indices of (forward pass) rows, heads, queries and sources."""
    edges = patch.edges
    batch, n_edges = edges.query.shape
    shape = (batch, n_edges, len(heads))
    rows = patch.acting_rows(device)[:, None, None].expand(shape)
    head_index = heads.to(device)[None, None, :].expand(shape)
    query = edges.query.to(device)[:, :, None].expand(shape)
    source = edges.source.to(device)[:, :, None].expand(shape)
    return rows, head_index, query, source


def _check_bounds(patch: EdgePatch, seq_len: int, batch: int) -> None:
    if patch.forward_batch != batch:
        raise ValueError(f"edges are made for {patch.forward_batch} rows but the forward pass has {batch}")
    if patch.edges.query.numel() and int(patch.edges.query.max()) >= seq_len:
        raise ValueError(f"an edge's query position {int(patch.edges.query.max())} is past the sequence ({seq_len} positions)")


def _heads(patch: EdgePatch, layout: AttentionLayout) -> Tensor:
    return torch.tensor(check_heads(patch.heads, layout.n_heads))


def _patch_scores(scores: Float[Tensor, "batch head q k"], patch: EdgePatch, layer: int, query_states: Tensor,
                  layout: AttentionLayout) -> Tensor:
    heads = _heads(patch, layout)
    rows, head_index, query, source = _index_grid(patch, heads, scores.device)
    q = query_states[rows, query, head_index]  # [batch, edge, head, d_head]
    new_key = patch.replacement[layer].to(scores.device)[:, :, layout.kv_head(heads).to(scores.device)]
    new_scores = layout.scales[layer] * (q.float() * new_key.float()).sum(-1)
    scores[rows, head_index, query, source] = new_scores.to(scores.dtype)
    return scores


def _old_values(values: Float[Tensor, "batch pos kv_head d_head"], patch: EdgePatch, layout: AttentionLayout) -> Tensor:
    """The current value each patched head reads at each edge's source, ``[batch, edge, head, d_head]``."""
    rows, head_index, _, source = _index_grid(patch, _heads(patch, layout), values.device)
    return values[rows, source, layout.kv_head(head_index)]


def _edge_weights(pattern: Float[Tensor, "batch head q k"], patch: EdgePatch, layout: AttentionLayout) -> Tensor:
    """``A[t, s]`` of each patched head at each edge, ``[batch, edge, head]``."""
    rows, head_index, query, source = _index_grid(patch, _heads(patch, layout), pattern.device)
    return pattern[rows, head_index, query, source]


def _patch_z(z: Float[Tensor, "batch pos head d_head"], patch: EdgePatch, layer: int, old_value: Tensor, weight: Tensor,
             layout: AttentionLayout) -> Tensor:
    heads = _heads(patch, layout)
    rows, head_index, query, _ = _index_grid(patch, heads, z.device)
    if patch.replacement is None:
        new_value = torch.zeros_like(old_value)
    else:
        new_value = patch.replacement[layer].to(z.device)[:, :, layout.kv_head(heads).to(z.device)]
    delta = weight[..., None].to(z.dtype) * (new_value - old_value).to(z.dtype)
    return z.index_put((rows, query, head_index), delta, accumulate=True)


def edge_patch_hooks(model_or_layout: TransformerBridge | AttentionLayout, patches: Sequence[EdgePatch],
                     counter: HookCounter | None = None) -> list[Hook]:
    """TransformerLens hooks applying every patch in ``patches`` in one forward pass.

    Patches may overlap in layers and queries: key patches act first (on the scores), value patches then read the
    resulting pattern. Pass a model or a precomputed [`attention_layout`][interp.interventions.edges.layout.attention_layout] (key patches need its scales).

    Examples:
        >>> import torch
        >>> from interp.models import load_model
        >>> model = load_model("tiny-llama", device="cpu")
        >>> tokens = torch.randint(0, model.cfg.d_vocab, (2, 8))
        >>> previous_token = Edges.shared(query=range(1, 8), source=range(0, 7), batch=2)   # every i-1 -> i
        >>> hooks = edge_patch_hooks(model, [cut(previous_token, layers=[0])])
        >>> bool(model.run_with_hooks(tokens, fwd_hooks=hooks).equal(model(tokens)))
        False
    """
    layout = model_or_layout if isinstance(model_or_layout, AttentionLayout) else attention_layout(model_or_layout)

    def count(hook) -> None:
        if counter is not None:
            counter.calls[hook.name] += 1

    hooks: list[Hook] = []
    for layer, layer_patches in sorted(_patches_by_layer(patches, layout).items()):
        hooks += _key_hooks(layer, [p for p in layer_patches if p.kind == "key"], layout, count)
        hooks += _value_hooks(layer, [p for p in layer_patches if p.kind == "value"], layout, count)
    return hooks


def _patches_by_layer(patches: Sequence[EdgePatch], layout: AttentionLayout) -> dict[int, list[EdgePatch]]:
    """The patches acting in each layer, each checked against the model."""
    per_layer: dict[int, list[EdgePatch]] = {}
    for patch in patches:
        check_heads(patch.heads, layout.n_heads)
        for layer in check_layers(patch.layers, layout.n_layers):
            if patch.replacement is not None and layer not in patch.replacement:
                raise ValueError(f"a {patch.kind} patch acts in layer {layer} but has no replacement for it")
            per_layer.setdefault(layer, []).append(patch)
    return per_layer


def _key_hooks(layer: int, patches: Sequence[EdgePatch], layout: AttentionLayout, count: Callable) -> list[Hook]:
    """Hooks setting the scores of key-patched edges: the query is kept, then each patched score recomputed."""
    if not patches:
        return []
    state = _LayerState()

    def keep_query(q, hook):
        count(hook)
        for patch in patches:
            _check_bounds(patch, q.shape[1], q.shape[0])
        state.query = q

    def set_scores(scores, hook):
        count(hook)
        scores = scores.clone()
        for patch in patches:
            scores = _patch_scores(scores, patch, layer, state.query, layout)
        state.query = None
        return scores

    return [(layout.query_hook(layer), keep_query), (get_act_name("attn_scores", layer), set_scores)]


def _value_hooks(layer: int, patches: Sequence[EdgePatch], layout: AttentionLayout, count: Callable) -> list[Hook]:
    """Hooks adding ``A[t, s] (v'_s - v_s)`` to ``z_t`` for value-patched edges (values and weights kept first)."""
    if not patches:
        return []
    state = _LayerState()

    def keep_values(v, hook):
        count(hook)
        for patch in patches:
            _check_bounds(patch, v.shape[1], v.shape[0])
        state.old_values = [_old_values(v, patch, layout) for patch in patches]

    def keep_weights(pattern, hook):
        count(hook)
        state.weights = [_edge_weights(pattern, patch, layout) for patch in patches]

    def add_to_z(z, hook):
        count(hook)
        for patch, old_value, weight in zip(patches, state.old_values, state.weights):
            z = _patch_z(z, patch, layer, old_value, weight, layout)
        state.old_values, state.weights = [], []
        return z

    return [(get_act_name("v", layer), keep_values), (get_act_name("pattern", layer), keep_weights),
            (get_act_name("z", layer), add_to_z)]
