"""Exact-match accuracy by teacher forcing: one forward pass per batch.

Greedy generation reproduces the answer exactly iff, with the correct answer fed in, the argmax
at every answer position is the next answer token and the argmax after the last one ends the
answer. So one forward pass over prompt + answer decides exact match for a whole batch, where
``generate`` would need one pass per answer token. ``generate_accuracy`` does it the slow way
(string-level, as the paper scores) to check the equivalence.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable, Iterable, Sequence

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from .prompts import EncodedPrompt, Prompt, PromptConfig, build_prompts, encode_prompts
from .tasks import ALNUM, TaskSpec, generate_examples, get_task

Hook = tuple[str | Callable[[str], bool], Callable]


@dataclass(frozen=True)
class AnswerScores:
    """Per-example results of teacher-forced scoring."""

    correct: Bool[Tensor, "batch"]
    token_accuracy: Float[Tensor, "batch"]
    mean_logprob: Float[Tensor, "batch"]  # mean log-probability of the answer tokens

    @staticmethod
    def concat(parts: Sequence["AnswerScores"]) -> "AnswerScores":
        return AnswerScores(*(torch.cat([getattr(p, f) for p in parts]) for f in ("correct", "token_accuracy", "mean_logprob")))

    @property
    def accuracy(self) -> float:
        return self.correct.float().mean().item() if len(self.correct) else float("nan")


@dataclass(frozen=True)
class TaskAccuracy:
    """Accuracy of a model on one task at one length (a row of the results tables)."""

    task: str
    length: int
    n_examples: int
    accuracy: float
    stderr: float
    mean_logprob: float
    token_accuracy: float
    n_shots: int
    template: str
    seed: int

    def as_row(self) -> dict:
        return asdict(self)


def pad_batch(batch: Sequence[EncodedPrompt], pad_id: int) -> tuple[Int[Tensor, "batch pos"], Int[Tensor, "batch"], Int[Tensor, "batch"]]:
    """Right-padded ids (harmless for causal models: real positions never see the padding),
    with each row's answer start and answer length."""
    width = max(len(p.ids) for p in batch)
    tokens = torch.full((len(batch), width), pad_id, dtype=torch.long)
    for row, p in enumerate(batch):
        tokens[row, : len(p.ids)] = torch.tensor(p.ids)
    starts = torch.tensor([p.answer_start for p in batch])
    lengths = torch.tensor([len(p.answer_ids) for p in batch])
    return tokens, starts, lengths


def score_answer(predicting: Float[Tensor, "n_plus_1 vocab"], answer_ids: Sequence[int], end_ids: frozenset[int]) -> tuple[bool, float, float]:
    """(exact match, token accuracy, mean answer log-prob) from the logits at the positions that
    predict each answer token plus the one after (which must predict an end token)."""
    predicting = predicting.float()
    n = len(answer_ids)
    answer = torch.tensor(answer_ids, device=predicting.device)
    predicted = predicting.argmax(-1)
    hits = predicted[:n] == answer
    log_probs = predicting[:n].log_softmax(-1).gather(-1, answer[:, None]).squeeze(-1)
    exact = bool(hits.all()) and predicted[n].item() in end_ids
    return exact, hits.float().mean().item(), log_probs.mean().item()


def answer_slice(p: EncodedPrompt) -> slice:
    """Positions whose logits predict the answer tokens and the end marker after them."""
    return slice(p.answer_start - 1, p.answer_start + len(p.answer_ids))


def score_logits(logits: Float[Tensor, "batch pos vocab"], batch: Sequence[EncodedPrompt]) -> AnswerScores:
    """Exact match, per-token accuracy and mean answer log-prob from the logits of prompt + answer."""
    results = [score_answer(logits[row, answer_slice(p)], p.answer_ids, p.end_ids) for row, p in enumerate(batch)]
    correct, token_acc, logprob = zip(*results) if results else ((), (), ())
    return AnswerScores(torch.tensor(correct, dtype=torch.bool), torch.tensor(token_acc), torch.tensor(logprob))


def forward_logits(model, tokens: Int[Tensor, "batch pos"], fwd_hooks: Sequence[Hook] = ()) -> Float[Tensor, "batch pos vocab"]:
    tokens = tokens.to(model.cfg.device)
    with torch.no_grad():
        if fwd_hooks:
            return model.run_with_hooks(tokens, fwd_hooks=list(fwd_hooks))
        return model(tokens)


def batched(items: Sequence, size: int) -> Iterable[Sequence]:
    if size < 1:
        raise ValueError(f"batch_size={size} must be >= 1")
    for i in range(0, len(items), size):
        yield items[i : i + size]


def score_encoded(model, encoded: Sequence[EncodedPrompt], batch_size: int = 8, fwd_hooks: Sequence[Hook] = (),
                  progress: bool | str = True) -> AnswerScores:
    """Teacher-forced scores for encoded prompts, batched; ``fwd_hooks`` apply to every batch."""
    pad_id = model.tokenizer.pad_token_id or 0
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i].ids))  # similar lengths pad less
    parts = []
    chunks = list(batched(order, batch_size))
    desc = progress if isinstance(progress, str) else "scoring"
    for chunk in tqdm(chunks, desc=desc, disable=not progress, leave=False):
        batch = [encoded[i] for i in chunk]
        tokens, _, _ = pad_batch(batch, pad_id)
        parts.append(score_logits(forward_logits(model, tokens, fwd_hooks), batch))
    if not parts:
        return AnswerScores(torch.zeros(0, dtype=torch.bool), torch.zeros(0), torch.zeros(0))
    merged = AnswerScores.concat(parts)
    inverse = torch.empty(len(order), dtype=torch.long)
    inverse[torch.tensor(order)] = torch.arange(len(order))
    return AnswerScores(merged.correct[inverse], merged.token_accuracy[inverse], merged.mean_logprob[inverse])


def task_prompts(model, task: str | TaskSpec, length: int, n_examples: int, seed: int = 0,
                 prompt_config: PromptConfig = PromptConfig(), vocabulary: Sequence[str] | None = None) -> list[Prompt]:
    """Seeded prompts of a task whose items are single tokens for ``model``'s tokenizer."""
    from .vocab import single_token_vocabulary

    spec = task if isinstance(task, TaskSpec) else get_task(task)
    vocabulary = vocabulary or single_token_vocabulary(model.tokenizer, ALNUM)
    examples = generate_examples(spec, length, n_examples, seed=seed, vocabulary=vocabulary)
    return build_prompts(examples, prompt_config, seed=seed, vocabulary=vocabulary)


def evaluate_prompts(model, prompts: Sequence[Prompt], prompt_config: PromptConfig = PromptConfig(),
                     batch_size: int = 8, fwd_hooks: Sequence[Hook] = (), progress: bool | str = True) -> AnswerScores:
    encoded = encode_prompts(model.tokenizer, prompts, prepend_bos=resolve_prepend_bos(model, prompt_config))
    return score_encoded(model, encoded, batch_size, fwd_hooks, progress)


def resolve_prepend_bos(model, prompt_config: PromptConfig) -> bool:
    """``prompt_config.prepend_bos`` if set, else the model's default (``cfg.default_prepend_bos``,
    which ``load_model`` sets to whether the model's own tokenizer adds a BOS)."""
    if prompt_config.prepend_bos is not None:
        return prompt_config.prepend_bos
    return bool(getattr(model.cfg, "default_prepend_bos", True))


def summarize(scores: AnswerScores, task: str, length: int, prompt_config: PromptConfig, seed: int) -> TaskAccuracy:
    n = len(scores.correct)
    acc = scores.accuracy
    stderr = math.sqrt(acc * (1 - acc) / n) if n else float("nan")
    return TaskAccuracy(task, length, n, acc, stderr, scores.mean_logprob.mean().item(),
                        scores.token_accuracy.mean().item(), prompt_config.n_shots, prompt_config.template, seed)


def evaluate_task(model, task: str | TaskSpec, length: int, n_examples: int = 100, *, seed: int = 0,
                  prompt_config: PromptConfig = PromptConfig(), vocabulary: Sequence[str] | None = None,
                  batch_size: int = 8, fwd_hooks: Sequence[Hook] = (), progress: bool | str = True) -> TaskAccuracy:
    """Exact-match accuracy of ``model`` on ``n_examples`` seeded examples of ``task`` at ``length``.

    ``fwd_hooks`` (TransformerLens ``(name, fn)`` pairs, e.g. from ``interp.ablation``) are
    active during every forward pass, so the same call measures ablated models."""
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    prompts = task_prompts(model, spec, length, n_examples, seed, prompt_config, vocabulary)
    label = progress if isinstance(progress, str) else f"{spec.name} n={length}"
    scores = evaluate_prompts(model, prompts, prompt_config, batch_size, fwd_hooks, progress and label)
    return summarize(scores, spec.name, length, prompt_config, seed)


# --------------------------------------------------------------------------- generation (reference)


def normalize_answer(text: str) -> str:
    """The paper's scoring: cut at the first newline, drop ``<eos>`` and all spaces."""
    return text.split("\n", 1)[0].replace("<eos>", "").replace(" ", "")


def greedy_continuation(model, prompt_ids: Sequence[int], max_new_tokens: int, stop_ids: frozenset[int],
                        fwd_hooks: Sequence[Hook] = ()) -> list[int]:
    """Greedy decoding by repeated full forward passes.

    No KV cache on purpose: the bridge's cached generation path returned wrong continuations for
    Llama-family models here (" Paris-------"), while full passes match Hugging Face exactly."""
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


def generate_answers(model, prompts: Sequence[Prompt], prompt_config: PromptConfig = PromptConfig(),
                     max_new_tokens: int | None = None, progress: bool = True) -> list[str]:
    """Greedy continuation of each prompt, one at a time, up to the first newline or EOS."""
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
