"""Greedy generation by repeated full forward passes: the slow reference that teacher forcing is
checked against, and the paper's string-level scoring.

No KV cache on purpose: the bridge's cached generation path returned wrong continuations for
Llama-family models here (" Paris-------"), while full passes match Hugging Face exactly.
String-level scoring reads each generation with its prompt's [`AnswerRule`][interp.prompts.answer_rule.AnswerRule]
(the same rule teacher forcing reads at the token level), and a row stops generating as soon as
its outcome is settled (a stop text, EOS, its budget, or a prefix no continuation can repair).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from interp.core.lm import LanguageModel
from interp.prompts.tokens import text_ids
from interp.measure.batching import Hook, batched, forward_logits, pad_token_id, right_pad
from interp.measure.encoding import encode_for
from interp.prompts import EncodedPrompt, Prompt, PromptConfig, prompt_rule
from interp.measure.teacher_forcing import check_context, logits_at


def greedy_continuation(model: LanguageModel, prompt_ids: Sequence[int], max_new_tokens: int, stop_ids: frozenset[int],
                        fwd_hooks: Sequence[Hook] = ()) -> list[int]:
    """Greedy tokens after ``prompt_ids`` until a stop token (not included) or the budget.

    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")
    >>> len(greedy_continuation(model, [1, 2, 3], max_new_tokens=2, stop_ids=frozenset()))
    2
    """
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


def greedy_answers(model: LanguageModel, encoded: Sequence[EncodedPrompt], slack: int = 1, fwd_hooks: Sequence[Hook] = (),
                   progress: bool | str = False) -> list[tuple[int, ...]]:
    """Free greedy generation after each prompt, stopped at one of its end tokens or after
    ``len(answer) + slack`` tokens (one extra token already decides whether a copy stops).

    >>> from interp.measure.evaluate import task_prompts
    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")
    >>> answers = greedy_answers(model, encode_for(model, task_prompts(model, "UF", 4, n_examples=3)), progress=False)
    >>> len(answers), type(answers[0]).__name__
    (3, 'tuple')
    """
    if slack < 1:
        raise ValueError(f"slack={slack} must be >= 1 so that a copy that fails to stop is seen")
    check_context(model, [EncodedPrompt(p.prompt_ids, p.answer_ids + (0,) * slack, p.end) for p in encoded])
    desc = progress if isinstance(progress, str) else "generating"
    return [tuple(greedy_continuation(model, p.prompt_ids, len(p.answer_ids) + slack, p.end.tokens, fwd_hooks))
            for p in tqdm(encoded, desc=desc, disable=not progress, leave=False)]


@dataclass
class _Row:
    """One prompt being generated: its ids so far, what it has generated, when it is done."""

    index: int
    ids: list[int]
    target: str
    end_text: str
    budget: int
    new: list[int]
    text: str = ""
    done: bool = False


def _generation_rows(tokenizer, prompts: Sequence[Prompt], encoded: Sequence[EncodedPrompt]) -> list[_Row]:
    rows = []
    for i, (prompt, e) in enumerate(zip(prompts, encoded)):
        rule = prompt_rule(prompt)
        end_tokens = max((len(text_ids(tokenizer, t)) for t in rule.end_texts(prompt.end_text)),
                         default=0)
        rows.append(_Row(i, list(e.prompt_ids), prompt.answer_string, prompt.end_text,
                         rule.max_new_tokens(len(e.answer_ids), end_tokens), []))
    return rows


def _advance(model: LanguageModel, rows: Sequence[_Row], prompts: Sequence[Prompt], fwd_hooks: Sequence[Hook]) -> None:
    """One greedy token for every row of ``rows`` (one batched pass, logits at each row's end)."""
    tokenizer = model.tokenizer
    tokens, _ = right_pad([r.ids for r in rows], pad_token_id(tokenizer))
    last = torch.tensor([[len(r.ids) - 1] for r in rows])
    next_ids = logits_at(model, tokens, last, fwd_hooks)[:, 0].argmax(-1).tolist()
    for row, next_id in zip(rows, next_ids):
        if next_id == tokenizer.eos_token_id:
            row.done = True
            continue
        row.ids.append(next_id)
        row.new.append(next_id)
        row.text = tokenizer.decode(row.new)
        rule = prompt_rule(prompts[row.index])
        row.done = (len(row.new) >= row.budget or any(s in row.text for s in rule.stop_texts(row.end_text))
                    or rule.settled(row.text, row.target, row.end_text))


def generate_answers(model: LanguageModel, prompts: Sequence[Prompt], prompt_config: PromptConfig = PromptConfig(),
                     batch_size: int = 8, fwd_hooks: Sequence[Hook] = (), progress: bool = False) -> list[str]:
    """Greedy continuation text of each prompt, batched: each row until its answer rule's stop
    text, EOS, its budget, or a prefix that settles its score (then the text is that prefix).

    >>> texts = generate_answers(model, task_prompts(model, "UR", 10, 4))  # doctest: +SKIP
    """
    encoded = encode_for(model, prompts, prompt_config)
    rows = _generation_rows(model.tokenizer, prompts, encoded)
    check_context(model, [EncodedPrompt(e.prompt_ids, (0,) * r.budget, e.end) for e, r in zip(encoded, rows)])
    order = sorted(rows, key=lambda r: len(r.ids))
    for chunk in tqdm(list(batched(order, batch_size)), desc="generate", disable=not progress, leave=False):
        while active := [r for r in chunk if not r.done]:
            _advance(model, active, prompts, fwd_hooks)
    return [r.text for r in rows]


def generate_accuracy(model: LanguageModel, prompts: Sequence[Prompt], prompt_config: PromptConfig = PromptConfig(),
                      batch_size: int = 8, progress: bool = False) -> tuple[float, list[bool]]:
    """String-level exact match of greedy generations, each read by its prompt's answer rule
    (the paper's way for ``--protocol paper``; slow).

    >>> accuracy, hits = generate_accuracy(model, task_prompts(model, "UF", 10, 8))  # doctest: +SKIP
    """
    texts = generate_answers(model, prompts, prompt_config, batch_size, progress=progress)
    hits = [prompt_rule(p).read(t, p.end_text) == p.answer_string for t, p in zip(texts, prompts)]
    return (sum(hits) / len(hits) if hits else float("nan")), hits
