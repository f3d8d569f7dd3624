"""Zero and mean ablation of attention heads through hooks on ``blocks.{l}.attn.hook_z``.

``hook_z`` holds each query head's output before the output projection, shape
``[batch, pos, head, d_head]``, so replacing one head's slice removes exactly that head's
contribution (``hook_result`` would need ``set_use_attn_result(True)`` and silently never fires
otherwise). Hooks are plain TransformerLens ``(name, fn)`` pairs: pass them to
``interp.measure.evaluate.evaluate_task(..., fwd_hooks=...)`` or use [`ablated`][interp.interventions.ablation.ablated] as a context manager.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal, get_args

import einops
import torch
from jaxtyping import Float
from torch import Tensor

from interp.core.lm import HookedModel
from interp.measure.batching import Hook, pad_token_id, padded_batches
from interp.models.bridge import TransformerBridge, act_name, run_until
from interp.core.heads import Head, HeadLike, HeadsLike, validate_heads
from interp.prompts import EncodedPrompt

AblationKind = Literal["zero", "mean"]
ABLATION_KINDS: tuple[str, ...] = get_args(AblationKind)


def z_hook_name(layer: int) -> str:
    """The hook whose ``head_index`` slices ablations replace: ``hook_z`` of ``layer``.

    >>> z_hook_name(3)
    'blocks.3.attn.hook_z'
    """
    return act_name("z", layer)


@dataclass
class HookCounter:
    """Counts calls per hook name: proof that an ablation hook actually fired."""

    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def total(self) -> int:
        return sum(self.calls.values())


@dataclass(frozen=True, repr=False)
class HeadMeans:
    """Mean ``hook_z`` per layer over a reference batch.

    ``per_position=False``: one ``[head, d_head]`` vector per layer, averaged over every real
    (non-padding) token of every reference prompt (the paper's choice). ``per_position=True``:
    ``[pos, head, d_head]``, averaged over the prompts that reach each position; positions past
    the longest reference prompt fall back to the all-token mean."""

    means: dict[int, Tensor]
    overall: dict[int, Float[Tensor, "head d_head"]]
    per_position: bool

    def __repr__(self) -> str:
        """``HeadMeans(layers 0-1, 4 heads x 16 d_head, over all tokens)``: the shape, not the tensors."""
        layers = sorted(self.overall)
        span = f"layers {layers[0]}-{layers[-1]}" if layers else "no layers"
        heads, d_head = next(iter(self.overall.values())).shape if layers else (0, 0)
        where = "per position" if self.per_position else "over all tokens"
        return f"HeadMeans({span}, {heads} heads x {d_head} d_head, {where})"

    def for_layer(self, layer: int, seq_len: int) -> Tensor:
        if not self.per_position:
            return self.overall[layer]
        table = self.means[layer]
        if seq_len <= table.shape[0]:
            return table[:seq_len]
        extra = self.overall[layer].expand(seq_len - table.shape[0], *self.overall[layer].shape)
        return torch.cat([table, extra])


def compute_head_means(model: TransformerBridge, reference: Sequence[EncodedPrompt], layers: Sequence[int] | None = None,
                       per_position: bool = False, batch_size: int = 8, progress: bool = False) -> HeadMeans:
    """Mean of ``hook_z`` over the real tokens of ``reference`` prompts (prompt + answer).

    >>> from interp.measure.encoding import encode_for
    >>> from interp.measure.evaluate import task_prompts
    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")
    >>> means = compute_head_means(model, encode_for(model, task_prompts(model, "UF", 4, n_examples=4)), progress=False)
    >>> sorted(means.overall), means.overall[0].shape  # per layer: head, d_head
    ([0, 1], torch.Size([4, 16]))
    """
    if not reference:
        raise ValueError("reference prompts for mean ablation must not be empty")
    layers = list(range(model.cfg.n_layers)) if layers is None else sorted(set(layers))
    width = max(len(p.ids) for p in reference)
    sums = {l: torch.zeros(width, model.cfg.n_heads, model.cfg.d_head) for l in layers}
    counts = torch.zeros(width)
    for batch in padded_batches(reference, batch_size, pad_token_id(model.tokenizer), sort_by_length=False,
                                progress=progress and "head means"):
        real: Float[Tensor, "batch pos"] = batch.real.float()

        def add(z: Float[Tensor, "batch pos head_index d_head"], hook, real=real) -> None:
            sums[hook.layer()][: z.shape[1]] += einops.einsum(z.float().cpu(), real, "batch pos head d_head, batch pos -> pos head d_head")

        run_until(model, batch.tokens, z_hook_name(layers[-1]), [(z_hook_name(l), add) for l in layers])
        counts[: batch.tokens.shape[1]] += real.sum(0)
    overall = {l: sums[l].sum(0) / counts.sum() for l in layers}
    per_pos = {l: sums[l] / counts.clamp(min=1)[:, None, None] for l in layers}
    return HeadMeans(per_pos, overall, per_position)


def _group_by_layer(heads: Sequence[Head]) -> dict[int, list[int]]:
    by_layer: dict[int, list[int]] = defaultdict(list)
    for layer, head in heads:
        by_layer[layer].append(head)
    return dict(by_layer)


def check_ablation_kind(kind: str, means: HeadMeans | None) -> None:
    """One clear error when ``kind`` is no ablation, or is ``"mean"`` without ``means``.

    >>> check_ablation_kind("mean", None)
    Traceback (most recent call last):
    ValueError: mean ablation needs means=compute_head_means(model, reference_prompts)
    """
    if kind not in ABLATION_KINDS:
        raise ValueError(f"kind={kind!r} is not an ablation; expected one of {ABLATION_KINDS}")
    if kind == "mean" and means is None:
        raise ValueError("mean ablation needs means=compute_head_means(model, reference_prompts)")


def ablation_hooks(model: HookedModel, heads: HeadsLike, kind: str = "zero", means: HeadMeans | None = None,
                   counter: HookCounter | None = None) -> list[Hook]:
    """Hooks that replace the ``hook_z`` slice of each head in ``heads`` by zero or its mean.

    >>> from interp.models import load_model
    >>> hooks = ablation_hooks(load_model("tiny-llama", device="cpu"), [(1, 2), (0, 3)])
    >>> sorted(name for name, _ in hooks)
    ['blocks.0.attn.hook_z', 'blocks.1.attn.hook_z']
    """
    check_ablation_kind(kind, means)
    heads = validate_heads(heads, model.cfg.n_layers, model.cfg.n_heads)
    if kind == "mean":
        missing = sorted({h.layer for h in heads} - set(means.overall))
        if missing:
            raise ValueError(f"means were computed without layers {missing}")
    hooks = []
    for layer, layer_heads in _group_by_layer(heads).items():
        index = torch.tensor(layer_heads)

        def hook(z: Float[Tensor, "batch pos head d_head"], hook, layer=layer, index=index):
            if counter is not None:
                counter.calls[hook.name] += 1
            z = z.clone()
            if kind == "zero":
                z[:, :, index] = 0.0
            else:
                replacement = means.for_layer(layer, z.shape[1]).to(z.device, z.dtype)  # [pos?, head, d_head]
                z[:, :, index] = replacement[..., index, :].expand_as(z[:, :, index])
            return z

        hooks.append((z_hook_name(layer), hook))
    return hooks


@contextmanager
def ablated(model: HookedModel, heads: HeadsLike, kind: str = "zero", means: HeadMeans | None = None,
            counter: HookCounter | None = None) -> Iterator[list[Hook]]:
    """``with ablated(model, heads, "zero"): ...`` runs everything inside with those heads ablated.

    ``kind="mean"`` replaces each head's output by its mean over reference prompts
    (``means=compute_head_means(model, reference)``). The hooks are removed on leaving the block.

    Examples:
        >>> from interp.models import load_model
        >>> model = load_model("tiny-llama", device="cpu")
        >>> tokens = model.to_tokens("a b c a b c")
        >>> clean = model(tokens)
        >>> with ablated(model, [(0, 1), (1, 2)], "zero"):   # heads as (layer, head)
        ...     without_heads = model(tokens)
        >>> bool((without_heads - clean).abs().max() > 0), bool(model(tokens).equal(clean))
        (True, True)
    """
    hooks = ablation_hooks(model, heads, kind, means, counter)
    with model.hooks(fwd_hooks=hooks):
        yield hooks


def random_heads(n_layers: int, n_heads: int, k: int, seed: int, exclude: Sequence[HeadLike] = ()) -> list[Head]:
    """``k`` distinct heads drawn uniformly (seeded), avoiding ``exclude``: the control condition.

    >>> random_heads(n_layers=2, n_heads=4, k=3, seed=0)
    [Head(0, 3), Head(1, 2), Head(1, 3)]
    """
    excluded = set(validate_heads(exclude))
    candidates = [Head(l, h) for l in range(n_layers) for h in range(n_heads) if (l, h) not in excluded]
    if k > len(candidates):
        raise ValueError(f"k={k} random heads requested but only {len(candidates)} heads are available")
    return sorted(random.Random(seed).sample(candidates, k))
