"""Prompts as the model reads them: the one way the toolkit turns rendered prompts into token
ids for a given model ([`encode_for`][interp.measure.encoding.encode_for]), with the BOS rule of the protocol and the model."""

from __future__ import annotations

from collections.abc import Sequence

from interp.core.lm import LanguageModel
from interp.prompts import EncodedPrompt, Prompt, PromptConfig, encode_prompts


def resolve_prepend_bos(model: LanguageModel, prompt_config: PromptConfig) -> bool:
    """``prompt_config.prepend_bos`` if set, never under the paper's protocol, else the model's
    default (``cfg.default_prepend_bos``: whether the model's own tokenizer adds a BOS).

    >>> resolve_prepend_bos(model, PromptConfig.paper())  # doctest: +SKIP
    False
    """
    if prompt_config.protocol == "paper":
        return False
    if prompt_config.prepend_bos is not None:
        return prompt_config.prepend_bos
    return bool(getattr(model.cfg, "default_prepend_bos", True))


def encode_for(model: LanguageModel, prompts: Sequence[Prompt], prompt_config: PromptConfig = PromptConfig()) -> list[EncodedPrompt]:
    """``prompts`` as ``model``'s token ids, BOS as [`resolve_prepend_bos`][interp.measure.encoding.resolve_prepend_bos] decides.

    Examples:
        >>> from interp.measure.evaluate import task_prompts
        >>> from interp.models import load_model
        >>> model = load_model("tiny-llama", device="cpu")
        >>> encoded = encode_for(model, task_prompts(model, "UF", 5, n_examples=4))
        >>> len(encoded), len(encoded[0].answer_ids) >= 5          # every item of the copy is answered
        (4, True)
    """
    return encode_prompts(model.tokenizer, prompts, resolve_prepend_bos(model, prompt_config))
