"""Where a circuit's nodes go and which of its edges a figure draws, shared by the static figure
(`interp.figures.circuit_figure`) and the interactive view (`interp.figures.circuit_view`).

A node is a component at a position role (``a18.6@c``: head 18.6 at the copy positions). A residual edge
runs from its writer to the component its reader feeds (a head's query input is the head, an MLP's input
the MLP, the logits the logits) at its role; a key or value input (``a18.2.k``, shared by the query heads
of its group) is a node of its own, and an attention read runs from it, at each role its keys lie at, to
the head at its query role. Rows are layers bottom to top (embeddings, then per layer the key/value
inputs, the heads and the MLP, then the logits), only those the nodes use; columns are roles in position
order.

>>> from interp.interventions.circuits.circuit import CircuitEdge
>>> segments(CircuitEdge("value", "a1.1", "a1.1.v", "c", "o", sources="s"))
[('a1.1.v@s', 'a1.1@c')]
>>> [node_label(n) for n in ("a18.6@c", "a18.2.v@s", "m5@s", "embed@s", "logits@c")]
['18.6 @ c', 'value 18.2 @ s', 'MLP 5 @ s', 'embed @ s', 'logits @ c']
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from interp.figures.style import OKABE_ITO

ROLE_ORDER = ("bos", "prompt", "x", "s", "sep", "q", "c")  # position order of the role-level graph's roles
LOGITS_LAYER = 10**6  # the logits' row sits above every layer
CHANNELS = {  # an edge's channel -> (colour, SVG/plotly dash, legend text)
    "q": (OKABE_ITO["blue"], "solid", "into a head's query"),
    "k": (OKABE_ITO["purple"], "solid", "into a key input"),
    "v": (OKABE_ITO["vermillion"], "solid", "into a value input"),
    "in": (OKABE_ITO["green"], "solid", "into an MLP"),
    "out": (OKABE_ITO["black"], "solid", "into the logits"),
    "key": (OKABE_ITO["sky_blue"], "dash", "attention read through the key (label: key role)"),
    "value": (OKABE_ITO["orange"], "solid", "attention read through the value (label: key role)"),
}
CHAR_PX = 6.6  # width of one character of an 11 px node label, near enough for spacing


def channel(edge) -> str:
    """How an edge enters its reader: ``q`` / ``k`` / ``v`` / ``in`` / ``out`` (residual), or ``key`` / ``value``
    (attention reads).

    >>> from interp.interventions.circuits.circuit import CircuitEdge
    >>> channel(CircuitEdge("residual", "a3.1.k", "a0.2", "s")), channel(CircuitEdge("key", "a3.4", "a3.1.k", "c", "o+1"))
    ('k', 'key')
    """
    if edge.kind != "residual":
        return edge.kind
    if edge.reader == "logits":
        return "out"
    return edge.reader.rpartition(".")[2] if edge.reader.count(".") == 2 or edge.reader.endswith(".in") else "out"


def _target(reader: str) -> str:
    """The node a residual edge into ``reader`` ends at: a head's query input is the head, an MLP's input the MLP;
    key and value inputs are nodes of their own."""
    if reader.endswith(".q"):
        return reader[:-2]
    if reader.endswith(".in"):
        return reader[:-3]
    return reader


def segments(edge) -> list[tuple[str, str]]:
    """The lines that draw ``edge``, as ``(from node, to node)``: one for a residual edge, one per role its keys lie
    at for an attention read."""
    if edge.kind == "residual":
        return [(f"{edge.writer}@{edge.role}", f"{_target(edge.reader)}@{edge.role}")]
    sources = [s for s in (edge.sources or edge.role).split(",") if s]
    return [(f"{edge.writer}@{s}", f"{edge.reader}@{edge.role}") for s in dict.fromkeys(sources)]


def node_label(node: str) -> str:
    """What a node is called on a figure: ``18.6 @ c``, ``key 18.2 @ s``, ``MLP 5 @ s``, ``logits @ c``."""
    component, _, role = node.partition("@")
    head = re.fullmatch(r"a(\d+)\.(\d+)(?:\.([qkv]))?", component)
    if head:
        name = f"{head[1]}.{head[2]}"
        name = f"{ {'q': 'query', 'k': 'key', 'v': 'value'}[head[3]]} {name}" if head[3] else name
    elif found := re.fullmatch(r"m(\d+)(?:\.in)?", component):
        name = f"MLP {found[1]}"
    else:
        name = component.replace("_", " ")
    return f"{name} @ {role}"


def node_row(node: str) -> tuple[int, int]:
    """(layer, place within the layer) of a node: embeddings (-1, 0), key/value inputs (L, 0), heads (L, 1),
    MLP (L, 2), logits last."""
    component = node.partition("@")[0]
    if component in ("embed", "pos_embed"):
        return (-1, 0)
    if found := re.fullmatch(r"a(\d+)\.\d+(\.[qkv])?", component):
        return (int(found[1]), 0 if found[2] else 1)
    if found := re.fullmatch(r"m(\d+)(?:\.in)?", component):
        return (int(found[1]), 2)
    return (LOGITS_LAYER, 0)


def row_label(row: tuple[int, int]) -> str:
    layer, place = row
    if layer < 0:
        return "embeddings"
    if layer == LOGITS_LAYER:
        return "logits"
    return f"L{layer} " + ("key/value" if place == 0 else "heads" if place == 1 else "MLP")


def role_key(role: str) -> tuple:
    """Position order of a role: the role graph's roles in `ROLE_ORDER`, a position-grain role (``s3``, ``s@3``) by
    its group then its index, anything else after them by name.

    >>> sorted(["c", "sep", "s", "bos", "prompt"], key=role_key)
    ['bos', 'prompt', 's', 'sep', 'c']
    """
    found = re.fullmatch(r"([a-z]+)(\d*)(?:@(\d+))?", role)
    group = found[1] if found else role
    index = int(found[3] or found[2] or 0) if found else 0
    return (ROLE_ORDER.index(group) if group in ROLE_ORDER else len(ROLE_ORDER), index, role)


def _component_key(node: str) -> tuple:
    return tuple(int(n) if n.isdigit() else n for n in re.split(r"(\d+)", node.partition("@")[0]))


@dataclass(frozen=True)
class Layout:
    """Node centres in px (``y`` down, as SVG draws), the rows' and columns' labels with their centre, the size,
    and the width of a node's box (every box as wide as the longest label)."""

    nodes: dict[str, tuple[float, float]]
    rows: list[tuple[float, str]]
    columns: list[tuple[float, str]]
    width: float
    height: float
    box: float


def layout(nodes: Iterable[str], row_px: float = 56, left: float = 0.0, top: float = 0.0) -> Layout:
    """Place ``nodes`` by layer (rows, logits on top) and role (columns, in position order); nodes sharing a row
    and a role stand side by side, one box width apart.

    >>> lay = layout(["a1.1@c", "a1.1.v@s", "a0.0@s", "embed@s", "logits@c"])
    >>> [label for _, label in lay.rows], [label for _, label in lay.columns]
    (['logits', 'L1 heads', 'L1 key/value', 'L0 heads', 'embeddings'], ['s', 'c'])
    >>> lay.nodes["logits@c"][1] < lay.nodes["a1.1@c"][1] < lay.nodes["embed@s"][1]
    True
    """
    nodes = list(dict.fromkeys(nodes))
    box = max((len(node_label(n)) for n in nodes), default=4) * CHAR_PX + 14
    rows = sorted({node_row(n) for n in nodes}, reverse=True)
    roles = sorted({n.partition("@")[2] for n in nodes}, key=role_key)
    cells: dict[tuple, list[str]] = {}
    for n in sorted(nodes, key=_component_key):
        cells.setdefault((node_row(n), n.partition("@")[2]), []).append(n)
    slots = {role: max(len(v) for (_, r), v in cells.items() if r == role) for role in roles}
    x0, columns = {}, []
    x = left
    for role in roles:
        x0[role] = x
        columns.append((x + slots[role] * (box + 12) / 2, role))
        x += slots[role] * (box + 12) + 24
    y_of = {row: top + (i + 0.5) * row_px for i, row in enumerate(rows)}
    coords = {}
    for (row, role), members in cells.items():
        spread = slots[role] * (box + 12) / len(members)
        for i, n in enumerate(members):
            coords[n] = (x0[role] + (i + 0.5) * spread, y_of[row])
    width = x - 24 if roles else left
    return Layout(coords, [(y_of[r], row_label(r)) for r in rows], columns, width, top + len(rows) * row_px, box)


def importance_order(edges: Sequence) -> list[int]:
    """Edge indices, most important first: by ``|loss|`` (the share of the gap the circuit loses without the edge)
    where measured, else by ``|score|``; edges with a measured loss come before those without.

    >>> from interp.interventions.circuits.circuit import CircuitEdge
    >>> importance_order([CircuitEdge("residual", "logits", "a0.0", "c", score=5.0),
    ...                   CircuitEdge("residual", "logits", "a0.1", "c", score=1.0, loss=0.2),
    ...                   CircuitEdge("residual", "logits", "a0.2", "c", score=-9.0)])
    [1, 2, 0]
    """
    def key(i: int) -> tuple:
        e = edges[i]
        return (e.loss is None, -abs(e.loss or 0.0), -abs(e.score or 0.0))

    return sorted(range(len(edges)), key=key)


def bezier(start: tuple[float, float], end: tuple[float, float], bend: float, steps: int = 16) -> list[tuple[float, float]]:
    """Points of a quadratic curve from ``start`` to ``end``, bowed sideways by ``bend`` of its length (lines that
    would run through other nodes of their column curve round them).

    >>> bezier((0, 0), (0, 100), 0.2, steps=2)
    [(0.0, 0.0), (10.0, 50.0), (0.0, 100.0)]
    """
    (x1, y1), (x2, y2) = start, end
    cx, cy = (x1 + x2) / 2 + bend * (y2 - y1), (y1 + y2) / 2 - bend * (x2 - x1)  # the control point, off to one side
    out = []
    for i in range(steps + 1):
        t = i / steps
        a, b, c = (1 - t) ** 2, 2 * (1 - t) * t, t * t
        out.append((a * x1 + b * cx + c * x2, a * y1 + b * cy + c * y2))
    return [(round(x, 2) + 0.0, round(y, 2) + 0.0) for x, y in out]
