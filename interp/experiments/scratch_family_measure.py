"""What the from-scratch family measures on each model: its route table and the paper's edge patching, both
on the single-shot line the models were trained on (``<bos> s : c``), and its circuit (greedy pruning verified
exactly, `interp.interventions.circuits.find`).

[`measure_routes`][interp.experiments.scratch_family_measure.measure_routes] is the one place the route
instrument (`interp.experiments.routes`) is called: per route (``o-1``, ``o``, ``o+1``, and ``o-1+o``
removed together), read kind (value, key), test (necessity, sufficiency) and counterfactual, the exact
copies left with a Wilson interval, the share of the gap with a bootstrap interval, and the routes
module's verdict.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from interp.experiments.edge_study import EdgeStudyConfig, edge_study
from interp.experiments.routes import ROUTE_COUNTERFACTUALS, check_counterfactuals, route_rows, route_summary
from interp.interventions.circuits.task import copying_task
from interp.interventions.edges.data import check_length
from interp.models.bridge import TransformerBridge


@dataclass(frozen=True)
class MeasureConfig:
    """Prompts of the route table and of the edge patching (the paper's lengths 3-9; 100 prompts a cell)."""

    route_lengths: tuple[int, ...] = (5, 9)
    route_n: int = 64
    edge_lengths: tuple[int, ...] = (3, 5, 7, 9)
    edge_n: int = 100
    seed: int = 0
    batch_size: int = 16
    route_counterfactuals: tuple[str, ...] = ROUTE_COUNTERFACTUALS
    circuit_length: int = 5
    circuit_n: int = 16
    circuit_method: str = "greedy"

    def __post_init__(self) -> None:
        check_counterfactuals(self.route_counterfactuals)
        for length in (*self.route_lengths, *self.edge_lengths):
            check_length(length)
        if not set(self.route_lengths) <= set(self.edge_lengths):
            raise ValueError(f"route_lengths={self.route_lengths} must be among edge_lengths={self.edge_lengths} "
                             "(the summary sets both side by side)")
        if min(self.route_n, self.edge_n, self.batch_size) < 1:
            raise ValueError("route_n, edge_n and batch_size must be >= 1")


def measure_routes(model: TransformerBridge, task: str, length: int, config: MeasureConfig) -> list[dict]:
    """The route table of one model at one length, summarised over prompts (`interp.experiments.routes.route_summary`:
    one row per route, read kind, test and counterfactual), each row with the mean gap ``gap`` (clean minus
    counterfactual-prompt logit difference) its share is a share of.

    >>> from interp.models import load_model
    >>> rows = measure_routes(load_model("planted-ub", device="cpu"), "UB", 4, MeasureConfig(route_n=4))
    >>> {r["route"]: r["verdict"] for r in rows if (r["kind"], r["test"], r["counterfactual"]) == ("value", "necessity", "mean")}
    {'o-1': 'not needed', 'o': 'needed', 'o+1': 'not needed', 'o-1+o': 'needed'}
    """
    prompts = copying_task(model.tokenizer, task, length, config.route_n, seed=config.seed, fmt="single-shot",
                           prepend_bos=True)
    rows = route_rows(model, prompts, counterfactuals=config.route_counterfactuals, batch_size=config.batch_size,
                      fmt="single-shot")
    one = [r for r in rows if (r.route, r.kind, r.test, r.counterfactual) == (rows[0].route, rows[0].kind, rows[0].test,
                                                                            rows[0].counterfactual)]
    gap = sum(r.clean_metric - r.counterfactual_metric for r in one) / len(one)
    return [summary.as_row() | {"gap": gap} for summary in route_summary(rows)]


def measure_edges(model: TransformerBridge, name: str, task: str, config: MeasureConfig) -> list[dict]:
    """The paper's edge patching on one model: copy accuracy with no intervention, induction edges
    removed and anti-induction edges removed, with Wilson intervals, at every edge length.

    >>> from interp.models import load_model
    >>> rows = measure_edges(load_model("planted-ub", device="cpu"), "planted-ub", "UB",
    ...                      MeasureConfig(route_lengths=(4,), edge_lengths=(4,), edge_n=8))
    >>> {row["condition"]: row["accuracy"] for row in rows}
    {'none': 1.0, 'induction': 1.0, 'anti_induction': 0.0}
    """
    study = EdgeStudyConfig(tasks=(task,), lengths=config.edge_lengths, n=config.edge_n, n_shots=1, seed=config.seed,
                            batch_size=config.batch_size, sweep_n=0, prepend_bos=True, prompt_format="single-shot")
    rows, _ = edge_study(model, study, model_label=name)
    return [asdict(row) for row in rows]


def family_circuit(model: TransformerBridge, name: str, task: str, config: MeasureConfig) -> list[dict]:
    """The circuit of a family model at ``circuit_length``: one row per edge (its labels, loss when removed from
    the circuit, first-order score) with the circuit's size, recovered share and accuracy; none where the model
    does not do the task (`interp.interventions.circuits.runner.WeakTaskError`).

    >>> from interp.models import load_model
    >>> rows = family_circuit(load_model("planted-ub", device="cpu"), "planted-ub", "UB", MeasureConfig(circuit_n=4))
    >>> "a1.1 @ c reads o by value" in {r["edge"] for r in rows}, rows[0]["circuit_edges"] == len(rows)
    (True, True)
    """
    from interp.interventions.circuits.find import find_circuit
    from interp.interventions.circuits.runner import WeakTaskError

    try:
        circuit = find_circuit(model, task, length=config.circuit_length, n=config.circuit_n, prepend_bos=True,
                               method=config.circuit_method, seed=config.seed, model_label=name,
                               fractions=(0.0, 0.001, 0.01, 0.1, 1.0), steps=2)
    except WeakTaskError:
        return []
    summary = {"length": config.circuit_length, "method": circuit.method, "circuit_edges": len(circuit),
               "total_edges": circuit.total_edges, "recovered": circuit.recovered, "accuracy": circuit.accuracy,
               "clean_accuracy": circuit.clean_accuracy, "n": circuit.n_prompts}
    return [summary | {"rank": row["rank"], "edge": row["edge"], "kind": row["kind"], "reader": row["reader"],
                       "writer": row["writer"], "role": row["role"], "key_role": row["key_role"], "loss": row["loss"],
                       "score": row["score"]} for row in circuit.rows()]


def measure_model(model: TransformerBridge, name: str, task: str, config: MeasureConfig) -> dict[str, list[dict]]:
    """Every measurement of one model, as rows of the routes, edges and circuits tables (each tagged with
    the model's name)."""
    routes = [row for length in config.route_lengths for row in measure_routes(model, task, length, config)]
    tables = {"routes": routes, "edges": measure_edges(model, name, task, config),
              "circuits": family_circuit(model, name, task, config)}
    return {kind: [{"model": name, **row} for row in rows] for kind, rows in tables.items()}
