"""A model's attention as edge patching needs it (head counts, grouped key/value heads, whether keys
are rotated, each layer's score scale), measured once from the model's own hooks; and the checks of
requested layers and heads against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import einops
import torch
from torch import Tensor
from transformer_lens.utilities import get_act_name

from interp.models.bridge import TransformerBridge

SCALE_TOLERANCE = 1e-4  # relative misfit above which scores are not a scaled dot product of the hooked q and k


@dataclass(frozen=True)
class AttentionLayout:
    """What edge patching needs to know about a model's attention, measured from its own hooks."""

    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    rotary: bool
    scales: tuple[float, ...]  # per layer: hook_attn_scores = scale * q . k

    @property
    def group_size(self) -> int:
        return self.n_heads // self.n_kv_heads

    def kv_head(self, heads: Tensor) -> Tensor:
        """The key/value head each query head in ``heads`` reads."""
        return heads // self.group_size

    def query_hook(self, layer: int) -> str:
        return get_act_name("rot_q" if self.rotary else "q", layer)

    def key_hook(self, layer: int) -> str:
        """The key as it enters the scores: after RoPE where the model has it."""
        return get_act_name("rot_k" if self.rotary else "k", layer)


def attention_layout(model: TransformerBridge, n_tokens: int = 16, seed: int = 0) -> AttentionLayout:
    """Head counts, whether keys are rotated, and each layer's score scale ``c``, from one small seeded forward.

    ``c`` is fitted by least squares of ``hook_attn_scores`` on ``q . k`` over the unmasked entries; a misfit
    above ``SCALE_TOLERANCE`` (softcapping, ALiBi, ...) raises, because a key edge could not be set exactly.

    >>> from interp.models import load_model
    >>> attention_layout(load_model("tiny-llama", device="cpu"))
    AttentionLayout(n_layers=2, n_heads=4, n_kv_heads=4, d_head=16, rotary=True, scales=(0.25, 0.25))
    """
    cfg = model.cfg
    rotary = getattr(cfg, "positional_embedding_type", None) == "rotary" and get_act_name("rot_k", 0) in model.hook_dict
    probe = AttentionLayout(cfg.n_layers, cfg.n_heads, 1, cfg.d_head, rotary, ())
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, min(cfg.d_vocab, 1000), (1, n_tokens), generator=generator)
    names = {f(layer) for layer in range(cfg.n_layers) for f in (probe.query_hook, probe.key_hook)}
    names |= {get_act_name("attn_scores", layer) for layer in range(cfg.n_layers)}
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens.to(cfg.device), names_filter=lambda name: name in names)
    n_kv_heads = cache[probe.key_hook(0)].shape[2]
    if cfg.n_heads % n_kv_heads:
        raise NotImplementedError(f"{cfg.n_heads} query heads do not split evenly over {n_kv_heads} key/value heads")
    causal = torch.tril(torch.ones(n_tokens, n_tokens, dtype=torch.bool))
    scales = []
    for layer in range(cfg.n_layers):
        q, k = cache[probe.query_hook(layer)].float(), cache[probe.key_hook(layer)].float()
        k = einops.repeat(k, "batch pos kv d -> batch pos (kv group) d", group=cfg.n_heads // n_kv_heads)
        dots = einops.einsum(q, k, "batch q head d, batch k head d -> batch head q k")[..., causal]
        scores = cache[get_act_name("attn_scores", layer)].float()[..., causal]
        scale = float((scores * dots).sum() / (dots * dots).sum())
        misfit = float((scores - scale * dots).abs().max() / scores.abs().max().clamp(min=1e-12))
        if misfit > SCALE_TOLERANCE:
            raise NotImplementedError(f"layer {layer}: hook_attn_scores is not a scaled dot product of "
                                      f"{probe.query_hook(layer)} and {probe.key_hook(layer)} (relative misfit "
                                      f"{misfit:.1e}); key edges cannot be patched exactly for this model")
        # The fit carries float noise (~1e-7); the standard 1/sqrt(d_head) is used when it is what the model does.
        standard = cfg.d_head ** -0.5
        scales.append(standard if abs(scale - standard) <= SCALE_TOLERANCE * standard else scale)
    return AttentionLayout(cfg.n_layers, cfg.n_heads, n_kv_heads, cfg.d_head, rotary, tuple(scales))


def _check_indices(values: Sequence[int] | None, count: int, name: str, what: str) -> tuple[int, ...]:
    """``values`` sorted, deduplicated and checked to lie in ``0..count-1`` (``None`` = all)."""
    if values is None:
        return tuple(range(count))
    chosen = tuple(sorted(set(int(value) for value in values)))
    if not chosen:
        raise ValueError(f"{name}: no {what}s given (expected some of 0-{count - 1}, or None for all)")
    bad = [value for value in chosen if not 0 <= value < count]
    if bad:
        raise ValueError(f"{name}: {what}(s) {bad} out of range; the model has {what}s 0-{count - 1}")
    return chosen


def check_layers(layers: Sequence[int] | None, n_layers: int, name: str = "layers") -> tuple[int, ...]:
    """``layers`` sorted and checked against the model (``None`` = all).

    >>> check_layers([3, 1, 3], n_layers=4), check_layers(None, n_layers=2)
    ((1, 3), (0, 1))
    """
    return _check_indices(layers, n_layers, name, "layer")


def check_heads(heads: Sequence[int] | None, n_heads: int, name: str = "heads") -> tuple[int, ...]:
    """Query ``heads`` sorted and checked against the model (``None`` = all).

    >>> check_heads([2, 0], n_heads=4)
    (0, 2)
    """
    return _check_indices(heads, n_heads, name, "query head")
