"""The published circuits a comparison reads: which files a model has (`published_circuit_files`: task, format and
counterfactual, length and method from each name), which two to compare (`choose_pair`: the only pair there, or one
line listing what exists), and what makes a circuit impossible to compare (`check_circuit`: a file whose circuit
is not the one its name says, an edge of a part the model does not have, a score that is not a number;
`check_distinct`: one circuit published under two tasks).

A model's parts come from its published head-score table (`ModelHeads`, which covers every head); query heads per
key/value head from the circuits' own attention reads (`heads_per_kv_head`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from interp.core.naming import model_label, result_files, split_result_stem
from interp.experiments.circuit_difference import HEAD, KV_INPUT, READER, READS, WRITER, edge_key
from interp.interventions.circuits.circuit import Circuit, CircuitEdge

CIRCUIT_REST = re.compile(r"(?P<task>UF|UB|UR|UL)(?P<variant>(?:_[^_]+)*?)_L(?P<length>\d+)_(?P<method>[a-z-]+)")
FLAGS = (("--variant", "format and counterfactual", "variants"), ("--length", "length", "lengths"), ("--method", "method", "methods"))


@dataclass(frozen=True)
class CircuitFile:
    """A published circuit's file and what its name says: ``variant`` is the name's part between the task and the
    length (``few-shot``, ``few-shot_zero``; ``""`` for a single-shot prompt and the corrupt counterfactual)."""

    path: Path
    model: str
    task: str
    variant: str
    length: int
    method: str

    @property
    def choice(self) -> tuple[str, int, str]:
        return self.variant, self.length, self.method


def circuit_file(path: str | Path, label: str) -> CircuitFile | None:
    """What the name of ``path`` says, when it is a circuit of the model labelled ``label``.

    >>> f = circuit_file("results/circuit_smollm2-135m_UF_few-shot_L5_masks.json", "smollm2-135m")
    >>> f.task, f.variant, f.length, f.method
    ('UF', 'few-shot', 5, 'masks')
    >>> circuit_file("results/circuit_smollm2-135m-ft-uf_UF_L5_masks.json", "smollm2-135m") is None
    True
    """
    kind, rest = split_result_stem(Path(path).stem)
    if kind != "circuit" or not rest.startswith(label + "_"):
        return None
    found = CIRCUIT_REST.fullmatch(rest[len(label) + 1:])
    if found is None:
        return None
    return CircuitFile(Path(path), label, found["task"], found["variant"].lstrip("_"), int(found["length"]), found["method"])


def published_circuit_files(folder: str | Path, label: str) -> list[CircuitFile]:
    """Every ``circuit_<label>_<task>[_<variant>]_L<length>_<method>.json`` in ``folder`` (tables of an earlier
    format, without a length and method in the name, are not circuits)."""
    return [f for path in result_files(folder, "circuit", ".json") if (f := circuit_file(path, label)) is not None]


def _choice_text(choice: tuple[str, int, str]) -> str:
    return f"{choice[0]!r} L{choice[1]} {choice[2]}"


def choose_pair(files: Sequence[CircuitFile], tasks: Sequence[str], variant: str | None = None, length: int | None = None,
                method: str | None = None, where: str = "") -> tuple[CircuitFile, CircuitFile]:
    """The two tasks' circuits at one variant, length and method: the one such pair among ``files`` that the given
    filters keep; else a ``ValueError`` naming the argument to give and listing what exists.

    >>> files = [CircuitFile(Path(f"c_{t}_{m}"), "m", t, "few-shot", 5, m) for t in ("UF", "UB") for m in ("masks", "top-k")]
    >>> [f.path.name for f in choose_pair(files, ("UF", "UB"), method="masks")]
    ['c_UF_masks', 'c_UB_masks']
    >>> choose_pair(files, ("UF", "UB"))
    Traceback (most recent call last):
    ValueError: --method: both circuits are published under several methods (masks, top-k); name one with --method
    """
    have = {t: {f.choice: f for f in files if f.task == t} for t in tasks}
    listing = "; ".join(f"{t}: " + (", ".join(_choice_text(c) for c in sorted(have[t])) or "none") for t in tasks)
    common = sorted(set(have[tasks[0]]) & set(have[tasks[1]]))
    label = files[0].model if files else "<model>"
    if not common:
        raise ValueError(f"--model: no {tasks[0]} and {tasks[1]} circuits of {label} at one format, length and method in "
                         f"{where or 'the results folder'} (there: {listing}); run analyses/find_circuit.py --model "
                         f"{label} --task <task> for each task and publish them")
    for (flag, what, _), index, value in zip(FLAGS, range(3), (variant, length, method)):
        if value is not None:
            kept = [c for c in common if c[index] == value]
            if not kept:
                raise ValueError(f"{flag}: no pair of circuits with {what} {value!r}; pairs there: "
                                 f"{', '.join(_choice_text(c) for c in common)}")
            common = kept
    for (flag, _, what), index in zip(FLAGS, range(3)):
        values = sorted({c[index] for c in common})
        if len(values) > 1:
            shown = ", ".join(repr(v) if index == 0 else str(v) for v in values)
            raise ValueError(f"{flag}: both circuits are published under several {what} ({shown}); name one with {flag}")
    return have[tasks[0]][common[0]], have[tasks[1]][common[0]]


@dataclass(frozen=True)
class ModelHeads:
    """The layers and query heads of a model, from its published head-score table (which covers every
    head: `interp.core.published.read_published` refuses one with a gap), and the table it came from."""

    n_layers: int
    n_heads: int
    source: str

    @classmethod
    def from_scores(cls, rows: Sequence[Mapping], source: str) -> "ModelHeads":
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
        found = HEAD.fullmatch(str(head))
        if found and int(found[1]) < self.n_layers and int(found[2]) < self.n_heads:
            return None
        return f"{head} is not a head of the model ({self.describe()})"

    def label_problem(self, label: str, reader: bool, heads_per_kv: int = 1) -> str | None:
        """Why a residual edge's reader or writer label names a part the model does not have, or None.

        >>> ModelHeads(30, 9, "x").label_problem("a99.99.q", reader=True)
        "'a99.99.q', expected a reader of the model (logits, m<layer>.in, a<layer>.<head>.q|k|v; layers 0-29, heads 0-8 (x))"
        """
        found = (READER if reader else WRITER).fullmatch(str(label))
        if found:
            layer, index = (found[1], found[2]) if found[1] is not None else (found[4 if reader else 3], None)
            channel = found[3] if reader else None
            n_index = self.n_heads // heads_per_kv if channel in ("k", "v") else self.n_heads
            if (layer is None or int(layer) < self.n_layers) and (index is None or int(index) < n_index):
                return None
        what = "a reader of the model (logits, m<layer>.in, a<layer>.<head>.q|k|v" if reader else \
            "a writer of the model (embed, pos_embed, m<layer>, a<layer>.<head>"
        return f"{label!r}, expected {what}; {self.describe()})"


def heads_per_kv_head(edges: Iterable[CircuitEdge], n_heads: int) -> int:
    """Query heads per key/value head: the smallest divisor of ``n_heads`` that every attention read among ``edges``
    fits (query head ``h`` reads key/value head ``h // n``) and every key/value input's index stays under.

    >>> heads_per_kv_head([CircuitEdge("value", "a1.6", "a1.2.v", "c", "o")], 9)
    3
    >>> heads_per_kv_head([CircuitEdge("residual", "a1.3.k", "embed", "s")], 4)
    1
    """
    pairs, kv_max = set(), -1
    for e in edges:
        query, kv = HEAD.fullmatch(str(e.reader)), KV_INPUT.fullmatch(str(e.writer))
        if e.kind in READS and query and kv:
            pairs.add((int(query[2]), int(kv[2])))
        for label in (e.reader, e.writer):
            if found := KV_INPUT.fullmatch(str(label)):
                kv_max = max(kv_max, int(found[2]))
    fits = [n for n in range(1, n_heads + 1)
            if n_heads % n == 0 and kv_max < n_heads // n and all(q // n == g for q, g in pairs)]
    return fits[0] if fits else 1


def _score_problem(score) -> str | None:
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        return f"score is {score!r}, expected a finite number (the edge's attribution)"
    return None


def edge_problem(edge: CircuitEdge, heads: ModelHeads, heads_per_kv: int = 1) -> str | None:
    """Why a circuit edge cannot be an edge of the model, or None.

    >>> edge_problem(CircuitEdge("value", "a1.4", "a1.0.v", "c", "o", score=-1.0), ModelHeads(2, 6, "x"), heads_per_kv=2)
    "writer is 'a1.0.v', expected the value input a1.2.v that head a1.4 reads"
    """
    if edge.kind not in ("residual", *READS):
        return f"kind is {edge.kind!r}, expected residual, key or value"
    if problem := _score_problem(edge.score):
        return problem
    if not isinstance(edge.role, str) or not edge.role:
        return f"role is {edge.role!r}, expected a position role (c, s, o+1, ...)"
    if edge.kind == "residual":
        for column, reader in (("reader", True), ("writer", False)):
            if found := heads.label_problem(getattr(edge, column), reader, heads_per_kv):
                return f"{column} is {found}"
        return None
    if problem := heads.head_problem(edge.reader):
        return f"reader {problem}"
    layer, head = HEAD.fullmatch(edge.reader).groups()
    expected = f"a{layer}.{int(head) // heads_per_kv}.{edge.kind[0]}"
    if edge.writer != expected:
        return f"writer is {edge.writer!r}, expected the {edge.kind} input {expected} that head {edge.reader} reads"
    return None


def check_circuit(circuit: Circuit, file: CircuitFile, heads: ModelHeads, heads_per_kv: int = 1) -> Circuit:
    """``circuit`` once it is the one its file's name says (model, task, method, length, format and counterfactual)
    and its edges are possible (`edge_problem`), each once, at least one; else one ``ValueError`` naming the file
    and the edge."""
    where = f"results file {file.path}"
    config = circuit.config
    fmt, counterfactual = config.get("prompt_format", "single-shot"), config.get("counterfactual", "corrupt")
    variant = "_".join(([fmt] if fmt != "single-shot" else []) + ([counterfactual] if counterfactual != "corrupt" else []))
    said = [("model", circuit.model, model_label(str(circuit.model)), file.model), ("task", circuit.task, circuit.task, file.task),
            ("method", circuit.method, circuit.method, file.method), ("length", config.get("length"), config.get("length"), file.length),
            ("format and counterfactual", variant, variant, file.variant)]
    for what, shown, found, expected in said:
        if found != expected:
            raise ValueError(f"{where}: {what} is {shown!r}, expected {expected!r}, the {what} the file name says")
    if not circuit.edges:
        raise ValueError(f"{where}: the circuit has no edges; expected the edges find_circuit selected")
    seen: set[tuple] = set()
    for i, edge in enumerate(circuit.edges, 1):
        if problem := edge_problem(edge, heads, heads_per_kv):
            raise ValueError(f"{where}, edge {i} ({edge.label!r}): {problem}")
        if edge_key(edge) in seen:
            raise ValueError(f"{where}, edge {i} ({edge.label!r}) appears twice; expected each edge once")
        seen.add(edge_key(edge))
    return circuit


def check_distinct(circuits: Mapping[str, Circuit], paths: Mapping[str, str | Path]) -> None:
    """Two measured circuits of different tasks never hold the same edges with the same scores: that is one circuit
    published twice.

    >>> edges = (CircuitEdge("residual", "logits", "a0.0", "c", score=-1.0),)
    >>> c = {t: Circuit("m", t, "masks", "roles", edges, 1.0, 1.0, 1.0, 2.0, 0.0, 4, 10) for t in ("UF", "UB")}
    >>> check_distinct(c, {"UF": "circuit_m_UF_L5_masks.json", "UB": "circuit_m_UB_L5_masks.json"})
    Traceback (most recent call last):
    ValueError: results file circuit_m_UB_L5_masks.json holds the edges and scores of circuit_m_UF_L5_masks.json (1 edges); expected the UB circuit measured on its own task
    """
    def content(circuit: Circuit) -> set:
        return {(edge_key(e), e.score) for e in circuit.edges}

    (first, a), (second, b) = list(circuits.items())[:2]
    if content(a) == content(b):
        raise ValueError(f"results file {paths[second]} holds the edges and scores of {paths[first]} ({len(a)} edges); "
                         f"expected the {second} circuit measured on its own task")
