"""The one batching path: sort by length, batch, right-pad, run, and put results back in order.

Right padding is harmless for causal models: a real position never attends to the padding
after it, so the logits and activations of real positions equal those of the unpadded sequence.
Sorting by length first keeps the padding small.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from interp.core.lm import LanguageModel
from interp.models.bridge import Hook

T = TypeVar("T")

__all__ = ["Hook", "PaddedBatch", "Sequenced", "batched", "forward_logits", "in_input_order", "pad_token_id",
           "padded_batches", "right_pad"]


@runtime_checkable
class Sequenced(Protocol):
    """Anything with token ids: encoded prompts, training items."""

    @property
    def ids(self) -> Sequence[int]: ...


def pad_token_id(tokenizer) -> int:
    """The id right padding is filled with: the tokenizer's pad token, else EOS, else 0. Its value
    never matters to a causal model (real positions do not see it); only that it is a valid id.

    >>> from interp.models.tiny import tiny_tokenizer
    >>> pad_token_id(tiny_tokenizer())
    1
    """
    for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id):
        if candidate is not None:
            return int(candidate)
    return 0


def batched(items: Sequence[T] | Tensor, size: int) -> Iterator[Sequence[T] | Tensor]:
    """``items`` in consecutive chunks of ``size`` (the last one shorter).

    >>> [list(chunk) for chunk in batched(range(5), 2)]
    [[0, 1], [2, 3], [4]]
    """
    if size < 1:
        raise ValueError(f"batch_size={size} must be >= 1")
    for i in range(0, len(items), size):
        yield items[i : i + size]


def right_pad(sequences: Sequence[Sequence[int]], pad_id: int) -> tuple[Int[Tensor, "batch pos"], Bool[Tensor, "batch pos"]]:
    """Sequences of different lengths as one tensor, padded on the right, with the mask of real tokens.

    >>> tokens, real = right_pad([[5, 6, 7], [8]], pad_id=0)
    >>> tokens.tolist(), real.sum(1).tolist()
    ([[5, 6, 7], [8, 0, 0]], [3, 1])
    """
    if not sequences:
        raise ValueError("nothing to pad: the batch is empty")
    width = max(len(s) for s in sequences)
    tokens = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    real = torch.zeros((len(sequences), width), dtype=torch.bool)
    for row, ids in enumerate(sequences):
        tokens[row, : len(ids)] = torch.as_tensor(list(ids), dtype=torch.long)
        real[row, : len(ids)] = True
    return tokens, real


@dataclass(frozen=True)
class PaddedBatch:
    """Some of the caller's items, padded into one tensor; ``indices`` says which."""

    indices: tuple[int, ...]
    items: tuple
    tokens: Int[Tensor, "batch pos"]
    real: Bool[Tensor, "batch pos"]

    def __len__(self) -> int:
        return len(self.indices)


def padded_batches(items: Sequence[Sequenced], batch_size: int, pad_id: int, *, sort_by_length: bool = True,
                   progress: bool | str = False) -> Iterator[PaddedBatch]:
    """``items`` in padded batches, shortest first unless ``sort_by_length=False``.

    >>> from interp.measure.encoding import encode_for
    >>> from interp.measure.evaluate import task_prompts
    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")
    >>> encoded = encode_for(model, task_prompts(model, "UF", 4, n_examples=3))
    >>> [batch.indices for batch in padded_batches(encoded, 2, pad_token_id(model.tokenizer), sort_by_length=False)]
    [(0, 1), (2,)]
    """
    order = list(range(len(items)))
    if sort_by_length:
        order.sort(key=lambda i: len(items[i].ids))
    chunks = list(batched(order, batch_size))
    desc = progress if isinstance(progress, str) else None
    for chunk in tqdm(chunks, desc=desc, disable=not progress, leave=False):
        batch = tuple(items[i] for i in chunk)
        tokens, real = right_pad([item.ids for item in batch], pad_id)
        yield PaddedBatch(tuple(chunk), batch, tokens, real)


def in_input_order(n_items: int, parts: Iterable[tuple[Sequence[int], Sequence[T]]]) -> list[T]:
    """Per-item results gathered batch by batch (``(indices, results)`` pairs) in input order.

    >>> in_input_order(3, [((2, 0), ["c", "a"]), ((1,), ["b"])])
    ['a', 'b', 'c']
    """
    ordered: list = [None] * n_items
    for indices, results in parts:
        for i, result in zip(indices, results, strict=True):
            ordered[i] = result
    missing = [i for i, r in enumerate(ordered) if r is None]
    if missing:
        raise RuntimeError(f"no result for items {missing[:10]}")
    return ordered


def forward_logits(model: LanguageModel, tokens: Int[Tensor, "batch pos"], fwd_hooks: Sequence[Hook] = ()) -> Float[Tensor, "batch out_pos d_vocab"]:
    """Logits of one batch, with ``fwd_hooks`` active (when the model takes hooks); at every
    position unless a hook on ``unembed.hook_in`` keeps fewer (``select_positions_hook``).

    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")
    >>> forward_logits(model, torch.tensor([[1, 2, 3]])).shape  # batch, pos, d_vocab
    torch.Size([1, 3, 354])
    """
    tokens = tokens.to(model.cfg.device)
    with torch.no_grad():
        if fwd_hooks:
            return model.run_with_hooks(tokens, fwd_hooks=list(fwd_hooks))
        return model(tokens)
