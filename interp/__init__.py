"""interp: a mechanistic-interpretability toolkit for the experiments of
*Born a Transformer -- Always a Transformer?* (Veitsman et al., 2025).

The packages follow the flow of data, each importing only those before it: ``core`` ->
``data`` -> ``crasp`` (the theory) -> ``prompts`` -> ``models`` -> ``measure`` ->
``interventions`` -> ``training`` -> ``experiments`` -> ``figures`` -> ``cli``.

Submodules are imported on first use, so that light tools (figures from results files) do
not pay for importing torch and transformers."""

from importlib import import_module

_EXPORTS = {
    "load_model": "models",
    "TASKS": "data.tasks", "TASK_NAMES": "data.tasks", "TaskExample": "data.tasks", "TaskSpec": "data.tasks",
    "generate_examples": "data.tasks", "get_task": "data.tasks",
    "evaluate_task": "measure.evaluate", "score_heads": "measure.head_scores",
    "ablated": "interventions.ablation", "ablation_hooks": "interventions.ablation",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'interp' has no attribute {name!r}")
