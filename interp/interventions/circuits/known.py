"""The circuits planted by hand in `interp.models.planted`, as component-level edges (reader
label, writer label), the positive controls that discovery must recover. Only the edges that carry
the answer's token: with a corrupt counterfactual (same positions, other letters) the position
edges that place each head's attention do not change and so cannot be found by any score."""

from __future__ import annotations

from interp.models.planted import PlantedConfig

PLANTED_EDGES: dict[str, frozenset[tuple[str, str]]] = {
    # induction 1.0: query the token, key the previous token written by 0.0, copy the token there
    "uf": frozenset({("logits", "a1.0"), ("a1.0.v", "embed"), ("a1.0.q", "embed"), ("a1.0.k", "a0.0"),
                     ("a0.0.v", "embed")}),
    # backward copier 1.1: query and key the token, read the earlier occurrence's previous token (V-composition)
    "ub": frozenset({("logits", "a1.1"), ("a1.1.v", "a0.0"), ("a1.1.q", "embed"), ("a1.1.k", "embed"),
                     ("a0.0.v", "embed")}),
    # right retrieval 1.3: query and key the previous token (0.0), copy the token there
    "ur": frozenset({("logits", "a1.3"), ("a1.3.q", "a0.0"), ("a1.3.k", "a0.0"), ("a1.3.v", "embed"),
                     ("a0.0.v", "embed")}),
    # left retrieval 1.3: query the previous token (0.0), key the token, copy the previous token there
    "ul": frozenset({("logits", "a1.3"), ("a1.3.q", "a0.0"), ("a1.3.k", "embed"), ("a1.3.v", "a0.0"),
                     ("a0.0.v", "embed")}),
}


def planted_edges(model_name: str, task: str) -> frozenset[tuple[str, str]]:
    """The planted circuit of ``task`` in ``model_name`` (``planted-ub``, ``planted-both@0.5``, ...).

    >>> sorted(planted_edges("planted-both", "UB"))[:2]
    [('a0.0.v', 'embed'), ('a1.1.k', 'embed')]
    """
    config = PlantedConfig.from_name(model_name)
    key = task.lower()
    if key not in config.circuits or key not in PLANTED_EDGES:
        raise ValueError(f"{model_name} plants no {task.upper()} circuit; it plants {', '.join(config.circuits)}")
    return PLANTED_EDGES[key]


def _residual(reader: str, writer: str, role: str):
    from interp.interventions.circuits.role_graph import Edge

    return Edge("residual", reader, writer, role)


def _read(head: str, query_role: str, key_role: str, kind: str = "value"):
    from interp.interventions.circuits.role_graph import Edge

    layer, index = head[1:].split(".")
    return Edge(kind, head, f"a{layer}.{index}.{kind[0]}", query_role, key_role)


def planted_role_edges(model_name: str, task: str, part: str = "circuit") -> frozenset:
    """The planted circuit of ``task`` at the grain of roles (`interp.interventions.circuits.role_graph`), under
    the corrupt counterfactual.

    ``part="circuit"``: the value path that carries each answer, at the copy (``c``) and at the separator (which
    predicts the copy's first token): head 1.1 (UB) reads ``o``, whose residual holds the previous token written by
    head 0.0; head 1.0 (UF) reads ``o + 1``, and at the separator the string (its first letter). It is the smallest
    circuit that keeps the task: with every other edge removed, query and key both come from the corrupt prompt of
    the same layout and still meet at the same position. ``part="mechanism"`` adds that query/key path, which
    removed alone (a clean query against a corrupt key) does break the copy. ``part="copy"``: the value path at the
    copy alone (the separator's prediction of the first copied token left out).

    >>> sorted(e.label for e in planted_role_edges("planted-uf", "UF"))[:2]
    ['a1.0 @ c reads o+1 by value', 'a1.0 @ sep reads s by value']
    >>> len(planted_role_edges("planted-ub", "UB", "mechanism"))
    12
    """
    planted_edges(model_name, task)  # refuses a model that plants no such circuit
    if part not in ("circuit", "mechanism", "copy"):
        raise ValueError(f"part={part!r}; expected 'circuit', 'mechanism' or 'copy'")
    if task.upper() == "UB":
        circuit = {_residual("logits", "a1.1", "c"), _read("a1.1", "c", "o"), _residual("a1.1.v", "a0.0", "s"),
                   _read("a0.0", "s", "t-1"), _residual("a0.0.v", "embed", "s"), _residual("logits", "a1.1", "sep"),
                   _read("a1.1", "sep", "t"), _residual("a1.1.v", "a0.0", "sep"), _read("a0.0", "sep", "t-1")}
        query_key = {_read("a1.1", "c", "o", "key"), _residual("a1.1.q", "embed", "c"), _residual("a1.1.k", "embed", "s")}
    elif task.upper() == "UF":
        circuit = {_residual("logits", "a1.0", "c"), _read("a1.0", "c", "o+1"), _residual("a1.0.v", "embed", "s"),
                   _residual("logits", "a1.0", "sep"), _read("a1.0", "sep", "s")}
        query_key = {_read("a1.0", "c", "o+1", "key"), _residual("a1.0.q", "embed", "c"), _residual("a1.0.k", "a0.0", "s"),
                     _read("a0.0", "s", "t-1"), _residual("a0.0.v", "embed", "s")}
    else:
        raise ValueError(f"no role-level planted circuit for {task}; expected UF or UB")
    if part == "copy":
        return frozenset(e for e in circuit if e.role != "sep")
    return frozenset(circuit | (query_key if part == "mechanism" else set()))
