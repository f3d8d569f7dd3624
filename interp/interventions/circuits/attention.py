"""Attention-level edges: inside one query head, query position ``t`` reading key position ``s``.

An entry ``(layer, head, t, s)`` is patched one of the two ways the paper's edge patching
([`interp.interventions.edges`][interp.interventions.edges]) patches it:

* **key** -- ``s``'s key as seen by ``t`` becomes the counterfactual's: ``S[t, s] = c q_t . k'_s`` and the
  softmax renormalises row ``t`` (the paper's induction edges, K-composition);
* **value** -- ``s``'s value as seen by ``t`` becomes the counterfactual's: ``z_t += A[t, s] (v'_s - v_s)``,
  the pattern kept, no renormalisation (the paper's anti-induction edges, V-composition).

Scores share the residual graph's sign and names (`interp.interventions.circuits.scores`): an entry the
task needs scores negative.

* ``eap``: key ``dm/dS[t, s] (S'[t, s] - S[t, s])``, value ``A[t, s] (v'_s - v_s) . dm/dz_t``, at the clean run;
* ``eap-ig``: those gradients averaged over ``m`` inputs from the counterfactual's token embeddings to the
  clean ones, times the same clean deltas (``m = 1`` is EAP);
* ``exact``: ``m(set patched) - m(clean)`` with the set's entries patched together, by
  [`edge_patch_hooks`][interp.interventions.edges.patching.edge_patch_hooks], the hooks of the paper's edge
  patching: its numbers are this instrument's (tests).

Entries are grouped by role, ``(layer, head, kind, query role, key role)`` and over every layer and head at
once (``head == "all"``): the paper's induction hypothesis is the row ``all / key / c / o+1``, its
anti-induction one ``all / value / c / o``. Roles are those of `roles` without their index (``s3`` -> ``s``,
``c0`` -> ``c``); a key position seen from a copy position is ``o``, ``o-1``, ``o+1``, ``t``, ``t-1`` where it is one.
Grouped-query models: every entry belongs to a query head (patterns are per query head); its key and value
come from the key/value head the query head reads.

Counterfactuals: ``corrupt``, ``zero``, ``mean`` as for the graph, and ``previous_token_cut`` (the paper's: the
clean prompt with every previous-token edge ``i - 1 -> i`` before the first answer token cut in every layer and
head, value zeroed; exact scores only).

Modules: this one (scores and exact effects), `attention_inputs` (what an entry is patched to) and
`attention_roles` (entries grouped by role, the attention table's rows); every name is importable from here.
"""

from __future__ import annotations

from collections.abc import Sequence

import einops
import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm
from transformer_lens.utilities import get_act_name

# The inputs and the role groups live in modules of their own; every name stays importable from here.
from interp.interventions.circuits.attention_inputs import (ATTENTION_COUNTERFACTUALS, KeysValues,  # noqa: F401
                                                            _attention_names, _capture, check_counterfactual,
                                                            counterfactual_keys_values, keys_values, mean_keys_values,
                                                            previous_token_cut_hooks)
from interp.interventions.circuits.attention_roles import (ALL_HEADS, HYPOTHESES, AttentionEdgeSet, RoleEdge,  # noqa: F401
                                                           entry_role_pairs, role_edges, role_group, role_scores)
from interp.interventions.circuits.scores import PassCount, _chunks, _embeddings
from interp.interventions.circuits.task import CircuitTask
from interp.interventions.edges.layout import AttentionLayout, attention_layout, check_heads, check_layers
from interp.interventions.edges.patching import EDGE_KINDS, EdgePatch, Edges, edge_patch_hooks
from interp.models.bridge import TransformerBridge


# --------------------------------------------------------------------------- first-order scores


def _attention_gradients(model: TransformerBridge, layout: AttentionLayout, task: CircuitTask,
                         embed: Tensor | None) -> tuple[dict[int, Tensor], dict[int, Tensor], dict[int, Tensor]]:
    """Per layer ``d sum(metric) / d scores`` ``[batch, head, q, k]``, ``d sum(metric) / d z`` ``[batch, pos, head,
    d_head]`` and the pattern, on the clean prompts (``embed`` replaces their token embeddings)."""
    held: dict[str, Tensor] = {}
    patterns: dict[int, Tensor] = {}

    def hold(x, hook):
        held[hook.name] = x = x.clone()  # a node of its own: the gradient of what reads the hook
        return x

    def keep_pattern(x, hook):
        patterns[hook.layer()] = x.detach().float().cpu()

    def set_embed(x, hook):
        return (x if embed is None else embed.to(x.device, x.dtype)).detach().requires_grad_(True)

    layers = range(layout.n_layers)
    score_names = [get_act_name("attn_scores", layer) for layer in layers]
    z_names = [get_act_name("z", layer) for layer in layers]
    hooks = [("hook_embed", set_embed)] + [(name, hold) for name in score_names + z_names]
    hooks += [(get_act_name("pattern", layer), keep_pattern) for layer in layers]
    with torch.enable_grad():
        logits = model.run_with_hooks(task.clean.to(model.cfg.device), fwd_hooks=hooks)
        names = score_names + z_names
        grads = torch.autograd.grad(task.metric(logits).sum(), [held[n] for n in names], allow_unused=True)
    out = {n: (torch.zeros_like(held[n]) if g is None else g).detach().float().cpu() for n, g in zip(names, grads)}
    return ({layer: out[n] for layer, n in enumerate(score_names)}, {layer: out[n] for layer, n in enumerate(z_names)},
            patterns)


def attention_edge_scores(model: TransformerBridge, task: CircuitTask, method: str = "eap-ig", *, steps: int = 4,
                          counterfactual: str = "corrupt", batch_size: int = 8, layout: AttentionLayout | None = None,
                          passes: PassCount | None = None, progress: bool = False) -> Float[Tensor, "kind layer head query source"]:
    """First-order scores of every attention entry (kind 0 key, 1 value), averaged over the prompts (0 above the diagonal).

    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> model = load_model("planted-ub", device="cpu")
    >>> scores = attention_edge_scores(model, copying_task(model.tokenizer, "UB", 4, 4), "eap")
    >>> tuple(scores.shape[:3]), bool(scores[1, 1, 1].min() < -1)   # head 1.1 reads values the copy needs
    ((2, 2, 4), True)
    """
    steps = 1 if method == "eap" else steps
    check_counterfactual(method, counterfactual, steps)
    if method == "exact":
        raise ValueError("exact scores are per edge set: use attention_exact_scores(model, task, edge_sets)")
    layout = layout or attention_layout(model)
    passes = passes if passes is not None else PassCount()
    n_pos = task.clean.shape[1]
    causal = torch.tril(torch.ones(n_pos, n_pos, dtype=torch.bool))
    total = torch.zeros(len(EDGE_KINDS), layout.n_layers, layout.n_heads, n_pos, n_pos)
    names = _attention_names(layout)
    means = mean_keys_values(model, layout, task, batch_size, passes) if counterfactual == "mean" else None
    for rows in tqdm(list(_chunks(task.n, batch_size)), desc=f"attention {method}", disable=not progress):
        chunk = task.rows(rows)
        clean = _capture(model, chunk.clean, names["query"] + names["key"] + names["value"])
        counter = counterfactual_keys_values(model, layout, chunk, counterfactual, means, passes)
        passes.forward += 1
        delta_scores, delta_values = {}, {}
        for layer in range(layout.n_layers):
            delta_key = counter.keys[layer] - clean[names["key"][layer]]
            delta_key = einops.repeat(delta_key, "batch pos kv d -> batch pos (kv group) d", group=layout.group_size)
            delta_scores[layer] = layout.scales[layer] * einops.einsum(
                clean[names["query"][layer]], delta_key, "batch q head d, batch k head d -> batch head q k") * causal
            delta_values[layer] = einops.repeat(counter.values[layer] - clean[names["value"][layer]],
                                                "batch pos kv d -> batch pos (kv group) d", group=layout.group_size)
        if method == "eap-ig":
            clean_embed, corrupt_embed = _embeddings(model, chunk.clean), _embeddings(model, chunk.corrupt)
            passes.forward += 2
        for k in range(1, steps + 1):
            embed = None if method == "eap" or k == steps else corrupt_embed + (k / steps) * (clean_embed - corrupt_embed)
            score_grads, z_grads, patterns = _attention_gradients(model, layout, chunk, embed)
            passes.forward += 1
            passes.backward += 1
            for layer in range(layout.n_layers):
                total[0, layer] += (score_grads[layer] * delta_scores[layer]).sum(0) / steps
                read = einops.einsum(z_grads[layer], delta_values[layer], "batch q head d, batch k head d -> batch head q k")
                total[1, layer] += (patterns[layer] * read * causal).sum(0) / steps
    return total / task.n


# --------------------------------------------------------------------------- exact effects


def _set_patch(edge_set: AttentionEdgeSet, counter: KeysValues, group: int, n_groups: int, batch: int,
               layout: AttentionLayout) -> EdgePatch:
    """``edge_set`` as an edge patch acting in rows ``group * batch ..`` of a pass over ``n_groups`` copies of the prompts."""
    layers = check_layers(edge_set.layers, layout.n_layers)
    table = counter.table(edge_set.kind)
    replacement = {layer: table[layer][:, edge_set.source] for layer in layers}
    return EdgePatch(edge_set.kind, Edges.shared(edge_set.query, edge_set.source, batch), replacement, layers,
                     edge_set.heads, torch.arange(n_groups * batch) // batch == group)


def attention_exact_scores(model: TransformerBridge, task: CircuitTask, edge_sets: Sequence[AttentionEdgeSet], *,
                           counterfactual: str = "corrupt", batch_size: int = 8, sets_per_pass: int = 16,
                           layout: AttentionLayout | None = None, passes: PassCount | None = None,
                           progress: bool = False) -> Float[Tensor, " set"]:
    """``metric(set patched) - metric(clean)`` of each set alone, averaged over the prompts; ``sets_per_pass``
    sets share one forward pass, each on its own copy of the prompts.

    >>> import torch
    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> model = load_model("planted-ub", device="cpu")
    >>> task = copying_task(model.tokenizer, "UB", 4, 4)
    >>> copy, o = task.prompts.copy_positions(), task.prompts.occurrences()
    >>> anti = AttentionEdgeSet("value", copy, o, layers=(1,), heads=(1,))     # head 1.1: copy -> o, value
    >>> bool(attention_exact_scores(model, task, [anti])[0] < -1)
    True
    """
    check_counterfactual("exact", counterfactual)
    layout = layout or attention_layout(model)
    passes = passes if passes is not None else PassCount()
    for edge_set in edge_sets:
        check_heads(edge_set.heads, layout.n_heads, "edge set heads")
        if int(edge_set.query.max()) >= task.clean.shape[1]:
            raise ValueError(f"an edge set's query position {int(edge_set.query.max())} is past the prompt "
                             f"({task.clean.shape[1]} positions)")
    total = torch.zeros(len(edge_sets))
    means = mean_keys_values(model, layout, task, batch_size, passes) if counterfactual == "mean" else None
    work = [(rows, sets) for rows in _chunks(task.n, batch_size) for sets in _chunks(len(edge_sets), sets_per_pass)]
    cached: tuple[slice, Tensor, KeysValues] | None = None
    for rows, sets in tqdm(work, desc="attention exact", disable=not progress):
        chunk = task.rows(rows)
        if cached is None or cached[0] != rows:
            with torch.no_grad():
                clean_metric = chunk.metric(model(chunk.clean.to(model.cfg.device))).cpu()
            passes.forward += 1
            cached = (rows, clean_metric, counterfactual_keys_values(model, layout, chunk, counterfactual, means, passes))
        _, clean_metric, counter = cached
        group = edge_sets[sets]
        patches = [_set_patch(s, counter, g, len(group), chunk.n, layout) for g, s in enumerate(group)]
        with torch.no_grad():
            logits = model.run_with_hooks(chunk.clean.repeat(len(group), 1).to(model.cfg.device),
                                          fwd_hooks=edge_patch_hooks(layout, patches))
        passes.forward += 1
        total[sets] += (chunk.metric(logits).cpu().view(len(group), -1) - clean_metric[None]).sum(1)
    return total / task.n
