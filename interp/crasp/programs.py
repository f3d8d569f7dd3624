"""C-RASP[pos] programs for the expressible tasks, bounded programs for the others, and the
registry that says which task has which (the paper's Lemmas 4-8)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch

from interp.data.tasks import get_task
from interp.crasp.operations import (Symbols, buckets, choose, conj, count, eq, ge, initial, lookup, negate, restrict, symbols,
                         with_member)
from interp.crasp.vocabulary import BoolFamily, BoolVec, CountVec, Tokens, Vocabulary

# --------------------------------------------------------------------------- programs

ProgramFn = Callable[[Tokens, Vocabulary], BoolFamily]


def program_ur(tokens: Tokens, vocab: Vocabulary) -> BoolFamily:
    """UR: NEXT_a(i) iff the bigram "s a" occurs in the prefix, s the symbol at i (Lemma 4).

    prev_s(j) = exists[j' <= j, j' = j - 1] Q_s(j') is a previous-token head, the count over j
    an induction head: at the query q only its unique occurrence is followed by something.

    >>> from interp.crasp.running import exact_match
    >>> from interp.data.tasks import generate_examples
    >>> exact_match(program_ur, generate_examples("UR", 6, n=3))
    [True, True, True]
    """
    q = symbols(tokens, vocab)
    return lookup(query=q, key=q.previous(), value=q) >= 1


def program_ul(tokens: Tokens, vocab: Vocabulary) -> BoolFamily:
    """UL: NEXT_a(i) iff the bigram "a s" occurs in the context, s the symbol at i (Lemma 4).

    The count is restricted to the context (no <sep> yet) because the query itself is preceded
    by <sep>: without it NEXT_<sep> would hold as well (anti-induction).

    >>> from interp.crasp.running import exact_match
    >>> from interp.data.tasks import generate_examples
    >>> exact_match(program_ul, generate_examples("UL", 6, n=3))
    [True, True, True]
    """
    q = symbols(tokens, vocab)
    in_context = eq(count(initial(tokens, vocab.sep)), 0)
    return lookup(query=q, key=q.where(in_context), value=q.previous()) >= 1


def _first_occurrences(q: Symbols) -> Symbols:
    """Q_s(i) and #[j <= i] Q_s(j) = 1: the leftmost representative of each symbol."""
    return q.where(eq(lookup(query=q, key=q), 1))


def program_nrfirst(tokens: Tokens, vocab: Vocabulary) -> BoolFamily:
    """NRFirst: NEXT_a(i) iff a follows the first occurrence of the symbol s at i (Lemma 5).

    The first occurrence is the one with exactly one occurrence up to it, a prefix count.

    >>> from interp.crasp.running import exact_match
    >>> from interp.data.tasks import generate_examples
    >>> exact_match(program_nrfirst, generate_examples("NRFirst", 8, n=3))
    [True, True, True]
    """
    q = symbols(tokens, vocab)
    first = _first_occurrences(q)
    return lookup(query=q, key=first.previous(), value=q) >= 1


def program_nlfirst(tokens: Tokens, vocab: Vocabulary) -> BoolFamily:
    """NLFirst: NEXT_a(i) iff a precedes the first occurrence of the symbol s at i (Lemma 5).

    >>> from interp.crasp.running import exact_match
    >>> from interp.data.tasks import generate_examples
    >>> exact_match(program_nlfirst, generate_examples("NLFirst", 8, n=3))
    [True, True, True]
    """
    q = symbols(tokens, vocab)
    first = _first_occurrences(q)
    return lookup(query=q, key=first, value=q.previous()) >= 1


def _copy_phases(tokens: Tokens, vocab: Vocabulary) -> tuple[BoolVec, BoolVec, BoolVec]:
    """(in the input, at the first <sep>, done): done once <sep> has appeared a second time."""
    seps = count(initial(tokens, vocab.sep))
    at_start = conj(initial(tokens, vocab.sep), eq(seps, 1))
    return eq(seps, 0), at_start, ge(seps, 2)


def program_uf(tokens: Tokens, vocab: Vocabulary) -> BoolFamily:
    """UF: at the first <sep> emit the symbol that followed <bos>; then emit the successor, in
    the input, of the symbol just emitted; x_N's successor is <sep>, which ends the copy (Lemma 7).

    Uniqueness makes the successor a single symbol: iterated UR. The count needs no restriction
    to the input: in the output the symbol just emitted has no successor yet.

    >>> from interp.crasp.running import exact_match
    >>> from interp.data.tasks import generate_examples
    >>> exact_match(program_uf, generate_examples("UF", 5, n=3), mode="autoregressive")
    [True, True, True]
    """
    q = symbols(tokens, vocab)
    _, at_start, done = _copy_phases(tokens, vocab)
    after_bos = q.where(q.previous().holds(vocab.bos)).count_each() >= 1
    successor = lookup(query=q, key=q.previous(), value=q) >= 1
    return restrict(choose(at_start, after_bos, successor), negate(done))


def program_ub(tokens: Tokens, vocab: Vocabulary) -> BoolFamily:
    """UB: at the first <sep> emit the symbol before it; then emit the predecessor, in the input,
    of the symbol just emitted; x_1's predecessor is <bos>, where <sep> ends the copy (Lemma 7).

    The count is restricted to the input: in the reversed output the symbol just emitted is
    preceded by the one emitted before it. Iterated UL.

    >>> from interp.crasp.running import exact_match
    >>> from interp.data.tasks import generate_examples
    >>> exact_match(program_ub, generate_examples("UB", 5, n=3), mode="autoregressive")
    [True, True, True]
    """
    q = symbols(tokens, vocab)
    in_input, at_start, done = _copy_phases(tokens, vocab)
    before_sep = q.previous().one_hot()
    predecessor = lookup(query=q, key=q.where(in_input), value=q.previous()) >= 1
    ends = predecessor[..., vocab.bos]
    predecessor = with_member(with_member(predecessor, vocab.bos, torch.zeros_like(ends)), vocab.sep, ends)
    return restrict(choose(at_start, before_sep, predecessor), negate(done))


# Bounded programs: the non-expressible tasks with the comparison they need spelled out up to a
# fixed bound K. Each is a valid C-RASP[pos] program, but its size grows with K, and it is exact
# only on inputs within K: the failure beyond is what "not expressible" predicts.

def _own_count(q: Symbols) -> CountVec:
    """#[j <= i] Q_s(j), s the symbol at i: which occurrence of its symbol position i is."""
    return lookup(query=q, key=q)


def bounded_last(direction: Literal["left", "right"], bound: int) -> ProgramFn:
    """NLLast / NRLast for at most ``bound`` occurrences of the query in the context.

    At the query, #occurrences so far is k + 1; the last context occurrence is the one whose own
    count is k. Comparing a count at i with one at j is no C-RASP operation, so the program
    enumerates k = 0..bound (pairs (s, k) of symbol and count) and says nothing beyond.

    >>> from interp.crasp.running import accuracy
    >>> from interp.data.tasks import generate_examples
    >>> accuracy(bounded_last("right", bound=4), generate_examples("NRLast", 10, n=8))
    1.0
    """
    if bound < 1:
        raise ValueError(f"bound={bound} must be at least 1")

    def program(tokens: Tokens, vocab: Vocabulary) -> BoolFamily:
        q = symbols(tokens, vocab)
        own = _own_count(q)
        occurrence = q.pair(buckets(own, bound))  # (s, m): the m-th occurrence of s
        wanted = q.pair(buckets(own - 1, bound))  # at the query: (q, k), its last context occurrence
        if direction == "right":
            return lookup(query=wanted, key=occurrence.previous(), value=q) >= 1
        return lookup(query=wanted, key=occurrence, value=q.previous()) >= 1

    program.__doc__ = (f"N{direction[0].upper()}Last for at most {bound} occurrences: the last occurrence is "
                       f"found by enumerating occurrence counts 0..{bound} (size grows with the bound)")
    return program


def bounded_copy(direction: Literal["forward", "backward"], bound: int) -> ProgramFn:
    """NF / NB for strings of at most ``bound`` symbols, by absolute alignment.

    Output step t (t = 1.. at the first <sep>) copies input index t (forward) or N + 1 - t
    (backward). Repeated symbols leave no content cue, so the index at i must be matched with
    the index at j; the program enumerates indices 1..bound and says nothing beyond.

    >>> from interp.crasp.running import accuracy
    >>> from interp.data.tasks import generate_examples
    >>> accuracy(bounded_copy("forward", bound=6), generate_examples("NF", 6, n=4))
    1.0
    """
    if bound < 1:
        raise ValueError(f"bound={bound} must be at least 1")

    def program(tokens: Tokens, vocab: Vocabulary) -> BoolFamily:
        q = symbols(tokens, vocab)
        in_input, _, done = _copy_phases(tokens, vocab)
        is_item = conj(in_input, negate(initial(tokens, vocab.bos)))
        index = count(is_item)  # x_m has index m; in the output it is N, the input length
        emitted = count(negate(in_input))  # t at output step t, counting the first <sep> as step 1
        wanted = emitted if direction == "forward" else index - emitted + 1
        item = lookup(query=buckets(wanted, bound), key=buckets(index, bound).where(is_item), value=q) >= 1
        ends = eq(wanted, index + 1) if direction == "forward" else eq(wanted, 0)
        return restrict(with_member(item, vocab.sep, ends), negate(done))

    program.__doc__ = (f"N{direction[0].upper()} for strings of at most {bound} symbols: absolute alignment "
                       f"through input indices 1..{bound} (size grows with the bound)")
    return program


# --------------------------------------------------------------------------- registry

@dataclass(frozen=True)
class Program:
    """A C-RASP[pos] program for a task. ``bound=None``: one program for every length."""

    name: str
    task: str
    run: ProgramFn
    bound: int | None = None

    @property
    def length_independent(self) -> bool:
        return self.bound is None

    @property
    def summary(self) -> str:
        return inspect.getdoc(self.run).split("\n\n")[0].replace("\n", " ")

    def __call__(self, tokens: Tokens, vocab: Vocabulary) -> BoolFamily:
        return self.run(tokens, vocab)


PROGRAMS: dict[str, Program] = {
    p.task: p for p in (
        Program("UL", "UL", program_ul),
        Program("UR", "UR", program_ur),
        Program("NLFirst", "NLFirst", program_nlfirst),
        Program("NRFirst", "NRFirst", program_nrfirst),
        Program("UF", "UF", program_uf),
        Program("UB", "UB", program_ub),
    )
}

# Where Jobanputra et al. (App. A.2) settle each task's expressibility.
PAPER_LEMMA: dict[str, str] = {
    "UL": "Lemma 4", "UR": "Lemma 4", "NLFirst": "Lemma 5", "NRFirst": "Lemma 5",
    "NLLast": "Lemma 6", "NRLast": "Lemma 6", "UF": "Lemma 7", "UB": "Lemma 7", "NF": "Lemma 8", "NB": "Lemma 8",
}


def not_expressible_reason(task: str) -> str:
    """The paper's reason a task has no C-RASP[pos] program (kept once, in interp.data.tasks).

    >>> not_expressible_reason("NF").startswith("repeated items make the successor ambiguous")
    True
    """
    spec = get_task(task)
    if spec.expressible:
        raise ValueError(f"{spec.name} is expressible in C-RASP[pos]; its program is PROGRAMS[{spec.name!r}]")
    return spec.theory_reason


def bound_needed(task: str, length: int) -> int:
    """The smallest bound at which the bounded program of a non-expressible task is exact for every
    instance the generator makes at ``length`` (occurrences for *Last, string length for NF/NB).

    >>> bound_needed("NF", 10), bound_needed("NRLast", 21)
    (10, 4)
    """
    spec = get_task(task)
    if spec.expressible:
        raise ValueError(f"{spec.name} is expressible: its program needs no bound")
    if spec.family == "retrieval":
        return max(2, (length - 1) // 5)
    return length


def bounded_program(task: str, bound: int) -> Program:
    """A C-RASP[pos] program for a non-expressible task that is exact only up to ``bound``.

    >>> bounded_program("NF", 10).name
    'NF<=10'
    """
    spec = get_task(task)
    if spec.expressible:
        raise ValueError(f"{spec.name} is expressible: use PROGRAMS[{spec.name!r}]")
    run = bounded_last(spec.direction, bound) if spec.family == "retrieval" else bounded_copy(spec.direction, bound)
    return Program(f"{spec.name}<={bound}", spec.name, run, bound=bound)


def program_for(task: str) -> Program:
    """The exact C-RASP[pos] program of an expressible task (a clear error, naming the bounded one, otherwise).

    >>> program_for("UF").name
    'UF'
    """
    spec = get_task(task)
    if not spec.expressible:
        raise ValueError(f"{spec.name} is not expressible in C-RASP[pos] ({spec.theory_reason}); "
                         f"use bounded_program({spec.name!r}, bound) for a length-bounded program")
    return PROGRAMS[spec.name]
