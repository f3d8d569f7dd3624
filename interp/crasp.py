"""C-RASP[pos]: a small interpreter, and the programs behind the paper's theory table.

C-RASP[pos] is C-RASP (Yang & Chiang, 2024) with the positional information of Huang et al.
(2025), who call it C-RASP[periodic, local]. The definition followed here is Definition 3 of
Jobanputra et al. (arXiv 2505.21785, App. A.1). A program is a sequence of operations, each
defining a vector over positions ``i = 1..n`` of the input:

Boolean-valued                                  Count-valued
  initial      Q_a(i): symbol i is a              counting     #[j <= i, psi(i, j)] P(j)
  Boolean      not P(i),  P1(i) and P2(i)         conditional  P(i) ? C1(i) : C2(i)
  constant     true                               addition     C1(i) + C2(i)
  positional   phi(i), phi periodic in i          subtraction  C1(i) - C2(i)
  comparison   C1(i) <= C2(i)                     constant     1

``psi`` is either "always" or a relation that depends only on ``i - j`` and holds at boundedly
many distances (:class:`Distance`; the key example is ``j = i - 1``, "the previous position").
A task is expressible when a program defines ``NEXT_a(i)`` for every symbol ``a`` so that at each
output position exactly the correct next symbol holds; generation stops when none holds.

Everything is vectorised over a batch: Boolean vectors are ``Bool[Tensor, "batch pos"]``, counts
``Int[Tensor, "batch pos"]``. A *family* ``{F_a : a in A}`` of Boolean vectors with at most one
member true per position (the symbols ``Q_a``, "the previous symbol is a", ...) is a
:class:`Symbols`, stored as the index of the true member. Programs that range over every symbol,
such as the paper's "for each bigram ab", are finite disjunctions of C-RASP operations; the
evaluator computes them at once instead of materialising ``|A|^2`` vectors (see :func:`lookup`).

Sequences are ``<bos> context <sep> query`` for retrieval and ``<bos> string <sep> output...``
for copying, as in the paper's proofs (Lemma 7 retrieves "the symbol that had followed <bos>").
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable, Iterable, Literal, Sequence

import torch
from jaxtyping import Bool, Int
from torch import Tensor

from .tasks import TaskExample, get_task

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
    follow, for teacher-forced evaluation of every output step at once."""
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
    rows = [encode(ex, vocab, with_target) for ex in examples]
    if not rows:
        raise ValueError("no examples to encode")
    if len({len(r) for r in rows}) != 1:
        raise ValueError("examples in one batch must have the same length (group them by length first)")
    return torch.tensor(rows, dtype=torch.long)


# --------------------------------------------------------------------------- Boolean operations

def initial(tokens: Tokens, symbol: int) -> BoolVec:
    """Q_a(i): the symbol at position i is a."""
    return tokens == symbol


def true(tokens: Tokens) -> BoolVec:
    return torch.ones_like(tokens, dtype=torch.bool)


def negate(p: BoolVec) -> BoolVec:
    return ~p


def conj(p: BoolVec, q: BoolVec) -> BoolVec:
    return p & q


def disj(p: BoolVec, q: BoolVec) -> BoolVec:
    """Sugar: not(not p and not q)."""
    return ~(~p & ~q)


def periodic(tokens: Tokens, period: int, residues: Iterable[int]) -> BoolVec:
    """phi(i) := i mod period in residues, positions numbered 1..n (the Positional operation)."""
    residues = set(residues)
    if period < 1:
        raise ValueError(f"period={period} must be a positive integer")
    if not residues or not all(0 <= r < period for r in residues):
        raise ValueError(f"residues {sorted(residues)} must be a non-empty subset of 0..{period - 1}")
    position = torch.arange(1, tokens.shape[1] + 1, device=tokens.device) % period
    hit = torch.zeros(period, dtype=torch.bool, device=tokens.device)
    hit[list(residues)] = True
    return hit[position].expand_as(tokens)


def le(c1: CountVec, c2: CountVec | int) -> BoolVec:
    """C1(i) <= C2(i). An int stands for the constant count 1 + ... + 1."""
    return c1 <= c2


def ge(c1: CountVec, c2: CountVec | int) -> BoolVec:
    """Sugar: C2(i) <= C1(i)."""
    return c1 >= c2


def eq(c1: CountVec, c2: CountVec | int) -> BoolVec:
    """Sugar: C1(i) <= C2(i) and C2(i) <= C1(i)."""
    return c1 == c2


# --------------------------------------------------------------------------- count operations

@dataclass(frozen=True)
class Distance:
    """psi(i, j) := i - j in ``distances``.

    [pos] allows relations that depend only on ``i - j`` and hold at finitely many distances;
    ``Distance((1,))`` is the paper's "j = i - 1". A count ranges over ``j <= i``, so a negative
    distance could never hold: it is rejected rather than silently counting nothing."""

    distances: tuple[int, ...]

    def __post_init__(self):
        if not self.distances:
            raise ValueError("a Distance relation needs at least one distance")
        if not all(isinstance(d, int) and d >= 0 for d in self.distances):
            raise ValueError(f"distances {self.distances} must be non-negative integers (counts look back only)")


PREVIOUS = Distance((1,))


def shift(x: Tensor, distance: int, fill) -> Tensor:
    """x moved ``distance`` positions to the right along dim 1, ``fill`` where nothing arrives."""
    if distance == 0:
        return x
    out = torch.full_like(x, fill)
    if distance < x.shape[1]:
        out[:, distance:] = x[:, :-distance]
    return out


def count(p: BoolVec, relation: Distance | None = None) -> CountVec:
    """#[j <= i, psi(i, j)] P(j); ``relation=None`` is psi = true, a prefix count."""
    if relation is None:
        return p.long().cumsum(1)
    return sum(shift(p.long(), d, 0) for d in set(relation.distances))


def exists(p: BoolVec, relation: Distance | None = None) -> BoolVec:
    """Sugar: 1 <= #[j <= i, psi(i, j)] P(j)."""
    return count(p, relation) >= 1


def one(tokens: Tokens) -> CountVec:
    return torch.ones_like(tokens)


def conditional(p: BoolVec, c1: CountVec, c2: CountVec) -> CountVec:
    """P(i) ? C1(i) : C2(i)."""
    return torch.where(p, c1, c2)


# --------------------------------------------------------------------------- families of symbols

@dataclass(frozen=True)
class Symbols:
    """A family ``{F_a : 0 <= a < size}`` of Boolean vectors, at most one member true per position.

    Stored as ``ids[b, i]`` = the member true at i, or NONE. Each method is the same C-RASP
    operation applied to every member, so the family stays a finite list of C-RASP vectors."""

    ids: Int[Tensor, "batch pos"]
    size: int

    def __post_init__(self):
        if self.size < 1:
            raise ValueError(f"a family needs at least one member, got size={self.size}")
        if self.ids.numel() and (self.ids.max() >= self.size or self.ids.min() < NONE):
            raise ValueError(f"member ids must lie in 0..{self.size - 1} or be NONE ({NONE})")

    def holds(self, member: int) -> BoolVec:
        """F_member(i)."""
        return self.ids == member

    def where(self, p: BoolVec) -> "Symbols":
        """F_a(i) and P(i), for every a."""
        return Symbols(torch.where(p, self.ids, NONE), self.size)

    def previous(self, distance: int = 1) -> "Symbols":
        """exists[j <= i, j = i - distance] F_a(j), for every a: "F_a held ``distance`` back"."""
        Distance((distance,))  # validates
        return Symbols(shift(self.ids, distance, NONE), self.size)

    def pair(self, other: "Symbols") -> "Symbols":
        """F_a(i) and G_b(i) for every pair (a, b), numbered ``a * other.size + b``."""
        both = (self.ids != NONE) & (other.ids != NONE)
        return Symbols(torch.where(both, self.ids * other.size + other.ids, NONE), self.size * other.size)

    def one_hot(self) -> BoolFamily:
        """The family as Boolean vectors, one per member."""
        members = torch.arange(self.size, device=self.ids.device)
        return self.ids[..., None] == members

    def count_each(self) -> CountFamily:
        """#[j <= i] F_a(j), for every a."""
        return self.one_hot().long().cumsum(1)


def symbols(tokens: Tokens, vocab: Vocabulary) -> Symbols:
    """The initial family {Q_a : a a symbol}."""
    if tokens.numel() and (tokens.min() < 0 or tokens.max() >= vocab.size):
        raise ValueError(f"token ids must lie in 0..{vocab.size - 1}")
    return Symbols(tokens, vocab.size)


def buckets(c: CountVec, upto: int) -> Symbols:
    """The family {C(i) = m : 0 <= m <= upto}: ``upto + 1`` comparisons with constants.

    This is how a program with a *fixed* bound can compare a count at i with one at j: it
    spells out every value. Its size grows with the bound, which is what expressibility forbids."""
    if upto < 0:
        raise ValueError(f"upto={upto} must be non-negative")
    inside = (c >= 0) & (c <= upto)
    return Symbols(torch.where(inside, c, NONE), upto + 1)


def lookup(query: Symbols, key: Symbols, value: Symbols | None = None) -> CountFamily | CountVec:
    """Sum over b of: query_b(i) ? #[j <= i](key_b(j) and value_a(j)) : 0, for every a.

    Written out this is |query| x |value| counting operations, |query| conditionals and a sum,
    all C-RASP. With ``value=None`` it is sum over b of query_b(i) ? #[j <= i] key_b(j) : 0.
    Because at most one query member holds at i, the sum picks the counts of that member, which
    the evaluator finds by comparing member ids (a [pos, pos] mask) rather than by building every
    count: the result is identical, the cost O(pos^2 + pos * |value|) per sequence instead of
    O(pos * |query| * |value|)."""
    if query.size != key.size:
        raise ValueError(f"query and key must range over the same members ({query.size} != {key.size})")
    n = query.ids.shape[1]
    causal = torch.ones(n, n, dtype=torch.bool, device=query.ids.device).tril()  # [i, j]: j <= i
    match = (query.ids[:, :, None] == key.ids[:, None, :]) & (query.ids[:, :, None] != NONE) & causal
    if value is None:
        return match.sum(-1)
    # NONE values are scattered into one extra column, dropped afterwards
    target = torch.where(value.ids == NONE, value.size, value.ids)
    out = torch.zeros(*query.ids.shape, value.size + 1, dtype=torch.int32, device=query.ids.device)
    out.scatter_add_(2, target[:, None, :].expand(-1, n, -1), match.int())
    return out[..., :-1].long()


# --------------------------------------------------------------------------- families of NEXT_a

def choose(p: BoolVec, if_true: BoolFamily, if_false: BoolFamily) -> BoolFamily:
    """(P(i) and A_a(i)) or (not P(i) and B_a(i)), for every a."""
    return torch.where(p[..., None], if_true, if_false)


def restrict(family: BoolFamily, p: BoolVec) -> BoolFamily:
    """A_a(i) and P(i), for every a."""
    return family & p[..., None]


def with_member(family: BoolFamily, member: int, p: BoolVec) -> BoolFamily:
    """The same family, except that member ``member`` is defined as P."""
    out = family.clone()
    out[..., member] = p
    return out


def decode_next(next_: BoolFamily) -> Int[Tensor, "batch pos"]:
    """Output by Booleans: the one symbol whose NEXT holds, STOP if none, AMBIGUOUS if several."""
    held = next_.sum(-1)
    return torch.where(held == 1, next_.int().argmax(-1), torch.where(held == 0, STOP, AMBIGUOUS))


def decode_argmax(scores: CountFamily) -> Int[Tensor, "batch pos"]:
    """Output by argmax over counts: the symbol with the largest count; AMBIGUOUS on a tie, STOP
    when every count is zero (no symbol has any support)."""
    top = scores.max(-1)
    ties = (scores == top.values[..., None]).sum(-1)
    return torch.where(top.values <= 0, STOP, torch.where(ties == 1, top.indices, AMBIGUOUS))


# --------------------------------------------------------------------------- programs

ProgramFn = Callable[[Tokens, Vocabulary], BoolFamily]


def program_ur(tokens: Tokens, vocab: Vocabulary) -> BoolFamily:
    """UR: NEXT_a(i) iff the bigram "s a" occurs in the prefix, s the symbol at i (Lemma 4).

    prev_s(j) = exists[j' <= j, j' = j - 1] Q_s(j') is a previous-token head, the count over j
    an induction head: at the query q only its unique occurrence is followed by something."""
    q = symbols(tokens, vocab)
    return lookup(query=q, key=q.previous(), value=q) >= 1


def program_ul(tokens: Tokens, vocab: Vocabulary) -> BoolFamily:
    """UL: NEXT_a(i) iff the bigram "a s" occurs in the context, s the symbol at i (Lemma 4).

    The count is restricted to the context (no <sep> yet) because the query itself is preceded
    by <sep>: without it NEXT_<sep> would hold as well (anti-induction)."""
    q = symbols(tokens, vocab)
    in_context = eq(count(initial(tokens, vocab.sep)), 0)
    return lookup(query=q, key=q.where(in_context), value=q.previous()) >= 1


def _first_occurrences(q: Symbols) -> Symbols:
    """Q_s(i) and #[j <= i] Q_s(j) = 1: the leftmost representative of each symbol."""
    return q.where(eq(lookup(query=q, key=q), 1))


def program_nrfirst(tokens: Tokens, vocab: Vocabulary) -> BoolFamily:
    """NRFirst: NEXT_a(i) iff a follows the first occurrence of the symbol s at i (Lemma 5).

    The first occurrence is the one with exactly one occurrence up to it, a prefix count."""
    q = symbols(tokens, vocab)
    first = _first_occurrences(q)
    return lookup(query=q, key=first.previous(), value=q) >= 1


def program_nlfirst(tokens: Tokens, vocab: Vocabulary) -> BoolFamily:
    """NLFirst: NEXT_a(i) iff a precedes the first occurrence of the symbol s at i (Lemma 5)."""
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
    to the input: in the output the symbol just emitted has no successor yet."""
    q = symbols(tokens, vocab)
    _, at_start, done = _copy_phases(tokens, vocab)
    after_bos = q.where(q.previous().holds(vocab.bos)).count_each() >= 1
    successor = lookup(query=q, key=q.previous(), value=q) >= 1
    return restrict(choose(at_start, after_bos, successor), negate(done))


def program_ub(tokens: Tokens, vocab: Vocabulary) -> BoolFamily:
    """UB: at the first <sep> emit the symbol before it; then emit the predecessor, in the input,
    of the symbol just emitted; x_1's predecessor is <bos>, where <sep> ends the copy (Lemma 7).

    The count is restricted to the input: in the reversed output the symbol just emitted is
    preceded by the one emitted before it. Iterated UL."""
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
    enumerates k = 0..bound (pairs (s, k) of symbol and count) and says nothing beyond."""
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
    the index at j; the program enumerates indices 1..bound and says nothing beyond."""
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
    """The paper's reason a task has no C-RASP[pos] program (kept once, in interp.tasks)."""
    spec = get_task(task)
    if spec.expressible:
        raise ValueError(f"{spec.name} is expressible in C-RASP[pos]; its program is PROGRAMS[{spec.name!r}]")
    return spec.theory_reason


def bound_needed(task: str, length: int) -> int:
    """The smallest bound at which the bounded program of a non-expressible task is exact for every
    instance the generator makes at ``length`` (occurrences for *Last, string length for NF/NB)."""
    spec = get_task(task)
    if spec.expressible:
        raise ValueError(f"{spec.name} is expressible: its program needs no bound")
    if spec.family == "retrieval":
        return max(2, (length - 1) // 5)
    return length


def bounded_program(task: str, bound: int) -> Program:
    """A C-RASP[pos] program for a non-expressible task that is exact only up to ``bound``."""
    spec = get_task(task)
    if spec.expressible:
        raise ValueError(f"{spec.name} is expressible: use PROGRAMS[{spec.name!r}]")
    run = bounded_last(spec.direction, bound) if spec.family == "retrieval" else bounded_copy(spec.direction, bound)
    return Program(f"{spec.name}<={bound}", spec.name, run, bound=bound)


def program_for(task: str) -> Program:
    spec = get_task(task)
    if not spec.expressible:
        raise ValueError(f"{spec.name} is not expressible in C-RASP[pos] ({spec.theory_reason}); "
                         f"use bounded_program({spec.name!r}, bound) for a length-bounded program")
    return PROGRAMS[spec.name]


# --------------------------------------------------------------------------- running programs

_MASK_BUDGET = 1 << 23  # batch * pos^2 cells per lookup mask, so long copies run in chunks


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
                mode: Literal["teacher-forced", "autoregressive"] = "teacher-forced") -> list[bool]:
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
        raise ValueError(f"mode must be 'teacher-forced' or 'autoregressive', got {mode!r}")
    return [g == w for g, w in zip(got, wanted)]


def accuracy(program: ProgramFn, examples: Sequence[TaskExample], vocab: Vocabulary | None = None,
             mode: Literal["teacher-forced", "autoregressive"] = "teacher-forced") -> float:
    hits = exact_match(program, examples, vocab, mode)
    if not hits:
        raise ValueError("no examples to score")
    return sum(hits) / len(hits)


__all__ = [
    "AMBIGUOUS", "BOS", "Distance", "NONE", "PAPER_LEMMA", "PREVIOUS", "PROGRAMS", "Program", "SEP", "STOP",
    "Symbols", "Vocabulary", "accuracy", "bound_needed", "bounded_copy", "bounded_last",
    "bounded_program", "buckets", "choose", "conditional", "conj", "count", "decode_argmax", "decode_next",
    "disj", "encode", "encode_batch", "eq", "exact_match", "exists", "ge", "generate", "initial", "le",
    "lookup", "negate", "not_expressible_reason", "one", "periodic", "program_for", "restrict", "run_program",
    "symbols", "teacher_forced", "true", "with_member",
]
