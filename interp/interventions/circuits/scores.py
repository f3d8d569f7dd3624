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

Cost per batch of prompts: the counterfactual's forward pass, stopped at the last writer with the
reader hooks off; one forward and backward pass per step on the clean prompts, unembedding only the
scored positions (the clean pass also records the writers). The scores are one batched product per
block of readers (a layer's query, key and value inputs with the MLP input before them) over the
writers upstream of it, made as the backward pass delivers the block's gradients; the writers are
kept ``[pos, writer, batch, d_model]``, so that product reads them in place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import einops
import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from interp.interventions.circuits.graph import CircuitGraph, HookSlots, circuit_graph, graph_hooks_enabled
from interp.interventions.circuits.patching import writer_activations
from interp.interventions.circuits.task import COUNTERFACTUALS, CircuitTask
from interp.models.bridge import Hook, TransformerBridge, logits_at, run_until

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


@dataclass(frozen=True)
class _ReaderBlock:
    """Reader hooks next to each other in the forward pass whose readers read the same writers but at
    most one (a layer's query, key and value inputs with the previous MLP's input, the last MLP's input
    with the logits): one batched product over writers ``0 .. upstream - 1`` scores them all, and the
    one edge too many per reader is masked by ``graph.valid`` afterwards. Writers come in forward
    order, so what a reader reads is a prefix of them."""

    hooks: tuple[HookSlots, ...]
    upstream: int

    @property
    def readers(self) -> slice:
        return slice(self.hooks[0].start, self.hooks[-1].stop)


def _reader_blocks(graph: CircuitGraph, hooks: tuple[HookSlots, ...]) -> tuple[_ReaderBlock, ...]:
    """``hooks`` (in forward order) grouped into blocks."""
    groups: list[tuple[list[HookSlots], int, int]] = []  # hooks, the first hook's writers, the last's
    for slots in hooks:
        upstream = int(graph.valid[slots.start].sum())
        if groups and groups[-1][0][-1].stop == slots.start and upstream - groups[-1][1] <= 1:
            groups[-1] = (groups[-1][0] + [slots], groups[-1][1], upstream)
        else:
            groups.append(([slots], upstream, upstream))
    return tuple(_ReaderBlock(tuple(members), last) for members, _, last in groups)


def _score_block(total: Float[Tensor, "pos reader writer"], delta: Float[Tensor, "pos writer batch d_model"],
                 block: _ReaderBlock, grad: Float[Tensor, "pos block_reader batch d_model"], writers: slice) -> None:
    """Add ``delta_w . grad_r``, summed over the batch and ``d_model``, to ``total[pos, r, w]`` for the
    block's readers ``r`` and the writers ``writers``: one matrix product per position, on views."""
    products = torch.bmm(grad.flatten(2), delta[:, writers].flatten(2).transpose(1, 2))
    total[:, block.readers, writers] += products


class _ReaderGradients:
    """Reader gradients as the backward passes deliver them, ``weight`` x their sum over passes, kept per
    block in the layout the product wants (``[pos, reader, batch, d_model]``). After `score_when_complete`,
    a block is scored, and its memory freed, as soon as its last hook has delivered in that pass."""

    def __init__(self, blocks: tuple[_ReaderBlock, ...], like: Tensor, weight: float) -> None:
        self.blocks, self.weight = blocks, weight
        self.n_pos, self.batch, self.d_model = like.shape[0], like.shape[2], like.shape[3]
        self.device = like.device
        self.where = {s.name: (i, s) for i, block in enumerate(blocks) for s in block.hooks}
        self.buffers: dict[int, Tensor] = {}
        self.scoring: tuple[Tensor, Tensor, int | None] | None = None
        self.delivered: dict[int, int] = {}

    def add(self, name: str, grad: Tensor) -> None:
        index, slots = self.where[name]
        block = self.blocks[index]
        if index not in self.buffers:
            width = block.readers.stop - block.readers.start
            self.buffers[index] = torch.zeros(self.n_pos, width, self.batch, self.d_model, device=self.device)
        grad = grad.detach() if slots.per_head else grad.detach()[:, :, None]
        rows = slice(slots.start - block.readers.start, slots.stop - block.readers.start)
        self.buffers[index][:, rows].add_(einops.rearrange(grad, "b p r d -> p r b d"), alpha=self.weight)
        if self.scoring is not None:
            self.delivered[index] = self.delivered.get(index, 0) + 1
            if self.delivered[index] == len(block.hooks):
                self._score(index)

    def score_when_complete(self, total: Tensor, delta: Tensor, writers: slice | None = None) -> None:
        """From now on (the last pass), score each block into ``total`` once all its hooks delivered."""
        self.scoring = (total, delta, writers)

    def score_rest(self, total: Tensor, delta: Tensor, writers: slice | None = None) -> None:
        """Score every block not scored yet (hooks whose readers never reach the metric deliver nothing)."""
        self.scoring = (total, delta, writers)
        for index in list(self.buffers):
            self._score(index)

    def _score(self, index: int) -> None:
        total, delta, writers = self.scoring
        block = self.blocks[index]
        _score_block(total, delta, block, self.buffers.pop(index), writers or slice(0, block.upstream))


def _capture_hooks(graph: CircuitGraph, store: Tensor, alpha: float) -> list[Hook]:
    """Hooks adding ``alpha`` x every writer's output to ``store`` (``[pos, writer, batch, d_model]``)."""

    def keep(slots: HookSlots):
        def hook(x, hook):
            x = x.detach().to(store.device)
            x = x if slots.per_head else x[:, :, None]
            store[:, slots.start:slots.stop].add_(einops.rearrange(x, "b p w d -> p w b d"), alpha=alpha)
        return hook

    return [(h.name, keep(h)) for h in graph.writer_hooks]


@contextmanager
def _writers_only(model: TransformerBridge) -> Iterator[None]:
    """Reader hooks off for a pass that only records writers: it skips the residual's per-head copies."""
    cfg = model.cfg
    saved = (cfg.use_split_qkv_input, cfg.use_hook_mlp_in)
    try:
        model.set_use_split_qkv_input(False)
        model.set_use_hook_mlp_in(False)
        yield
    finally:
        model.set_use_split_qkv_input(saved[0])
        model.set_use_hook_mlp_in(saved[1])


def _counterfactual_outputs(model: TransformerBridge, graph: CircuitGraph, chunk: CircuitTask, counterfactual: str,
                            means: Tensor | None, passes: PassCount) -> Float[Tensor, "pos writer batch d_model"]:
    """The writers' outputs an edge is patched to: the corrupt run's (a forward pass that stops at the
    last writer), zeros, or the means."""
    batch, n_pos = chunk.clean.shape
    if counterfactual == "mean":
        return einops.repeat(means.to(model.cfg.device), "p w d -> p w b d", b=batch).contiguous()
    store = torch.zeros(n_pos, len(graph.writers), batch, model.cfg.d_model, device=model.cfg.device)
    if counterfactual == "corrupt":
        with _writers_only(model):
            run_until(model, chunk.corrupt, graph.writer_hooks[-1].name, _capture_hooks(graph, store, 1.0))
        passes.forward += 1
    return store


def _gradient_pass(model: TransformerBridge, graph: CircuitGraph, chunk: CircuitTask, readers: tuple[HookSlots, ...],
                   deliver: Callable[[str, Tensor], None], *, embed: Tensor | None = None,
                   shift: tuple[HookSlots, Tensor] | None = None, subtract_into: Tensor | None = None) -> None:
    """One forward and backward pass on the clean prompts: ``deliver(hook, d sum(metric) / d x_r)`` for each
    reader hook in ``readers`` as the backward pass reaches it. ``embed`` replaces the token embeddings;
    ``shift = (writer hook, offset)`` is added to one writer hook's output, and the backward pass then
    stops there; ``subtract_into`` (``[pos, writer, batch, d_model]``) loses every writer's output.
    Only the scored positions are unembedded."""
    sources: list[Tensor] = []

    def set_embed(x, hook):
        # a leaf, so gradients flow also where the weights do not require them
        leaf = (x if embed is None else embed.to(x.device, x.dtype)).detach().requires_grad_(shift is None)
        if shift is None:
            sources.append(leaf)
        return leaf

    def holder(name: str):
        def hold(x, hook):
            x = x.clone()  # a node of its own: the gradient of what reads the hook, not of its input
            if x.requires_grad:
                x.register_hook(lambda grad: deliver(name, grad))
            return x
        return hold

    hooks = [("hook_embed", set_embed)]
    if shift is not None:
        slots, offset = shift
        offset = (offset if slots.per_head else offset[:, :, 0]).detach().requires_grad_(True)
        sources.append(offset)
        hooks.append((slots.name, lambda x, hook: x + offset.to(x.device, x.dtype)))
    hooks += _capture_hooks(graph, subtract_into, -1.0) if subtract_into is not None else []
    hooks += [(h.name, holder(h.name)) for h in readers]
    with torch.enable_grad():
        scored = logits_at(model, chunk.clean, chunk.positions, hooks)
        torch.autograd.grad(chunk.scored_metric(scored).sum(), sources)


def _embeddings(model: TransformerBridge, tokens: Tensor) -> Tensor:
    captured = {}

    def keep(x, hook):
        captured["embed"] = x.detach()

    with torch.no_grad():
        model.run_with_hooks(tokens, fwd_hooks=[("hook_embed", keep)], stop_at_layer=0)
    return captured["embed"]


def _input_ig(model: TransformerBridge, graph: CircuitGraph, chunk: CircuitTask, method: str, steps: int,
              counterfactual: str, means: Tensor | None, passes: PassCount) -> Float[Tensor, "pos reader writer"]:
    """EAP (``steps = 1``) or EAP-IG over the token embeddings, summed over the chunk's prompts."""
    delta = _counterfactual_outputs(model, graph, chunk, counterfactual, means, passes)  # a'; the clean pass takes a
    if method == "eap-ig":
        clean_embed, corrupt_embed = _embeddings(model, chunk.clean), _embeddings(model, chunk.corrupt)
        passes.forward += 2
    total = torch.zeros(chunk.clean.shape[1], len(graph.readers), len(graph.writers), device=delta.device)
    grads = _ReaderGradients(_reader_blocks(graph, graph.reader_hooks), delta, 1 / steps)
    for k in range(1, steps + 1):
        last = k == steps  # the clean input: its writers' outputs are the ones edges are patched from
        embed = None if last else corrupt_embed + (k / steps) * (clean_embed - corrupt_embed)
        if last:
            grads.score_when_complete(total, delta)
        _gradient_pass(model, graph, chunk, graph.reader_hooks, grads.add, embed=embed,
                       subtract_into=delta if last else None)
        passes.forward += 1
        passes.backward += 1
    grads.score_rest(total, delta)
    return total.cpu()


def _activation_ig(model: TransformerBridge, graph: CircuitGraph, chunk: CircuitTask, steps: int, counterfactual: str,
                   means: Tensor | None, passes: PassCount) -> Float[Tensor, "pos reader writer"]:
    """EAP-IG over each writer hook's outputs in turn, summed over the chunk's prompts: the clean run's
    gradients (``k = m``, shared by every layer) score every edge at once, weight ``1 / m``; each writer
    hook's ``m - 1`` shifted runs add the rest for its own edges."""
    delta = _counterfactual_outputs(model, graph, chunk, counterfactual, means, passes)
    total = torch.zeros(chunk.clean.shape[1], len(graph.readers), len(graph.writers), device=delta.device)
    clean = _ReaderGradients(_reader_blocks(graph, graph.reader_hooks), delta, 1 / steps)
    clean.score_when_complete(total, delta)
    _gradient_pass(model, graph, chunk, graph.reader_hooks, clean.add, subtract_into=delta)
    passes.forward += 1
    passes.backward += 1
    clean.score_rest(total, delta)
    for writer in graph.writer_hooks:
        shift = delta[:, writer.start:writer.stop]
        if steps == 1 or not shift.any():  # e.g. position embeddings under a counterfactual of the same layout
            continue
        stage = graph.writers[writer.start].stage
        downstream = tuple(h for h in graph.reader_hooks if graph.readers[h.start].stage > stage)
        grads = _ReaderGradients(_reader_blocks(graph, downstream), delta, 1 / steps)
        for k in range(1, steps):
            offset = einops.rearrange((1 - k / steps) * shift, "p w b d -> b p w d")
            _gradient_pass(model, graph, chunk, downstream, grads.add, shift=(writer, offset))
            passes.forward += 1
            passes.backward += 1
        grads.score_rest(total, delta, slice(writer.start, writer.stop))
    return total.cpu()


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
        raise ValueError("exact scores patch edges one at a time: use role_scores.exact_effects(runner, edges)")
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
