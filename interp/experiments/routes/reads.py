"""The reads a copy position can make, and which of them a removal takes away.

At a copy position ``t`` (one that holds a letter and predicts the next) ``o(t)`` is the earlier
occurrence of ``t``'s token. A *route* is the source read relative to it (``o-1``, ``o``, ``o+1``);
a read of a route goes through the source's *value* (what is carried) or its *key* (where the head
looks). A [`Removal`][interp.experiments.routes.reads.Removal] names the reads taken away: the
reads themselves (``necessity``: is the copy lost without them?) or every other read of the copy
positions of the same kind, the one read kept (``sufficiency``: does the copy survive on it alone?).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Int
from torch import Tensor

from interp.interventions.edges.data import CopyingPrompts
from interp.interventions.edges.patching import EDGE_KINDS

ROUTES: dict[str, int] = {"o-1": -1, "o": 0, "o+1": 1}  # source offset from the earlier occurrence
# The paper's edges: induction reads o+1 (UF), anti-induction reads o, whose residual holds its previous token (UB).
EXPECTED_ROUTE: dict[str, str] = {"UF": "o+1", "UB": "o"}
READ_KINDS: tuple[str, ...] = ("value", "key")
TESTS: tuple[str, ...] = ("necessity", "sufficiency")
# Removed together: the paper's anti-induction read and the direct read of the answer's position.
JOINT_ROUTES: tuple[tuple[str, ...], ...] = (("o-1", "o"),)
assert set(READ_KINDS) == set(EDGE_KINDS)


@dataclass(frozen=True)
class RouteRead:
    """Every copy position reading ``o(t) + ROUTES[route]`` through the source's ``kind`` (key or value).

    >>> RouteRead("o-1", "value").offset
    -1
    """

    route: str
    kind: str

    def __post_init__(self) -> None:
        if self.route not in ROUTES:
            raise ValueError(f"route {self.route!r}; expected one of {', '.join(ROUTES)}")
        if self.kind not in READ_KINDS:
            raise ValueError(f"read kind {self.kind!r}; expected one of {', '.join(READ_KINDS)}")

    @property
    def offset(self) -> int:
        return ROUTES[self.route]


@dataclass(frozen=True)
class Removal:
    """Which reads of the copy positions are replaced by a counterfactual's: ``reads`` themselves
    (``test="necessity"``), or every other read of the copy positions of their kind, keeping the one
    read (``test="sufficiency"``).

    >>> Removal((RouteRead("o-1", "value"), RouteRead("o", "value"))).route
    'o-1+o'
    >>> Removal((RouteRead("o", "key"),), "sufficiency").kind
    'key'
    """

    reads: tuple[RouteRead, ...]
    test: str = "necessity"

    def __post_init__(self) -> None:
        if self.test not in TESTS:
            raise ValueError(f"test {self.test!r}; expected one of {', '.join(TESTS)}")
        if not self.reads or len({read.kind for read in self.reads}) != 1:
            raise ValueError("a removal needs at least one read, all of one kind (key and value reads are kept apart)")
        if self.test == "sufficiency" and len(self.reads) != 1:
            raise ValueError("a sufficiency test keeps exactly one read")

    @property
    def kind(self) -> str:
        return self.reads[0].kind

    @property
    def route(self) -> str:
        """The route's name, or the routes joined by ``+`` in `ROUTES` order for a joint removal."""
        names = {read.route for read in self.reads}
        return "+".join(route for route in ROUTES if route in names)


def route_removals(kinds: Sequence[str] = READ_KINDS, joint: Sequence[tuple[str, ...]] = JOINT_ROUTES) -> list[Removal]:
    """The removals of the route table, per kind: each route alone (necessity), the ``joint`` routes
    together, and each route kept alone (sufficiency).

    >>> [(r.route, r.test) for r in route_removals(["value"])]  # doctest: +NORMALIZE_WHITESPACE
    [('o-1', 'necessity'), ('o', 'necessity'), ('o+1', 'necessity'), ('o-1+o', 'necessity'),
     ('o-1', 'sufficiency'), ('o', 'sufficiency'), ('o+1', 'sufficiency')]
    """
    out = []
    for kind in kinds:
        out += [Removal((RouteRead(route, kind),)) for route in ROUTES]
        out += [Removal(tuple(RouteRead(route, kind) for route in routes)) for routes in joint]
        out += [Removal((RouteRead(route, kind),), "sufficiency") for route in ROUTES]
    return out


@dataclass(frozen=True)
class Entries:
    """Attention entries (query position, source position) shared by every prompt of a layout, and the
    reads asked for whose source lies before the prompt (``skipped``: nothing there to remove or keep)."""

    query: Int[Tensor, " entry"]
    source: Int[Tensor, " entry"]
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.query)


def copy_reads(prompts: CopyingPrompts) -> tuple[Int[Tensor, " copy"], Int[Tensor, " copy"]]:
    """The copy positions that predict a scored token (the copy's last position predicts nothing
    scored) and the earlier occurrence of each one's token.

    >>> from interp.models import tiny_tokenizer
    >>> from interp.interventions.edges.data import copying_prompts
    >>> p = copying_prompts(tiny_tokenizer(), "UB", 3, 1, n_shots=2)
    >>> [x.tolist() for x in copy_reads(p)], p.string_start
    ([[12, 13], [10, 9]], 8)
    """
    return prompts.copy_positions()[:-1], prompts.occurrences()[:-1]


def read_entries(prompts: CopyingPrompts, reads: Sequence[RouteRead]) -> Entries:
    """The entries of ``reads`` at every copy position (see `copy_reads`), those of one position in
    ``reads``' order; a source before the prompt (``o - 1`` of a string at position 0) is skipped and counted.

    >>> from interp.models import tiny_tokenizer
    >>> from interp.interventions.edges.data import copying_prompts
    >>> p = copying_prompts(tiny_tokenizer(), "UF", 3, 1, n_shots=1)   # the string starts at position 0
    >>> e = read_entries(p, [RouteRead("o-1", "value")])
    >>> e.query.tolist(), e.source.tolist(), e.skipped
    ([5], [0], 1)
    """
    queries, occurrences = copy_reads(prompts)
    pairs = [(int(t), int(o) + read.offset) for t, o in zip(queries, occurrences) for read in reads]
    kept = [(t, s) for t, s in pairs if s >= 0]
    return _entries(kept, len(pairs) - len(kept))


def other_entries(prompts: CopyingPrompts, read: RouteRead) -> Entries:
    """Every entry of the copy positions (each query reading each source at or before it) except
    ``read``'s: what a sufficiency test removes. A copy position whose kept source lies before the
    prompt keeps nothing, and is counted in ``skipped``.

    >>> from interp.models import tiny_tokenizer
    >>> from interp.interventions.edges.data import copying_prompts
    >>> p = copying_prompts(tiny_tokenizer(), "UB", 2, 1, n_shots=1)   # one copy query, at position 3
    >>> e = other_entries(p, RouteRead("o", "key"))      # o = 1: it reads 0, 2 and 3 besides
    >>> e.query.tolist(), e.source.tolist(), e.skipped
    ([3, 3, 3], [0, 2, 3], 0)
    """
    queries, occurrences = copy_reads(prompts)
    pairs, skipped = [], 0
    for t, o in zip(queries.tolist(), occurrences.tolist()):
        kept = o + read.offset
        skipped += kept < 0
        pairs += [(t, s) for s in range(t + 1) if s != kept]
    return _entries(pairs, skipped)


def removal_entries(prompts: CopyingPrompts, removal: Removal) -> Entries:
    """The entries ``removal`` replaces in every prompt of ``prompts``' layout.

    >>> from interp.models import tiny_tokenizer
    >>> from interp.interventions.edges.data import copying_prompts
    >>> p = copying_prompts(tiny_tokenizer(), "UB", 3, 1, n_shots=1)
    >>> joint = Removal((RouteRead("o-1", "value"), RouteRead("o", "value")))
    >>> removal_entries(p, joint).source.tolist()   # c0 (o = s2) and c1 (o = s1)
    [1, 2, 0, 1]
    """
    if removal.test == "sufficiency":
        return other_entries(prompts, removal.reads[0])
    return read_entries(prompts, removal.reads)


def _entries(pairs: Sequence[tuple[int, int]], skipped: int) -> Entries:
    query = torch.tensor([t for t, _ in pairs], dtype=torch.long)
    source = torch.tensor([s for _, s in pairs], dtype=torch.long)
    return Entries(query, source, int(skipped))
