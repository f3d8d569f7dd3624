"""The residual-stream graph a circuit is made of.

*Writers* add to the residual stream: the token embedding, the position embedding (where the model
has one), each head's output (``attn.hook_result``) and each MLP's output. *Readers* take from it:
each query head's query input, each key/value head's key and value input (so a key/value head
shared by several query heads, GQA / MQA, is one reader, not one per query head), each MLP's
input and the logits (the last ``hook_resid_post``). An edge is (reader, writer) at one position:
the residual is a plain sum before each LayerNorm, so what one writer gives one reader can be
removed exactly. Cross-position information flows through attention: a head at position ``t``
reads its key and value readers at every ``s <= t``.

The layout follows TransformerLens' ``attribution_patching`` graph (the same hooks and the same
edges, plus the position embedding as a writer and key/value readers per key/value head).

Models that normalise each block's output before adding it to the residual (Gemma 2 and 3: post-attention
and post-MLP norms) add ``norm(sum of heads)``, not each head's output: the writer is then the whole
attention layer (``attn5``, ``hook_attn_out``, after its norm), and heads stay apart only as readers.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property

import torch
from jaxtyping import Bool
from torch import Tensor

from interp.models.bridge import TransformerBridge

WRITER_KINDS: tuple[str, ...] = ("embed", "pos_embed", "head", "attn", "mlp")
READER_KINDS: tuple[str, ...] = ("q", "k", "v", "mlp_in", "logits")


@dataclass(frozen=True)
class Component:
    """One writer or reader: ``kind``, its ``layer`` (-1 for embeddings) and ``head`` (-1 if none;
    for ``k`` / ``v`` readers the key/value head)."""

    kind: str
    layer: int = -1
    head: int = -1

    @property
    def stage(self) -> int:
        """Order in the forward pass: a reader reads every writer of a smaller stage."""
        if self.kind in ("embed", "pos_embed"):
            return 0
        if self.kind in ("head", "attn", "q", "k", "v"):
            return 2 * self.layer + 1
        return 2 * self.layer + 2  # mlp writer, mlp_in reader; logits sit at layer n_layers

    @property
    def label(self) -> str:
        """``a1.2`` (head), ``m0`` (MLP), ``a1.2.q``, ``a1.0.v`` (key/value head 0), ``m0.in``, ``logits``.

        >>> Component("v", 1, 0).label, Component("head", 0, 3).label
        ('a1.0.v', 'a0.3')
        """
        if self.kind in ("embed", "pos_embed", "logits"):
            return self.kind
        if self.kind == "head":
            return f"a{self.layer}.{self.head}"
        if self.kind == "attn":
            return f"attn{self.layer}"
        if self.kind == "mlp":
            return f"m{self.layer}"
        if self.kind == "mlp_in":
            return f"m{self.layer}.in"
        return f"a{self.layer}.{self.head}.{self.kind}"


@dataclass(frozen=True)
class HookSlots:
    """One hook and the graph indices of the components it holds (``per_head``: a head axis at dim 2)."""

    name: str
    start: int
    stop: int
    per_head: bool


@dataclass(frozen=True)
class CircuitGraph:
    """Every writer and reader of a model, in forward order, and which edges exist."""

    n_layers: int
    n_heads: int
    n_kv_heads: int
    pos_embed: bool
    post_norm: bool = False  # each block's output normalised before the residual: one attention writer per layer

    @property
    def head_writers(self) -> int:
        """Writers per attention layer: each head, or the whole (normalised) layer."""
        return 1 if self.post_norm else self.n_heads

    @cached_property
    def writers(self) -> tuple[Component, ...]:
        out = [Component("embed")] + ([Component("pos_embed")] if self.pos_embed else [])
        for layer in range(self.n_layers):
            heads = [Component("attn", layer)] if self.post_norm else [Component("head", layer, h) for h in range(self.n_heads)]
            out += heads + [Component("mlp", layer)]
        return tuple(out)

    @cached_property
    def readers(self) -> tuple[Component, ...]:
        out = []
        for layer in range(self.n_layers):
            out += [Component("q", layer, h) for h in range(self.n_heads)]
            out += [Component(kind, layer, g) for kind in ("k", "v") for g in range(self.n_kv_heads)]
            out += [Component("mlp_in", layer)]
        return tuple(out + [Component("logits", self.n_layers)])

    @property
    def group_size(self) -> int:
        return self.n_heads // self.n_kv_heads

    @cached_property
    def valid(self) -> Bool[Tensor, "reader writer"]:
        """Which (reader, writer) pairs are edges: the writer comes earlier in the forward pass."""
        writer_stage = torch.tensor([w.stage for w in self.writers])
        reader_stage = torch.tensor([r.stage for r in self.readers])
        return writer_stage[None, :] < reader_stage[:, None]

    @property
    def n_edges_per_position(self) -> int:
        return int(self.valid.sum())

    @cached_property
    def writer_hooks(self) -> tuple[HookSlots, ...]:
        hooks, i = [HookSlots("hook_embed", 0, 1, False)], 1
        if self.pos_embed:
            hooks.append(HookSlots("hook_pos_embed", 1, 2, False))
            i = 2
        k = self.head_writers
        for layer in range(self.n_layers):
            if self.post_norm:
                hooks.append(HookSlots(f"blocks.{layer}.hook_attn_out", i, i + 1, False))
            else:
                hooks.append(HookSlots(f"blocks.{layer}.attn.hook_result", i, i + k, True))
            hooks.append(HookSlots(f"blocks.{layer}.hook_mlp_out", i + k, i + k + 1, False))
            i += k + 1
        return tuple(hooks)

    @cached_property
    def reader_hooks(self) -> tuple[HookSlots, ...]:
        hooks, i = [], 0
        for layer in range(self.n_layers):
            for kind, count in (("q", self.n_heads), ("k", self.n_kv_heads), ("v", self.n_kv_heads)):
                hooks.append(HookSlots(f"blocks.{layer}.attn.hook_{kind}_input", i, i + count, True))
                i += count
            hooks.append(HookSlots(f"blocks.{layer}.hook_mlp_in", i, i + 1, False))
            i += 1
        hooks.append(HookSlots(f"blocks.{self.n_layers - 1}.hook_resid_post", i, i + 1, False))
        return tuple(hooks)

    def reader_index(self, component: Component) -> int:
        return self.readers.index(component)

    def writer_index(self, component: Component) -> int:
        return self.writers.index(component)

    def reader_owner(self, reader: Component) -> list[Component]:
        """The writer(s) whose computation a reader feeds: a query head, every head of a key/value
        group, an MLP; none for the logits."""
        if reader.kind in ("q", "k", "v") and self.post_norm:
            return [Component("attn", reader.layer)]
        if reader.kind == "q":
            return [Component("head", reader.layer, reader.head)]
        if reader.kind in ("k", "v"):
            g = self.group_size
            return [Component("head", reader.layer, h) for h in range(reader.head * g, (reader.head + 1) * g)]
        if reader.kind == "mlp_in":
            return [Component("mlp", reader.layer)]
        return []


def circuit_graph(model: TransformerBridge) -> CircuitGraph:
    """The graph of ``model``, key/value heads counted from its config.

    >>> from interp.models import load_model
    >>> graph = circuit_graph(load_model("planted-ub", device="cpu"))
    >>> len(graph.writers), len(graph.readers), graph.n_edges_per_position
    (12, 27, 137)
    """
    cfg = model.cfg
    if getattr(cfg, "parallel_attn_mlp", False):
        raise NotImplementedError("parallel attention and MLP blocks: the MLP does not read the heads of its layer")
    n_kv = getattr(cfg, "n_key_value_heads", None) or cfg.n_heads
    if cfg.n_heads % n_kv:
        raise NotImplementedError(f"{cfg.n_heads} query heads do not split evenly over {n_kv} key/value heads")
    post_norm = "blocks.0.ln1_post.hook_normalized" in model.hook_dict
    return CircuitGraph(cfg.n_layers, cfg.n_heads, n_kv, _fires(model, "hook_pos_embed"), post_norm)


def _fires(model: TransformerBridge, name: str) -> bool:
    """Whether hook ``name`` is called in a forward pass (a rotary model lists ``hook_pos_embed`` but never calls it)."""
    if name not in model.hook_dict:
        return False
    fired = []
    with torch.no_grad():
        model.run_with_hooks(torch.zeros(1, 1, dtype=torch.long), fwd_hooks=[(name, lambda x, hook: fired.append(1))],
                             stop_at_layer=0)
    return bool(fired)


@contextmanager
def graph_hooks_enabled(model: TransformerBridge) -> Iterator[None]:
    """Switch on the per-head writer and reader hooks (``attn.hook_result``, ``hook_{q,k,v}_input``,
    ``hook_mlp_in``) and restore the caller's settings afterwards; those hooks never fire otherwise."""
    cfg = model.cfg
    saved = (cfg.use_attn_result, cfg.use_split_qkv_input, cfg.use_hook_mlp_in, bool(getattr(cfg, "use_attn_in", False)))
    try:
        if saved[3]:
            model.set_use_attn_in(False)
        model.set_use_attn_result(True)
        model.set_use_split_qkv_input(True)
        model.set_use_hook_mlp_in(True)
        yield
    finally:
        model.set_use_attn_result(saved[0])
        model.set_use_split_qkv_input(saved[1])
        model.set_use_hook_mlp_in(saved[2])
        if saved[3]:
            model.set_use_attn_in(True)
