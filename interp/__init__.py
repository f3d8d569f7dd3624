"""interp: a mechanistic-interpretability toolkit for the experiments of
*Born a Transformer -- Always a Transformer?* (Veitsman et al., 2025).

Submodules are imported on first use, so that light tools (figures from results files) do
not pay for importing torch and transformers."""

from importlib import import_module

_EXPORTS = {
    "load_model": "models",
    "TASKS": "tasks", "TASK_NAMES": "tasks", "TaskExample": "tasks", "TaskSpec": "tasks",
    "generate_examples": "tasks", "get_task": "tasks",
    "evaluate_task": "evaluate", "score_heads": "scoring", "ablated": "ablation", "ablation_hooks": "ablation",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'interp' has no attribute {name!r}")
