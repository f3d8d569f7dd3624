"""What a head-ablation study needs before it runs: its configuration, the conditions (which heads
each ablates), the prompt sets, the mean-ablation reference and the head scores, and the checks that
refuse an impossible request before any forward pass.

The study itself ([`interp.experiments.head_ablation.ablation_study`][interp.experiments.head_ablation.ablation_study]) runs the conditions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING


from interp.core.executor import NO_MODEL, Executor, ModelSource, SerialExecutor
from interp.core.heads import Head
from interp.core.locking import TableLock
from interp.core.naming import model_name
from interp.core.lm import LanguageModel
from interp.core.tables import stem_file, write_table
from interp.data.paper_files import ExampleSource, Generated
from interp.measure.mechanism_scores import MECHANISM_SCORES, all_head_scores
from interp.data.tasks import get_task
from interp.interventions.ablation import ABLATION_KINDS, HeadMeans, compute_head_means, random_heads
from interp.measure.encoding import encode_for
from interp.measure.evaluate import task_prompts
from interp.measure.head_scores import SCORE_NAMES, HeadScores, task_attention_scores
from interp.measure.score_tables import model_dtype, read_head_scores
from interp.measure.teacher_forcing import check_context
from interp.prompts import PromptConfig

if TYPE_CHECKING:
    from transformer_lens.model_bridge import TransformerBridge

Log = Callable[[str], None]
SELECTABLE_SCORES: tuple[str, ...] = (*SCORE_NAMES, *MECHANISM_SCORES)


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class AblationConfig:
    tasks: tuple[str, ...] = ("UF", "UB", "UR", "UL")
    lengths: tuple[int, ...] = (10,)
    k: int = 10
    n_examples: int = 30
    kinds: tuple[str, ...] = ("zero", "mean")
    random_seeds: tuple[int, ...] = (0, 1, 2)
    seed: int = 0
    n_reference: int = 20  # prompts per task for the mean-ablation reference (their own seed)
    batch_size: int = 8
    prompt_config: PromptConfig = field(default_factory=PromptConfig)
    source: ExampleSource = field(default_factory=Generated)
    induction_by: str = "induction"  # the head score the "induction" set is the top k of
    anti_by: str = "anti_induction"  # ... and the "anti_induction" set (e.g. "duplicate_v_composition")

    def __post_init__(self) -> None:
        for kind in self.kinds:
            if kind not in ABLATION_KINDS:
                raise ValueError(f"ablation kind {kind!r} is not one of {ABLATION_KINDS}")
        if not self.kinds:
            raise ValueError(f"kinds: name at least one ablation kind ({', '.join(ABLATION_KINDS)})")
        if not self.tasks:
            raise ValueError("tasks: name at least one task")
        if not self.lengths or min(self.lengths) < 1:
            raise ValueError(f"lengths={self.lengths}: give at least one positive length")
        if len(set(self.random_seeds)) != len(self.random_seeds):
            raise ValueError(f"random_seeds={self.random_seeds}: each seed once (a repeat counts one draw twice)")
        for name in ("k", "n_examples", "n_reference", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 1")
        for task in self.tasks:
            get_task(task)
        for name in ("induction_by", "anti_by"):
            if getattr(self, name) not in SELECTABLE_SCORES:
                raise ValueError(f"{name}={getattr(self, name)!r} is not a head score; expected one of {SELECTABLE_SCORES}")

    def check_model(self, n_layers: int, n_heads: int) -> None:
        """Refuse, before any work, a ``k`` the model cannot supply: k heads per ablated set, and
        k random heads outside both top-k sets."""
        total = n_layers * n_heads
        if self.k > total:
            raise ValueError(f"k={self.k} heads per set, but the model has only {total} heads ({n_layers} x {n_heads})")
        if self.random_seeds and total - 2 * self.k < self.k:
            raise ValueError(f"k={self.k}: the random-head control needs {self.k} heads outside the top-k induction and "
                             f"anti-induction sets, but the model has only {total} heads; lower k or pass no random seeds")

    def as_dict(self) -> dict:
        """JSON-ready: the example source by its description, not its records."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("prompt_config", "source")}
        return out | {"prompt_config": asdict(self.prompt_config), "source": self.source.describe()}


def ablation_conditions(scores: HeadScores, config: AblationConfig) -> list[tuple[str, int | None, list[Head]]]:
    """(condition, random seed, heads): top-k induction, top-k anti-induction (by the scores
    ``config.induction_by`` and ``config.anti_by``), k random (per seed, drawn from the heads in
    neither top list).

    >>> import torch
    >>> from interp.core.heads import format_heads
    >>> grid = torch.arange(8.0).view(2, 4)   # 2 layers x 4 heads
    >>> scores = HeadScores({"induction": grid, "anti_induction": -grid})
    >>> for condition, seed, heads in ablation_conditions(scores, AblationConfig(k=2, random_seeds=(0,))):
    ...     print(condition, seed, format_heads(heads))
    induction None 1.3;1.2
    anti_induction None 0.0;0.1
    random 0 0.3;1.1
    """
    induction = scores.top_heads(config.induction_by, config.k)
    anti = scores.top_heads(config.anti_by, config.k)
    conditions: list[tuple[str, int | None, list[Head]]] = [("induction", None, induction), ("anti_induction", None, anti)]
    for seed in config.random_seeds:
        conditions.append(("random", seed, random_heads(scores.n_layers, scores.n_heads, config.k, seed,
                                                        exclude=induction + anti)))
    return conditions


def reference_means(model: TransformerBridge, config: AblationConfig, vocabulary: Sequence[str] | None = None,
                    progress: bool = False) -> HeadMeans:
    """Mean ``hook_z`` over all tokens of reference prompts of every task (a seed of their own).

    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")
    >>> means = reference_means(model, AblationConfig(tasks=("UF",), lengths=(3,), n_reference=2), progress=False)
    >>> sorted(means.overall), tuple(means.overall[0].shape)   # per layer: [head, d_head]
    ([0, 1], (4, 16))
    """
    prompts = [p for task in config.tasks for length in config.lengths
               for p in task_prompts(model, task, length, config.n_reference, config.seed + 10_000,
                                     config.prompt_config, vocabulary, Generated(config.source.items(task)))]
    encoded = encode_for(model, prompts, config.prompt_config)
    return compute_head_means(model, encoded, per_position=False, batch_size=config.batch_size, progress=progress)


def add_task_attention(model: TransformerBridge, scores: HeadScores, prompt_sets: dict[tuple[str, int], Sequence], prompt_config: PromptConfig,
                       batch_size: int = 8, progress: bool = False, executor: Executor | None = None,
                       model_source: ModelSource = NO_MODEL) -> HeadScores:
    """Add ``attn_<task>`` scores (mean attention from each output position to its answer's
    source position, over the given prompts; lengths pooled) to ``scores``.

    Each task is a cell of ``executor`` (default: here, one after the other); a distributed one
    loads the model on each worker from ``model_source``. Every executor gives the same scores.

    >>> import torch
    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")
    >>> config = AblationConfig(tasks=("UF",), lengths=(3,), n_examples=2)
    >>> scores = HeadScores({"induction": torch.zeros(2, 4)})
    >>> prompt_sets = ablation_prompt_sets(model, config)
    >>> scores = add_task_attention(model, scores, prompt_sets, config.prompt_config, progress=False)
    >>> sorted(scores.scores), tuple(scores["attn_UF"].shape)
    (['attn_UF', 'induction'], (2, 4))
    """
    by_task: dict[str, list] = {}
    for (task, _), prompts in prompt_sets.items():
        by_task.setdefault(task, []).extend(prompts)
    executor = executor or SerialExecutor()
    # A bar per cell only where cells run here, one at a time.
    shared = _AttentionShared(prompt_config, batch_size, progress and executor.name == "serial")
    cells = list(by_task.items())
    attention = dict(executor.map(_task_attention_cell, cells, model_source, shared, model))
    for index, (task, _) in enumerate(cells):  # the tasks' order, whatever order the cells finished in
        scores.scores[f"attn_{task}"] = attention[index]
    return scores


@dataclass(frozen=True)
class _AttentionShared:
    """What every task-attention cell reads."""

    prompt_config: PromptConfig
    batch_size: int
    progress: bool


def _task_attention_cell(model: TransformerBridge, shared: _AttentionShared, cell: tuple[str, list]):
    """One task's attention-to-answer scores (module-level, so that it pickles for a worker)."""
    _, prompts = cell
    encoded = encode_for(model, prompts, shared.prompt_config)
    return task_attention_scores(model, prompts, encoded, shared.batch_size, shared.progress)


def ablation_prompt_sets(model: LanguageModel, config: AblationConfig, vocabulary: Sequence[str] | None = None) -> dict[tuple[str, int], list]:
    """The seeded evaluation prompts of every task and length of an ablation study.

    >>> from interp.models import load_model
    >>> config = AblationConfig(tasks=("UF", "UB"), lengths=(3, 5), n_examples=2)
    >>> sets = ablation_prompt_sets(load_model("tiny-llama", device="cpu"), config)
    >>> list(sets), len(sets[("UB", 5)])
    ([('UF', 3), ('UF', 5), ('UB', 3), ('UB', 5)], 2)
    """
    return {(t, n): task_prompts(model, t, n, config.n_examples, config.seed, config.prompt_config, vocabulary,
                                 None if vocabulary else config.source)
            for t in config.tasks for n in config.lengths}


def check_ablation_inputs(model: TransformerBridge, config: AblationConfig) -> None:
    """Everything about a study that can be wrong for this model, checked before any forward
    pass: ``k`` against the number of heads, and every prompt against the context length.

    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")   # 2 layers x 4 heads
    >>> check_ablation_inputs(model, AblationConfig(tasks=("UF",), k=3))
    Traceback (most recent call last):
    ValueError: k=3: the random-head control needs 3 heads outside the top-k induction and anti-induction sets, ...
    """
    config.check_model(model.cfg.n_layers, model.cfg.n_heads)
    check_prompt_context(model, config)


def check_prompt_context(model: LanguageModel, config: AblationConfig) -> None:
    """Every prompt of the study's tasks and lengths against the model's context.

    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")   # n_ctx 512
    >>> long_demos = PromptConfig(n_shots=8, demo_length=40)
    >>> check_prompt_context(model, AblationConfig(tasks=("UF",), lengths=(40,), n_examples=1, prompt_config=long_demos))
    Traceback (most recent call last):
    ValueError: the longest prompt + answer has 814 tokens but the model's context (cfg.n_ctx) is 512: ...
    """
    for prompts in ablation_prompt_sets(model, config).values():
        check_context(model, encode_for(model, prompts, config.prompt_config))


def study_head_scores(model: TransformerBridge, stem: Path, config: AblationConfig, n_sequences: int = 100, progress: bool = False,
                      metadata: dict | None = None, log: Log = _quiet, executor: Executor | None = None,
                      model_source: ModelSource = NO_MODEL) -> HeadScores:
    """The head scores a study ranks heads by, with its ``attn_<task>`` columns: read back from
    ``stem`` when that table is whole and was written for the same model, dtype, probe and
    prompts (a re-run after an interruption), else computed and written there (``log`` says why).
    The table is locked meanwhile: another run computing the same table is refused.

    >>> import tempfile, torch
    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")
    >>> config = AblationConfig(tasks=("UF",), lengths=(3,), k=2, n_examples=2)
    >>> stem = Path(tempfile.mkdtemp()) / "head_scores_tiny-llama"
    >>> scores = study_head_scores(model, stem, config, n_sequences=1, progress=False)
    >>> sorted(path.name for path in stem.parent.iterdir())
    ['head_scores_tiny-llama.csv', 'head_scores_tiny-llama.json', 'head_scores_tiny-llama.md']
    >>> again = study_head_scores(model, stem, config, n_sequences=1, progress=False, log=print)   # read back
    >>> bool(torch.allclose(again["attn_UF"], scores["attn_UF"], atol=1e-6))
    True
    """
    wanted = {"model": model_name(model), "dtype": model_dtype(model), "probe": "repeated_random",
              "n_sequences": n_sequences, "seed": config.seed,
              "task_attention": {"tasks": list(config.tasks), "lengths": list(config.lengths),
                                 "n_examples": config.n_examples, "prompt_config": asdict(config.prompt_config),
                                 "source": config.source.describe()},
              "scores": list(SELECTABLE_SCORES), **(metadata or {})}
    names = [*SELECTABLE_SCORES, *(f"attn_{t}" for t in config.tasks)]
    with TableLock(stem):
        stored, why_not = read_head_scores(stem, wanted, model.cfg.n_layers, model.cfg.n_heads, names)
        if stored is not None:
            return stored
        if stem_file(stem, "csv").exists() or stem_file(stem, "json").exists():
            log(f"not reusing the head scores in {stem_file(stem, 'csv')}: {why_not}; computing them again")
        scores = all_head_scores(model, n_sequences=n_sequences, seed=config.seed, progress=progress)
        add_task_attention(model, scores, ablation_prompt_sets(model, config), config.prompt_config, config.batch_size,
                           progress, executor, model_source)
        write_table(scores.rows(), stem, metadata=scores.metadata | wanted)
    return scores
