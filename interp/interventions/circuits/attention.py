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
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import einops
import torch
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm
from transformer_lens.utilities import get_act_name

from interp.interventions.circuits.roles import relative_role
from interp.interventions.circuits.scores import PassCount, _chunks, _embeddings, check_method
from interp.interventions.circuits.task import COUNTERFACTUALS, CircuitTask
from interp.interventions.edges.layout import AttentionLayout, attention_layout, check_heads, check_layers
from interp.interventions.edges.patching import EDGE_KINDS, EdgePatch, Edges, cut, edge_patch_hooks
from interp.measure.batching import Hook
from interp.models.bridge import TransformerBridge

ATTENTION_COUNTERFACTUALS: tuple[str, ...] = (*COUNTERFACTUALS, "previous_token_cut")
ALL_HEADS = "all"
# the paper's two hypotheses as (kind, query role, key role) of an every-head row
HYPOTHESES: dict[str, tuple[str, str, str]] = {"induction": ("key", "c", "o+1"), "anti_induction": ("value", "c", "o")}


@dataclass(frozen=True)
class KeysValues:
    """Keys (as scored: after RoPE where the model has it) and values of every position, per layer,
    ``[batch, pos, kv_head, d_head]``."""

    keys: dict[int, Tensor]
    values: dict[int, Tensor]

    def table(self, kind: str) -> dict[int, Tensor]:
        return self.keys if kind == "key" else self.values


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


def check_counterfactual(method: str, counterfactual: str, steps: int = 1) -> None:
    """`scores.check_method`, with the paper's counterfactual allowed where no input is interpolated.

    >>> check_counterfactual("exact", "previous_token_cut") is None
    True
    >>> check_counterfactual("eap-ig", "previous_token_cut")
    Traceback (most recent call last):
    ...
    ValueError: counterfactual='previous_token_cut'; expected one of corrupt, zero, mean
    """
    if counterfactual not in ATTENTION_COUNTERFACTUALS:
        raise ValueError(f"counterfactual={counterfactual!r}; expected one of {', '.join(ATTENTION_COUNTERFACTUALS)}")
    # a run of the clean prompt, like zero and mean: it has no input to interpolate toward
    check_method(method, "zero" if counterfactual == "previous_token_cut" and method != "eap-ig" else counterfactual, steps)


def _attention_names(layout: AttentionLayout) -> dict[str, list[str]]:
    layers = range(layout.n_layers)
    return {"query": [layout.query_hook(layer) for layer in layers], "key": [layout.key_hook(layer) for layer in layers],
            "value": [get_act_name("v", layer) for layer in layers]}


def _capture(model: TransformerBridge, tokens: Tensor, names: Sequence[str], fwd_hooks: Sequence[Hook] = ()) -> dict[str, Tensor]:
    kept: dict[str, Tensor] = {}

    def keep(x, hook):
        kept[hook.name] = x.detach().float().cpu()

    with torch.no_grad():
        model.run_with_hooks(tokens.to(model.cfg.device), fwd_hooks=[*fwd_hooks, *((name, keep) for name in names)])
    return kept


def keys_values(model: TransformerBridge, layout: AttentionLayout, tokens: Int[Tensor, "batch pos"],
                fwd_hooks: Sequence[Hook] = ()) -> KeysValues:
    """Every layer's keys and values on ``tokens`` (under ``fwd_hooks``), one forward pass without gradients.

    >>> import torch
    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")
    >>> kv = keys_values(model, attention_layout(model), torch.arange(5)[None])
    >>> tuple(kv.keys[1].shape), tuple(kv.values[0].shape)   # [batch, pos, kv_head, d_head]
    ((1, 5, 4, 16), (1, 5, 4, 16))
    """
    names = _attention_names(layout)
    kept = _capture(model, tokens, names["key"] + names["value"], fwd_hooks)
    return KeysValues({layer: kept[name] for layer, name in enumerate(names["key"])},
                      {layer: kept[name] for layer, name in enumerate(names["value"])})


def previous_token_cut_hooks(layout: AttentionLayout, batch: int, first_answer: int) -> list[Hook]:
    """The paper's counterfactual run: every previous-token edge ``i - 1 -> i``, ``i = 1 .. first_answer - 1``,
    cut in every layer and head (value zeroed, no renormalisation).

    >>> from interp.models import load_model
    >>> len(previous_token_cut_hooks(attention_layout(load_model("tiny-gpt2", device="cpu")), 1, 4))  # v, pattern, z per layer
    6
    """
    queries = torch.arange(1, first_answer)
    return edge_patch_hooks(layout, [cut(Edges.shared(queries, queries - 1, batch))])


def mean_keys_values(model: TransformerBridge, layout: AttentionLayout, task: CircuitTask, batch_size: int = 8,
                     passes: PassCount | None = None) -> KeysValues:
    """Keys and values per position averaged over the corrupt prompts, ``[1, pos, kv_head, d_head]``.

    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> model = load_model("tiny-gpt2", device="cpu")
    >>> means = mean_keys_values(model, attention_layout(model), copying_task(model.tokenizer, "UF", 3, 4), batch_size=3)
    >>> tuple(means.values[1].shape)
    (1, 13, 4, 16)
    """
    total: KeysValues | None = None
    for rows in _chunks(task.n, batch_size):
        kv = keys_values(model, layout, task.corrupt[rows])
        if passes is not None:
            passes.forward += 1
        sums = KeysValues({l: t.sum(0, keepdim=True) for l, t in kv.keys.items()},
                          {l: t.sum(0, keepdim=True) for l, t in kv.values.items()})
        total = sums if total is None else KeysValues({l: total.keys[l] + t for l, t in sums.keys.items()},
                                                      {l: total.values[l] + t for l, t in sums.values.items()})
    return KeysValues({l: t / task.n for l, t in total.keys.items()}, {l: t / task.n for l, t in total.values.items()})


def counterfactual_keys_values(model: TransformerBridge, layout: AttentionLayout, task: CircuitTask, counterfactual: str,
                               means: KeysValues | None = None, passes: PassCount | None = None) -> KeysValues:
    """What an attention entry is patched to, for the prompts of ``task``: the corrupt run's keys and values,
    zeros, the means over the corrupt prompts, or the paper's previous-token-cut run of the clean prompts.

    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> model = load_model("tiny-gpt2", device="cpu")
    >>> task = copying_task(model.tokenizer, "UF", 3, 2)
    >>> cut_run = counterfactual_keys_values(model, attention_layout(model), task, "previous_token_cut")
    >>> clean = keys_values(model, attention_layout(model), task.clean)
    >>> bool(cut_run.keys[0].equal(clean.keys[0])), bool(cut_run.keys[1].equal(clean.keys[1]))  # layer 0's cut moves layer 1
    (True, False)
    """
    if counterfactual not in ATTENTION_COUNTERFACTUALS:
        raise ValueError(f"counterfactual={counterfactual!r}; expected one of {', '.join(ATTENTION_COUNTERFACTUALS)}")
    shape = (task.n, task.clean.shape[1], layout.n_kv_heads, layout.d_head)
    if counterfactual == "zero":
        zeros = {layer: torch.zeros(shape) for layer in range(layout.n_layers)}
        return KeysValues(zeros, zeros)
    if counterfactual == "mean":
        if means is None:
            raise ValueError("counterfactual='mean' needs the means (mean_keys_values)")
        return KeysValues({l: t.expand(shape) for l, t in means.keys.items()}, {l: t.expand(shape) for l, t in means.values.items()})
    if passes is not None:
        passes.forward += 1
    if counterfactual == "corrupt":
        return keys_values(model, layout, task.corrupt)
    first_answer = int(task.positions.min()) + 1
    return keys_values(model, layout, task.clean, previous_token_cut_hooks(layout, task.n, first_answer))


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


# --------------------------------------------------------------------------- roles


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
