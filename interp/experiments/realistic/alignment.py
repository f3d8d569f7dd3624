"""Where a copy departs from its source, and whether the source made that place ambiguous.

Positions are indices into the reference ``r[0..n-1]`` plus ``n``, the place where the copy
should end. Position ``t >= 1`` is *ambiguous* when its preceding token ``r[t-1]`` has more than
one distinct successor in the source, the source's last token being followed by the end of the
source (in the prompt, the closing ``<end>`` marker). An induction-style copier that looks up "what
followed the previous token" cannot know which successor to take there. Position 0 follows the
opening marker, outside the source, and is never ambiguous.

The paper aligns a free generation to the reference (Needleman-Wunsch on tokens) and, at every
switch from matching to editing, classifies the last correctly copied token ``r[t-1]``; that is
the classification of position ``t`` here. With teacher forcing only the *first* departure of the
greedy copy is observable, which equals the first position whose argmax differs from the reference.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

from interp.prompts import AnswerEnd

END = object()  # stands for "the source ends here" among a token's successors

Op = Literal["match", "substitute", "delete", "insert"]


def successors(source: Sequence[Hashable]) -> dict[Hashable, set]:
    """Every token of the source and the set of tokens that follow it (``END`` after the last).

    >>> following = successors("a b c a d".split())
    >>> sorted(following["a"]), following["d"] == {END}
    (['b', 'd'], True)
    """
    following: dict[Hashable, set] = defaultdict(set)
    for i, token in enumerate(source):
        following[token].add(source[i + 1] if i + 1 < len(source) else END)
    return dict(following)


def ambiguous_positions(source: Sequence[Hashable]) -> list[bool]:
    """For positions ``0..n``: does the token before the position have several successors?

    >>> ambiguous_positions("a b c a d".split())  # "a" is followed by "b" and by "d"
    [False, True, False, False, True, False]
    """
    following = successors(source)
    return [False] + [len(following[token]) > 1 for token in source]


def base_rate(source: Sequence[Hashable]) -> float:
    """Share of the ``n + 1`` positions of a copy (its end included) that are ambiguous.

    >>> base_rate("a b c a d".split())  # 2 of 6 positions
    0.333...
    """
    flags = ambiguous_positions(source)
    return sum(flags) / len(flags)


def transition_index(reference: Sequence[Hashable], copy: Sequence[Hashable]) -> int | None:
    """First position where ``copy`` departs from ``reference``; ``None`` for an exact copy.

    A copy that stops early departs at its own length (it ended where a token was due); one that
    runs on departs at ``len(reference)`` (it did not end).

    >>> reference = "a b c".split()
    >>> transition_index(reference, "a x c".split()), transition_index(reference, reference)
    (1, None)
    >>> transition_index(reference, "a b".split()), transition_index(reference, "a b c d".split())
    (2, 3)
    """
    for t, (want, got) in enumerate(zip(reference, copy)):
        if want != got:
            return t
    if len(copy) == len(reference):
        return None
    return min(len(copy), len(reference))


def departure_from_predictions(reference: Sequence[int], predictions: Sequence[int], end: AnswerEnd) -> int | None:
    """First departure of the greedy copy, from teacher-forced argmaxes ``predictions[0..n]``
    (``predictions[n]`` must be an end token). Before its first departure the greedy prefix *is*
    the reference, so this is exactly where greedy generation would first go wrong.

    >>> end = AnswerEnd(frozenset({0}))
    >>> departure_from_predictions([5, 6], [5, 6, 0], end), departure_from_predictions([5, 6], [5, 7, 0], end)
    (None, 1)
    >>> departure_from_predictions([5, 6], [5, 6, 9], end)  # the copy does not end
    2
    """
    n = len(reference)
    if len(predictions) != n + 1:
        raise ValueError(f"predictions has {len(predictions)} entries; expected len(reference) + 1 = {n + 1}")
    for t in range(n):
        if predictions[t] != reference[t]:
            return t
    return None if end.accepts(predictions[n]) else n


# --------------------------------------------------------------------------- alignment (the paper's way)


@dataclass(frozen=True)
class AlignedOp:
    """One column of an alignment: ``ref`` / ``hyp`` are indices, ``None`` for a gap."""

    op: Op
    ref: int | None
    hyp: int | None


def needleman_wunsch(reference: Sequence[Hashable], hypothesis: Sequence[Hashable]) -> list[AlignedOp]:
    """Global alignment maximising matches (score +1 match, 0 substitution, -1 gap).

    Among equally good alignments the traceback (from the end) takes gaps first, which places
    them as late as possible: a copy is aligned as correct for as long as it can be, so a copy
    that loops back is read as "right, then an insertion" rather than "an insertion, then right".

    >>> [column.op for column in needleman_wunsch("a b c".split(), "a x c d".split())]
    ['match', 'substitute', 'match', 'insert']
    """
    n, m = len(reference), len(hypothesis)
    score = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        score[i][0] = -i
    for j in range(1, m + 1):
        score[0][j] = -j
    for i in range(1, n + 1):
        above, row, want = score[i - 1], score[i], reference[i - 1]
        for j in range(1, m + 1):
            row[j] = max(above[j - 1] + (want == hypothesis[j - 1]), above[j] - 1, row[j - 1] - 1)
    ops: list[AlignedOp] = []
    i, j = n, m
    while i > 0 or j > 0:
        if j > 0 and score[i][j] == score[i][j - 1] - 1:
            ops.append(AlignedOp("insert", None, j - 1))
            j -= 1
        elif i > 0 and score[i][j] == score[i - 1][j] - 1:
            ops.append(AlignedOp("delete", i - 1, None))
            i -= 1
        else:
            same = reference[i - 1] == hypothesis[j - 1]
            ops.append(AlignedOp("match" if same else "substitute", i - 1, j - 1))
            i, j = i - 1, j - 1
    return ops[::-1]


def edit_transitions(reference: Sequence[Hashable], hypothesis: Sequence[Hashable]) -> list[int]:
    """Position (as defined above) at which each maximal run of edits starts.

    A cascade of consecutive edits counts once, at the position after the last matched reference
    token (0 when the copy starts with an edit), as in the paper's grouped comparison.

    >>> edit_transitions("a b c a d".split(), "a b a d".split())  # "c" dropped after "a b"
    [2]
    """
    starts, last_ref, in_edit = [], -1, False
    for column in needleman_wunsch(reference, hypothesis):
        if column.op == "match":
            last_ref, in_edit = column.ref, False
            continue
        if not in_edit:
            starts.append(last_ref + 1)
            in_edit = True
    return starts
