"""Shared machinery of the realistic tasks: free-text prompts as ``EncodedPrompt``s, one
teacher-forced pass that yields both exact match and every next-token prediction, and (slow,
optional) greedy generation for checking the teacher-forced numbers.

The synthetic tasks encode answers item by item; here answers are ordinary text, encoded on their
own and appended to the separately encoded prompt. That token split is what the model must
reproduce; :func:`split_is_natural` says whether it is also how the tokenizer splits the whole
text (it is for the prompts of this package with byte-level BPE tokenizers, whose pre-tokenizer
never merges across the prompt/answer boundaries used here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import torch
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from ..evaluate import Hook, answer_slice, batched, forward_logits, greedy_continuation, pad_batch, score_answer
from ..prompts import EncodedPrompt


@dataclass(frozen=True)
class TextPrompt:
    """A prompt that ends where the answer starts, the answer, and the text that should follow it."""

    text: str
    answer_text: str
    end_text: str


@dataclass(frozen=True)
class TeacherForced:
    """Teacher-forced results for one prompt: exact match and the argmax at every answer position.

    ``predictions`` has one entry per answer token plus one for the position after the answer,
    where an end token is expected."""

    correct: bool
    token_accuracy: float
    mean_logprob: float
    predictions: tuple[int, ...]


def first_token_ids(tokenizer, texts: Iterable[str]) -> frozenset[int]:
    """The first token of each text: the tokens a generation must emit to start that text."""
    ids = set()
    for text in texts:
        encoded = tokenizer.encode(text, add_special_tokens=False)
        if not encoded:
            raise ValueError(f"texts contains {text!r}, which encodes to no token at all")
        ids.add(encoded[0])
    return frozenset(ids)


def encode_text_prompt(tokenizer, prompt: TextPrompt, end_ids: frozenset[int], prepend_bos: bool) -> EncodedPrompt:
    """Prompt and answer encoded separately and concatenated (BOS first when asked)."""
    bos = [tokenizer.bos_token_id] if prepend_bos and tokenizer.bos_token_id is not None else []
    prompt_ids = bos + tokenizer.encode(prompt.text, add_special_tokens=False)
    answer_ids = tokenizer.encode(prompt.answer_text, add_special_tokens=False)
    if not answer_ids:
        raise ValueError(f"prompt.answer_text={prompt.answer_text!r} encodes to no token")
    return EncodedPrompt(tuple(prompt_ids), tuple(answer_ids), end_ids)


def split_is_natural(tokenizer, prompt: TextPrompt) -> bool:
    """Whether encoding prompt, answer and end marker apart gives the tokens of the whole text."""
    parts = [tokenizer.encode(t, add_special_tokens=False) for t in (prompt.text, prompt.answer_text, prompt.end_text)]
    whole = tokenizer.encode(prompt.text + prompt.answer_text + prompt.end_text, add_special_tokens=False)
    return sum(parts, []) == whole


def check_context(model, encoded: Sequence[EncodedPrompt]) -> None:
    """Fail early, with the sizes, when a prompt does not fit the model's context window."""
    n_ctx = getattr(model.cfg, "n_ctx", None)
    longest = max((len(p.ids) for p in encoded), default=0)
    if n_ctx is not None and longest > n_ctx:
        raise ValueError(f"the longest prompt + answer has {longest} tokens but the model's context (cfg.n_ctx) "
                         f"is {n_ctx}; lower the token budget, the number of shots or the history length")


def teacher_forced_row(logits: Float[Tensor, "pos vocab"], p: EncodedPrompt) -> TeacherForced:
    """Scores of one prompt from its row of logits, with the argmax at each answer position."""
    predicting: Float[Tensor, "n_plus_1 vocab"] = logits[answer_slice(p)]
    correct, token_accuracy, mean_logprob = score_answer(predicting, p.answer_ids, p.end_ids)
    predicted: Int[Tensor, "n_plus_1"] = predicting.argmax(-1)
    return TeacherForced(correct, token_accuracy, mean_logprob, tuple(predicted.tolist()))


def teacher_forced(model, encoded: Sequence[EncodedPrompt], batch_size: int = 4, fwd_hooks: Sequence[Hook] = (),
                   progress: bool | str = True) -> list[TeacherForced]:
    """One forward pass per batch over prompt + answer; results in the order of ``encoded``."""
    check_context(model, encoded)
    pad_id = model.tokenizer.pad_token_id or 0
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i].ids))  # similar lengths pad less
    results: list[TeacherForced | None] = [None] * len(encoded)
    desc = progress if isinstance(progress, str) else "teacher forcing"
    for chunk in tqdm(list(batched(order, batch_size)), desc=desc, disable=not progress, leave=False):
        batch = [encoded[i] for i in chunk]
        tokens, _, _ = pad_batch(batch, pad_id)
        logits = forward_logits(model, tokens, fwd_hooks)
        for row, i in enumerate(chunk):
            results[i] = teacher_forced_row(logits[row], encoded[i])
    return results  # type: ignore[return-value]


def greedy_answers(model, encoded: Sequence[EncodedPrompt], slack: int = 1, fwd_hooks: Sequence[Hook] = (),
                   progress: bool | str = True) -> list[tuple[int, ...]]:
    """Free greedy generation after each prompt, stopped at an end token or after
    ``len(answer) + slack`` tokens (one extra token already decides whether a copy stops).

    One full forward pass per generated token (see ``greedy_continuation``): slow, for checks."""
    if slack < 1:
        raise ValueError(f"slack={slack} must be >= 1 so that a copy that fails to stop is seen")
    check_context(model, [EncodedPrompt(p.prompt_ids, p.answer_ids + (0,) * slack, p.end_ids) for p in encoded])
    desc = progress if isinstance(progress, str) else "generating"
    return [tuple(greedy_continuation(model, p.prompt_ids, len(p.answer_ids) + slack, p.end_ids, fwd_hooks))
            for p in tqdm(encoded, desc=desc, disable=not progress, leave=False)]


def binomial_stderr(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n) if n else float("nan")
