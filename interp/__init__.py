"""interp: a mechanistic-interpretability toolkit for the experiments of
*Born a Transformer -- Always a Transformer?* (Veitsman et al., 2025)."""

from .models import load_model
from .tasks import TASKS, TASK_NAMES, TaskExample, TaskSpec, generate_examples, get_task

__all__ = ["load_model", "TASKS", "TASK_NAMES", "TaskExample", "TaskSpec", "generate_examples", "get_task"]
