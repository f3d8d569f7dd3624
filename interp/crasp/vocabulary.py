"""Symbols and their ids, and the one place a task instance becomes a tensor of ids.

Sequences are ``<bos> context <sep> query`` for retrieval and ``<bos> string <sep> output...``
for copying, as in the paper's proofs. The tensor types every program works on are defined here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Bool, Int
from torch import Tensor

from interp.data.tasks import TaskExample, get_task

BoolVec = Bool[Tensor, "batch pos"]
CountVec = Int[Tensor, "batch pos"]
BoolFamily = Bool[Tensor, "batch pos member"]
CountFamily = Int[Tensor, "batch pos member"]
Tokens = Int[Tensor, "batch pos"]

NONE = -1  # Symbols: no member of the family holds here
STOP = -1  # decoded NEXT: no symbol holds, so generation stops
AMBIGUOUS = -2  # decoded NEXT: several symbols hold, which a correct program never allows


# --------------------------------------------------------------------------- vocabulary, encoding

BOS, SEP = "<bos>", "<sep>"


@dataclass(frozen=True)
class Vocabulary:
    """Symbol ids: ``<bos>`` is 0, ``<sep>`` is 1, then the task's items in the given order."""

    items: tuple[str, ...]

    def __post_init__(self):
        if len(set(self.items)) != len(self.items):
            raise ValueError("vocabulary items must be distinct")
        clash = {BOS, SEP} & set(self.items)
        if clash:
            raise ValueError(f"vocabulary items {sorted(clash)} collide with the special symbols {BOS}, {SEP}")
        object.__setattr__(self, "_index", {s: k for k, s in enumerate(self.symbols)})

    @classmethod
    def covering(cls, examples: Iterable[TaskExample]) -> "Vocabulary":
        """The items the examples use, in order of first appearance (deterministic for a list)."""
        seen: dict[str, None] = {}
        for ex in examples:
            seen.update(dict.fromkeys(ex.context))
            if ex.query is not None:
                seen[ex.query] = None
            seen.update(dict.fromkeys(ex.target))
        return cls(tuple(seen))

    @property
    def symbols(self) -> tuple[str, ...]:
        return (BOS, SEP) + self.items

    @property
    def size(self) -> int:
        return len(self.items) + 2

    @property
    def bos(self) -> int:
        return 0

    @property
    def sep(self) -> int:
        return 1

    def id(self, symbol: str) -> int:
        try:
            return self._index[symbol]
        except KeyError:
            raise ValueError(f"{symbol!r} is not in the vocabulary of {len(self.items)} items") from None

    def symbol(self, symbol_id: int) -> str:
        if symbol_id == STOP:
            return "<stop>"
        if symbol_id == AMBIGUOUS:
            return "<ambiguous>"
        return self.symbols[symbol_id]


def encode(example: TaskExample, vocab: Vocabulary, with_target: bool = False) -> list[int]:
    """The one place a task instance becomes symbol ids.

    Retrieval: ``<bos> x1 .. x(n-1) <sep> q``; the answer is NEXT at the last position.
    Copying: ``<bos> x1 .. xN <sep>``; with ``with_target`` the target and the closing ``<sep>``
    follow, for teacher-forced evaluation of every output step at once.

    >>> from interp.data.tasks import TaskExample
    >>> vocab = Vocabulary(("a", "b", "c"))
    >>> encode(TaskExample("UF", ("b", "a"), ("b", "a")), vocab, with_target=True)  # <bos> b a <sep> b a <sep>
    [0, 3, 2, 1, 3, 2, 1]
    """
    ids = [vocab.bos] + [vocab.id(s) for s in example.context] + [vocab.sep]
    spec = get_task(example.task)
    if spec.family == "retrieval":
        if example.query is None:
            raise ValueError(f"retrieval example of {example.task} has no query")
        return ids + [vocab.id(example.query)]
    if with_target:
        ids += [vocab.id(s) for s in example.target] + [vocab.sep]
    return ids


def encode_batch(examples: Sequence[TaskExample], vocab: Vocabulary, with_target: bool = False) -> Tokens:
    """[`encode`][interp.crasp.vocabulary.encode] of each example, in one tensor (the examples must encode to the same length).

    >>> from interp.data.tasks import generate_examples
    >>> examples = generate_examples("UF", 4, n=2)
    >>> encode_batch(examples, Vocabulary.covering(examples)).shape
    torch.Size([2, 6])
    """
    rows = [encode(ex, vocab, with_target) for ex in examples]
    if not rows:
        raise ValueError("no examples to encode")
    if len({len(r) for r in rows}) != 1:
        raise ValueError("examples in one batch must have the same length (group them by length first)")
    return torch.tensor(rows, dtype=torch.long)
