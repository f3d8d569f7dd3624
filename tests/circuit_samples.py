"""Circuits made in code for the figure and view tests: a pretrained-sized one (30 layers, 9 query heads, 3
key/value heads, the role graph's roles), its ranking, a curve on the fixed grid, and the published files."""

from __future__ import annotations

import random
from pathlib import Path

from interp.core.tables import write_table
from interp.figures.circuit_files import RANKING_COLUMNS
from interp.interventions.circuits.circuit import Circuit, CircuitEdge
from interp.interventions.circuits.curve import FRACTIONS, Curve, CurvePoint, grid_sizes

ROLES = ("bos", "prompt", "s", "sep", "c")
KEY_ROLES = ("o+1", "o", "o-1", "t", "t-1")
TOTAL = 60_000  # role edges of the sampled graph


def sample_edges(n: int, seed: int = 0, layers: int = 30, heads: int = 9, kv_heads: int = 3,
                 roles=ROLES, key_roles=KEY_ROLES) -> list[CircuitEdge]:
    """``n`` distinct edges of every kind, with scores (descending in size) and no loss."""
    rng = random.Random(seed)
    group = heads // kv_heads
    seen, edges = set(), []
    while len(edges) < n:
        layer, head, role = rng.randrange(layers), rng.randrange(heads), rng.choice(roles)
        kind = rng.choice(("residual", "residual", "residual", "key", "value"))
        if kind == "residual":
            reader = rng.choice((f"a{layer}.{head}.q", f"a{layer}.{head // group}.k", f"a{layer}.{head // group}.v",
                                 f"m{layer}.in", "logits"))
            below = rng.randrange(layer) if layer else -1
            writer = "embed" if below < 0 or reader == "logits" and rng.random() < 0.2 else \
                rng.choice((f"a{below}.{rng.randrange(heads)}", f"m{below}"))
            edge = CircuitEdge("residual", reader, writer, role)
        else:
            sources = ",".join(sorted(set(rng.sample(roles, rng.choice((1, 1, 2)))), key=roles.index))
            edge = CircuitEdge(kind, f"a{layer}.{head}", f"a{layer}.{head // group}.{kind[0]}", role, rng.choice(key_roles),
                               sources=sources)
        key = (edge.kind, edge.reader, edge.writer, edge.role, edge.key_role)
        if key not in seen:
            seen.add(key)
            edges.append(edge)
    return [CircuitEdge(**{**vars(e), "score": round((n - i) * (1 if i % 3 else -1) / n, 6),
                           "rank_value": round((n - i) / n, 6)}) for i, e in enumerate(edges)]


def sample_circuit(n_edges: int = 200, seed: int = 0, ranking: int = 2000, model: str = "smollm2-135m",
                   task: str = "UF", **labels) -> tuple[Circuit, tuple[CircuitEdge, ...]]:
    """A circuit of ``n_edges`` (losses measured, descending) selected from a ranking of ``ranking`` edges (the
    circuit is its top ``n_edges``), with a curve on the fixed grid of a ``TOTAL``-edge graph."""
    ranked = sample_edges(ranking, seed, **labels)
    edges = tuple(CircuitEdge(**{**vars(e), "loss": round(0.5 / (i + 1), 6)}) for i, e in enumerate(ranked[:n_edges]))
    sizes = grid_sizes(TOTAL, FRACTIONS)
    points = tuple(CurvePoint(f, k, recovered=min(1.0, k / 150), accuracy=min(1.0, k / 400), random_recovered=k / TOTAL,
                              random_accuracy=0.0) for f, k in zip(FRACTIONS, sizes))
    circuit = Circuit(model, task, "top-k", "roles", edges, recovered=0.86, accuracy=0.875, clean_accuracy=1.0,
                      clean_metric=6.0, empty_metric=-1.0, n_prompts=16, total_edges=TOTAL,
                      curve=Curve(points, TOTAL, 6.0, -1.0, 1.0, 0.0), config={"score": "eap-ig"})
    return circuit, tuple(ranked)


def publish(results: Path, circuit: Circuit, ranking, stem: str) -> Path:
    """The files the circuit script publishes: ``<stem>.json`` (the table's JSON, the circuit as its metadata),
    ``.csv`` / ``.md``, and ``circuit_ranking_<rest>.csv``."""
    results.mkdir(parents=True, exist_ok=True)
    write_table(circuit.rows(), results / stem, metadata=circuit.to_json())
    rows = [{"rank": i + 1, "kind": e.kind, "reader": e.reader, "writer": e.writer, "role": e.role, "key_role": e.key_role,
             "sources": e.sources, "score": e.score, "rank_value": e.rank_value} for i, e in enumerate(ranking)]
    write_table(rows, results / stem.replace("circuit_", "circuit_ranking_", 1), columns=RANKING_COLUMNS, formats=("csv",))
    return results / f"{stem}.json"
