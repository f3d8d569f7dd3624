"""What the evaluators need from a model, as a ``Protocol``: a TransformerLens bridge satisfies it,
and so does :class:`interp.training.HFForward`, a plain Hugging Face model seen the same way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch
from jaxtyping import Float, Int
from torch import Tensor


class ForwardConfig(Protocol):
    """The part of a TransformerLens config the evaluators read."""

    device: torch.device | str
    default_prepend_bos: bool
    n_ctx: int | None


@dataclass(frozen=True)
class LMConfig:
    """A concrete :class:`ForwardConfig` for models that are not bridges."""

    device: torch.device
    default_prepend_bos: bool
    n_ctx: int | None = None


@runtime_checkable
class LanguageModel(Protocol):
    """Tokens in, logits out, with the tokenizer that made the tokens."""

    cfg: ForwardConfig
    tokenizer: object

    def __call__(self, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos d_vocab"]: ...


def context_length(model) -> int | None:
    """The longest sequence ``model`` takes (``cfg.n_ctx``), or None when it does not say."""
    n_ctx = getattr(model.cfg, "n_ctx", None)
    return int(n_ctx) if n_ctx else None
