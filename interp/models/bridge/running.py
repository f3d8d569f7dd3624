"""Running parts of a bridge: from a layer on a given residual, or until a hook has fired; the
rotary embedding its attention applies, and its attention weights per query head."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn
from transformer_lens.model_bridge import TransformerBridge

from interp.core.lm import Hook
from interp.models.bridge.hooks import act_name


class _PassThrough(nn.Module):
    """Stands in for a skipped block: returns its hidden-state input untouched."""

    def forward(self, hidden_states, *args, **kwargs):
        return hidden_states


@contextmanager
def _bypass_blocks_below(model: TransformerBridge, layer: int, unembed: bool = True) -> Iterator[None]:
    """Inside, blocks ``0..layer-1`` cost nothing (a forward that starts at ``layer`` discards
    their output anyway) and, with ``unembed``, the unembedding returns the final normalized
    residual, so callers unembed only the positions they need ([`unembed_residual`][interp.models.bridge.running.unembed_residual])."""
    swapped = [(block, block.original_component) for block in list(model.blocks)[:layer]]
    if unembed:
        swapped.append((model.unembed, model.unembed.original_component))
    try:
        for component, _ in swapped:
            component.set_original_component(_PassThrough())
        yield
    finally:
        for component, original in swapped:
            component.set_original_component(original)


def unembed_residual(model: TransformerBridge, residual: Float[Tensor, "*rows d_model"]) -> Float[Tensor, "*rows d_vocab"]:
    """The model's own unembedding applied to final (normalized) residuals.

    >>> from interp.models import load_model
    >>> model = load_model("tiny-gpt2", device="cpu")
    >>> tuple(unembed_residual(model, torch.zeros(3, model.cfg.d_model)).shape)
    (3, 354)
    """
    return model.unembed.original_component(residual)


def run_from_layer(model: TransformerBridge, residual: Float[Tensor, "batch pos d_model"], layer: int,
                   fwd_hooks: Sequence[Hook] = ()) -> Float[Tensor, "batch pos d_model"]:
    """Blocks ``layer..`` on ``residual`` (the stream entering ``layer``); returns the final
    normalized residual (no unembedding).

    >>> from interp.models import load_model
    >>> model = load_model("tiny-gpt2", device="cpu")
    >>> tokens = torch.tensor([[3, 7, 11, 5, 3, 7]])
    >>> logits, cache = model.run_with_cache(tokens, names_filter=act_name("resid_pre", 1))
    >>> final = run_from_layer(model, cache[act_name("resid_pre", 1)], 1)
    >>> tuple(final.shape), bool(torch.allclose(unembed_residual(model, final), logits, atol=1e-5))
    ((1, 6, 64), True)
    """
    with torch.no_grad(), _bypass_blocks_below(model, layer):
        return model.run_with_hooks(residual, start_at_layer=layer, fwd_hooks=list(fwd_hooks))


def logits_at(model: TransformerBridge, tokens: Int[Tensor, "batch pos"], positions: Int[Tensor, " slot"],
              fwd_hooks: Sequence[Hook] = ()) -> Float[Tensor, "batch slot d_vocab"]:
    """The logits at ``positions`` only, under ``fwd_hooks``: the unembedding (a vocabulary-sized product per
    position, a fifth of a small model's forward pass) runs where a metric reads it. Gradients flow as usual.

    >>> from interp.models import load_model
    >>> model = load_model("tiny-gpt2", device="cpu")
    >>> tokens = torch.tensor([[3, 7, 11, 5, 3, 7]])
    >>> bool(torch.allclose(logits_at(model, tokens, torch.tensor([2, 5])), model(tokens)[:, [2, 5]], atol=1e-5))
    True
    """
    with _bypass_blocks_below(model, 0):
        final = model.run_with_hooks(tokens.to(model.cfg.device), fwd_hooks=list(fwd_hooks))
    return unembed_residual(model, final[:, positions.to(final.device)])


class _Stop(Exception):
    """Raised from a hook to end a forward pass early."""


def run_until(model: TransformerBridge, tokens: Int[Tensor, "batch pos"], last_hook: str,
              fwd_hooks: Sequence[Hook] = ()) -> None:
    """Run the forward pass with ``fwd_hooks`` and stop as soon as ``last_hook`` has fired (its
    own hooks in ``fwd_hooks`` included): the layers after it, and the unembedding, never run.

    >>> from interp.models import load_model
    >>> model = load_model("tiny-gpt2", device="cpu")
    >>> fired = []
    >>> def record(name):
    ...     return lambda value, hook: fired.append(name)
    >>> names = [act_name(kind, layer) for layer in (0, 1) for kind in ("resid_pre", "pattern")]
    >>> run_until(model, torch.tensor([[3, 7, 11]]), names[1], [(name, record(name)) for name in names])
    >>> fired   # block 1 never ran
    ['blocks.0.hook_resid_pre', 'blocks.0.attn.hook_pattern']
    """

    if last_hook not in model.hook_dict:
        raise ValueError(f"the model has no hook {last_hook!r} (e.g. {act_name('pattern', 0)!r})")

    def stop(value, hook):
        raise _Stop

    with torch.no_grad(), model.hooks(fwd_hooks=[*fwd_hooks, (last_hook, stop)]):
        try:
            model(tokens.to(model.cfg.device))
        except _Stop:
            return
    raise RuntimeError(f"hook {last_hook!r} never fired: the forward pass ran to the end")


# --------------------------------------------------------------------------- rotary embeddings


def rotary_hook_names(layer: int) -> tuple[str, str]:
    """The hooks holding the cosines and sines a rotary layer applies to its queries and keys.

    >>> rotary_hook_names(1)
    ('blocks.1.attn.hook_cos', 'blocks.1.attn.hook_sin')
    """
    return f"blocks.{layer}.attn.hook_cos", f"blocks.{layer}.attn.hook_sin"


def apply_rotary(model: TransformerBridge, x: Float[Tensor, "*#rows head d_head"], cos: Float[Tensor, "*#rows d_head"],
                 sin: Float[Tensor, "*#rows d_head"]) -> Float[Tensor, "*#rows head d_head"]:
    """RoPE as the bridge's rotary attention applies it to ``hook_q`` / ``hook_k`` (giving
    ``hook_rot_q`` / ``hook_rot_k``): halves rotated, Hugging Face's ``rotate_half``; linear in
    ``x``, so it also rotates a change of a query or key. ``cos`` and ``sin`` come from
    [`rotary_hook_names`][interp.models.bridge.running.rotary_hook_names] at the same rows.

    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")
    >>> names = [act_name("q", 0), act_name("rot_q", 0), *rotary_hook_names(0)]
    >>> _, cache = model.run_with_cache(torch.tensor([[1, 5, 9, 2]]), names_filter=lambda name: name in names)
    >>> q, rot_q, cos, sin = (cache[name] for name in names)
    >>> bool(torch.allclose(apply_rotary(model, q, cos, sin), rot_q, atol=1e-6))
    True
    """
    if getattr(model.cfg, "rotary_adjacent_pairs", False) or x.shape[-1] != cos.shape[-1]:
        raise NotImplementedError("only full-width rotary embeddings on rotated halves are supported")
    first, second = x.chunk(2, dim=-1)
    return x * cos[..., None, :] + torch.cat([-second, first], dim=-1) * sin[..., None, :]


# --------------------------------------------------------------------------- weights per query head


def head_weights(model: TransformerBridge) -> dict[str, Float[Tensor, "layer head_index ..."]]:
    """``W_Q``, ``W_K``, ``W_V`` ``[layer, head, d_model, d_head]`` and ``W_O`` ``[layer, head,
    d_head, d_model]`` of the processed weights, one entry per *query* head: under grouped-query
    attention each key/value head is repeated for the query heads that share it.

    >>> from interp.models import load_model
    >>> {name: tuple(w.shape) for name, w in head_weights(load_model("tiny-gpt2", device="cpu")).items()}
    {'W_Q': (2, 4, 64, 16), 'W_K': (2, 4, 64, 16), 'W_V': (2, 4, 64, 16), 'W_O': (2, 4, 16, 64)}
    """
    n_heads = model.cfg.n_heads
    weights = {name: getattr(model, name).detach() for name in ("W_Q", "W_K", "W_V", "W_O")}
    for name in ("W_K", "W_V"):
        shared = weights[name].shape[1]
        if shared != n_heads:
            if n_heads % shared:
                raise ValueError(f"{name} has {shared} heads, which do not divide the {n_heads} query heads")
            weights[name] = weights[name].repeat_interleave(n_heads // shared, dim=1)
    return weights
