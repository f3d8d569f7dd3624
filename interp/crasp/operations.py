"""The operations of C-RASP[pos], vectorised over a batch: Boolean and count vectors, bounded
relative positions, and families of symbols (see the package docstring for the definitions)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from jaxtyping import Int
from torch import Tensor

from interp.crasp.vocabulary import AMBIGUOUS, NONE, STOP, BoolFamily, BoolVec, CountFamily, CountVec, Tokens, Vocabulary

# --------------------------------------------------------------------------- Boolean operations

def initial(tokens: Tokens, symbol: int) -> BoolVec:
    """Q_a(i): the symbol at position i is a.

    >>> initial(torch.tensor([[3, 4, 3, 5]]), 3).tolist()
    [[True, False, True, False]]
    """
    return tokens == symbol


def true(tokens: Tokens) -> BoolVec:
    """The constant true vector (every position).

    >>> true(torch.tensor([[3, 4]])).tolist()
    [[True, True]]
    """
    return torch.ones_like(tokens, dtype=torch.bool)


def negate(p: BoolVec) -> BoolVec:
    """not P(i).

    >>> negate(torch.tensor([[True, False]])).tolist()
    [[False, True]]
    """
    return ~p


def conj(p: BoolVec, q: BoolVec) -> BoolVec:
    """P(i) and Q(i).

    >>> conj(torch.tensor([[True, True]]), torch.tensor([[True, False]])).tolist()
    [[True, False]]
    """
    return p & q


def disj(p: BoolVec, q: BoolVec) -> BoolVec:
    """Sugar: not(not p and not q).

    >>> disj(torch.tensor([[True, False]]), torch.tensor([[False, False]])).tolist()
    [[True, False]]
    """
    return ~(~p & ~q)


def periodic(tokens: Tokens, period: int, residues: Iterable[int]) -> BoolVec:
    """phi(i) := i mod period in residues, positions numbered 1..n (the Positional operation).

    >>> periodic(torch.tensor([[3, 4, 3, 5]]), period=2, residues=[0]).tolist()  # even positions (1-based)
    [[False, True, False, True]]
    """
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
    """C1(i) <= C2(i). An int stands for the constant count 1 + ... + 1.

    >>> le(torch.tensor([[1, 1, 2, 2]]), 1).tolist()
    [[True, True, False, False]]
    """
    return c1 <= c2


def ge(c1: CountVec, c2: CountVec | int) -> BoolVec:
    """Sugar: C2(i) <= C1(i).

    >>> ge(torch.tensor([[1, 1, 2, 2]]), 2).tolist()
    [[False, False, True, True]]
    """
    return c1 >= c2


def eq(c1: CountVec, c2: CountVec | int) -> BoolVec:
    """Sugar: C1(i) <= C2(i) and C2(i) <= C1(i).

    >>> eq(torch.tensor([[1, 1, 2, 2]]), 1).tolist()
    [[True, True, False, False]]
    """
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
    """x moved ``distance`` positions to the right along dim 1, ``fill`` where nothing arrives.

    >>> shift(torch.tensor([[3, 4, 3, 5]]), 1, fill=0).tolist()
    [[0, 3, 4, 3]]
    """
    if distance == 0:
        return x
    out = torch.full_like(x, fill)
    if distance < x.shape[1]:
        out[:, distance:] = x[:, :-distance]
    return out


def count(p: BoolVec, relation: Distance | None = None) -> CountVec:
    """#[j <= i, psi(i, j)] P(j); ``relation=None`` is psi = true, a prefix count.

    >>> is_3 = initial(torch.tensor([[3, 4, 3, 5]]), 3)
    >>> count(is_3).tolist(), count(is_3, PREVIOUS).tolist()  # prefix count; previous token only
    ([[1, 1, 2, 2]], [[0, 1, 0, 1]])
    """
    if relation is None:
        return p.long().cumsum(1)
    return sum(shift(p.long(), d, 0) for d in set(relation.distances))


def exists(p: BoolVec, relation: Distance | None = None) -> BoolVec:
    """Sugar: 1 <= #[j <= i, psi(i, j)] P(j).

    >>> exists(initial(torch.tensor([[3, 4, 3, 5]]), 3), PREVIOUS).tolist()  # "the previous token is 3"
    [[False, True, False, True]]
    """
    return count(p, relation) >= 1


def one(tokens: Tokens) -> CountVec:
    """The constant count 1 at every position.

    >>> one(torch.tensor([[3, 4]])).tolist()
    [[1, 1]]
    """
    return torch.ones_like(tokens)


def conditional(p: BoolVec, c1: CountVec, c2: CountVec) -> CountVec:
    """P(i) ? C1(i) : C2(i).

    >>> tokens = torch.tensor([[3, 4, 3, 5]])
    >>> conditional(initial(tokens, 3), count(initial(tokens, 3)), one(tokens)).tolist()
    [[1, 1, 2, 1]]
    """
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
    """The initial family {Q_a : a a symbol}.

    >>> from interp.crasp.vocabulary import Vocabulary
    >>> symbols(torch.tensor([[0, 2, 3, 1]]), Vocabulary(("a", "b"))).size  # <bos>, <sep>, a, b
    4
    """
    if tokens.numel() and (tokens.min() < 0 or tokens.max() >= vocab.size):
        raise ValueError(f"token ids must lie in 0..{vocab.size - 1}")
    return Symbols(tokens, vocab.size)


def buckets(c: CountVec, upto: int) -> Symbols:
    """The family {C(i) = m : 0 <= m <= upto}: ``upto + 1`` comparisons with constants.

    This is how a program with a *fixed* bound can compare a count at i with one at j: it
    spells out every value. Its size grows with the bound, which is what expressibility forbids.

    >>> buckets(torch.tensor([[1, 1, 2, 0]]), upto=1).ids.tolist()  # NONE (-1) beyond the bound
    [[1, 1, -1, 0]]
    """
    if upto < 0:
        raise ValueError(f"upto={upto} must be non-negative")
    inside = (c >= 0) & (c <= upto)
    return Symbols(torch.where(inside, c, NONE), upto + 1)


def lookup(query: Symbols, key: Symbols, value: Symbols | None = None) -> CountFamily | CountVec:
    """Sum over b of: ``query_b(i) ? #[j <= i](key_b(j) and value_a(j)) : 0``, for every a.

    Written out this is |query| x |value| counting operations, |query| conditionals and a sum,
    all C-RASP. With ``value=None`` it is sum over b of ``query_b(i) ? #[j <= i] key_b(j) : 0``.
    Because at most one query member holds at i, the sum picks the counts of that member, which
    the evaluator finds by comparing member ids (a [pos, pos] mask) rather than by building every
    count: the result is identical, the cost O(pos^2 + pos * |value|) per sequence instead of
    O(pos * |query| * |value|).

    >>> previous = Symbols(torch.tensor([[-1, 0, 1, 0]]), 2)  # the symbol before each position
    >>> current = Symbols(torch.tensor([[0, 1, 0, 1]]), 2)
    >>> lookup(current, previous).tolist()  # how often the current symbol came just before, so far
    [[0, 0, 1, 1]]
    """
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
    """(P(i) and A_a(i)) or (not P(i) and B_a(i)), for every a.

    >>> a, b = torch.tensor([[[True, False]]]), torch.tensor([[[False, True]]])
    >>> choose(torch.tensor([[False]]), a, b).tolist()
    [[[False, True]]]
    """
    return torch.where(p[..., None], if_true, if_false)


def restrict(family: BoolFamily, p: BoolVec) -> BoolFamily:
    """A_a(i) and P(i), for every a.

    >>> restrict(torch.tensor([[[True, True], [True, False]]]), torch.tensor([[True, False]])).tolist()
    [[[True, True], [False, False]]]
    """
    return family & p[..., None]


def with_member(family: BoolFamily, member: int, p: BoolVec) -> BoolFamily:
    """The same family, except that member ``member`` is defined as P.

    >>> with_member(torch.zeros(1, 2, 2, dtype=torch.bool), 1, torch.tensor([[True, False]])).tolist()
    [[[False, True], [False, False]]]
    """
    out = family.clone()
    out[..., member] = p
    return out


def decode_next(next_: BoolFamily) -> Int[Tensor, "batch pos"]:
    """Output by Booleans: the one symbol whose NEXT holds, STOP if none, AMBIGUOUS if several.

    >>> decode_next(torch.tensor([[[True, False], [False, False], [True, True]]])).tolist()  # a symbol, STOP, AMBIGUOUS
    [[0, -1, -2]]
    """
    held = next_.sum(-1)
    return torch.where(held == 1, next_.int().argmax(-1), torch.where(held == 0, STOP, AMBIGUOUS))


def decode_argmax(scores: CountFamily) -> Int[Tensor, "batch pos"]:
    """Output by argmax over counts: the symbol with the largest count; AMBIGUOUS on a tie, STOP
    when every count is zero (no symbol has any support).

    >>> decode_argmax(torch.tensor([[[3, 1], [0, 0], [2, 2]]])).tolist()  # a symbol, STOP, AMBIGUOUS
    [[0, -1, -2]]
    """
    top = scores.max(-1)
    ties = (scores == top.values[..., None]).sum(-1)
    return torch.where(top.values <= 0, STOP, torch.where(ties == 1, top.indices, AMBIGUOUS))
