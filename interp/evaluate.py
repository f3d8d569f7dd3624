"""In-context accuracy of a model on the synthetic tasks: seeded prompts, scored by teacher
forcing (:mod:`interp.teacher_forcing`) in one pass per batch. ``generate_accuracy``
(:mod:`interp.generation`) scores the slow way, string by string, as the paper does."""

from __future__ import annotations

from collections.abc import Sequence

from .batching import Hook
from .datasets import ExampleSource, Generated
from .generation import generate_accuracy, generate_answers, greedy_continuation
from .prompts import Prompt, PromptConfig, build_prompts, encode_prompts
from .tasks import TaskSpec, get_task
from .teacher_forcing import Accuracy, AnswerScores, scores_from_logits, teacher_forced_scores

__all__ = ["Accuracy", "AnswerScores", "evaluate_prompts", "evaluate_task", "task_row", "generate_accuracy", "generate_answers",
           "greedy_continuation", "resolve_prepend_bos", "scores_from_logits", "task_prompts"]


def task_prompts(model, task: str | TaskSpec, length: int, n_examples: int, seed: int = 0,
                 prompt_config: PromptConfig = PromptConfig(), vocabulary: Sequence[str] | None = None,
                 source: ExampleSource | None = None) -> list[Prompt]:
    """Seeded prompts of a task. Examples come from ``source`` (default: the generator over
    ``vocabulary``, itself by default the paper's items for the task,
    :func:`interp.vocab.paper_vocabulary`); demonstrations from the generator over the same items."""
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    source = source or Generated(tuple(vocabulary) if vocabulary else None)
    examples = source.examples(spec, length, n_examples, seed)
    return build_prompts(examples, prompt_config, seed=seed, vocabulary=source.items(spec))


def resolve_prepend_bos(model, prompt_config: PromptConfig) -> bool:
    """``prompt_config.prepend_bos`` if set, never under the paper's protocol, else the model's
    default (``cfg.default_prepend_bos``: whether the model's own tokenizer adds a BOS)."""
    if prompt_config.protocol == "paper":
        return False
    if prompt_config.prepend_bos is not None:
        return prompt_config.prepend_bos
    return bool(getattr(model.cfg, "default_prepend_bos", True))


def evaluate_prompts(model, prompts: Sequence[Prompt], prompt_config: PromptConfig = PromptConfig(),
                     batch_size: int = 8, fwd_hooks: Sequence[Hook] = (), progress: bool | str = True) -> AnswerScores:
    encoded = encode_prompts(model.tokenizer, prompts, prepend_bos=resolve_prepend_bos(model, prompt_config))
    return teacher_forced_scores(model, encoded, batch_size, fwd_hooks, progress)


def evaluate_task(model, task: str | TaskSpec, length: int, n_examples: int = 100, *, seed: int = 0,
                  prompt_config: PromptConfig = PromptConfig(), vocabulary: Sequence[str] | None = None,
                  batch_size: int = 8, fwd_hooks: Sequence[Hook] = (), progress: bool | str = True,
                  source: ExampleSource | None = None) -> Accuracy:
    """Exact-match accuracy of ``model`` on ``n_examples`` seeded examples of ``task`` at ``length``.

    ``fwd_hooks`` (TransformerLens ``(name, fn)`` pairs, e.g. from ``interp.ablation``) are
    active during every forward pass, so the same call measures ablated models."""
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    prompts = task_prompts(model, spec, length, n_examples, seed, prompt_config, vocabulary, source)
    label = progress if isinstance(progress, str) else f"{spec.name} n={length}"
    return Accuracy.of(evaluate_prompts(model, prompts, prompt_config, batch_size, fwd_hooks, progress and label))


def task_row(task: str, length: int, accuracy: Accuracy, prompt_config: PromptConfig, seed: int) -> dict:
    """One row of a per-task results table (directional bias, ablations)."""
    return {"task": task, "length": length, **accuracy.as_row(), "n_shots": prompt_config.n_shots,
            "template": prompt_config.template_for(get_task(task).family), "protocol": prompt_config.protocol,
            "seed": seed}
