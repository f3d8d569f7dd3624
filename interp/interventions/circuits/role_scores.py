"""Scores of every edge of a role graph: first-order (EAP, EAP-IG) and exact.

First-order effects add, so a residual edge's score is the sum of its positions' scores
(`interp.interventions.circuits.scores.edge_scores`) and an attention read's the sum of its entries'
(`interp.interventions.circuits.attention.attention_edge_scores`); both share the noising sign convention
(an edge the task needs scores negative). ``exact`` is ``metric(edge removed alone) - metric(clean)``,
measured with the same removal a circuit's faithfulness uses (`interp.interventions.circuits.masking`), so
the score of an edge is what removing it does, in the graph's own units.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from tqdm.auto import tqdm
from jaxtyping import Float, Int
from torch import Tensor

from interp.interventions.circuits.attention import attention_edge_scores
from interp.interventions.circuits.role_graph import READ_KINDS, RoleGraph
from interp.interventions.circuits.runner import CircuitRunner
from interp.interventions.circuits.scores import PassCount, edge_scores

ROLE_METHODS: tuple[str, ...] = ("eap", "eap-ig", "exact")
MAX_EXACT_EDGES = 20_000  # exact scores of every edge cost one pass of the prompts per edge


def residual_scores(position_scores: Float[Tensor, "pos reader writer"], graph: RoleGraph) -> Float[Tensor, " residual"]:
    """Each residual edge's score: the sum over its role's positions.

    >>> import torch
    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> from interp.interventions.circuits.role_graph import role_graph
    >>> model = load_model("planted-ub", device="cpu")
    >>> graph = role_graph(model, copying_task(model.tokenizer, "UB", 3, 2), grain="components")
    >>> scores = torch.ones(15, len(graph.components.readers), len(graph.components.writers))
    >>> float(residual_scores(scores, graph)[0])           # 9 positions up to the last scored one, summed
    9.0
    """
    n_roles = len(graph.roles)
    per_role = torch.zeros(n_roles, *position_scores.shape[1:]).index_add_(
        0, graph.position_roles, position_scores[:graph.n_pos].float())
    r, w, role = graph.residual.unbind(-1)
    return per_role[role, r, w]


def read_scores(entry_scores: Float[Tensor, "kind layer head query source"], graph: RoleGraph) -> Float[Tensor, " read"]:
    """Each attention read's score: the sum over its entries."""
    out = torch.zeros(len(graph.reads))
    for i, read in enumerate(graph.reads):
        out[i] = entry_scores[READ_KINDS.index(read.kind), read.layer, read.head, read.query, read.source].sum()
    return out


def role_edge_scores(runner: CircuitRunner, method: str = "eap-ig", *, steps: int = 4, passes: PassCount | None = None,
                     progress: bool = False) -> Float[Tensor, " edge"]:
    """Scores of every edge of ``runner.graph``: first-order (``eap``, ``eap-ig`` with ``steps`` points) or
    ``exact`` (`exact_effects` of every edge; graphs of at most `MAX_EXACT_EDGES` edges).

    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> from interp.interventions.circuits.runner import circuit_runner
    >>> model = load_model("planted-ub", device="cpu")
    >>> runner = circuit_runner(model, copying_task(model.tokenizer, "UB", 3, 4))
    >>> scores = role_edge_scores(runner, "eap")
    >>> graph = runner.graph
    >>> top = {graph.edge(i).label for i in scores.argsort()[:5].tolist()}   # the five most needed edges
    >>> sorted(top & {"a1.1 @ c reads o by value", "a0.0 @ s reads t-1 by value"})   # hold the planted reads
    ['a0.0 @ s reads t-1 by value', 'a1.1 @ c reads o by value']
    """
    if method not in ROLE_METHODS:
        raise ValueError(f"method={method!r}: role-level scores are one of {', '.join(ROLE_METHODS)}")
    if method == "exact":
        if len(runner.graph) > MAX_EXACT_EDGES:
            raise ValueError(f"method='exact' measures each of the {len(runner.graph):,} edges in its own pass (at most "
                             f"{MAX_EXACT_EDGES:,}); use 'eap-ig'")
        with tqdm(total=runner.passes(len(runner.graph)), desc="exact scores", disable=not progress) as bar:
            return exact_effects(runner, torch.arange(len(runner.graph)), on_pass=bar.update)
    common = dict(steps=steps, counterfactual=runner.counterfactual, batch_size=runner.batch_size, passes=passes,
                  progress=progress)
    positions = edge_scores(runner.model, runner.task, method, graph=runner.graph.components, **common)
    scores = [residual_scores(positions, runner.graph)]
    if runner.graph.reads:
        entries = attention_edge_scores(runner.model, runner.task, method, layout=runner.layout, **common)
        scores.append(read_scores(entries, runner.graph))
    return torch.cat(scores)


def exact_effects(runner: CircuitRunner, edges: Int[Tensor, " k"], *, on_pass: Callable[[], None] | None = None
                  ) -> Float[Tensor, " k"]:
    """``metric(edge removed alone) - metric(clean)`` of each edge, averaged over the prompts.

    >>> import torch
    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> from interp.interventions.circuits.runner import circuit_runner
    >>> model = load_model("planted-ub", device="cpu")
    >>> runner = circuit_runner(model, copying_task(model.tokenizer, "UB", 3, 4))
    >>> anti = runner.graph.find(runner.graph.edge(int(role_edge_scores(runner, "eap").argmin())))
    >>> bool(exact_effects(runner, torch.tensor([anti]))[0] < -10)
    True
    """
    measured = runner.measure([e[None] for e in edges.long()], kept_by_default=True, on_pass=on_pass)
    return measured.metric - runner.clean_metric


def removal_losses(runner: CircuitRunner, circuit: Int[Tensor, " k"], *, on_pass: Callable[[], None] | None = None
                   ) -> Float[Tensor, " k"]:
    """Minimality: for each edge of ``circuit``, how much of the gap the circuit loses without it (its recovered
    share minus the share with that edge removed too); an edge that does not matter loses about 0."""
    circuit = circuit.long()
    whole = float(runner.recovered(runner.measure([circuit]).metric[0]))
    without = [circuit[torch.arange(len(circuit)) != i] for i in range(len(circuit))]
    shares = runner.recovered(runner.measure(without, on_pass=on_pass).metric)
    return whole - shares
