"""The ten synthetic tasks of the paper: seeded generators, examples and the theory table.

Retrieval (input ``x1 .. x(n-1) | q``, ``n`` counts the query): the answer is the left or right
neighbour of the query's occurrence in the context. Unique tasks (UL, UR) have exactly one
occurrence; non-unique ones (NLFirst, NRFirst, NLLast, NRLast) have several and ask about the
first or the last. Copying (UF, UB, NF, NB): output the string forwards or backwards; unique
strings use each item once, non-unique ones draw from a small pool with every item repeated.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

LETTERS = tuple("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
ALNUM = LETTERS + tuple("0123456789")

Family = Literal["retrieval", "copying"]
# How non-unique copying strings repeat items. "pool": max(2, n // 3) items, each at least twice
# (the paper's generator, and its committed files at lengths 30 and 100); "sparse": n draws with
# replacement, at least one repeat forced (like the paper's committed files at lengths 10 and 20,
# where most strings have n - 1 distinct items).
Repeats = Literal["pool", "sparse"]
REPEATS: tuple[str, ...] = get_args(Repeats)


@dataclass(frozen=True)
class TaskSpec:
    """What a task asks for, and what C-RASP[pos] theory says about it."""

    name: str
    family: Family
    unique: bool
    direction: Literal["left", "right", "forward", "backward"]
    occurrence: Literal["only", "first", "last", "all"]
    expressible: bool  # a C-RASP[pos] program exists: predicted to length-generalize
    theory_reason: str
    description: str

    @property
    def length_generalizable(self) -> bool:
        return self.expressible

    @property
    def pair(self) -> str:
        """The task with the opposite direction (UR <-> UL, UF <-> UB, ...)."""
        return DIRECTIONAL_PAIRS_LOOKUP[self.name]


TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        TaskSpec("UL", "retrieval", True, "left", "only", True,
                 "the unique query is located by a count; its left neighbour is one position step away",
                 "token to the left of the unique occurrence of the query"),
        TaskSpec("UR", "retrieval", True, "right", "only", True,
                 "the unique query is located by a count; its right neighbour is one position step away",
                 "token to the right of the unique occurrence of the query"),
        TaskSpec("NLFirst", "retrieval", False, "left", "first", True,
                 "the first occurrence is the one with zero earlier occurrences, a prefix count",
                 "token to the left of the first occurrence of the query"),
        TaskSpec("NRFirst", "retrieval", False, "right", "first", True,
                 "the first occurrence is the one with zero earlier occurrences, a prefix count",
                 "token to the right of the first occurrence of the query"),
        TaskSpec("NLLast", "retrieval", False, "left", "last", False,
                 "the last occurrence needs 'no later occurrence', which a causal prefix count cannot say",
                 "token to the left of the last occurrence of the query"),
        TaskSpec("NRLast", "retrieval", False, "right", "last", False,
                 "the last occurrence needs 'no later occurrence', which a causal prefix count cannot say",
                 "token to the right of the last occurrence of the query"),
        TaskSpec("UF", "copying", True, "forward", "all", True,
                 "each output token has a unique earlier occurrence whose successor is found by counting",
                 "copy a string of distinct items"),
        TaskSpec("UB", "copying", True, "backward", "all", True,
                 "each output token has a unique occurrence whose predecessor is found by counting",
                 "reverse a string of distinct items"),
        TaskSpec("NF", "copying", False, "forward", "all", False,
                 "repeated items make the successor ambiguous; copying needs absolute alignment",
                 "copy a string with repeated items"),
        TaskSpec("NB", "copying", False, "backward", "all", False,
                 "repeated items make the predecessor ambiguous; copying needs absolute alignment",
                 "reverse a string with repeated items"),
    )
}
TASK_NAMES: tuple[str, ...] = tuple(TASKS)
DIRECTIONAL_PAIRS: tuple[tuple[str, str], ...] = (
    ("UR", "UL"), ("NRFirst", "NLFirst"), ("NRLast", "NLLast"), ("UF", "UB"), ("NF", "NB"),
)
DIRECTIONAL_PAIRS_LOOKUP = {a: b for a, b in DIRECTIONAL_PAIRS} | {b: a for a, b in DIRECTIONAL_PAIRS}


def get_task(name: str | TaskSpec) -> TaskSpec:
    """Look a task up by name, case-insensitively, with a clear error for unknown names.

    >>> get_task("uf").name, get_task("uf").family
    ('UF', 'copying')
    """
    if isinstance(name, TaskSpec):
        return name
    for key, spec in TASKS.items():
        if key.lower() == str(name).lower():
            return spec
    raise ValueError(f"unknown task {name!r}; expected one of {', '.join(TASK_NAMES)}")


def parse_tasks(names: str | Iterable[str]) -> list[TaskSpec]:
    """``"UF,UB"`` or ``["UF", "UB"]`` or ``"all"`` -> task specs.

    >>> [spec.name for spec in parse_tasks("UF,UB")], len(parse_tasks("all"))
    (['UF', 'UB'], 10)
    """
    if isinstance(names, str):
        names = [n for n in names.replace(" ", ",").split(",") if n]
    names = list(names)
    if [n.lower() for n in names] == ["all"]:
        return list(TASKS.values())
    return [get_task(n) for n in names]


@dataclass(frozen=True)
class TaskExample:
    """One instance of a task, independent of any prompt format.

    ``context`` is the input sequence (retrieval: x1..x(n-1) without the query; copying: the
    string). ``answer_positions[i]`` is the index in ``context`` whose item the i-th target item
    copies, so attention from the output position to that index is the "right" attention.
    """

    task: str
    context: tuple[str, ...]
    target: tuple[str, ...]
    query: str | None = None
    query_positions: tuple[int, ...] = ()
    answer_positions: tuple[int, ...] = ()
    ambiguous: bool = False
    metadata: dict = field(default_factory=dict, compare=False)

    @property
    def length(self) -> int:
        """The paper's length: retrieval counts the query, copying the string."""
        return len(self.context) + (1 if self.query is not None else 0)

    @property
    def query_position(self) -> int | None:
        """The occurrence of the query the task asks about (retrieval only)."""
        spec = get_task(self.task)
        if not self.query_positions:
            return None
        return self.query_positions[-1] if spec.occurrence == "last" else self.query_positions[0]


def _rng(seed: int | random.Random) -> random.Random:
    return seed if isinstance(seed, random.Random) else random.Random(seed)


def check_items(items: Sequence[str], what: str = "vocabulary") -> None:
    """Refuse items a prompt cannot show: empty ones, and any holding whitespace or control
    characters (a space or newline inside an item breaks the prompt's lines and separators).

    >>> check_items(["a", "b"])           # fine
    >>> check_items(["a", " "])
    Traceback (most recent call last):
    ...
    ValueError: vocabulary item ' ' holds whitespace or control characters, which would break the prompt's lines; every item must be a visible symbol
    """
    for item in items:
        if not isinstance(item, str) or not item:
            raise ValueError(f"{what} item {item!r} is empty or not text; every item must be a visible symbol")
        if any(c.isspace() or not c.isprintable() for c in item):
            raise ValueError(f"{what} item {item!r} holds whitespace or control characters, which would break the "
                             f"prompt's lines; every item must be a visible symbol")


def check_vocabulary(spec: TaskSpec, length: int, vocabulary: Sequence[str]) -> None:
    """Raise a clear error when the vocabulary cannot express the task at this length.

    >>> check_vocabulary(get_task("UF"), 100, ALNUM)
    Traceback (most recent call last):
    ...
    ValueError: vocabulary of 62 items is too small for UF at length 100: ...
    """
    check_items(vocabulary)
    if len(set(vocabulary)) != len(vocabulary):
        raise ValueError("vocabulary items must be distinct")
    minimum_length = {"retrieval": 4 if spec.unique else 7, "copying": 1 if spec.unique else 4}[spec.family]
    if length < minimum_length:
        raise ValueError(f"length={length} is too short for {spec.name}: it needs at least {minimum_length}")
    needed = length if (spec.family == "copying" and spec.unique) else 3
    if spec.family == "copying" and not spec.unique:
        needed = max(2, length // 3)
    if len(vocabulary) < needed:
        raise ValueError(
            f"vocabulary of {len(vocabulary)} items is too small for {spec.name} at length {length}: "
            f"it needs at least {needed} distinct single-token items "
            f"(use a larger vocabulary, e.g. interp.data.vocab.word_vocabulary, or a shorter length)"
        )


def _retrieval_answer_index(spec: TaskSpec, occurrence_index: int) -> int:
    return occurrence_index - 1 if spec.direction == "left" else occurrence_index + 1


def generate_retrieval(spec: TaskSpec, length: int, rng: random.Random, vocabulary: Sequence[str]) -> TaskExample:
    """Context of ``length - 1`` items plus a query; see the module docstring for the rules.

    >>> example = generate_retrieval(get_task("UR"), 5, random.Random(0), ALNUM)
    >>> example.context, example.query, example.target
    (('y', '2', '5', 'A'), '2', ('5',))
    """
    context_len = length - 1
    query = rng.choice(vocabulary)
    others = [v for v in vocabulary if v != query]
    context = [rng.choice(others) for _ in range(context_len)]
    if spec.unique:
        positions = [rng.randint(1, context_len - 2)]  # both neighbours exist (the paper's 1..n-3)
    else:
        k_max = max(2, context_len // 5)
        k = rng.randint(2, k_max)
        positions = _non_adjacent_positions(rng, lo=2, hi=length - 3, k=k)
    for p in positions:
        context[p] = query
    chosen = positions[-1] if spec.occurrence == "last" else positions[0]
    answer = _retrieval_answer_index(spec, chosen)
    candidates = {context[_retrieval_answer_index(spec, p)] for p in positions}
    return TaskExample(spec.name, tuple(context), (context[answer],), query, tuple(positions), (answer,),
                       ambiguous=len(candidates) > 1)


def _non_adjacent_positions(rng: random.Random, lo: int, hi: int, k: int) -> list[int]:
    """k sorted positions in [lo, hi], pairwise at least 2 apart (so no neighbour is the query).

    Drawn as k values from a range shrunk by k-1, then spread: uniform over all valid sets."""
    span = hi - lo + 1 - (k - 1)
    if span < k:
        raise ValueError(f"cannot place {k} non-adjacent occurrences in positions {lo}..{hi}")
    picks = sorted(rng.sample(range(span), k))
    return [lo + p + i for i, p in enumerate(picks)]


def generate_copying(spec: TaskSpec, length: int, rng: random.Random, vocabulary: Sequence[str],
                     repeats: str = "pool") -> TaskExample:
    """Context of ``length`` items and its copy, forward or backward; see the module docstring for
    ``repeats``.

    >>> generate_copying(get_task("UB"), 4, random.Random(0), ALNUM).target
    ('4', 'W', 'y', '2')
    """
    if spec.unique:
        context = rng.sample(list(vocabulary), length)
    elif repeats == "pool":
        pool = rng.sample(list(vocabulary), max(2, length // 3))
        context = pool * 2 + [rng.choice(pool) for _ in range(length - 2 * len(pool))]
        rng.shuffle(context)
    elif repeats == "sparse":
        context = [rng.choice(vocabulary) for _ in range(length)]
        if len(set(context)) == length:
            context[rng.randrange(1, length)] = context[rng.randrange(0, length - 1)]
            while len(set(context)) == length:  # the copied-from position was the one overwritten
                context[rng.randrange(1, length)] = context[0]
    else:
        raise ValueError(f"repeats={repeats!r} is not one of {REPEATS}")
    order = list(range(length)) if spec.direction == "forward" else list(range(length - 1, -1, -1))
    target = tuple(context[i] for i in order)
    return TaskExample(spec.name, tuple(context), target, answer_positions=tuple(order),
                       ambiguous=copying_is_ambiguous(context, spec.direction))


def copying_is_ambiguous(context: Sequence[str], direction: str) -> bool:
    """True when some item has more than one distinct successor (forward) or predecessor
    (backward): an induction (or anti-induction) lookup alone cannot decide the next item.

    >>> copying_is_ambiguous(["a", "b", "a", "c"], "forward"), copying_is_ambiguous(["a", "b", "c"], "forward")
    (True, False)
    """
    seq = list(context) if direction == "forward" else list(reversed(context))
    following: dict[str, set[str]] = {}
    for a, b in zip(seq, seq[1:]):
        following.setdefault(a, set()).add(b)
    return any(len(v) > 1 for v in following.values())


def generate_example(task: str | TaskSpec, length: int, seed: int | random.Random,
                     vocabulary: Sequence[str] = ALNUM, repeats: str = "pool") -> TaskExample:
    """One example of ``task`` at ``length``, drawn from ``vocabulary`` with ``seed``.

    >>> generate_example("UF", 5, seed=0).target
    ('2', 'y', 'W', '4', 'A')
    """
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    check_vocabulary(spec, length, vocabulary)
    rng = _rng(seed)
    if spec.family == "retrieval":
        return generate_retrieval(spec, length, rng, vocabulary)
    return generate_copying(spec, length, rng, vocabulary, repeats)


def generate_examples(task: str | TaskSpec, length: int, n: int, seed: int = 0,
                      vocabulary: Sequence[str] = ALNUM, repeats: str = "pool") -> list[TaskExample]:
    """``n`` examples of ``task`` at ``length``; the same seed always gives the same list.
    ``repeats`` (non-unique copying only): ``"pool"`` or ``"sparse"``, see `Repeats`.

    >>> [example.target for example in generate_examples("UB", 4, n=2, seed=1)]
    [('S', 'z', 'o', 'L'), ('N', 'c', 'x', 'h')]
    """
    if n < 0:
        raise ValueError(f"n={n} must be non-negative")
    if repeats not in REPEATS:
        raise ValueError(f"repeats={repeats!r} is not one of {REPEATS}")
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    check_vocabulary(spec, length, vocabulary)
    rng = random.Random(f"{spec.name}:{length}:{seed}")
    return [generate_example(spec, length, rng, vocabulary, repeats) for _ in range(n)]
