"""Circuit discovery over the residual-stream graph: ``graph`` (writers, readers, edges), ``task``
(prompts, counterfactual, metric), ``roles`` (what each position is), ``patching`` (the hooks that
remove edges), ``scores`` (EAP, EAP-IG over the inputs or the activations, exact), ``faithfulness``
(circuits ablated outside, curves), ``selection`` (top-n and greedy circuits, ROC AUC against a
known circuit) and ``attention`` (attention-level edges: a query position reading a key position
inside a head, by role)."""

from interp.interventions.circuits.attention import AttentionEdgeSet, attention_edge_scores, attention_exact_scores, role_edges
from interp.interventions.circuits.graph import CircuitGraph, Component, circuit_graph
from interp.interventions.circuits.patching import ALL_POSITIONS, GraphEdges
from interp.interventions.circuits.scores import METHODS, PassCount, edge_scores, exact_scores
from interp.interventions.circuits.task import COUNTERFACTUALS, CircuitTask, copying_task

__all__ = ["ALL_POSITIONS", "COUNTERFACTUALS", "METHODS", "AttentionEdgeSet", "CircuitGraph", "CircuitTask", "Component",
           "GraphEdges", "PassCount", "attention_edge_scores", "attention_exact_scores", "circuit_graph", "copying_task",
           "edge_scores", "exact_scores", "role_edges"]
