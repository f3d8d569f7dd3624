"""Two circuits of one model compared (e.g. its UF circuit against its UB circuit): which edges one has and the
other lacks, grouped by the role of their position and the kinds of their reader and writer (attention reads by
their key role), and whether given heads are *wired to the answer* in each (a path of circuit edges from the
head's output to the logits).

Both circuits are `Circuit` objects, as `analyses/find_circuit.py` publishes them
(``circuit_<model>_<task>[_<format>][_<counterfactual>]_L<length>_<method>.json``): each edge a residual edge
(``reader <- writer @ role``) or an attention read (head ``reader`` at queries of ``role`` reading ``key_role``
through the key or value input ``writer``, whose keys lie at the roles ``sources``). A path runs from a writer to
its readers at the same role, from a query input to its head, from a key/value input at a source role through
each of its reads to the head at the query role. In the graphs without attention reads (``positions`` and
``components`` grains) a key/value input at a role feeds its group's heads at that role and every role not
before it. `difference_words` says the comparison in words. Which two published circuits are compared, and what
makes one impossible to compare, is `interp.experiments.circuit_pair`'s.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

from interp.interventions.circuits.circuit import Circuit, CircuitEdge

GROUP_PATTERNS: tuple[tuple[str, str], ...] = (("s", "string"), ("c", "copy"), ("x", "context"))
READS = ("key", "value")
HEAD = re.compile(r"a(\d+)\.(\d+)")
KV_INPUT = re.compile(r"a(\d+)\.(\d+)\.([kv])")
WRITER = re.compile(r"embed|pos_embed|a(\d+)\.(\d+)|m(\d+)")
READER = re.compile(r"logits|a(\d+)\.(\d+)\.([qkv])|m(\d+)\.in")


def position_group(role: str) -> str:
    """The part of the prompt a role belongs to: ``s`` / ``s3`` -> ``string``, ``c`` / ``c0`` -> ``copy``, ``x2``
    -> ``context``, ``prompt@4`` -> ``prompt``; other roles (``sep``, ``bos``, ``o+1``, ``t-1``) stay.

    >>> [position_group(r) for r in ("s3", "c", "sep", "x12", "prompt@4", "o+1")]
    ['string', 'copy', 'sep', 'context', 'prompt', 'o+1']
    """
    role = role.split("@")[0]
    for prefix, group in GROUP_PATTERNS:
        if re.fullmatch(rf"{prefix}\d*", role):
            return group
    return role


def reader_kind(label: str) -> str:
    """``a3.1.v`` -> ``v``; ``m2.in`` -> ``mlp``; ``logits`` -> ``logits``; a head (an attention read's reader) -> ``head``.

    >>> [reader_kind(r) for r in ("a3.1.v", "a0.2.q", "m2.in", "logits", "a1.1")]
    ['v', 'q', 'mlp', 'logits', 'head']
    """
    if label == "logits" or HEAD.fullmatch(label):
        return "logits" if label == "logits" else "head"
    channel = label.rpartition(".")[2]
    return "mlp" if channel == "in" else channel


def writer_kind(label: str) -> str:
    """``a3.1`` -> ``head``; ``m2`` -> ``mlp``; ``embed`` / ``pos_embed`` unchanged.

    >>> [writer_kind(w) for w in ("a3.1", "m2", "embed")]
    ['head', 'mlp', 'embed']
    """
    if HEAD.fullmatch(label):
        return "head"
    return "mlp" if re.fullmatch(r"m\d+", label) else label


def edge_key(edge: CircuitEdge) -> tuple[str, str, str, str, str]:
    return edge.kind, edge.reader, edge.writer, edge.role, edge.key_role


def edge_group(edge: CircuitEdge) -> tuple[str, str, str, str]:
    """``(position, kind, reader, writer)``: a residual edge by its role's group and its reader's and writer's kinds;
    an attention read by its query role's group, ``head`` and its key role.

    >>> edge_group(CircuitEdge("residual", "logits", "a1.1", "c")), edge_group(CircuitEdge("value", "a1.1", "a1.0.v", "c", "o"))
    (('copy', 'residual', 'logits', 'head'), ('copy', 'value', 'head', 'o'))
    """
    if edge.kind in READS:
        return position_group(edge.role), edge.kind, "head", position_group(edge.key_role)
    return position_group(edge.role), edge.kind, reader_kind(edge.reader), writer_kind(edge.writer)


def _edges(circuit: Circuit, name: str) -> dict[tuple, CircuitEdge]:
    out: dict[tuple, CircuitEdge] = {}
    for edge in circuit.edges:
        if edge_key(edge) in out:
            raise ValueError(f"the {name} circuit: edge {edge.label!r} appears twice")
        out[edge_key(edge)] = edge
    if not out:
        raise ValueError(f"the {name} circuit has no edges")
    return out


def circuit_difference(a: Circuit, b: Circuit, names: tuple[str, str] = ("a", "b")) -> list[dict]:
    """One row per (position group, kind, reader, writer) found in either circuit (`edge_group`): how many edges
    each has there, how many both share, how many only one has, and the group's share of each circuit's summed
    ``|score|``; sorted by how differently the two circuits weigh the group.

    >>> def circuit(task, *edges):
    ...     return Circuit("m", task, "masks", "roles", edges, 1.0, 1.0, 1.0, 2.0, 0.0, 4, 100)
    >>> uf = circuit("UF", CircuitEdge("value", "a1.0", "a1.0.v", "c", "o+1", score=-3.0),
    ...              CircuitEdge("residual", "logits", "a1.0", "c", score=-1.0))
    >>> ub = circuit("UB", CircuitEdge("residual", "logits", "a1.0", "c", score=-2.0))
    >>> [(r["position"], r["kind"], r["writer"], r["only_UF"], r["shared"], r["share_UF"], r["share_UB"])
    ...  for r in circuit_difference(uf, ub, ("UF", "UB"))]
    [('copy', 'residual', 'head', 0, 1, 0.25, 1.0), ('copy', 'value', 'o+1', 1, 0, 0.75, 0.0)]
    """
    first, second = _edges(a, names[0]), _edges(b, names[1])
    total = {names[0]: sum(abs(e.score) for e in first.values()) or 1.0,
             names[1]: sum(abs(e.score) for e in second.values()) or 1.0}
    groups: dict[tuple[str, str, str, str], dict] = {}
    for name, edges, other in ((names[0], first, second), (names[1], second, first)):
        for key, edge in edges.items():
            cell = groups.setdefault(edge_group(edge), {f"{k}_{n}": 0 for k in ("edges", "only", "share") for n in names}
                                     | {"shared": 0})
            cell[f"edges_{name}"] += 1
            cell[f"share_{name}"] += abs(edge.score) / total[name]
            if key in other:
                cell["shared"] += name == names[0]  # counted once
            else:
                cell[f"only_{name}"] += 1
    rows = [{"position": g[0], "kind": g[1], "reader": g[2], "writer": g[3], **cell} for g, cell in groups.items()]
    for row in rows:
        for n in names:
            row[f"share_{n}"] = round(float(row[f"share_{n}"]), 6)
    return sorted(rows, key=lambda r: (-abs(r[f"share_{names[0]}"] - r[f"share_{names[1]}"]), r["position"], r["kind"],
                                       r["reader"], r["writer"]))


# --------------------------------------------------------------------------- wiring


def _group_heads(kv_input: str, heads_per_kv: int) -> list[str]:
    """The query heads a key/value input feeds: ``a8.1.v`` with 3 heads per key/value head -> a8.3, a8.4, a8.5."""
    found = KV_INPUT.fullmatch(kv_input)
    if not found:
        return []
    return [f"a{found[1]}.{int(found[2]) * heads_per_kv + h}" for h in range(heads_per_kv)]


_ORDER = re.compile(r"bos|s(\d+)|sep|c(\d+)|end")


def _not_before(role: str, later: str) -> bool:
    """Whether positions of ``later`` can read a key at ``role`` (``False`` only where the roles say ``later`` comes
    first: two ``@position`` roles, or two of bos, s<i>, sep, c<i>, end)."""
    at, at_later = re.search(r"@(\d+)$", role), re.search(r"@(\d+)$", later)
    if at and at_later:
        return int(at[1]) <= int(at_later[1])
    a, b = _ORDER.fullmatch(role), _ORDER.fullmatch(later)
    if a is None or b is None:
        return True

    def rank(m: re.Match) -> tuple[int, int]:
        kind = m[0] if m[1] is None and m[2] is None else ("s" if m[1] is not None else "c")
        return ({"bos": 0, "s": 1, "sep": 2, "c": 3, "end": 4}[kind], int(m[1] or m[2] or 0))

    return rank(a) <= rank(b)


def wired_nodes(circuit: Circuit, heads_per_kv: int = 1) -> set[tuple[str, str]]:
    """Every (component, role) of a circuit from which a path of its edges reaches the logits.

    >>> edges = (CircuitEdge("residual", "logits", "a1.1", "c"), CircuitEdge("value", "a1.1", "a1.1.v", "c", "o", sources="s"),
    ...          CircuitEdge("residual", "a1.1.v", "a0.0", "s"), CircuitEdge("residual", "a1.2.q", "a0.1", "c"))
    >>> c = Circuit("m", "UB", "masks", "roles", edges, 1.0, 1.0, 1.0, 2.0, 0.0, 4, 100)
    >>> sorted(node for node in wired_nodes(c) if node[0] in ("a0.0", "a0.1"))
    [('a0.0', 's')]
    """
    into: dict[tuple[str, str], set[tuple[str, str]]] = {}  # node -> the nodes feeding it

    def link(source: tuple[str, str], target: tuple[str, str]) -> None:
        into.setdefault(target, set()).add(source)

    roles = {e.role for e in circuit.edges}
    through_reads = circuit.grain == "roles"  # the one grain whose graph has attention reads
    for e in circuit.edges:
        if e.kind in READS:
            for source in (e.sources or e.key_role).split(","):
                link((e.writer, source), (e.reader, e.role))
            continue
        link((e.writer, e.role), (e.reader, e.role))
        if e.reader.endswith(".q") or e.reader.endswith(".in"):
            link((e.reader, e.role), (e.reader.rsplit(".", 1)[0], e.role))
        elif KV_INPUT.fullmatch(e.reader) and not through_reads:  # the input feeds its heads at later roles
            for head in _group_heads(e.reader, heads_per_kv):
                for later in roles:
                    if _not_before(e.role, later):
                        link((e.reader, e.role), (head, later))
    live: set[tuple[str, str]] = set()
    frontier = [node for node in into if node[0] == "logits"]
    while frontier:
        node = frontier.pop()
        for source in into.get(node, ()):
            if source not in live:
                live.add(source)
                frontier.append(source)
    return live


@dataclass(frozen=True)
class HeadWiring:
    """Where one head stands in one circuit: its edges out (as a writer), in (into its query, or its group's key and
    value inputs), its attention reads, and whether a path of circuit edges leads from its output to the logits."""

    head: str
    circuit: str
    edges_out: int
    edges_in: int
    reads: int
    score_out: float  # summed score of its outgoing edges
    wired: bool

    def as_row(self) -> dict:
        return asdict(self)


def head_wiring(circuits: Mapping[str, Circuit], heads: Iterable[str], heads_per_kv: int = 1) -> list[dict]:
    """For each named head (``a8.0``) in each circuit: its edges out and in, its reads, whether it is wired to the
    logits (`wired_nodes`).

    >>> edges = (CircuitEdge("residual", "logits", "a1.1", "c", score=-2.0), CircuitEdge("value", "a1.1", "a1.1.v", "c", "o", sources="s"),
    ...          CircuitEdge("residual", "a1.1.v", "a0.0", "s", score=-1.0), CircuitEdge("residual", "a1.2.q", "a0.1", "c"))
    >>> c = Circuit("m", "UB", "masks", "roles", edges, 1.0, 1.0, 1.0, 2.0, 0.0, 4, 100)
    >>> [(r["head"], r["edges_out"], r["reads"], r["wired"]) for r in head_wiring({"UB": c}, ["a1.1", "a0.0", "a0.1", "a0.2"])]
    [('a1.1', 1, 1, True), ('a0.0', 1, 0, True), ('a0.1', 1, 0, False), ('a0.2', 0, 0, False)]
    """
    heads = list(heads)
    out = []
    for name, circuit in circuits.items():
        live = {component for component, _ in wired_nodes(circuit, heads_per_kv)}
        for head in heads:
            mine = [e for e in circuit.edges if e.kind == "residual" and e.writer == head]
            into = [e for e in circuit.edges if e.kind == "residual"
                    and (e.reader == f"{head}.q" or head in _group_heads(e.reader, heads_per_kv))]
            reads = [e for e in circuit.edges if e.kind in READS and e.reader == head]
            out.append(HeadWiring(head, name, len(mine), len(into), len(reads), round(sum(e.score or 0.0 for e in mine), 6),
                                  head in live).as_row())
    return out


# --------------------------------------------------------------------------- in words

POSITION_WORDS = {"string": "the string", "copy": "the copy", "sep": "the separator", "bos": "BOS", "prompt": "the prompt",
                  "context": "the context", "all": "every position", "end": "the end", "q": "the question"}
READER_WORDS = {"logits": "the logits", "q": "queries", "k": "keys", "v": "values", "mlp": "MLPs", "head": "heads"}
WRITER_WORDS = {"head": "heads", "mlp": "MLPs", "embed": "the token embedding", "pos_embed": "the position embedding"}


def group_words(row: Mapping) -> str:
    """A `circuit_difference` row's group in words.

    >>> group_words({"position": "copy", "kind": "residual", "reader": "logits", "writer": "head"})
    'heads into the logits at the copy'
    >>> group_words({"position": "copy", "kind": "value", "reader": "head", "writer": "o+1"})
    'value reads from the copy to o+1'
    """
    where = POSITION_WORDS.get(row["position"], row["position"])
    if row["kind"] in READS:
        return f"{row['kind']} reads from {where} to {POSITION_WORDS.get(row['writer'], row['writer'])}"
    return f"{WRITER_WORDS.get(row['writer'], row['writer'])} into {READER_WORDS.get(row['reader'], row['reader'])} at {where}"


def _heads_text(heads: Sequence[str]) -> str:
    names = [h[1:] for h in heads]
    return ("head " if len(names) == 1 else "heads ") + ", ".join(names)


def difference_words(circuits: Mapping[str, Circuit], difference: Sequence[Mapping], wiring: Sequence[Mapping],
                     limit: int = 3, margin: float = 0.05) -> str:
    """The comparison in words: each circuit's size and faithfulness, the edges both hold, the ``limit`` groups each
    leans on more than the other (by more than ``margin`` of its summed ``|score|``), and which named heads are
    wired to the logits in which circuit.

    >>> edges = (CircuitEdge("residual", "logits", "a1.0", "c", score=-2.0), CircuitEdge("value", "a1.0", "a1.0.v", "c", "o+1", score=-2.0))
    >>> uf = Circuit("m", "UF", "masks", "roles", edges, 0.9, 1.0, 1.0, 2.0, 0.0, 4, 100)
    >>> ub = Circuit("m", "UB", "masks", "roles", edges[:1], 0.8, 0.5, 0.75, 2.0, 0.0, 4, 100)
    >>> print(difference_words({"UF": uf, "UB": ub}, circuit_difference(uf, ub, ("UF", "UB")),
    ...                        head_wiring({"UF": uf, "UB": ub}, ["a1.0", "a0.3"])))
    UF: 2 of 100 role edges keep 0.90 of the gap and copy 4 of 4 prompts (clean 4); UB: 1 of 100 keep 0.80 and copy
    2 of 4 (clean 3); 1 edge in both. UF leans more on value reads from the copy to o+1 (0.50 of its |score|, UB
    0.00). UB leans more on heads into the logits at the copy (1.00 of its |score|, UF 0.50). Wired to the logits in
    both: head 1.0; in neither: head 0.3.
    """
    (a, first), (b, second) = list(circuits.items())[:2]
    shared = sum(int(r["shared"]) for r in difference)

    def faithfulness(c: Circuit, long: bool) -> str:
        n = c.n_prompts
        copies = round(c.accuracy * n)
        return (f"{len(c)} of {c.total_edges:,} {c.grain[:-1]} edges keep {c.recovered:.2f} of the gap and copy {copies} of "
                f"{n} prompts (clean {round(c.clean_accuracy * n)})" if long else
                f"{len(c)} of {c.total_edges:,} keep {c.recovered:.2f} and copy {copies} of {n} (clean {round(c.clean_accuracy * n)})")

    text = [f"{a}: {faithfulness(first, True)}; {b}: {faithfulness(second, False)}; {shared} edge{'s' * (shared != 1)} in both."]
    for name, circuit in ((a, first), (b, second)):  # a circuit found where the model does not do the task explains noise
        text += [f"The {name} circuit is marked: {note}." for note in circuit.notes if note.startswith("weak task")]
    for mine, other in ((a, b), (b, a)):
        leaning = sorted((r for r in difference if r[f"share_{mine}"] - r[f"share_{other}"] > margin),
                         key=lambda r: r[f"share_{other}"] - r[f"share_{mine}"])[:limit]
        if leaning:
            text.append(f"{mine} leans more on " + "; ".join(
                f"{group_words(r)} ({r[f'share_{mine}']:.2f} of its |score|, {other} {r[f'share_{other}']:.2f})" for r in leaning) + ".")
    status: dict[str, dict[str, bool]] = {}
    present: dict[str, list[str]] = {}
    for row in wiring:
        status.setdefault(row["head"], {})[row["circuit"]] = bool(row["wired"])
        if not row["wired"] and (row["edges_out"] or row["edges_in"] or row["reads"]):
            present.setdefault(row["circuit"], []).append(row["head"])
    parts = []
    for words, wanted in (("in both", (True, True)), (f"in {a} only", (True, False)), (f"in {b} only", (False, True)),
                          ("in neither", (False, False))):
        heads = [h for h, s in status.items() if (s.get(a, False), s.get(b, False)) == wanted]
        if heads:
            parts.append(f"{words}: {_heads_text(heads)}")
    if parts:
        text.append("Wired to the logits " + "; ".join(parts) + ".")
    for name, heads in present.items():
        text.append(f"In the {name} circuit but not wired to the logits: {_heads_text(heads)}.")
    return " ".join(text)
