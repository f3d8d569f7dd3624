"""Edge-level patching: one query position reading one source position, through its key or its value.

``layout`` the model's attention as the hooks need it, ``patching`` the batched hooks, ``reference`` the slow per-query yardstick, ``data`` the paper's prompts,
``branching`` one forward pass for a shared prefix and several continuations, ``study`` the experiment and
its rows, ``preflight`` checks of a request against the model before loading it; the plots are
[`interp.figures.edges`][interp.figures.edges].
"""

from interp.interventions.edges.data import TASKS, CopyingPrompts, copying_prompts
from interp.interventions.edges.layout import AttentionLayout, attention_layout
from interp.interventions.edges.patching import EdgePatch, Edges, SourceActivations, capture_source_hooks, cut, edge_patch_hooks

__all__ = ["TASKS", "AttentionLayout", "CopyingPrompts", "EdgePatch", "Edges", "SourceActivations", "attention_layout",
           "capture_source_hooks", "copying_prompts", "cut", "edge_patch_hooks"]
