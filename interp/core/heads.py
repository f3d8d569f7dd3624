"""Naming attention heads: ``Head(layer, head)``, parsing ``"18.6,17.3"`` and formatting ``"18.6;17.3"``.

A head is a *query* head (the index into ``hook_pattern`` / ``hook_z``), so grouped-query models
such as SmolLM2 (9 query heads, 3 key/value heads) are addressed with ``n_heads`` query heads.

Accepted spellings of one head: ``"18.6"``, ``"18:6"`` or ``"L18H6"`` (case-insensitive); a list
separates heads with commas, semicolons or whitespace. ``format_heads`` writes the ``;``-separated
form used in the ``heads`` column of results tables (a comma would clash with CSV).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

_HEAD_RE = re.compile(r"^(?:L(?P<l1>\d+)H(?P<h1>\d+)|(?P<l2>\d+)[.:](?P<h2>\d+))$", re.IGNORECASE)
_SPLIT_RE = re.compile(r"[,;\s]+")


class Head(NamedTuple):
    """One attention head: ``layer`` and (query) ``head`` index, both 0-based."""

    layer: int
    head: int

    def __str__(self) -> str:
        return f"{self.layer}.{self.head}"

    def __repr__(self) -> str:
        """``Head(18, 6)``: short, and still valid Python (``Head(18, 6)`` spelled positionally)."""
        return f"Head({self.layer}, {self.head})"

    @property
    def label(self) -> str:
        """TransformerLens-style name, ``L18H6``."""
        return f"L{self.layer}H{self.head}"


HeadLike = Head | tuple[int, int] | str
"""One head as the library takes it: ``Head(18, 6)``, ``(18, 6)`` or ``"18.6"`` (``"18:6"``, ``"L18H6"``)."""
HeadsLike = str | Sequence[HeadLike]
"""Several heads: a sequence of ``HeadLike``, or one string such as ``"18.6,17.3"``."""


def _parse_one(item: object, name: str) -> Head:
    if isinstance(item, str):
        match = _HEAD_RE.match(item.strip())
        if match is None:
            raise ValueError(f"{name}: cannot read head {item!r}; write heads as LAYER.HEAD (e.g. '18.6,17.3') or L18H6")
        layer = match.group("l1") or match.group("l2")
        head = match.group("h1") or match.group("h2")
        return Head(int(layer), int(head))
    try:
        layer, head = item
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name}: cannot read head {item!r}; expected 'LAYER.HEAD' or a (layer, head) pair") from err
    return Head(_index(layer, item, name), _index(head, item, name))


def _index(value, item: object, name: str) -> int:
    """A layer or head index: a whole number (1.0 is fine, 1.7 and True are not)."""
    whole = isinstance(value, int) or (hasattr(value, "is_integer") and value.is_integer())
    if isinstance(value, bool) or not whole:
        raise ValueError(f"{name}: cannot read head {item!r}: {value!r} is not a whole-number index")
    return int(value)


def validate_heads(heads: str | Iterable[object], n_layers: int | None = None, n_heads: int | None = None,
                   name: str = "heads") -> list[Head]:
    """Heads as ``Head`` tuples (order and duplicates kept), each checked against the model's
    ``n_layers`` x ``n_heads``; a ``ValueError`` names ``name`` and the model's shape.

    >>> validate_heads(["18.6", (17, 3)], n_layers=30, n_heads=9)
    [Head(18, 6), Head(17, 3)]
    """
    if isinstance(heads, str):
        heads = [s for s in _SPLIT_RE.split(heads.strip()) if s]
    elif isinstance(heads, tuple) and len(heads) == 2 and all(isinstance(x, int) for x in heads):
        heads = [heads]  # a single (layer, head) pair
    out = [_parse_one(h, name) for h in heads]
    for h in out:
        bad_layer = h.layer < 0 or (n_layers is not None and h.layer >= n_layers)
        bad_head = h.head < 0 or (n_heads is not None and h.head >= n_heads)
        if bad_layer or bad_head:
            shape = []
            if n_layers is not None:
                shape.append(f"n_layers={n_layers} (layers 0-{n_layers - 1})")
            if n_heads is not None:
                shape.append(f"n_heads={n_heads} (heads 0-{n_heads - 1})")
            what = "layer" if bad_layer else "head"
            raise ValueError(f"{name}: head {h} is out of range ({what} {h.layer if bad_layer else h.head}); "
                             f"the model has {' and '.join(shape) or 'no negative indices'}")
    return out


def parse_heads(spec: str | Iterable[object] | None, n_layers: int | None = None, n_heads: int | None = None,
                name: str = "heads") -> list[Head]:
    """``"18.6,17.3"`` -> ``[Head(18, 6), Head(17, 3)]``, in the given order, duplicates dropped.

    ``spec`` may also be the ``;``-separated form of a results table, a list of strings or of
    ``(layer, head)`` pairs. With ``n_layers`` / ``n_heads`` every head is range-checked; errors are
    ``ValueError`` naming ``name`` (the argument, e.g. ``"--heads"``) and the model's shape.
    An empty spec (``""`` or ``None``) gives ``[]``; callers that need heads should check for that.

    >>> parse_heads("18.6,17.3,18.6")
    [Head(18, 6), Head(17, 3)]
    >>> parse_heads("1.9", n_layers=2, n_heads=4, name="--heads")
    Traceback (most recent call last):
    ...
    ValueError: ...
    """
    if spec is None:
        return []
    return list(dict.fromkeys(validate_heads(spec, n_layers, n_heads, name)))


def format_heads(heads: Iterable[HeadLike]) -> str:
    """``[Head(18, 6), Head(17, 3)]`` -> ``"18.6;17.3"`` (the ``heads`` column of results tables).

    >>> format_heads([(18, 6), Head(17, 3)])
    '18.6;17.3'
    """
    return ";".join(str(h) for h in validate_heads(heads))
