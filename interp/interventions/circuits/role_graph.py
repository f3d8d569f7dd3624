"""The graph a circuit is selected from, at the grain of a mechanism: components at position roles.

Two kinds of edge, each removable exactly (`interp.interventions.circuits.masking`):

* a **residual edge** ``(reader, writer, role)``: what a writer (embedding, head, MLP) adds to a reader's input
  (a head's query, a key/value head's key or value, an MLP, the logits) at every position of one role;
  removing it gives the reader the counterfactual's ``a'_w`` there instead of ``a_w``;
* an **attention read** ``(head, kind, query role, key role)``: inside one query head, the queries of one role
  reading the keys of another, through the key (finding the position: the score uses the counterfactual's
  key, the softmax renormalises) or through the value (carrying the token: the counterfactual's value at the
  same weight). Key roles are seen from the query: ``t``, ``t-1`` and, from a copy position whose token
  occurred earlier at ``o``, ``o``, ``o-1``, ``o+1``; else the key's own role. So the paper's hypotheses are
  edges: induction is ``value c -> o+1`` found by ``key c -> o+1``, anti-induction ``value c -> o``.

Grains: ``roles`` (the default: ``bos``, ``prompt`` (template and earlier shots), ``s`` (the string), ``sep``,
``c`` (the copy); retrieval tasks ``x``, ``q``), ``positions`` (every position its own role, no attention reads:
a head passes every position through, the position-resolved graph) and ``components`` (one role, every
position at once). Only positions up to the last scored one are in the graph: nothing later moves the metric.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import torch
from jaxtyping import Int
from torch import Tensor

from interp.interventions.circuits.attention import entry_role_pairs, role_group
from interp.interventions.circuits.graph import CircuitGraph, Component
from interp.interventions.circuits.task import CircuitTask

GRAINS: tuple[str, ...] = ("roles", "positions", "components")
READ_KINDS: tuple[str, ...] = ("key", "value")
EVERY_POSITION = "all"  # the one role of the components grain


@dataclass(frozen=True)
class AttentionRead:
    """Query head ``layer.head`` at queries of ``query_role`` reading keys of ``key_role`` through ``kind``;
    ``query`` / ``source`` are the position pairs (shared by every prompt)."""

    layer: int
    head: int
    kind: str
    query_role: str
    key_role: str
    query: Int[Tensor, " entry"]
    source: Int[Tensor, " entry"]

    @property
    def head_label(self) -> str:
        return f"a{self.layer}.{self.head}"


@dataclass(frozen=True)
class Edge:
    """One edge as a reader sees it: ``kind`` is ``residual``, ``key`` or ``value``.

    Residual: ``reader <- writer`` at positions of ``role``. Attention read: ``reader`` is the head,
    ``writer`` the key/value input it reads (``a18.2.v``), ``role`` the query role, ``key_role`` the key's.

    >>> Edge("residual", "a1.1.v", "a0.0", "s").label, Edge("value", "a1.1", "a1.1.v", "c", "o").label
    ('a1.1.v <- a0.0 @ s', 'a1.1 @ c reads o by value')
    """

    kind: str
    reader: str
    writer: str
    role: str
    key_role: str = ""

    @property
    def label(self) -> str:
        if self.kind == "residual":
            return f"{self.reader} <- {self.writer} @ {self.role}"
        return f"{self.reader} @ {self.role} reads {self.key_role} by {self.kind}"


def _position_role(task: CircuitTask, grain: str, position: int) -> str:
    if grain == "components":
        return EVERY_POSITION
    if grain == "roles":
        return role_group(task.roles[position])
    role = task.roles[position]  # one role per position: a role several positions share gets the position
    return role if task.roles.count(role) == 1 else f"{role}@{position}"


@dataclass(frozen=True)
class RoleGraph:
    """Every edge of one model on one prompt layout, residual edges first (``residual`` rows: reader, writer and
    role index), then attention reads. An edge is an index ``0 .. len(graph) - 1``."""

    components: CircuitGraph
    grain: str
    roles: tuple[str, ...]  # the node roles, in position order
    position_roles: Int[Tensor, " pos"]  # role index of each position in the graph
    scored: Int[Tensor, " slot"]  # positions whose next-token logits are scored
    residual: Int[Tensor, "edge 3"]
    reads: tuple[AttentionRead, ...]
    source_roles: tuple[tuple[str, ...], ...]  # per read: the roles of the positions it reads

    @property
    def n_pos(self) -> int:
        """Positions in the graph (0 .. the last scored)."""
        return len(self.position_roles)

    @property
    def n_residual(self) -> int:
        return self.residual.shape[0]

    def __len__(self) -> int:
        return self.n_residual + len(self.reads)

    def positions(self, role: int) -> Int[Tensor, " member"]:
        """The positions of role index ``role``."""
        return (self.position_roles == role).nonzero()[:, 0]

    def edge(self, index: int) -> Edge:
        """Edge ``index`` with its labels.

        >>> from interp.models import load_model
        >>> from interp.interventions.circuits.task import copying_task
        >>> model = load_model("planted-ub", device="cpu")
        >>> graph = role_graph(model, copying_task(model.tokenizer, "UB", 3, 2))
        >>> graph.edge(0).label, graph.edge(len(graph) - 1).kind
        ('a0.0.q <- embed @ prompt', 'value')
        """
        if not 0 <= index < len(self):
            raise IndexError(f"edge {index} of a graph of {len(self)} edges")
        if index < self.n_residual:
            r, w, role = self.residual[index].tolist()
            return Edge("residual", self.components.readers[r].label, self.components.writers[w].label, self.roles[role])
        read = self.reads[index - self.n_residual]
        kv = read.head // self.components.group_size
        return Edge(read.kind, read.head_label, f"a{read.layer}.{kv}.{read.kind[0]}", read.query_role, read.key_role)

    def edges(self) -> Iterator[Edge]:
        return (self.edge(i) for i in range(len(self)))

    @cached_property
    def index(self) -> dict[tuple[str, str, str, str, str], int]:
        """Edge index by ``(kind, reader, writer, role, key_role)``."""
        return {(e.kind, e.reader, e.writer, e.role, e.key_role): i for i, e in enumerate(self.edges())}

    def find(self, edge: Edge) -> int:
        """The index of ``edge`` (refused with a clear error when the graph has no such edge)."""
        key = (edge.kind, edge.reader, edge.writer, edge.role, edge.key_role)
        if key not in self.index:
            raise ValueError(f"edge {edge.label!r} is not in this {self.grain} graph of {len(self)} edges")
        return self.index[key]

    def entry_edges(self, kind: str, layer: int) -> Int[Tensor, "head query source"]:
        """For one read kind and layer: the read index (``0 ..``) covering each attention entry, -1 where none."""
        return self._entry_edges[(kind, layer)]

    @cached_property
    def _entry_edges(self) -> dict[tuple[str, int], Tensor]:
        out = {(kind, layer): torch.full((self.components.n_heads, self.n_pos, self.n_pos), -1, dtype=torch.long)
               for kind in READ_KINDS for layer in range(self.components.n_layers)}
        for i, read in enumerate(self.reads):
            out[(read.kind, read.layer)][read.head, read.query, read.source] = i
        return out

    @cached_property
    def role_positions(self) -> tuple[Tensor, ...]:
        """The positions of each role."""
        return tuple(self.positions(role) for role in range(len(self.roles)))


def role_graph(model_or_components, task: CircuitTask, grain: str = "roles") -> RoleGraph:
    """The graph of ``task``'s prompts at ``grain`` (see the module text).

    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> model = load_model("planted-ub", device="cpu")
    >>> graph = role_graph(model, copying_task(model.tokenizer, "UB", 3, 2))
    >>> graph.roles, graph.n_residual, len(graph.reads)
    (('prompt', 's', 'sep', 'c'), 524, 304)
    """
    from interp.interventions.circuits.graph import circuit_graph

    if grain not in GRAINS:
        raise ValueError(f"grain={grain!r}; expected one of {', '.join(GRAINS)}")
    components = model_or_components if isinstance(model_or_components, CircuitGraph) else circuit_graph(model_or_components)
    last = int(task.positions.max())
    names = [_position_role(task, grain, p) for p in range(last + 1)]
    roles = tuple(dict.fromkeys(names))
    position_roles = torch.tensor([roles.index(name) for name in names])
    scored_roles = {int(position_roles[p]) for p in task.positions.tolist()}
    logits = components.reader_index(Component("logits", components.n_layers))
    pairs = components.valid.nonzero()
    rows = [(r, w, role) for role in range(len(roles)) for r, w in pairs.tolist()
            if r != logits or role in scored_roles]  # the logits are read at scored positions only
    reads, source_roles = [], []
    if grain == "roles":
        for (query_role, key_role), (query, source) in entry_role_pairs(task).items():
            sources = tuple(dict.fromkeys(role_group(task.roles[s]) for s in source.tolist()))
            for kind in READ_KINDS:
                for layer in range(components.n_layers):
                    for head in range(components.n_heads):
                        reads.append(AttentionRead(layer, head, kind, query_role, key_role, query, source))
                        source_roles.append(sources)
    return RoleGraph(components, grain, roles, position_roles, task.positions.clone(),
                     torch.tensor(rows, dtype=torch.long).view(-1, 3), tuple(reads), tuple(source_roles))
