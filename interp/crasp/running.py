"""Running programs on task examples: decoded NEXT per position, teacher-forced and
autoregressive, and exact match against the task generator's targets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import torch
from jaxtyping import Int
from torch import Tensor

from interp.data.tasks import TaskExample, get_task
from interp.crasp.operations import decode_next
from interp.crasp.programs import ProgramFn
from interp.crasp.vocabulary import STOP, Tokens, Vocabulary, encode_batch

# --------------------------------------------------------------------------- running programs

_MASK_BUDGET = 1 << 23  # batch * pos^2 cells per lookup mask, so long copies run in chunks


Mode = Literal["teacher-forced", "autoregressive"]
MODES: tuple[str, ...] = get_args(Mode)


def run_program(program: ProgramFn, tokens: Tokens, vocab: Vocabulary) -> Int[Tensor, "batch pos"]:
    """Decoded NEXT at every position, evaluated in batch chunks that keep memory bounded."""
    rows = max(1, _MASK_BUDGET // max(1, tokens.shape[1]) ** 2)
    return torch.cat([decode_next(program(chunk, vocab)) for chunk in tokens.split(rows)])


def _target_ids(example: TaskExample, vocab: Vocabulary) -> list[int]:
    """What the program must emit: the answer (retrieval), or the copy, <sep> and a stop."""
    ids = [vocab.id(s) for s in example.target]
    return ids if get_task(example.task).family == "retrieval" else ids + [vocab.sep, STOP]


def teacher_forced(program: ProgramFn, examples: Sequence[TaskExample], vocab: Vocabulary) -> Int[Tensor, "batch out"]:
    """NEXT at each output position, the correct output so far given as input: one pass.

    Every operation reads only positions j <= i, so NEXT at i depends on the prefix alone; all
    teacher-forced outputs are correct exactly when autoregressive generation is (an induction
    over steps; the tests check both agree)."""
    tokens = encode_batch(examples, vocab, with_target=True)
    outputs = run_program(program, tokens, vocab)
    if get_task(examples[0].task).family == "retrieval":
        return outputs[:, -1:]
    start = len(examples[0].context) + 1  # the first <sep>
    return outputs[:, start:]


def generate(program: ProgramFn, examples: Sequence[TaskExample], vocab: Vocabulary,
             max_new_tokens: int | None = None) -> list[list[int]]:
    """Autoregressive generation: run the program, append the symbol NEXT names at the last
    position, repeat until no symbol holds (STOP, recorded) or several do (AMBIGUOUS, recorded)."""
    tokens = encode_batch(examples, vocab)
    if get_task(examples[0].task).family == "retrieval":
        return [[int(t)] for t in run_program(program, tokens, vocab)[:, -1]]
    if max_new_tokens is None:
        max_new_tokens = len(examples[0].context) + 2  # the copy, <sep>, and the stop
    emitted: list[list[int]] = [[] for _ in examples]
    open_ = torch.ones(len(examples), dtype=torch.bool)
    for _ in range(max_new_tokens):
        step = run_program(program, tokens, vocab)[:, -1]
        for row in torch.nonzero(open_).flatten().tolist():
            emitted[row].append(int(step[row]))
        open_ &= step >= 0
        if not open_.any():
            break
        # closed rows get a <sep> they will never read, so the batch stays rectangular
        tokens = torch.cat([tokens, torch.where(open_, step, vocab.sep)[:, None]], dim=1)
    return emitted


def exact_match(program: ProgramFn, examples: Sequence[TaskExample], vocab: Vocabulary | None = None,
                mode: str = "teacher-forced") -> list[bool]:
    """Per example: does the program produce exactly the generator's target (and then stop)?"""
    if not examples:
        return []
    if len({ex.task for ex in examples}) != 1:
        raise ValueError("examples must all belong to one task")
    vocab = vocab or Vocabulary.covering(examples)
    wanted = [_target_ids(ex, vocab) for ex in examples]
    if mode == "teacher-forced":
        got = teacher_forced(program, examples, vocab).tolist()
    elif mode == "autoregressive":
        got = generate(program, examples, vocab)
    else:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return [g == w for g, w in zip(got, wanted)]


def accuracy(program: ProgramFn, examples: Sequence[TaskExample], vocab: Vocabulary | None = None,
             mode: str = "teacher-forced") -> float:
    hits = exact_match(program, examples, vocab, mode)
    if not hits:
        raise ValueError("no examples to score")
    return sum(hits) / len(hits)
