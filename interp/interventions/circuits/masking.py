"""One forward pass with edges of a role graph removed, wholly or in part, for several circuits at once.

Every reader's input is a plain sum of writer outputs (and constants), so an edge ``e = (r, w, role)`` kept with
weight ``m_e`` gives, at each position ``p`` of its role,

    x_r[p] = base_r[p] + sum_e c_e (a_w[p] - a'_w[p]),

``a_w`` the writer's output in this very pass, ``a'_w`` the counterfactual's. Two bases: with edges *removed by
default* (a circuit: only the listed edges kept) ``base_r`` is the counterfactual's input ``x'_r`` and
``c_e = m_e``; with edges *kept by default* (single edges knocked out) ``base_r`` is the live input and
``c_e = m_e - 1``. An attention read weighted ``m`` mixes the clean and counterfactual key in the score,
``S = S' + m (S - S')``, and the value, ``z_t += A[t, s] (m - 1) (v_s - v'_s)``. ``m = 1`` is the model,
``m = 0`` the edge removed, values between are what mask optimization trains.

Circuits run side by side in rows ``g * batch + i``. Two ways to sum: ``sparse`` (index lists per reader and
writer hook; differentiable in the weights; the cost grows with the listed edges) and ``dense`` (one matrix
product per reader over every upstream writer; no gradients; the cost of the whole graph whatever the
circuit). The default picks dense for large circuits without gradients.
"""

from __future__ import annotations

from dataclasses import dataclass

import einops
import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.utilities import get_act_name

from interp.interventions.circuits.graph import HookSlots, graph_hooks_enabled
from interp.interventions.circuits.removal_state import RemovalState
from interp.interventions.circuits.role_graph import READ_KINDS, RoleGraph
from interp.interventions.edges.layout import AttentionLayout
from interp.models.bridge import Hook, TransformerBridge, logits_at

DENSE_ABOVE = 4_000  # residual edges listed above which a pass without gradients sums densely
class _SparseMix(torch.autograd.Function):
    """``out = base + sum c * values`` over index lists, keeping no gathered copies for the backward pass.

    ``plan`` holds per writer hook ``j``: entries ``in_idx`` (into its compact differences), ``out_idx`` (into the
    reader's flattened (position, slot)) and ``col`` (into ``coef``)."""

    @staticmethod
    def forward(ctx, base, coef, plan, *diffs):
        groups, rows = coef.shape[0], base.shape[0]
        out = base.clone()
        for j, in_idx, out_idx, col in plan:
            weight = einops.repeat(coef[:, col], "g n -> (g b) n 1", b=rows // groups)
            out.index_add_(1, out_idx, diffs[j].index_select(1, in_idx) * weight)
        ctx.plan = plan
        ctx.save_for_backward(coef, *diffs)
        return out

    @staticmethod
    def backward(ctx, grad):
        coef, *diffs = ctx.saved_tensors
        groups, rows = coef.shape[0], grad.shape[0]
        grad_coef = torch.zeros_like(coef) if ctx.needs_input_grad[1] else None
        grad_diffs = [torch.zeros_like(d) if ctx.needs_input_grad[3 + j] else None for j, d in enumerate(diffs)]
        for j, in_idx, out_idx, col in ctx.plan:
            g = grad.index_select(1, out_idx)
            if grad_coef is not None:
                per_row = (g * diffs[j].index_select(1, in_idx)).sum(-1)
                grad_coef.index_add_(1, col, einops.reduce(per_row, "(g b) n -> g n", "sum", g=groups))
            if grad_diffs[j] is not None:
                weight = einops.repeat(coef[:, col], "g n -> (g b) n 1", b=rows // groups)
                grad_diffs[j].index_add_(1, in_idx, g * weight)
        return (grad, grad_coef, None, *grad_diffs)


@dataclass(frozen=True)
class _SparsePlan:
    """Index lists of a pass: per writer hook the (position, slot) entries some listed edge reads (``need``),
    and per reader hook its entries ``(writer hook, in_idx, out_idx, col)``."""

    need: dict[str, Tensor]
    readers: dict[str, list[tuple[str, Tensor, Tensor, Tensor]]]


def sparse_plan(graph: RoleGraph, residual: Int[Tensor, " k"]) -> _SparsePlan:
    """The index lists of the residual edges ``residual`` (build once per edge list: a training loop reuses it)."""
    components = graph.components
    writer_hook = torch.zeros(len(components.writers), dtype=torch.long)
    for i, h in enumerate(components.writer_hooks):
        writer_hook[h.start:h.stop] = i
    reader_hook = torch.zeros(len(components.readers), dtype=torch.long)
    for i, h in enumerate(components.reader_hooks):
        reader_hook[h.start:h.stop] = i
    r, w, role = graph.residual[residual].unbind(-1) if len(residual) else (torch.zeros(0, dtype=torch.long),) * 3
    counts = torch.tensor([len(p) for p in graph.role_positions])[role]
    col = torch.repeat_interleave(torch.arange(len(residual)), counts)
    pos = torch.cat([graph.role_positions[x] for x in role.tolist()]) if len(residual) else col
    r, w = r[col], w[col]
    rh, wh = reader_hook[r], writer_hook[w]
    w_start = torch.tensor([h.start for h in components.writer_hooks])[wh]
    w_slots = torch.tensor([h.stop - h.start for h in components.writer_hooks])[wh]
    r_start = torch.tensor([h.start for h in components.reader_hooks])[rh]
    r_slots = torch.tensor([h.stop - h.start for h in components.reader_hooks])[rh]
    in_entry, out_entry = pos * w_slots + w - w_start, pos * r_slots + r - r_start
    need, readers = {}, {}
    for j in wh.unique().tolist():
        need[components.writer_hooks[j].name], compact = in_entry[wh == j].unique(return_inverse=True)
        in_entry[wh == j] = compact
    for i, j in torch.stack([rh, wh], 1).unique(dim=0).tolist():
        chosen = (rh == i) & (wh == j)
        readers.setdefault(components.reader_hooks[i].name, []).append(
            (components.writer_hooks[j].name, in_entry[chosen], out_entry[chosen], col[chosen]))
    return _SparsePlan(need, readers)


def _flat(x: Tensor, per_head: bool) -> Tensor:
    """``[rows, pos, slot, d]`` (or ``[rows, pos, d]``) as ``[rows, pos * slot, d]``."""
    return einops.rearrange(x if per_head else x[:, :, None], "r p s d -> r (p s) d")


def _residual_hooks_sparse(graph: RoleGraph, state: RemovalState, residual: Tensor, coef: Tensor, kept: bool,
                           rows: int, plan: _SparsePlan | None = None) -> list[Hook]:
    plan = plan or sparse_plan(graph, residual)
    components = graph.components
    groups = coef.shape[0]
    diffs: dict[str, Tensor] = {}
    hooks: list[Hook] = []
    for h in components.writer_hooks:
        if h.name not in plan.need:
            continue
        counter = _flat(state.writers[:, :, h.start:h.stop], True).index_select(1, plan.need[h.name])

        def on_writer(x, hook, h=h, counter=counter):
            live = _flat(x, h.per_head).index_select(1, plan.need[h.name].to(x.device))
            diffs[h.name] = live - einops.repeat(counter, "b n d -> (g b) n d", g=groups).to(live.dtype)
        hooks.append((h.name, on_writer))
    for h in components.reader_hooks:
        if h.name not in plan.readers and kept:
            continue

        def on_reader(x, hook, h=h):
            slots = h.stop - h.start
            base = x if kept else _counterfactual_input(state, h, slots, groups, x)
            flat = _flat(base, h.per_head)
            items = plan.readers.get(h.name, [])
            names = list(dict.fromkeys(w for w, _, _, _ in items))
            mix_plan = [(names.index(w), i, o, c) for w, i, o, c in items]
            out = _SparseMix.apply(flat, coef, mix_plan, *[diffs[w] for w in names]) if items else flat
            out = einops.rearrange(out, "r (p s) d -> r p s d", s=slots)
            return out if h.per_head else out[:, :, 0]
        hooks.append((h.name, on_reader))
    return hooks


def _counterfactual_input(state: RemovalState, h: HookSlots, slots: int, groups: int, like: Tensor) -> Tensor:
    base = einops.repeat(state.bases[h.name], "b p d -> (g b) p s d", g=groups, s=slots).to(like.device, like.dtype)
    return base if h.per_head else base[:, :, 0]


# --------------------------------------------------------------------------- dense sums


def _residual_hooks_dense(graph: RoleGraph, state: RemovalState, residual: Tensor, coef: Tensor, kept: bool,
                          rows: int, plan: _SparsePlan | None = None) -> list[Hook]:
    components = graph.components
    groups = coef.shape[0]
    batch = rows // groups
    n_roles, n_r, n_w = len(graph.roles), len(components.readers), len(components.writers)
    r, w, role = graph.residual[residual].unbind(-1)
    weights = torch.zeros(groups, n_roles * n_r * n_w)
    weights[:, (role * n_r + r) * n_w + w] = coef.detach().float()
    weights = weights.view(groups, n_roles, n_r, n_w)[:, graph.position_roles]  # [group, pos, reader, writer]
    buffer = torch.zeros(groups, graph.n_pos, n_w, batch * state.writers.shape[-1])
    counter = einops.rearrange(state.writers, "b p w d -> p w (b d)")
    hooks: list[Hook] = []
    for h in components.writer_hooks:
        def on_writer(x, hook, h=h):
            live = einops.rearrange(x if h.per_head else x[:, :, None], "(g b) p s d -> g p s (b d)", g=groups)
            buffer[:, :, h.start:h.stop] = live.float().cpu() - counter[None, :, h.start:h.stop]
        hooks.append((h.name, on_writer))
    for h in components.reader_hooks:
        upstream = int(components.valid[h.start].sum())  # writers come in forward order: a prefix
        block = weights[:, :, h.start:h.stop, :upstream]
        if kept and not block.any():
            continue

        def on_reader(x, hook, h=h, block=block, upstream=upstream):
            slots = h.stop - h.start
            mixed = einops.rearrange(block @ buffer[:, :, :upstream], "g p s (b d) -> (g b) p s d", b=batch)
            mixed = mixed if h.per_head else mixed[:, :, 0]
            base = x if kept else _counterfactual_input(state, h, slots, groups, x)
            return base + mixed.to(x.device, x.dtype)
        hooks.append((h.name, on_reader))
    return hooks


# --------------------------------------------------------------------------- attention reads


def _read_hooks(graph: RoleGraph, layout: AttentionLayout, state: RemovalState, reads: Tensor, coef: Tensor,
                kept: bool) -> list[Hook]:
    """Hooks weighting every attention read: listed reads by ``default + coef``, the others by the default."""
    if not graph.reads:
        return []
    groups = coef.shape[0]
    default = 1.0 if kept else 0.0
    weight = torch.full((groups, len(graph.reads)), default).index_add(1, reads, coef.float())
    weight = torch.cat([torch.ones(groups, 1), weight], 1)  # column 0: entries that are no edge
    hooks: list[Hook] = []
    for layer in range(layout.n_layers):
        for kind in READ_KINDS:
            index = graph.entry_edges(kind, layer) + 1
            if kept and not bool(((index > 0) & torch.isin(index - 1, reads)).any()):
                continue
            mask = weight[:, index]  # [group, head, query, source]
            hooks += _key_read_hooks(layer, mask, index > 0, state, layout) if kind == "key" \
                else _value_read_hooks(layer, mask, index > 0, state, layout)
    return hooks


def _key_read_hooks(layer: int, mask: Tensor, is_edge: Tensor, state: RemovalState, layout: AttentionLayout) -> list[Hook]:
    held = {}

    def keep_query(q, hook):
        held["q"] = q

    def set_scores(scores, hook):
        groups = mask.shape[0]
        counter = einops.repeat(state.keys[layer], "b s kv d -> (g b) s (kv k) d", g=groups, k=layout.group_size)
        counter_scores = layout.scales[layer] * einops.einsum(held.pop("q").float(), counter.to(scores.device),
                                                              "r t h d, r s h d -> r h t s")
        n = scores.shape[-1]
        edge = is_edge[:, :n, :n].to(scores.device)
        m = einops.repeat(mask[:, :, :n, :n], "g h t s -> (g b) h t s", b=scores.shape[0] // groups).to(scores.device)
        gap = torch.where(edge, scores.float() - counter_scores, 0.0)
        return torch.where(edge, counter_scores + m * gap, scores.float()).to(scores.dtype)

    return [(layout.query_hook(layer), keep_query), (get_act_name("attn_scores", layer), set_scores)]


def _value_read_hooks(layer: int, mask: Tensor, is_edge: Tensor, state: RemovalState, layout: AttentionLayout) -> list[Hook]:
    held = {}

    def keep(name):
        def hook(x, hook):
            held[name] = x
        return hook

    def add_to_z(z, hook):
        groups = mask.shape[0]
        n = z.shape[1]
        counter = einops.repeat(state.values[layer], "b s kv d -> (g b) s kv d", g=groups).to(z.device)
        delta = einops.repeat(held.pop("v").float() - counter, "r s kv d -> r s (kv k) d", k=layout.group_size)
        m = einops.repeat(mask[:, :, :n, :n], "g h t s -> (g b) h t s", b=z.shape[0] // groups).to(z.device)
        weight = held.pop("pattern").float() * (m - 1) * is_edge[:, :n, :n].to(z.device)
        return z + einops.einsum(weight, delta, "r h t s, r s h d -> r t h d").to(z.dtype)

    return [(get_act_name("v", layer), keep("v")), (get_act_name("pattern", layer), keep("pattern")),
            (get_act_name("z", layer), add_to_z)]


# --------------------------------------------------------------------------- the pass


def masked_logits(model: TransformerBridge, graph: RoleGraph, layout: AttentionLayout, state: RemovalState,
                  tokens: Int[Tensor, "batch pos"], edges: Int[Tensor, " k"], coef: Float[Tensor, "group k"], *,
                  kept_by_default: bool = False, dense: bool | None = None,
                  plan: _SparsePlan | None = None) -> Float[Tensor, "row slot vocab"]:
    """Logits at the scored positions with edge ``edges[k]`` weighted ``coef[g, k]`` (``kept_by_default``: by
    ``1 + coef``) and every other edge removed (kept), for each group ``g`` (rows ``g * batch + i``); ``plan``:
    `sparse_plan` of the residual edges among ``edges``, when a loop reuses one edge list.

    >>> import torch
    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> from interp.interventions.circuits.role_graph import role_graph
    >>> from interp.interventions.edges.layout import attention_layout
    >>> from interp.interventions.circuits.removal_state import removal_state
    >>> model = load_model("planted-ub", device="cpu")
    >>> task = copying_task(model.tokenizer, "UB", 3, 2)
    >>> graph, layout = role_graph(model, task), attention_layout(model)
    >>> state = removal_state(model, graph, layout, task.clean, task.corrupt)
    >>> every = torch.arange(len(graph))
    >>> full = masked_logits(model, graph, layout, state, task.clean, every, torch.ones(1, len(graph)))
    >>> bool(torch.allclose(full, model(task.clean)[:, task.positions], atol=1e-4))
    True
    """
    if edges.dim() != 1 or coef.dim() != 2 or coef.shape[1] != len(edges):
        raise ValueError(f"edges {tuple(edges.shape)} and coef {tuple(coef.shape)}: expected [k] and [group, k]")
    groups, batch = coef.shape[0], tokens.shape[0]
    residual_cols = (edges < graph.n_residual).nonzero()[:, 0]
    read_cols = (edges >= graph.n_residual).nonzero()[:, 0]
    residual, reads = edges[residual_cols], edges[read_cols] - graph.n_residual
    if dense is None:
        dense = not coef.requires_grad and len(residual) > DENSE_ABOVE
    if dense and coef.requires_grad:
        raise ValueError("dense sums carry no gradients: pass dense=False to train weights")
    build = _residual_hooks_dense if dense else _residual_hooks_sparse
    hooks = build(graph, state, residual, coef[:, residual_cols], kept_by_default, groups * batch, plan)
    hooks += _read_hooks(graph, layout, state, reads, coef[:, read_cols], kept_by_default)
    run = einops.repeat(tokens[:, :graph.n_pos], "b p -> (g b) p", g=groups)
    with graph_hooks_enabled(model):
        return logits_at(model, run, graph.scored, hooks)
