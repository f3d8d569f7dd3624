"""Replaying a forward pass from a layer.

An intervention on heads of layer ``L`` and above cannot change the residual stream entering
``L``, so the clean run's ``blocks.{L}.hook_resid_pre`` is kept and only blocks ``L..`` are run
again, with the unembedding applied at the answer positions alone. Single-head sweeps and the
ablation study both run on this, batch by batch, with the batches of the clean run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import einops
import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.core.lm import HookedModel
from interp.measure.batching import Hook, PaddedBatch
from interp.models.bridge import TransformerBridge, act_name, run_from_layer, unembed_residual
from interp.measure.teacher_forcing import AnswerPositions, ScoreRow, answer_rows, gather_positions, select_positions_hook


@dataclass(frozen=True)
class CleanBatch:
    """One batch's clean run: its scores, the residual stream entering each kept layer, and the
    answer positions every replay of the batch unembeds."""

    batch: PaddedBatch
    residuals: dict[int, Float[Tensor, "batch pos d_model"]]
    rows: list[ScoreRow]
    positions: Int[Tensor, "batch slot"]


def run_clean(model: HookedModel, batch: PaddedBatch, layers: Iterable[int]) -> CleanBatch:
    """Score ``batch`` without intervention, keeping ``hook_resid_pre`` of ``layers``; logits are
    computed at the answer positions only.

    >>> batch = next(padded_batches(encoded, 8, pad_token_id(model.tokenizer)))  # doctest: +SKIP
    >>> clean = run_clean(model, batch, layers=[1])  # doctest: +SKIP
    >>> sorted(clean.residuals)  # doctest: +SKIP
    [1]
    """
    layers = sorted(set(layers))
    names = {act_name("resid_pre", layer) for layer in layers}
    positions = AnswerPositions.of(batch.items).positions
    select = select_positions_hook(positions)
    with torch.no_grad(), model.hooks(fwd_hooks=[select]):
        logits, cache = model.run_with_cache(batch.tokens.to(model.cfg.device), names_filter=lambda n: n in names)
    rows = answer_rows(logits, batch.items)
    return CleanBatch(batch, {layer: cache[act_name("resid_pre", layer)] for layer in layers}, rows, positions)


def replay(model: TransformerBridge, clean: CleanBatch, layer: int, fwd_hooks: Sequence[Hook] = (), copies: int = 1) -> list[list[ScoreRow]]:
    """Scores of the batch with blocks ``layer..`` run again under ``fwd_hooks``.

    ``copies`` stacks the batch that many times along the batch axis (hooks see rows
    ``[i * len(batch), (i + 1) * len(batch))`` as copy ``i``); returns one list of rows per copy.

    >>> clean = run_clean(model, batch, layers=[1])  # doctest: +SKIP
    >>> [rows] = replay(model, clean, 1, fwd_hooks=ablation_hooks(model, [(1, 2)]))  # doctest: +SKIP
    >>> len(rows) == len(batch)  # doctest: +SKIP
    True
    """
    if layer not in clean.residuals:
        raise ValueError(f"layer {layer}: the clean run kept only layers {sorted(clean.residuals)}")
    residual = einops.repeat(clean.residuals[layer], "batch pos d_model -> (copies batch) pos d_model", copies=copies)
    final = run_from_layer(model, residual, layer, fwd_hooks)
    out = []
    with torch.no_grad():
        for copy in einops.rearrange(final, "(copies batch) pos d_model -> copies batch pos d_model", copies=copies):
            out.append(answer_rows(unembed_residual(model, gather_positions(copy, clean.positions)), clean.batch.items))
    return out
