"""A circuit as an object: its labelled edges with their scores and exact effects, its faithfulness and curve,
and the ways to read it (a table, a graph, DOT text, a short description, an HTML view in a notebook) and to keep
it (JSON ``save`` / ``load``).

>>> from interp.interventions.circuits.circuit import Circuit, CircuitEdge
>>> c = Circuit("planted-ub", "UB", "masks", "roles", (CircuitEdge("value", "a1.1", "a1.1.v", "c", "o", score=-43.7),),
...             recovered=0.98, accuracy=1.0, clean_accuracy=1.0, clean_metric=29.0, empty_metric=-29.0, n_prompts=8,
...             total_edges=1049)
>>> c
Circuit(planted-ub UB, masks: 1 of 1,049 role edges keep 0.98 of the gap, accuracy 1.00 (clean 1.00, n=8))
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from interp.interventions.circuits.curve import Curve, CurvePoint

FORMAT = "interp.circuit/1"


@dataclass(frozen=True)
class CircuitEdge:
    """One edge (see `interp.interventions.circuits.role_graph.Edge`) and what was measured of it: ``score`` the
    first-order score (EAP-IG), ``rank_value`` the selecting method's ranking value (mask log-odds, ...),
    ``exact`` the metric change when it alone is removed from the model, ``loss`` the share of the gap the circuit
    loses without it (minimality), ``sources`` the roles an attention read's keys lie at."""

    kind: str
    reader: str
    writer: str
    role: str
    key_role: str = ""
    score: float | None = None
    rank_value: float | None = None
    exact: float | None = None
    loss: float | None = None
    sources: str = ""

    @property
    def label(self) -> str:
        if self.kind == "residual":
            return f"{self.reader} <- {self.writer} @ {self.role}"
        return f"{self.reader} @ {self.role} reads {self.key_role} by {self.kind}"

    @property
    def head(self) -> str:
        """The head an attention read belongs to (empty for residual edges)."""
        return self.reader if self.kind != "residual" else ""


def _clean(value: Any) -> Any:
    """JSON has no NaN: None stands for a number not measured."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True)
class Circuit:
    """The edges a method selected for one model and task, most important first, and how faithful they are."""

    model: str
    task: str
    method: str
    grain: str
    edges: tuple[CircuitEdge, ...]
    recovered: float
    accuracy: float
    clean_accuracy: float
    clean_metric: float
    empty_metric: float
    n_prompts: int
    total_edges: int
    curve: Curve | None = None
    config: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.edges)

    def __repr__(self) -> str:
        return (f"Circuit({self.model} {self.task}, {self.method}: {len(self)} of {self.total_edges:,} {self.grain[:-1]} edges keep "
                f"{self.recovered:.2f} of the gap, accuracy {self.accuracy:.2f} (clean {self.clean_accuracy:.2f}, "
                f"n={self.n_prompts}))")

    @property
    def heads(self) -> tuple[str, ...]:
        """Every head the circuit passes through (as ``a18.6``), in first-appearance order."""
        out = []
        for e in self.edges:
            for name in (e.reader, e.writer):
                parts = name.split(".")
                if name.startswith("a") and len(parts) == 2:
                    out.append(name)
        return tuple(dict.fromkeys(out))

    @property
    def unneeded(self) -> int:
        """Edges whose removal from the circuit loses under 1% of the gap (minimality; 0 where not measured)."""
        return sum(1 for e in self.edges if e.loss is not None and abs(e.loss) < 0.01)

    def rows(self) -> list[dict]:
        """One dict per edge, with the circuit's model, task and method."""
        return [{"model": self.model, "task": self.task, "method": self.method, "rank": i + 1, "edge": e.label}
                | {k: _clean(v) for k, v in asdict(e).items()} for i, e in enumerate(self.edges)]

    def to_pandas(self):
        """The edges as a DataFrame (pandas imported here, so the type does not need it)."""
        import pandas as pd

        return pd.DataFrame(self.rows())

    def summary(self) -> dict:
        """The circuit's numbers as one flat row (a summary table's line)."""
        row = {"model": self.model, "task": self.task, "method": self.method, "grain": self.grain, "edges": len(self),
               "total_edges": self.total_edges, "recovered": self.recovered, "accuracy": self.accuracy,
               "clean_accuracy": self.clean_accuracy, "clean_metric": self.clean_metric, "empty_metric": self.empty_metric,
               "gap": self.clean_metric - self.empty_metric, "n": self.n_prompts, "unneeded_edges": self.unneeded}
        if self.curve is not None:
            row |= {"cpr": self.curve.cpr, "cmd": self.curve.cmd, "random_cpr": self.curve.random_cpr}
        return row | {k: v for k, v in self.config.items() if isinstance(v, (int, float, str, bool)) and k not in row}

    # ------------------------------------------------------------------ keeping it

    def to_json(self) -> dict:
        out = {"format": FORMAT} | {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("edges", "curve")}
        out["notes"] = list(self.notes)
        out["edges"] = [{k: _clean(v) for k, v in asdict(e).items()} for e in self.edges]
        out["curve"] = None if self.curve is None else {
            "total_edges": self.curve.total_edges, "clean_metric": self.curve.clean_metric,
            "empty_metric": self.curve.empty_metric, "clean_accuracy": self.curve.clean_accuracy,
            "empty_accuracy": self.curve.empty_accuracy,
            "points": [{k: _clean(v) for k, v in vars(p).items()} for p in self.curve.points]}
        return {k: _clean(v) for k, v in out.items()}

    @classmethod
    def from_json(cls, data: object, source: str = "circuit") -> "Circuit":
        if isinstance(data, dict) and "format" not in data and isinstance(data.get("metadata"), dict):
            data = data["metadata"]  # a circuit table's JSON: the circuit is its metadata
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{source}: not a saved circuit (expected a JSON object with format {FORMAT!r})")
        try:
            edges = tuple(CircuitEdge(**e) for e in data["edges"])
            curve = data.get("curve")
            if curve is not None:
                points = tuple(CurvePoint(**{k: (float("nan") if v is None else v) for k, v in p.items()})
                               for p in curve["points"])
                curve = Curve(points, curve["total_edges"], curve["clean_metric"], curve["empty_metric"],
                              curve["clean_accuracy"], curve["empty_accuracy"])
            scalars = {f.name: data[f.name] for f in fields(cls) if f.name not in ("edges", "curve", "config", "notes")}
            return cls(**scalars, edges=edges, curve=curve, config=dict(data.get("config") or {}),
                       notes=tuple(data.get("notes") or ()))
        except (KeyError, TypeError) as err:
            raise ValueError(f"{source}: a saved circuit with a missing or unexpected field ({err})") from None

    def save(self, path: str | Path) -> Path:
        """Write the circuit as JSON (atomically).

        >>> import tempfile
        >>> from pathlib import Path
        >>> c = Circuit("m", "UF", "top-k", "roles", (CircuitEdge("residual", "logits", "a1.0", "c"),), recovered=0.9,
        ...             accuracy=1.0, clean_accuracy=1.0, clean_metric=2.0, empty_metric=0.0, n_prompts=4, total_edges=10)
        >>> Circuit.load(c.save(Path(tempfile.mkdtemp()) / "c.json")) == c
        True
        """
        from interp.core.tables import atomic_write_text

        return atomic_write_text(Path(path), json.dumps(self.to_json(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "Circuit":
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise ValueError(f"{path}: cannot read a saved circuit ({err})") from None
        return cls.from_json(data, str(path))

    # ------------------------------------------------------------------ reading it

    def to_networkx(self):
        """A ``networkx.DiGraph``: nodes are components at roles (``a3.4@s``, ``a18.2.v@s``, ``logits@c``), each
        residual edge goes writer -> reader, each attention read the key/value input at its source roles -> the head
        at its query role; a reader feeds the component it belongs to (``a18.6.q@c -> a18.6@c``)."""
        import networkx as nx

        graph = nx.DiGraph()
        for e in self.edges:
            data = {"kind": e.kind, "score": e.score, "loss": e.loss, "label": e.label}
            if e.kind == "residual":
                graph.add_edge(f"{e.writer}@{e.role}", f"{e.reader}@{e.role}", **data)
                owner = _owner(e.reader)
                if owner:
                    graph.add_edge(f"{e.reader}@{e.role}", f"{owner}@{e.role}", kind="internal")
            else:
                for source in (e.sources or e.role).split(","):
                    graph.add_edge(f"{e.writer}@{source}", f"{e.reader}@{e.role}", key_role=e.key_role, **data)
        return graph

    def to_dot(self) -> str:
        """Graphviz DOT text of `to_networkx` (render with ``dot -Tsvg``; graphviz itself is not needed here)."""
        lines = [f'digraph "{self.model} {self.task}" {{', "  rankdir=BT;", '  node [shape=box, fontname="Helvetica"];']
        graph = self.to_networkx()
        for node in graph.nodes:
            lines.append(f'  "{node}";')
        for a, b, data in graph.edges(data=True):
            style = {"internal": "dotted", "key": "dashed"}.get(data.get("kind"), "solid")
            label = f' label="{data["key_role"]} {data["kind"]}"' if data.get("key_role") else ""
            lines.append(f'  "{a}" -> "{b}" [style={style}{label}];')
        return "\n".join(lines + ["}"]) + "\n"

    def describe(self, limit: int = 6) -> str:
        """The mechanism in words (`interp.interventions.circuits.describe`)."""
        from interp.interventions.circuits.describe import describe

        return describe(self, limit)

    def _repr_html_(self) -> str:
        from interp.interventions.circuits.describe import html_summary

        return html_summary(self)


def _owner(reader: str) -> str:
    """The component a reader feeds: ``a18.6.q`` -> ``a18.6``, ``m5.in`` -> ``m5``; key/value inputs feed several
    heads through attention reads, so none."""
    if reader.endswith(".q"):
        return reader[:-2]
    if reader.endswith(".in"):
        return reader[:-3]
    return ""
