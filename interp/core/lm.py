"""What the library needs from a model, as ``Protocol`` s.

[`LanguageModel`][interp.core.lm.LanguageModel] is what the evaluators need (tokens in, logits out): a TransformerLens bridge
satisfies it, and so does [`interp.training.HFForward`][interp.training.evaluation.HFForward], a plain Hugging Face model seen the same
way. [`HookedModel`][interp.core.lm.HookedModel] adds TransformerLens' public hook API (hooks by name, caches), which the
interventions and the attention readers use. What needs more than that (the weights, running from a
layer) takes a ``TransformerBridge`` and goes through [`interp.models.bridge`][interp.models.bridge]."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

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
    """A concrete [`ForwardConfig`][interp.core.lm.ForwardConfig] for models that are not bridges."""

    device: torch.device
    default_prepend_bos: bool
    n_ctx: int | None = None


@runtime_checkable
class LanguageModel(Protocol):
    """Tokens in, logits out, with the tokenizer that made the tokens."""

    cfg: ForwardConfig
    tokenizer: object

    def __call__(self, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos d_vocab"]: ...


Hook = tuple[str | Callable[[str], bool], Callable]


@runtime_checkable
class HookedModel(LanguageModel, Protocol):
    """A [`LanguageModel`][interp.core.lm.LanguageModel] that also runs with hooks named as TransformerLens names them
    (``blocks.3.attn.hook_z``) and caches activations: a TransformerLens bridge.

    >>> from interp.models import load_model
    >>> isinstance(load_model("tiny-gpt2", device="cpu"), HookedModel)
    True
    """

    def run_with_hooks(self, tokens: Int[Tensor, "batch pos"], *, fwd_hooks: Sequence[Hook] = ...,
                       **kwargs: Any) -> Any: ...

    def run_with_cache(self, tokens: Int[Tensor, "batch pos"], *, names_filter: Any = ...,
                       **kwargs: Any) -> tuple[Any, Any]: ...

    def hooks(self, fwd_hooks: Sequence[Hook] = ..., **kwargs: Any) -> AbstractContextManager: ...


def context_length(model: LanguageModel) -> int | None:
    """The longest sequence ``model`` takes (``cfg.n_ctx``), or None when it does not say.

    >>> from interp.models import load_model
    >>> context_length(load_model("tiny-gpt2", device="cpu"))
    512
    """
    n_ctx = getattr(model.cfg, "n_ctx", None)
    return int(n_ctx) if n_ctx else None
