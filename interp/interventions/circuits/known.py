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
