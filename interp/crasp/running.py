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
    """Decoded NEXT at every position, evaluated in batch chunks that keep memory bounded.

    >>> from interp.crasp.programs import program_uf
    >>> from interp.crasp.vocabulary import Vocabulary, encode_batch
    >>> from interp.data.tasks import generate_examples
    >>> examples = generate_examples("UF", 4, n=2)
    >>> vocab = Vocabulary.covering(examples)
    >>> run_program(program_uf, encode_batch(examples, vocab), vocab).shape  # batch, pos
    torch.Size([2, 6])
    """
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
    over steps; the tests check both agree).

    >>> from interp.crasp.programs import program_uf
    >>> from interp.crasp.vocabulary import Vocabulary
    >>> from interp.data.tasks import generate_examples
    >>> examples = generate_examples("UF", 4, n=2)
    >>> teacher_forced(program_uf, examples, Vocabulary.covering(examples)).shape  # batch, output steps
    torch.Size([2, 6])
    """
    tokens = encode_batch(examples, vocab, with_target=True)
    outputs = run_program(program, tokens, vocab)
    if get_task(examples[0].task).family == "retrieval":
        return outputs[:, -1:]
    start = len(examples[0].context) + 1  # the first <sep>
    return outputs[:, start:]


def generate(program: ProgramFn, examples: Sequence[TaskExample], vocab: Vocabulary,
             max_new_tokens: int | None = None) -> list[list[int]]:
    """Autoregressive generation: run the program, append the symbol NEXT names at the last
    position, repeat until no symbol holds (STOP, recorded) or several do (AMBIGUOUS, recorded).

    >>> from interp.crasp.programs import program_uf
    >>> from interp.crasp.vocabulary import Vocabulary, encode
    >>> from interp.data.tasks import generate_examples
    >>> examples = generate_examples("UF", 4, n=1)
    >>> vocab = Vocabulary.covering(examples)
    >>> [output] = generate(program_uf, examples, vocab)
    >>> output == encode(examples[0], vocab, with_target=True)[6:] + [STOP]  # the copy, <sep>, then STOP
    True
    """
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
    """Per example: does the program produce exactly the generator's target (and then stop)?

    >>> from interp.crasp.programs import program_for
    >>> from interp.data.tasks import generate_examples
    >>> exact_match(program_for("UB"), generate_examples("UB", 5, n=2))
    [True, True]
    """
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
    """The share of ``examples`` on which [`exact_match`][interp.crasp.running.exact_match] holds.

    >>> from interp.crasp.programs import program_for
    >>> from interp.data.tasks import generate_examples
    >>> accuracy(program_for("UR"), generate_examples("UR", 8, n=4))
    1.0
    """
    hits = exact_match(program, examples, vocab, mode)
    if not hits:
        raise ValueError("no examples to score")
    return sum(hits) / len(hits)
