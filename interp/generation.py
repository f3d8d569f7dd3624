"""Greedy generation by repeated full forward passes: the slow reference that teacher forcing is
checked against, and the paper's string-level scoring.

No KV cache on purpose: the bridge's cached generation path returned wrong continuations for
Llama-family models here (" Paris-------"), while full passes match Hugging Face exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tqdm.auto import tqdm

from .batching import Hook, forward_logits
from .prompts import EncodedPrompt, Prompt, PromptConfig, encode_prompts
from .teacher_forcing import check_context


def greedy_continuation(model, prompt_ids: Sequence[int], max_new_tokens: int, stop_ids: frozenset[int],
                        fwd_hooks: Sequence[Hook] = ()) -> list[int]:
    """Greedy tokens after ``prompt_ids`` until a stop token (not included) or the budget."""
    ids = list(prompt_ids)
    new: list[int] = []
    for _ in range(max_new_tokens):
        logits = forward_logits(model, torch.tensor([ids]), fwd_hooks)
        next_id = int(logits[0, -1].argmax())
        if next_id in stop_ids:
            break
        new.append(next_id)
        ids.append(next_id)
    return new


def greedy_answers(model, encoded: Sequence[EncodedPrompt], slack: int = 1, fwd_hooks: Sequence[Hook] = (),
                   progress: bool | str = True) -> list[tuple[int, ...]]:
    """Free greedy generation after each prompt, stopped at one of its end tokens or after
    ``len(answer) + slack`` tokens (one extra token already decides whether a copy stops)."""
    if slack < 1:
        raise ValueError(f"slack={slack} must be >= 1 so that a copy that fails to stop is seen")
    check_context(model, [EncodedPrompt(p.prompt_ids, p.answer_ids + (0,) * slack, p.end_ids) for p in encoded])
    desc = progress if isinstance(progress, str) else "generating"
    return [tuple(greedy_continuation(model, p.prompt_ids, len(p.answer_ids) + slack, p.end_ids, fwd_hooks))
            for p in tqdm(encoded, desc=desc, disable=not progress, leave=False)]


def normalize_answer(text: str) -> str:
    """The paper's scoring: cut at the first newline, drop ``<eos>`` and all spaces."""
    return text.split("\n", 1)[0].replace("<eos>", "").replace(" ", "")


def generate_answers(model, prompts: Sequence[Prompt], prompt_config: PromptConfig = PromptConfig(),
                     max_new_tokens: int | None = None, progress: bool = True) -> list[str]:
    """Greedy continuation of each prompt, one at a time, up to the first newline or EOS."""
    from .evaluate import resolve_prepend_bos

    tokenizer = model.tokenizer
    encoded = encode_prompts(tokenizer, prompts, prepend_bos=resolve_prepend_bos(model, prompt_config))
    stop = {i for i in range(len(tokenizer)) if tokenizer.decode([i]).startswith("\n")}
    stop |= {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    outputs = []
    for p in tqdm(encoded, desc="generate", disable=not progress, leave=False):
        budget = max_new_tokens or len(p.answer_ids) + 4
        outputs.append(tokenizer.decode(greedy_continuation(model, p.prompt_ids, budget, frozenset(stop))))
    return outputs


def generate_accuracy(model, prompts: Sequence[Prompt], prompt_config: PromptConfig = PromptConfig(),
                      progress: bool = True) -> tuple[float, list[bool]]:
    """String-level exact match of greedy generations (the paper's way; slow)."""
    texts = generate_answers(model, prompts, prompt_config, progress=progress)
    hits = [normalize_answer(t) == p.answer_string for t, p in zip(texts, prompts)]
    return (sum(hits) / len(hits) if hits else float("nan")), hits
