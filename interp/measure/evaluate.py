"""In-context accuracy of a model on the synthetic tasks: seeded prompts, scored by teacher
forcing ([`interp.measure.teacher_forcing`][interp.measure.teacher_forcing]) in one pass per batch. ``generate_accuracy``
([`interp.measure.generation`][interp.measure.generation]) scores the slow way, string by string, as the paper does."""

from __future__ import annotations

from collections.abc import Sequence

from interp.core.lm import LanguageModel
from interp.measure.batching import Hook
from interp.data.paper_files import ExampleSource, Generated
from interp.measure.encoding import encode_for
from interp.measure.generation import generate_accuracy, generate_answers, greedy_continuation
from interp.prompts import Prompt, PromptConfig, build_prompts
from interp.data.tasks import TaskSpec, get_task
from interp.measure.teacher_forcing import Accuracy, AnswerScores, teacher_forced_scores

__all__ = ["Accuracy", "AnswerScores", "evaluate_prompts", "evaluate_task", "generate_accuracy", "generate_answers",
           "greedy_continuation", "task_prompts"]


def task_prompts(model: LanguageModel | None, task: str | TaskSpec, length: int, n_examples: int, seed: int = 0,
                 prompt_config: PromptConfig = PromptConfig(), vocabulary: Sequence[str] | None = None,
                 source: ExampleSource | None = None) -> list[Prompt]:
    """Seeded prompts of a task. Examples come from ``source`` (default: the generator over
    ``vocabulary``, itself by default the paper's items for the task,
    [`interp.data.vocab.paper_vocabulary`][interp.data.vocab.paper_vocabulary]); demonstrations from the generator over the same items.

    >>> from interp.models import load_model
    >>> prompts = task_prompts(load_model("tiny-llama", device="cpu"), "UF", length=4, n_examples=3)
    >>> len(prompts), prompts[0].example.task
    (3, 'UF')
    """
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    source = source or Generated(tuple(vocabulary) if vocabulary else None)
    examples = source.examples(spec, length, n_examples, seed)
    return build_prompts(examples, prompt_config, seed=seed, vocabulary=source.items(spec))


def evaluate_prompts(model: LanguageModel, prompts: Sequence[Prompt], prompt_config: PromptConfig = PromptConfig(),
                     batch_size: int = 8, fwd_hooks: Sequence[Hook] = (), progress: bool | str = False) -> AnswerScores:
    """Teacher-forced scores of ``prompts``, encoded as ``prompt_config`` says, with ``fwd_hooks`` active.

    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")
    >>> scores = evaluate_prompts(model, task_prompts(model, "UF", 4, n_examples=3), progress=False)
    >>> scores.correct.shape, bool((scores.mean_logprob < 0).all())
    (torch.Size([3]), True)
    """
    encoded = encode_for(model, prompts, prompt_config)
    return teacher_forced_scores(model, encoded, batch_size, fwd_hooks, progress)


def evaluate_task(model: LanguageModel, task: str | TaskSpec, length: int, n_examples: int = 100, *, seed: int = 0,
                  prompt_config: PromptConfig = PromptConfig(), vocabulary: Sequence[str] | None = None,
                  batch_size: int = 8, fwd_hooks: Sequence[Hook] = (), progress: bool | str = False,
                  source: ExampleSource | None = None) -> Accuracy:
    """Exact-match accuracy of ``model`` on ``n_examples`` seeded examples of ``task`` at ``length``.

    ``fwd_hooks`` (TransformerLens ``(name, fn)`` pairs, e.g. from ``interp.interventions.ablation``) are
    active during every forward pass, so the same call measures ablated models.

    Examples:
        >>> from interp.models import load_model
        >>> model = load_model("tiny-llama", device="cpu")
        >>> result = evaluate_task(model, "UF", length=5, n_examples=4, progress=False)
        >>> result.n_examples, 0.0 <= result.accuracy <= 1.0
        (4, True)
    """
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    prompts = task_prompts(model, spec, length, n_examples, seed, prompt_config, vocabulary, source)
    label = progress if isinstance(progress, str) else f"{spec.name} n={length}"
    return Accuracy.of(evaluate_prompts(model, prompts, prompt_config, batch_size, fwd_hooks, progress and label))


