"""Circuit discovery over the residual-stream graph: ``graph`` (writers, readers, edges), ``task``
(prompts, counterfactual, metric), ``roles`` (what each position is), ``role_graph`` (the graph a circuit
is selected from: components at position roles, with attention reads; or every position, or every
component), ``masking`` and ``runner`` (edges removed exactly, many circuits per pass), ``scores`` and
``role_scores`` (EAP, EAP-IG over the inputs or the activations, exact), ``curve`` (faithfulness over a
fixed grid of edge fractions), ``optimize`` / ``pruning`` (whole-circuit selection), ``find`` and
``circuit`` (one call to a `Circuit`), ``selection`` (ROC AUC against a known circuit) and ``attention``
(attention-level edges: a query position reading a key position inside a head, by role)."""

from interp.interventions.circuits.attention import AttentionEdgeSet, attention_edge_scores, attention_exact_scores, role_edges
from interp.interventions.circuits.circuit import Circuit, CircuitEdge
from interp.interventions.circuits.curve import Curve, CurvePoint, faithfulness_curve
from interp.interventions.circuits.find import CircuitConfig, find_circuit
from interp.interventions.circuits.graph import CircuitGraph, Component, circuit_graph
from interp.interventions.circuits.role_graph import RoleGraph, role_graph
from interp.interventions.circuits.role_scores import exact_effects, role_edge_scores
from interp.interventions.circuits.runner import CircuitRunner, circuit_runner
from interp.interventions.circuits.scores import METHODS, PassCount, edge_scores
from interp.interventions.circuits.task import COUNTERFACTUALS, CircuitTask, copying_task

__all__ = ["COUNTERFACTUALS", "METHODS", "AttentionEdgeSet", "Circuit", "CircuitConfig", "CircuitEdge", "CircuitGraph",
           "CircuitRunner", "CircuitTask", "Component", "Curve", "CurvePoint", "PassCount", "RoleGraph",
           "attention_edge_scores", "attention_exact_scores", "circuit_graph", "circuit_runner", "copying_task",
           "edge_scores", "exact_effects", "faithfulness_curve", "find_circuit", "role_edge_scores", "role_edges",
           "role_graph"]
