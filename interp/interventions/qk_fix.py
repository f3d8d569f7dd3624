"""AtP*'s QK fix (Kramar et al., 2024): the attention-pattern part of a head's ablation effect, taken
through the softmax exactly instead of to first order.

Ablating head ``s`` changes the residual stream that every later layer reads by ``dz_s W_O[s]``.
Where a later head's queries or keys read that change, first-order attribution patching takes
the resulting change of its attention pattern as ``J_softmax . d_scores``, which vanishes in a
saturated row (a previous-token head whose output an induction head reads through its keys: the
induction head attends to one key with probability ~1, the gradient through its softmax is ~0,
yet removing the key signal moves all of its attention elsewhere). Here, for a downstream row
(layer ``l'``, query head ``h'``, prompt ``b``, query position ``t``), the scores are recomputed
with the source's change applied to that row's query and to every key,

    d_scores[u] = c (q_t . dk_u + dq_t . k_u) + c dq_t . dk_u,

the pattern is recomputed by the softmax, and the estimate is corrected by

    <dM/dpattern[t], softmax(scores + d_scores) - pattern - J_softmax . d_linear>,

with ``d_linear`` the first two terms (the part of ``d_scores`` the gradient sees): exact minus
linearised pattern change, weighted by the metric's gradient at that pattern row. The
change reaches ``q`` and ``k`` through the source's direct path, with the normalisation's clean
scale (a linearised LayerNorm / RMSNorm); other paths stay first order. In the linear regime the
correction vanishes and the estimate is plain attribution patching.

Cost: one composition ``W_O[s] W_K[l', g]`` per source head and key/value head ``g`` whose rows are
fixed. Rows are fixed in order of the spread of ``dM/dpattern`` over the row's keys (a pattern
change sums to zero, so the exact pattern term of any source is at most that spread), up to a
budget of rows per prompt; the other rows stay first order.
"""

from __future__ import annotations

from dataclasses import dataclass

import einops
import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.models.bridge import TransformerBridge, act_name, apply_rotary, rotary_hook_names
from interp.interventions.edges.layout import AttentionLayout


@dataclass(frozen=True)
class FixedRows:
    """The downstream pattern rows the QK fix recomputes: one entry per (layer, head, prompt, query)."""

    layer: Int[Tensor, " row"]
    head: Int[Tensor, " row"]
    batch: Int[Tensor, " row"]
    query: Int[Tensor, " row"]


@dataclass(frozen=True)
class QKWeights:
    """The weights the fix reads, stacked once (the bridge stacks its blocks' parameters anew on
    every ``model.W_Q`` access): every layer's queries and keys, and each source head's output
    as the attention input's normalisation sees it, heads flattened layer-major."""

    W_Q: Float[Tensor, "layer head_index d_model d_head"]
    W_K: Float[Tensor, "layer kv_head d_model d_head"]
    writing: Float[Tensor, "source d_head d_model"]

    @classmethod
    def of(cls, model: TransformerBridge) -> "QKWeights":
        """
        >>> from interp.models import load_model
        >>> QKWeights.of(load_model("tiny-llama", device="cpu")).writing.shape[0]  # 2 layers x 4 heads
        8
        """
        writing = einops.rearrange(model.W_O.detach().float(), "layer head d_head d_model -> (layer head) d_head d_model")
        return cls(model.W_Q.detach().float(), model.W_K.detach().float(), _normalised(model, writing))


def hook_names(layout: AttentionLayout) -> tuple[list[str], list[str]]:
    """The hooks the fix needs: patterns (values and gradients) and, values only, the clean
    scores, queries, keys, normalisation scales and rotary tables of every layer.

    >>> from interp.interventions.edges.layout import attention_layout
    >>> from interp.models import load_model
    >>> patterns, kept = hook_names(attention_layout(load_model("tiny-llama", device="cpu")))
    >>> patterns
    ['blocks.0.attn.hook_pattern', 'blocks.1.attn.hook_pattern']
    """
    patterns = [act_name("pattern", layer) for layer in range(layout.n_layers)]
    kept = []
    for layer in range(layout.n_layers):
        kept += [act_name("attn_scores", layer), layout.query_hook(layer), layout.key_hook(layer),
                 f"blocks.{layer}.ln1.hook_scale"]
        if layout.rotary:
            kept += list(rotary_hook_names(layer))
    return patterns, kept


def pattern_spread(grad: Float[Tensor, "batch head query key"]) -> Float[Tensor, "batch head query"]:
    """Per pattern row, ``max - min`` of the metric's gradient over the keys the row can attend to.

    >>> grad = torch.tensor([[[[0.0, 1.0, 2.0], [3.0, 0.0, -1.0], [0.0, 0.0, 0.0]]]])
    >>> pattern_spread(grad).tolist()  # row 1 sees keys 0 and 1 only
    [[[0.0, 3.0, 0.0]]]
    """
    causal = torch.ones(grad.shape[-2:], dtype=torch.bool, device=grad.device).tril()
    high = grad.masked_fill(~causal, float("-inf")).amax(-1)
    low = grad.masked_fill(~causal, float("inf")).amin(-1)
    return high - low


def select_rows(pattern_grads: list[Tensor], rows_per_prompt: int | None) -> FixedRows:
    """The rows of layers 1.. with the largest gradient spread, ``rows_per_prompt`` per prompt on
    average (``None``: every row whose spread is not zero).

    >>> pattern_grads = [run.watched_grads[name] for name in patterns]  # doctest: +SKIP
    >>> rows = select_rows(pattern_grads, rows_per_prompt=64)  # doctest: +SKIP
    """
    spread = torch.stack([pattern_spread(g.float()) for g in pattern_grads[1:]], dim=1)  # batch layer head query
    flat = spread.flatten()
    if rows_per_prompt is None:
        chosen = (flat > 0).nonzero()[:, 0]
    else:
        budget = min(rows_per_prompt * spread.shape[0], int((flat > 0).sum()))
        chosen = torch.topk(flat, budget).indices
    batch, layer, head, query = torch.unravel_index(chosen, spread.shape)
    return FixedRows(layer + 1, head, batch, query)


def _normalised(model: TransformerBridge, delta: Float[Tensor, "*rows d_model"]) -> Float[Tensor, "*rows d_model"]:
    """What a change of the residual stream becomes after the attention input's normalisation, at its
    clean scale (divided out by the caller)."""
    if model.cfg.normalization_type in ("LN", "LNPre"):
        return delta - delta.mean(-1, keepdim=True)
    return delta


def _rotate(model: TransformerBridge, layout: AttentionLayout, x: Tensor, kept: dict[str, Tensor], layer: int, rows) -> Tensor:
    if not layout.rotary:
        return x
    n_batch = kept[layout.query_hook(layer)].shape[0]
    # The tables may be shared by every prompt (batch axis of 1).
    cos, sin = (kept[name].expand(n_batch, *kept[name].shape[1:])[rows] for name in rotary_hook_names(layer))
    return apply_rotary(model, x, cos, sin)


def layer_corrections(model: TransformerBridge, layout: AttentionLayout, layer: int, rows: FixedRows, kept: dict[str, Tensor],
                      pattern_grad: Float[Tensor, "batch head query key"],
                      changes: Float[Tensor, "source batch pos d_head"], weights: QKWeights | None = None
                      ) -> Float[Tensor, "source batch"]:
    """The QK-fix correction of every source head below ``layer`` (stacked, layer-major) for
    the fixed rows of ``layer``, per prompt (``weights``: ``QKWeights.of(model)``, computed here
    when not given).

    >>> correction = layer_corrections(model, layout, 1, rows, run.watched, pattern_grads[1], changes)  # doctest: +SKIP
    >>> correction.shape  # source heads of layer 0, batch  # doctest: +SKIP
    """
    weights = weights or QKWeights.of(model)
    n_sources, n_batch = changes.shape[:2]
    writing = weights.writing[:n_sources]
    scale = kept[f"blocks.{layer}.ln1.hook_scale"].float()  # batch pos 1
    correction = torch.zeros(n_sources, n_batch, device=changes.device)
    in_layer = rows.layer == layer
    kv_heads = layout.kv_head(rows.head[in_layer])
    for kv in kv_heads.unique().tolist():
        composed = einops.einsum(writing, weights.W_K[layer, kv],
                                 "source d_head d_model, d_model d_key -> source d_head d_key")
        key_change = einops.einsum(changes, composed, "source batch pos d_head, source d_head d_key -> source batch pos d_key")
        key_change = _rotate(model, layout, (key_change / scale)[..., None, :], kept, layer, slice(None))[..., 0, :]
        for head in rows.head[in_layer][kv_heads == kv].unique().tolist():
            mine = in_layer & (rows.head == head)
            correction += _head_correction(model, layout, layer, head, kv, rows.batch[mine], rows.query[mine], kept,
                                           pattern_grad, changes, writing, key_change, scale, weights.W_Q[layer, head])
    return correction


def _head_correction(model: TransformerBridge, layout, layer, head, kv, batch, query, kept, pattern_grad, changes, writing, key_change,
                     scale, w_q: Float[Tensor, "d_model d_head"]) -> Float[Tensor, "source batch"]:
    """The correction from the fixed rows ``(batch[i], query[i])`` of one query head."""
    residual_change = einops.einsum(changes[:, batch, query], writing,
                                    "source row d_head, source d_head d_model -> source row d_model")
    query_change = einops.einsum(residual_change / scale[batch, query], w_q,
                                 "source row d_model, d_model d_key -> source row d_key")
    query_change = _rotate(model, layout, query_change[..., None, :], kept, layer, (batch, query))[..., 0, :]
    q = kept[layout.query_hook(layer)][batch, query, head].float()  # row d_key
    k = kept[layout.key_hook(layer)][batch, :, kv].float()  # row key d_key
    key_change = key_change[:, batch]  # source row key d_key
    # First order in the source's change (what the gradient saw), and the second-order rest.
    linear_change = layout.scales[layer] * (einops.einsum(q, key_change, "row d, source row key d -> source row key")
                                            + einops.einsum(query_change, k, "source row d, row key d -> source row key"))
    both_change = layout.scales[layer] * einops.einsum(query_change, key_change, "source row d, source row key d -> source row key")
    visible = torch.arange(k.shape[1], device=k.device)[None, :] <= query[:, None]  # row key
    linear_change = linear_change.masked_fill(~visible, 0.0)
    scores = kept[act_name("attn_scores", layer)][batch, head, query].float()  # row key
    pattern = scores.softmax(-1)
    exact = (scores + linear_change + both_change.masked_fill(~visible, 0.0)).softmax(-1) - pattern
    linear = pattern * (linear_change - (pattern * linear_change).sum(-1, keepdim=True))
    weighted = einops.einsum(exact - linear, pattern_grad[batch, head, query].float(), "source row key, row key -> source row")
    per_prompt = torch.zeros(weighted.shape[0], changes.shape[1], device=weighted.device)
    return per_prompt.index_add_(1, batch, weighted)


def qk_corrections(model: TransformerBridge, layout: AttentionLayout, kept: dict[str, Tensor], pattern_grads: list[Tensor],
                   changes: dict[int, Float[Tensor, "batch pos head_index d_head"]],
                   rows_per_prompt: int | None) -> Float[Tensor, "batch layer head_index"]:
    """Per prompt and source head, the QK fix's correction to the first-order estimate.

    >>> fix = qk_corrections(model, layout, run.watched, pattern_grads, z_changes(run, "zero", None), 64)  # doctest: +SKIP
    >>> fix.shape  # batch, layer, head  # doctest: +SKIP
    """
    rows = select_rows(pattern_grads, rows_per_prompt)
    n_layers, n_heads = layout.n_layers, layout.n_heads
    n_batch = changes[0].shape[0]
    total = torch.zeros(n_layers * n_heads, n_batch, device=changes[0].device)
    stacked = einops.rearrange(torch.stack([changes[layer].float() for layer in range(n_layers)]),
                               "layer batch pos head d_head -> (layer head) batch pos d_head")
    with torch.no_grad():
        weights = QKWeights.of(model)
        for layer in rows.layer.unique().tolist():
            n_sources = layer * n_heads
            total[:n_sources] += layer_corrections(model, layout, layer, rows, kept, pattern_grads[layer],
                                                   stacked[:n_sources], weights)
    return einops.rearrange(total, "(layer head) batch -> batch layer head", layer=n_layers).cpu()
