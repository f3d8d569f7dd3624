"""Edge scores behind one call: ``eap`` (first order), ``eap-ig`` (integrated gradients over the
inputs, ``steps`` points), ``eap-ig-act`` (integrated gradients over each writer layer's outputs)
and ``exact`` (the edge patched alone).

Sign convention (noising): a score estimates ``metric(edge patched to the counterfactual) -
metric(clean)``, so an edge the task needs scores negative. EAP is ``(a'_w - a_w) . dm/dx_r`` at
the clean run; EAP-IG averages that gradient over the inputs ``e' + (k / m) (e - e')``, ``k = 1 .. m``
(token embeddings interpolated from the counterfactual's to the clean ones), so ``m = 1`` is EAP.
EAP-IG-activations (Marks et al. 2024; MIB's EAP-IG-activations) moves only the edge's own writer
layer: the gradient at reader ``r`` is averaged over runs whose writers of that layer output
``a_w + (1 - k / m) (a'_w - a_w)`` and whose other writers run clean, one group of ``m`` runs per
writer hook (the embeddings, each layer's heads, each MLP); ``m = 1`` is EAP again, and the
clean run (``k = m``) is shared by every layer, so it costs ``(m - 1) x hooks + 1`` passes.
TransformerLens' ``attribution_patch(model, clean=A, corrupt=B)`` (denoising: gradient at the corrupt
run, toward clean) equals `edge_scores` with ``clean=B, counterfactual=A``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from interp.interventions.circuits.graph import CircuitGraph, HookSlots, circuit_graph, graph_hooks_enabled
from interp.interventions.circuits.patching import GraphEdges, capture_writer_hooks, single_edge_hooks, writer_activations
from interp.interventions.circuits.task import COUNTERFACTUALS, CircuitTask
from interp.models.bridge import TransformerBridge

METHODS: tuple[str, ...] = ("eap", "eap-ig", "eap-ig-act", "exact")
GRADIENT_METHODS: tuple[str, ...] = ("eap", "eap-ig", "eap-ig-act")  # every edge at once, from gradients


@dataclass
class PassCount:
    """Forward and backward passes spent (a pass over a batch of rows counts once)."""

    forward: int = 0
    backward: int = 0


def check_method(method: str, counterfactual: str, steps: int = 1) -> None:
    """Refuse an unknown method or counterfactual, and EAP-IG without a counterfactual input.

    >>> check_method("eap-ig", "zero")
    Traceback (most recent call last):
    ...
    ValueError: method='eap-ig' interpolates the input toward the counterfactual prompt; it needs counterfactual='corrupt', not 'zero'
    """
    if method not in METHODS:
        raise ValueError(f"method={method!r}; expected one of {', '.join(METHODS)}")
    if counterfactual not in COUNTERFACTUALS:
        raise ValueError(f"counterfactual={counterfactual!r}; expected one of {', '.join(COUNTERFACTUALS)}")
    if method == "eap-ig" and counterfactual != "corrupt":
        raise ValueError(f"method='eap-ig' interpolates the input toward the counterfactual prompt; it needs "
                         f"counterfactual='corrupt', not {counterfactual!r}")
    if steps < 1:
        raise ValueError(f"steps={steps}: at least one integration step")


def _chunks(n: int, size: int) -> Iterator[slice]:
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


def mean_activations(model: TransformerBridge, graph: CircuitGraph, task: CircuitTask, batch_size: int = 8,
                     passes: PassCount | None = None) -> Float[Tensor, "pos writer d_model"]:
    """Each writer's output per position, averaged over the corrupt prompts (held out from the clean ones)."""
    total = None
    with graph_hooks_enabled(model):
        for rows in _chunks(task.n, batch_size):
            acts, _ = writer_activations(model, graph, task.corrupt[rows])
            total = acts.sum(0) if total is None else total + acts.sum(0)
            if passes is not None:
                passes.forward += 1
    return total / task.n


def counterfactual_activations(model: TransformerBridge, graph: CircuitGraph, task: CircuitTask, counterfactual: str,
                               means: Tensor | None, shape: torch.Size) -> Tensor:
    """The writers' outputs an edge is patched to: the corrupt run's, zeros, or the means."""
    if counterfactual == "corrupt":
        return writer_activations(model, graph, task.corrupt)[0]
    if counterfactual == "zero":
        return torch.zeros(shape)
    return means.expand(shape).clone()


def _reader_gradients(model: TransformerBridge, graph: CircuitGraph, task: CircuitTask, *, embed: Tensor | None = None,
                      shift: tuple[HookSlots, Tensor] | None = None, readers: tuple[HookSlots, ...] | None = None,
                      store: Tensor | None = None) -> dict[str, Tensor]:
    """``d sum(metric) / d x_r`` for the reader hooks ``readers`` (default: all) on the clean prompts,
    ``embed`` replacing the token embeddings or ``shift = (writer hook, offset)`` added to one writer
    hook's output; ``store`` (``[batch, pos, writer, d_model]``) receives the writers' outputs."""
    readers = graph.reader_hooks if readers is None else readers
    held: dict[str, Tensor] = {}

    def holder(name: str):
        def hold(x, hook):
            held[name] = x = x.clone()  # a node of its own: the gradient of what reads the hook, not of its input
            return x
        return hold

    def set_embed(x, hook):
        # a leaf that requires grad, so gradients flow also where the weights do not require them
        return (x if embed is None else embed.to(x.device, x.dtype)).detach().requires_grad_(True)

    hooks = [("hook_embed", set_embed)]
    if shift is not None:
        slots, offset = shift
        offset = offset if slots.per_head else offset[:, :, 0]
        hooks.append((slots.name, lambda x, hook: x + offset.to(x.device, x.dtype)))
    hooks += capture_writer_hooks(graph, store) if store is not None else []
    hooks += [(h.name, holder(h.name)) for h in readers]
    with torch.enable_grad():
        logits = model.run_with_hooks(task.clean, fwd_hooks=hooks)
        names = [h.name for h in readers]
        grads = torch.autograd.grad(task.metric(logits).sum(), [held[n] for n in names], allow_unused=True)
    return {n: (torch.zeros_like(held[n]) if g is None else g.detach()) for n, g in zip(names, grads)}


def _embeddings(model: TransformerBridge, tokens: Tensor) -> Tensor:
    captured = {}

    def keep(x, hook):
        captured["embed"] = x.detach()

    with torch.no_grad():
        model.run_with_hooks(tokens, fwd_hooks=[("hook_embed", keep)], stop_at_layer=0)
    return captured["embed"]


def _attribute(total: Tensor, delta: Float[Tensor, "batch pos writer d_model"], grads: dict[str, Tensor],
               graph: CircuitGraph, writers: slice = slice(None)) -> None:
    """Add ``delta_w . grad_r``, summed over the batch, to ``total[pos, reader, writer]`` for the
    readers in ``grads`` and the writers ``writers``."""
    for slots in graph.reader_hooks:
        if slots.name in grads:
            g = grads[slots.name].float()
            g = g if slots.per_head else g[:, :, None]
            total[:, slots.start:slots.stop, writers] += torch.einsum("bpwd,bprd->prw", delta[:, :, writers], g)


def _input_ig(model: TransformerBridge, graph: CircuitGraph, chunk: CircuitTask, method: str, steps: int,
              counterfactual: str, means: Tensor | None, passes: PassCount) -> Float[Tensor, "pos reader writer"]:
    """EAP (``steps = 1``) or EAP-IG over the token embeddings, summed over the chunk's prompts."""
    grads: dict[str, Tensor] = {}
    clean_acts = torch.zeros(*chunk.clean.shape, len(graph.writers), model.cfg.d_model)
    if method == "eap-ig":
        clean_embed, corrupt_embed = _embeddings(model, chunk.clean), _embeddings(model, chunk.corrupt)
        passes.forward += 2
    for k in range(1, steps + 1):
        last = k == steps  # the clean input: its writers' outputs are the ones edges are patched from
        embed = None if last else corrupt_embed + (k / steps) * (clean_embed - corrupt_embed)
        step_grads = _reader_gradients(model, graph, chunk, embed=embed, store=clean_acts if last else None)
        passes.forward += 1
        passes.backward += 1
        for name, g in step_grads.items():
            grads[name] = grads[name] + g / steps if name in grads else g / steps
    counter = counterfactual_activations(model, graph, chunk, counterfactual, means, clean_acts.shape)
    passes.forward += counterfactual == "corrupt"
    total = torch.zeros(chunk.clean.shape[1], len(graph.readers), len(graph.writers))
    _attribute(total, counter - clean_acts, grads, graph)
    return total


def _activation_ig(model: TransformerBridge, graph: CircuitGraph, chunk: CircuitTask, steps: int, counterfactual: str,
                   means: Tensor | None, passes: PassCount) -> Float[Tensor, "pos reader writer"]:
    """EAP-IG over each writer hook's outputs in turn, summed over the chunk's prompts."""
    clean_acts, _ = writer_activations(model, graph, chunk.clean)
    counter = counterfactual_activations(model, graph, chunk, counterfactual, means, clean_acts.shape)
    passes.forward += 1 + (counterfactual == "corrupt")
    delta = counter - clean_acts
    clean_grads = _reader_gradients(model, graph, chunk)  # k = m: every layer's path ends at the clean run
    passes.forward += 1
    passes.backward += 1
    total = torch.zeros(chunk.clean.shape[1], len(graph.readers), len(graph.writers))
    for writer in graph.writer_hooks:
        shift = delta[:, :, writer.start:writer.stop]
        if not shift.any():  # e.g. position embeddings under a counterfactual of the same layout
            continue
        stage = graph.writers[writer.start].stage
        downstream = tuple(h for h in graph.reader_hooks if graph.readers[h.start].stage > stage)
        grads = {h.name: clean_grads[h.name] / steps for h in downstream}
        for k in range(1, steps):
            step_grads = _reader_gradients(model, graph, chunk, shift=(writer, (1 - k / steps) * shift), readers=downstream)
            passes.forward += 1
            passes.backward += 1
            for name, g in step_grads.items():
                grads[name] += g / steps
        _attribute(total, delta, grads, graph, slice(writer.start, writer.stop))
    return total


def edge_scores(model: TransformerBridge, task: CircuitTask, method: str = "eap-ig", *, steps: int = 4,
                counterfactual: str = "corrupt", batch_size: int = 8, graph: CircuitGraph | None = None,
                passes: PassCount | None = None, progress: bool = False) -> Float[Tensor, "pos reader writer"]:
    """First-order scores of every edge at every position, averaged over the prompts (0 where no edge).

    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> model = load_model("planted-ub", device="cpu")
    >>> task = copying_task(model.tokenizer, "UB", 4, 4)
    >>> scores = edge_scores(model, task, "eap")
    >>> tuple(scores.shape[1:]), bool(scores.abs().sum() > 0)
    ((27, 12), True)
    >>> torch.allclose(edge_scores(model, task, "eap-ig-act", steps=1), scores)   # one step: the clean point
    True
    """
    steps = 1 if method == "eap" else steps
    check_method(method, counterfactual, steps)
    if method == "exact":
        raise ValueError("exact scores are per edge: use exact_scores(model, task, edges)")
    graph = graph or circuit_graph(model)
    passes = passes if passes is not None else PassCount()
    total = torch.zeros(task.clean.shape[1], len(graph.readers), len(graph.writers))
    with graph_hooks_enabled(model):
        means = mean_activations(model, graph, task, batch_size, passes) if counterfactual == "mean" else None
        for rows in tqdm(list(_chunks(task.n, batch_size)), desc=f"{method} scores", disable=not progress):
            chunk = task.rows(rows)
            if method == "eap-ig-act":
                total += _activation_ig(model, graph, chunk, steps, counterfactual, means, passes)
            else:
                total += _input_ig(model, graph, chunk, method, steps, counterfactual, means, passes)
    return total * graph.valid / task.n


def exact_scores(model: TransformerBridge, task: CircuitTask, edges: GraphEdges, *, counterfactual: str = "corrupt",
                 batch_size: int = 8, edges_per_pass: int = 16, graph: CircuitGraph | None = None,
                 passes: PassCount | None = None, progress: bool = False) -> Float[Tensor, " edge"]:
    """``metric(edge patched) - metric(clean)`` of each edge alone, averaged over the prompts; many edges
    share one forward pass (``edges_per_pass`` groups of ``batch_size`` rows).

    >>> import torch
    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> from interp.interventions.circuits.graph import circuit_graph
    >>> model = load_model("planted-ub", device="cpu")
    >>> task, graph = copying_task(model.tokenizer, "UB", 4, 4), circuit_graph(model)
    >>> logits = GraphEdges.components(graph.valid[-1:].expand(len(graph.readers), -1) & (torch.arange(27) == 26)[:, None])
    >>> exact_scores(model, task, logits, graph=graph).shape      # every writer's edge into the logits
    torch.Size([12])
    """
    check_method("exact", counterfactual)
    graph = graph or circuit_graph(model)
    passes = passes if passes is not None else PassCount()
    if len(edges) and not bool(graph.valid[edges.reader, edges.writer].all()):
        raise ValueError("edges: some (reader, writer) pairs are not edges of the graph (the writer is not upstream)")
    total = torch.zeros(len(edges))
    with graph_hooks_enabled(model):
        means = mean_activations(model, graph, task, batch_size, passes) if counterfactual == "mean" else None
        work = [(rows, edge_rows) for rows in _chunks(task.n, batch_size) for edge_rows in _chunks(len(edges), edges_per_pass)]
        clean_cache: dict[tuple, tuple[Tensor, Tensor]] = {}
        for rows, edge_rows in tqdm(work, desc="exact edges", disable=not progress):
            chunk = task.rows(rows)
            key = (rows.start, rows.stop)
            if key not in clean_cache:
                clean_cache.clear()
                acts, logits = writer_activations(model, graph, chunk.clean)
                counter = counterfactual_activations(model, graph, chunk, counterfactual, means, acts.shape)
                passes.forward += 1 + (counterfactual == "corrupt")
                clean_cache[key] = (counter - acts, chunk.metric(logits))
            delta, clean_metric = clean_cache[key]
            group = edges[edge_rows]
            hooks = single_edge_hooks(graph, delta, GraphEdges(group.pos, group.reader, group.writer))
            with torch.no_grad():
                logits = model.run_with_hooks(chunk.clean.repeat(len(group), 1), fwd_hooks=hooks)
            passes.forward += 1
            patched = chunk.metric(logits).view(len(group), -1)
            total[edge_rows] += (patched - clean_metric[None]).sum(1)
    return total / task.n
