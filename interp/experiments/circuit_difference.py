"""Two circuits of one model compared (e.g. its UF circuit against its UB circuit): which edges one has
and the other lacks, grouped by the role of the position they sit at and by the kinds of their reader
and writer, and whether given heads are *wired to the answer* in each (a path of circuit edges from
the head's output to the logits).

Both circuits are rows of published ``circuit_<model>_<task>`` tables (``pos``, ``role``, ``reader``,
``writer``, ``score``). An edge is one writer feeding one reader at one position; a head's key and
value readers at position ``s`` feed its output at every later position ``t >= s``, its query reader
only at ``s``, so a path follows attention forward in position as the model does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

Rows = Sequence[Mapping]
GROUP_PATTERNS: tuple[tuple[str, str], ...] = (("s", "string"), ("c", "copy"), ("x", "context"))


def position_group(role: str) -> str:
    """The part of the prompt a position role belongs to: ``s3`` -> ``string``, ``c0`` -> ``copy``,
    ``x2`` -> ``context``; other roles (``sep``, ``bos``, ``prompt``, ``q``, ``end``) stay as they are.

    >>> [position_group(r) for r in ("s3", "c0", "sep", "x12", "prompt")]
    ['string', 'copy', 'sep', 'context', 'prompt']
    """
    for prefix, group in GROUP_PATTERNS:
        if re.fullmatch(rf"{prefix}\d+", role):
            return group
    return role


def reader_kind(label: str) -> str:
    """``a3.1.v`` -> ``v``; ``m2.in`` -> ``mlp``; ``logits`` -> ``logits``.

    >>> [reader_kind(r) for r in ("a3.1.v", "a0.2.q", "m2.in", "logits")]
    ['v', 'q', 'mlp', 'logits']
    """
    if label == "logits":
        return "logits"
    channel = label.rpartition(".")[2]
    return "mlp" if channel == "in" else channel


def writer_kind(label: str) -> str:
    """``a3.1`` -> ``head``; ``m2`` -> ``mlp``; ``embed`` / ``pos_embed`` unchanged.

    >>> [writer_kind(w) for w in ("a3.1", "m2", "embed")]
    ['head', 'mlp', 'embed']
    """
    if re.fullmatch(r"a\d+\.\d+", label):
        return "head"
    if re.fullmatch(r"m\d+", label):
        return "mlp"
    return label


def _edges(rows: Rows) -> dict[tuple[int, str, str], dict]:
    out = {}
    for r in rows:
        key = (int(r["pos"]), str(r["reader"]), str(r["writer"]))
        if key in out:
            raise ValueError(f"circuit: edge {key[2]} -> {key[1]} at position {key[0]} appears twice")
        out[key] = dict(r)
    return out


def circuit_difference(a: Rows, b: Rows, names: tuple[str, str] = ("a", "b")) -> list[dict]:
    """One row per (position group, reader kind, writer kind) found in either circuit: how many edges each
    has there, how many both share, how many only one has, and the group's share of each circuit's
    summed ``|score|``. Rows are sorted by how differently the two circuits weigh the group.

    >>> uf = [{"pos": 5, "role": "s1", "reader": "a1.0.v", "writer": "a0.0", "score": -3.0},
    ...       {"pos": 9, "role": "c1", "reader": "logits", "writer": "a1.0", "score": -1.0}]
    >>> ub = [{"pos": 9, "role": "c1", "reader": "logits", "writer": "a1.0", "score": -2.0}]
    >>> [(r["position"], r["reader"], r["writer"], r["only_UF"], r["shared"], r["share_UF"], r["share_UB"])
    ...  for r in circuit_difference(uf, ub, ("UF", "UB"))]
    [('copy', 'logits', 'head', 0, 1, 0.25, 1.0), ('string', 'v', 'head', 1, 0, 0.75, 0.0)]
    """
    first, second = _edges(a), _edges(b)
    if not first or not second:
        raise ValueError(f"circuit_difference: the {names[0] if not first else names[1]} circuit has no edges")
    total = {names[0]: sum(abs(float(r["score"])) for r in first.values()) or 1.0,
             names[1]: sum(abs(float(r["score"])) for r in second.values()) or 1.0}
    groups: dict[tuple[str, str, str], dict] = {}
    for name, edges, other in ((names[0], first, second), (names[1], second, first)):
        for key, row in edges.items():
            group = (position_group(str(row["role"])), reader_kind(key[1]), writer_kind(key[2]))
            cell = groups.setdefault(group, {f"{k}_{n}": 0 for k in ("edges", "only", "share") for n in names} | {"shared": 0})
            cell[f"edges_{name}"] += 1
            cell[f"share_{name}"] += abs(float(row["score"])) / total[name]
            if key in other:
                cell["shared"] += name == names[0]  # counted once
            else:
                cell[f"only_{name}"] += 1
    rows = [{"position": g[0], "reader": g[1], "writer": g[2], **cell} for g, cell in groups.items()]
    for row in rows:
        row[f"share_{names[0]}"], row[f"share_{names[1]}"] = (round(float(row[f"share_{n}"]), 6) for n in names)
    return sorted(rows, key=lambda r: (-abs(r[f"share_{names[0]}"] - r[f"share_{names[1]}"]), r["position"], r["reader"], r["writer"]))


@dataclass(frozen=True)
class HeadWiring:
    """Where one head stands in one circuit: its edges out (as a writer) and in (its readers), and
    whether a path of circuit edges leads from its output to the logits."""

    head: str
    circuit: str
    edges_out: int
    edges_in: int
    score_out: float  # summed score of its outgoing edges
    wired: bool

    def as_row(self) -> dict:
        return asdict(self)


def _reader_heads(reader: str, heads_per_kv: int) -> list[str]:
    """The query heads a reader feeds: ``a8.0.v`` with 3 heads per key/value head -> a8.0, a8.1, a8.2."""
    found = re.fullmatch(r"a(\d+)\.(\d+)\.([qkv])", reader)
    if not found:
        return []
    layer, index, channel = int(found[1]), int(found[2]), found[3]
    if channel == "q":
        return [f"a{layer}.{index}"]
    return [f"a{layer}.{index * heads_per_kv + h}" for h in range(heads_per_kv)]


def wired_writers(rows: Rows, heads_per_kv: int = 1) -> set[tuple[str, int]]:
    """Every (writer, position) of a circuit from which a path of its edges reaches the logits.

    >>> rows = [{"pos": 2, "reader": "a1.0.v", "writer": "a0.0"}, {"pos": 4, "reader": "logits", "writer": "a1.0"},
    ...         {"pos": 3, "reader": "a1.0.q", "writer": "a0.1"}]
    >>> sorted(wired_writers(rows))
    [('a0.0', 2), ('a1.0', 4)]
    """
    edges = _edges(rows)
    by_reader: dict[str, list[tuple[int, str]]] = {}
    for pos, reader, writer in edges:
        by_reader.setdefault(reader, []).append((pos, writer))
    live: set[tuple[str, int]] = set()
    frontier = [(writer, pos) for pos, writer in by_reader.get("logits", [])]
    while frontier:
        node = frontier.pop()
        if node in live:
            continue
        live.add(node)
        writer, pos = node
        # the readers whose component is this writer, at positions that reach (writer, pos)
        for reader, feeding in by_reader.items():
            owner = re.fullmatch(r"(a\d+\.\d+)\.([qkv])|(m\d+)\.in", reader)
            if not owner:
                continue
            if owner[3] is not None:
                if owner[3] != writer:
                    continue
                frontier += [(w, p) for p, w in feeding if p == pos]
            elif writer in _reader_heads(reader, heads_per_kv):
                frontier += [(w, p) for p, w in feeding if (p == pos if owner[2] == "q" else p <= pos)]
    return live


def head_wiring(circuits: Mapping[str, Rows], heads: Iterable[str], heads_per_kv: int = 1) -> list[dict]:
    """For each named head (``a8.0``) in each circuit: its edges out and in and whether it is wired to the
    logits (`wired_writers`).

    >>> rows = [{"pos": 2, "reader": "a1.0.v", "writer": "a0.0", "score": -1.0},
    ...         {"pos": 4, "reader": "logits", "writer": "a1.0", "score": -2.0},
    ...         {"pos": 3, "reader": "a1.0.q", "writer": "a0.1", "score": -0.5}]
    >>> [(r["head"], r["edges_out"], r["wired"]) for r in head_wiring({"UB": rows}, ["a0.0", "a0.1", "a0.2"])]
    [('a0.0', 1, True), ('a0.1', 1, False), ('a0.2', 0, False)]
    """
    out = []
    for name, rows in circuits.items():
        live = {writer for writer, _ in wired_writers(rows, heads_per_kv)}
        for head in heads:
            mine = [r for r in rows if r["writer"] == head]
            into = [r for r in rows if head in _reader_heads(str(r["reader"]), heads_per_kv)]
            out.append(HeadWiring(head, name, len(mine), len(into), round(sum(float(r["score"]) for r in mine), 6),
                                  head in live).as_row())
    return out


def heads_per_kv_head(labels: Iterable[str]) -> int:
    """Query heads per key/value head, from the reader and writer labels of a model's edge tables
    (``a3.8`` writers and ``a3.2.k`` readers: 9 / 3 = 3).

    >>> heads_per_kv_head(["a0.8", "a0.2.v", "a1.0.q", "m0"])
    3
    """
    heads = kv = 0
    for label in labels:
        if found := re.fullmatch(r"a\d+\.(\d+)", label):
            heads = max(heads, int(found[1]) + 1)
        elif found := re.fullmatch(r"a\d+\.(\d+)\.[kv]", label):
            kv = max(kv, int(found[1]) + 1)
    if not heads or not kv or heads % kv:
        raise ValueError(f"heads_per_kv_head: {heads} query heads and {kv} key/value heads in the labels; "
                         "expected both, the first a multiple of the second")
    return heads // kv


def circuit_value_heads(rows: Rows, heads_per_kv: int = 1) -> dict[int, list[int]]:
    """Layer -> query heads whose value input has a circuit edge at a position of the copied string: the
    heads through which the circuit can read the string from a copy position.

    >>> rows = [{"pos": 3, "role": "s1", "reader": "a1.0.v", "writer": "embed"},
    ...         {"pos": 9, "role": "c1", "reader": "a0.1.v", "writer": "embed"}]
    >>> circuit_value_heads(rows, heads_per_kv=2)
    {1: [0, 1]}
    """
    heads: dict[int, set[int]] = {}
    for r in rows:
        if reader_kind(str(r["reader"])) == "v" and position_group(str(r["role"])) == "string":
            for head in _reader_heads(str(r["reader"]), heads_per_kv):
                layer, index = head[1:].split(".")
                heads.setdefault(int(layer), set()).add(int(index))
    return {layer: sorted(hs) for layer, hs in sorted(heads.items())}


# --------------------------------------------------------------------------- reading published circuits

WRITER = re.compile(r"embed|pos_embed|a(\d+)\.(\d+)|m(\d+)")
READER = re.compile(r"logits|a(\d+)\.(\d+)\.([qkv])|m(\d+)\.in")


@dataclass(frozen=True)
class ModelHeads:
    """The layers and query heads of a model, from its published head-score table (which covers every
    head: `interp.core.published.read_published` refuses one with a gap), and the table it came from."""

    n_layers: int
    n_heads: int
    source: str

    @classmethod
    def from_scores(cls, rows: Rows, source: str) -> "ModelHeads":
        """The heads of a head-score table's rows (checked complete by the reader).

        >>> ModelHeads.from_scores([{"layer": 1, "head": 2}], "head_scores_m.csv").describe()
        'layers 0-1, heads 0-2 (head_scores_m.csv)'
        """
        return cls(max(int(r["layer"]) for r in rows) + 1, max(int(r["head"]) for r in rows) + 1, source)

    def describe(self) -> str:
        return f"layers 0-{self.n_layers - 1}, heads 0-{self.n_heads - 1} ({self.source})"

    def labels(self) -> list[str]:
        return [f"a{layer}.{head}" for layer in range(self.n_layers) for head in range(self.n_heads)]

    def head_problem(self, head: str) -> str | None:
        """Why ``head`` (``a8.0``) is not a head of the model, or None.

        >>> ModelHeads(2, 3, "x").head_problem("a999.0")
        'a999.0 is not a head of the model (layers 0-1, heads 0-2 (x))'
        """
        found = re.fullmatch(r"a(\d+)\.(\d+)", head)
        if found and int(found[1]) < self.n_layers and int(found[2]) < self.n_heads:
            return None
        return f"{head} is not a head of the model ({self.describe()})"

    def label_problem(self, label: str, reader: bool, heads_per_kv: int = 1) -> str | None:
        """Why a circuit's reader or writer label names a part the model does not have, or None.

        >>> ModelHeads(30, 9, "x").label_problem("a99.99.q", reader=True)
        "'a99.99.q', expected a reader of the model (logits, m<layer>.in, a<layer>.<head>.q|k|v; layers 0-29, heads 0-8 (x))"
        """
        found = (READER if reader else WRITER).fullmatch(label)
        if found:
            layer, index = (found[1], found[2]) if found[1] is not None else (found[4 if reader else 3], None)
            channel = found[3] if reader else None
            n_index = self.n_heads // heads_per_kv if channel in ("k", "v") else self.n_heads
            if (layer is None or int(layer) < self.n_layers) and (index is None or int(index) < n_index):
                return None
        what = "a reader of the model (logits, m<layer>.in, a<layer>.<head>.q|k|v" if reader else \
            "a writer of the model (embed, pos_embed, m<layer>, a<layer>.<head>"
        return f"{label!r}, expected {what}; {self.describe()})"


def check_circuit(lines: Sequence[tuple[int, Mapping]], path: str, heads: ModelHeads, heads_per_kv: int = 1) -> list[dict]:
    """The rows of a published circuit (``(line, row)``, as `interp.core.published.published_lines` gives
    them) once every edge is possible: a finite score, whole positions and ranks, a reader and a writer
    the model has; else one ``ValueError`` naming the file and the line.

    >>> lines = [(2, {"length": 5, "rank": 1, "pos": 3, "reader": "a1.0.v", "writer": "a0.0", "score": float("nan")})]
    >>> check_circuit(lines, "circuit_m_UF.csv", ModelHeads(2, 2, "x"))
    Traceback (most recent call last):
    ValueError: results file circuit_m_UF.csv, line 2: score is nan, expected a finite number (the edge's attribution)
    """
    rows = []
    for line, row in lines:
        problem = None
        for column, lo in (("length", 1), ("rank", 1), ("pos", 0)):
            value = row.get(column)
            if not isinstance(value, int) or isinstance(value, bool) or value < lo:
                problem = f"{column} is {value!r}, expected an integer >= {lo}"
                break
        score = row.get("score")
        if problem is None and (not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score)):
            problem = f"score is {score!r}, expected a finite number (the edge's attribution)"
        if problem is None:
            for column, reader in (("reader", True), ("writer", False)):
                if found := heads.label_problem(str(row.get(column)), reader, heads_per_kv):
                    problem = f"{column} is {found}"
                    break
        if problem:
            raise ValueError(f"results file {path}, line {line}: {problem}")
        rows.append(dict(row))
    return rows


def check_distinct(circuits: Mapping[str, Rows], paths: Mapping[str, str]) -> None:
    """Two measured circuits of different tasks never hold the same edges with the same scores: that is one
    circuit published twice.

    >>> rows = [{"pos": 3, "reader": "logits", "writer": "a0.0", "score": -1.0}]
    >>> check_distinct({"UF": rows, "UB": rows}, {"UF": "circuit_m_UF.csv", "UB": "circuit_m_UB.csv"})
    Traceback (most recent call last):
    ValueError: results file circuit_m_UB.csv holds the edges and scores of circuit_m_UF.csv (1 edges); expected the UB circuit measured on its own task
    """
    def content(rows: Rows) -> set:
        return {(int(r["pos"]), str(r["reader"]), str(r["writer"]), float(r["score"])) for r in rows}

    (first, a), (second, b) = list(circuits.items())[:2]
    if content(a) == content(b):
        raise ValueError(f"results file {paths[second]} holds the edges and scores of {paths[first]} ({len(a)} edges); "
                         f"expected the {second} circuit measured on its own task")


def circuit_variants(folder: str | Path, label: str, task: str) -> list[str]:
    """The variants (``few-shot``, ``""`` for none) of the published ``circuit_<label>_<task>[_<variant>].csv``.

    >>> circuit_variants("results", "smollm2-135m", "UB")  # from the repository's root
    ['few-shot']
    """
    prefix = f"circuit_{label}_{task}"
    return sorted(p.stem[len(prefix):].lstrip("_") for p in Path(folder).glob(f"{prefix}*.csv")
                  if p.stem == prefix or p.stem.startswith(prefix + "_"))


def choose_variant(folder: str | Path, label: str, tasks: Sequence[str], variant: str | None) -> str:
    """The variant both tasks' circuits are published under: ``variant`` when given, else the one variant
    both have; a ``ValueError`` (naming ``--variant``) says which files it looked for and which exist.

    >>> choose_variant("results", "smollm2-135m", ("UF", "UB"), None)  # from the repository's root
    'few-shot'
    """
    have = {task: circuit_variants(folder, label, task) for task in tasks}
    found = "; ".join(f"{t}: " + (", ".join(repr(v) for v in vs) or "none") for t, vs in have.items())
    if variant is not None:
        missing = [t for t in tasks if variant not in have[t]]
        if missing:
            names = ", ".join(f"circuit_{label}_{t}{'_' + variant if variant else ''}.csv" for t in missing)
            raise ValueError(f"--variant: no published {names} in {folder} (variants there: {found})")
        return variant
    both = sorted(set(have[tasks[0]]).intersection(*map(set, have.values())))
    if len(both) == 1:
        return both[0]
    if not both:
        raise ValueError(f"--model: no pair of published circuits circuit_{label}_{tasks[0]}[_<variant>].csv and "
                         f"circuit_{label}_{tasks[1]}[_<variant>].csv in {folder} (variants there: {found}); run "
                         f"analyses/find_circuit.py --model {label} --task <task> for each task and publish them")
    raise ValueError(f"--variant: both circuits exist under several variants ({', '.join(repr(v) for v in both)}); "
                     "name one with --variant")
