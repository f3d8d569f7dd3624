"""Exact match by teacher forcing: one forward pass per batch decides it for every prompt.

Greedy generation reproduces an answer exactly iff, with the correct answer fed in, the argmax at
every answer position is the next answer token and the argmax after the last one ends the answer.
So one pass over prompt + answer scores a whole batch, where ``generate`` needs a pass per token.
[`AnswerScores`][interp.measure.teacher_forcing.AnswerScores] (one entry per prompt) is the result type of every teacher-forced
measurement in the toolkit: synthetic tasks, realistic tasks, sweeps, training evaluation and
the edge study; [`Accuracy`][interp.measure.teacher_forcing.Accuracy] is its summary, the numbers a results row reports (exact match
with its binomial standard error and 95% Wilson interval).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from interp.measure.batching import Hook, PaddedBatch, forward_logits, in_input_order, pad_token_id, padded_batches
from interp.core.lm import LanguageModel, context_length
from interp.core.results import Tabular
from interp.prompts import AnswerEnd, EncodedPrompt
from interp.core.stats import binomial_stderr, wilson_interval

ScoreRow = tuple[bool, float, float, tuple[int, ...]]  # exact match, token accuracy, mean log-prob, argmaxes


@dataclass(frozen=True, repr=False)
class AnswerScores(Tabular):
    """Per-prompt results. ``predictions[i]`` (kept on request) holds the argmax at each answer
    position of prompt ``i`` plus the position after the answer, where an end token is expected.

    >>> scores = AnswerScores.from_rows([(True, 1.0, -0.2, (5, 6)), (False, 0.5, -1.4, (5, 9))])
    >>> len(scores), scores.accuracy
    (2, 0.5)
    >>> scores
    AnswerScores(n=2, accuracy 0.500, mean log-prob -0.800)
    >>> scores.rows()[1]
    {'prompt': 1, 'correct': False, 'token_accuracy': 0.5, 'mean_logprob': -1.4}
    """

    correct: Bool[Tensor, " batch"]
    token_accuracy: Float[Tensor, " batch"]
    mean_logprob: Float[Tensor, " batch"]  # mean log-probability of the answer tokens
    predictions: tuple[tuple[int, ...], ...] | None = field(default=None, compare=False)

    def __len__(self) -> int:
        return len(self.correct)

    def __repr__(self) -> str:
        lp = self.mean_logprob.mean().item() if len(self) else float("nan")
        return f"AnswerScores(n={len(self)}, accuracy {self.accuracy:.3f}, mean log-prob {lp:.3f})"

    def rows(self) -> list[dict]:
        """One row a prompt, in input order."""
        return [{"prompt": i, "correct": bool(c), "token_accuracy": round(float(t), 6), "mean_logprob": round(float(m), 6)}
                for i, (c, t, m) in enumerate(zip(self.correct, self.token_accuracy, self.mean_logprob))]

    @property
    def accuracy(self) -> float:
        return self.correct.float().mean().item() if len(self) else float("nan")

    @classmethod
    def from_rows(cls, rows: Sequence[ScoreRow], keep_predictions: bool = False) -> "AnswerScores":
        """From ``(exact, token accuracy, mean log-prob, predictions)`` per prompt."""
        correct, token_accuracy, mean_logprob, predictions = zip(*rows) if rows else ((), (), (), ())
        return cls(torch.tensor(correct, dtype=torch.bool), torch.tensor(token_accuracy, dtype=torch.float),
                   torch.tensor(mean_logprob, dtype=torch.float), tuple(predictions) if keep_predictions else None)

    @classmethod
    def concat(cls, parts: Sequence["AnswerScores"]) -> "AnswerScores":
        """The prompts of ``parts`` one after another (predictions kept only if every part kept them).

        >>> one = AnswerScores.from_rows([(True, 1.0, -0.1, (5,))])
        >>> AnswerScores.concat([one, one]).accuracy
        1.0
        """
        if not parts:
            return cls.from_rows([])
        predictions = None
        if all(part.predictions is not None for part in parts):
            predictions = tuple(p for part in parts for p in part.predictions)
        return cls(torch.cat([part.correct for part in parts]), torch.cat([part.token_accuracy for part in parts]),
                   torch.cat([part.mean_logprob for part in parts]), predictions)


@dataclass(frozen=True, repr=False)
class Accuracy(Tabular):
    """The summary a results row reports: exact match with its binomial standard error and its
    95% Wilson interval (the one interval every accuracy in the toolkit's tables carries).

    >>> row = Accuracy.of_counts(3, 4).as_row()
    >>> row["accuracy"], round(row["stderr"], 3), round(row["ci_low"], 3), round(row["ci_high"], 3)
    (0.75, 0.217, 0.301, 0.954)
    >>> Accuracy.of_counts(3, 4)
    Accuracy(0.750 [0.301, 0.954], n=4)
    """

    n_examples: int
    accuracy: float
    stderr: float  # binomial standard error of the accuracy
    ci_low: float  # 95% Wilson interval of the accuracy
    ci_high: float
    mean_logprob: float
    token_accuracy: float

    @classmethod
    def of(cls, scores: AnswerScores) -> "Accuracy":
        n = len(scores)
        nan = float("nan")
        low, high = wilson_interval(int(scores.correct.sum()), n)
        return cls(n, scores.accuracy, binomial_stderr(scores.accuracy, n), low, high,
                   scores.mean_logprob.mean().item() if n else nan, scores.token_accuracy.mean().item() if n else nan)

    @classmethod
    def of_counts(cls, successes: int, n: int, mean_logprob: float = float("nan"),
                  token_accuracy: float = float("nan")) -> "Accuracy":
        """From ``successes`` exact matches out of ``n`` (e.g. pooled over the rows of a table)."""
        accuracy = successes / n if n else float("nan")
        low, high = wilson_interval(successes, n)
        return cls(n, accuracy, binomial_stderr(accuracy, n), low, high, mean_logprob, token_accuracy)

    def __repr__(self) -> str:
        return f"Accuracy({self.accuracy:.3f} [{self.ci_low:.3f}, {self.ci_high:.3f}], n={self.n_examples})"

    def as_row(self) -> dict:
        return asdict(self)

    def rows(self) -> list[dict]:
        """The one row this summary is (``as_row``)."""
        return [self.as_row()]


def answer_slice(p: EncodedPrompt) -> slice:
    """Positions whose logits predict the answer tokens and the end marker after them.

    >>> answer_slice(EncodedPrompt(prompt_ids=(1, 2, 3), answer_ids=(4, 5), end=AnswerEnd.not_required()))
    slice(2, 5, None)
    """
    return slice(p.answer_start - 1, p.answer_start + len(p.answer_ids))


def score_answer(predicting: Float[Tensor, "n_or_n_plus_1 d_vocab"], answer_ids: Sequence[int], end: AnswerEnd) -> ScoreRow:
    """(exact match, token accuracy, mean answer log-prob, argmaxes) from the logits at the
    positions that predict each answer token plus the one after (which must predict an end
    when ``end.required``; without ``end.required`` that last position may be left out).

    >>> logits = torch.eye(4)[[2, 3]] * 10  # predicts token 2, then token 3
    >>> exact, token_accuracy, _, argmaxes = score_answer(logits, [2, 3], AnswerEnd.not_required())
    >>> exact, token_accuracy, argmaxes
    (True, 1.0, (2, 3))
    """
    predicting = predicting.float()
    n = len(answer_ids)
    if len(predicting) <= n and end.required:
        raise ValueError(f"predicting: {len(predicting)} positions for {n} answer tokens; the end marker "
                         "is required, so the position after the answer is needed too")
    answer = torch.tensor(answer_ids, device=predicting.device)
    predicted = predicting.argmax(-1)
    hits = predicted[:n] == answer
    log_probs = predicting[:n].log_softmax(-1).gather(-1, answer[:, None]).squeeze(-1)
    ends = end.accepts(predicted[n].item()) if len(predicted) > n else True
    return bool(hits.all()) and ends, hits.float().mean().item(), log_probs.mean().item(), tuple(predicted.tolist())


@dataclass(frozen=True)
class AnswerPositions:
    """Per row, the positions whose logits predict each answer token and the end marker after
    it (``answer_slice``), padded to a common width by repeating the row's last position."""

    positions: Int[Tensor, "batch slot"]
    answer_ids: Int[Tensor, "batch slot"]  # the answer token predicted at each slot (0 where none)
    is_answer: Bool[Tensor, "batch slot"]  # slots that predict an answer token (not the end, not padding)

    @classmethod
    def of(cls, batch: Sequence[EncodedPrompt]) -> "AnswerPositions":
        width = max(len(p.answer_ids) + 1 for p in batch)
        positions = torch.zeros(len(batch), width, dtype=torch.long)
        answer_ids = torch.zeros(len(batch), width, dtype=torch.long)
        is_answer = torch.zeros(len(batch), width, dtype=torch.bool)
        for row, p in enumerate(batch):
            span = torch.arange(answer_slice(p).start, answer_slice(p).stop)
            positions[row] = torch.cat([span, span[-1:].expand(width - len(span))])
            answer_ids[row, : len(p.answer_ids)] = torch.tensor(p.answer_ids)
            is_answer[row, : len(p.answer_ids)] = True
        return cls(positions, answer_ids, is_answer)


def gather_positions(values: Float[Tensor, "batch pos d"], positions: Int[Tensor, "batch slot"]) -> Float[Tensor, "batch slot d"]:
    """``values[row, positions[row, slot]]`` for every row and slot.

    >>> gather_positions(torch.arange(6.0).view(1, 3, 2), torch.tensor([[2, 0]])).tolist()
    [[[4.0, 5.0], [0.0, 1.0]]]
    """
    index = positions.to(values.device)[..., None].expand(-1, -1, values.shape[-1])
    return values.gather(1, index)


SELECT_HOOK = "unembed.hook_in"


def select_positions_hook(positions: Int[Tensor, "batch slot"]) -> Hook:
    """A hook on the unembedding's input keeping only ``positions`` of each row, so logits (and
    their gradient) are computed only where they are read: the unembedding costs about a fifth
    of SmolLM2-135M's forward pass (49k-token vocabulary) and a sixth of Qwen2.5-1.5B's (152k).

    >>> name, select = select_positions_hook(torch.tensor([[2, 0]]))
    >>> name, select(torch.arange(6.0).view(1, 3, 2), hook=None).tolist()  # residual of 1 row, 3 positions
    ('unembed.hook_in', [[[4.0, 5.0], [0.0, 1.0]]])
    """

    def select(residual: Float[Tensor, "batch pos d_model"], hook) -> Float[Tensor, "batch slot d_model"]:
        return gather_positions(residual, positions)

    return SELECT_HOOK, select


def answer_rows(logits: Float[Tensor, "batch slot d_vocab"], batch: Sequence[EncodedPrompt]) -> list[ScoreRow]:
    """``score_answer`` rows from logits taken at ``AnswerPositions.of(batch)`` only.

    >>> prompt = EncodedPrompt(prompt_ids=(1, 2), answer_ids=(3,), end=AnswerEnd(frozenset({0})))
    >>> answer_rows(torch.eye(4)[None, [3, 0]] * 9, [prompt])[0][0]  # predicts 3, then the end token 0
    True
    """
    return [score_answer(logits[row, : len(p.answer_ids) + 1], p.answer_ids, p.end) for row, p in enumerate(batch)]


def logits_at(model: LanguageModel, tokens: Int[Tensor, "batch pos"], positions: Int[Tensor, "batch slot"],
              fwd_hooks: Sequence[Hook] = ()) -> Float[Tensor, "batch slot d_vocab"]:
    """Logits at ``positions`` of each row only, ``fwd_hooks`` active: the one way the toolkit
    reads logits where it needs them (answers, the next token of a generation).

    >>> logits_at(model, tokens, torch.tensor([[3, 4]]))  # doctest: +SKIP
    """
    if SELECT_HOOK in getattr(model, "hook_dict", {}):
        return forward_logits(model, tokens, [*fwd_hooks, select_positions_hook(positions)])
    # A model without hook points (a plain HF model during fine-tuning) unembeds every position.
    return gather_positions(forward_logits(model, tokens, fwd_hooks), positions)


def _answer_logits(model: LanguageModel, batch: PaddedBatch, fwd_hooks: Sequence[Hook] = ()) -> Float[Tensor, "batch slot d_vocab"]:
    """Logits of one batch at its answer positions only (``AnswerPositions``), ``fwd_hooks`` active."""
    return logits_at(model, batch.tokens, AnswerPositions.of(batch.items).positions, fwd_hooks)


def check_context(model: LanguageModel, encoded: Sequence[EncodedPrompt]) -> None:
    """Fail early, with the sizes, when a prompt + answer does not fit the model's context.

    >>> from interp.models import load_model
    >>> model = load_model("tiny-gpt2", device="cpu")  # a context of 512 tokens
    >>> check_context(model, [EncodedPrompt(prompt_ids=(1,) * 600, answer_ids=(2,), end=AnswerEnd.not_required())])
    Traceback (most recent call last):
    ValueError: the longest prompt + answer has 601 tokens but the model's context (cfg.n_ctx) is 512: ...
    """
    n_ctx = context_length(model)
    longest = max((len(p.ids) for p in encoded), default=0)
    if n_ctx is not None and longest > n_ctx:
        raise ValueError(f"the longest prompt + answer has {longest} tokens but the model's context (cfg.n_ctx) is "
                         f"{n_ctx}: use shorter lengths, fewer shots or a model with a longer context")


def teacher_forced_scores(model: LanguageModel, encoded: Sequence[EncodedPrompt], batch_size: int = 8,
                          fwd_hooks: Sequence[Hook] = (), progress: bool | str = False, keep_predictions: bool = False,
                          every_position: bool = False) -> AnswerScores:
    """Teacher-forced scores of ``encoded`` prompts in their order; ``fwd_hooks`` are active in
    every batch (ablations). Logits are computed at the answer positions only;
    ``every_position=True`` unembeds every position and then reads the same positions (the
    full-pass reference that the ablation study's and the naive sweep's checks run against).

    >>> scores = teacher_forced_scores(model, encoded, batch_size=8)  # doctest: +SKIP
    >>> Accuracy.of(scores).as_row()["accuracy"]  # doctest: +SKIP
    0.75
    """
    check_context(model, encoded)
    rows_by_batch = []
    batches = padded_batches(encoded, batch_size, pad_token_id(model.tokenizer),
                             progress=progress if isinstance(progress, str) else progress and "teacher forcing")
    for batch in batches:
        if every_position:
            positions = AnswerPositions.of(batch.items).positions
            logits = gather_positions(forward_logits(model, batch.tokens, fwd_hooks), positions)
        else:
            logits = _answer_logits(model, batch, fwd_hooks)
        rows_by_batch.append((batch.indices, answer_rows(logits, batch.items)))
    return AnswerScores.from_rows(in_input_order(len(encoded), rows_by_batch), keep_predictions)
