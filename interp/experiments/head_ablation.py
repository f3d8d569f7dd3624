"""Accuracy under head ablation: the top-k induction heads, the top-k anti-induction heads and
k random heads (per seed), each zero- and mean-ablated, on each task and length.

Each prompt set's clean run keeps the residual stream entering the lowest ablated layer of every
condition (:mod:`interp.interventions.replay`); a condition then recomputes only the layers from there on, and
unembeds only the answer positions. With a :class:`interp.core.tables.RowJournal`, finished cells are
recorded as they finish and a re-run with the same configuration skips them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from interp.core.heads import Head, format_heads
from interp.core.journal import NUMBER, OPTIONAL_NUMBER, RowJournal, RowShape
from interp.core.locking import TableLock
from interp.core.naming import model_name
from interp.core.lm import LanguageModel
from interp.core.tables import row_from_mapping, stem_file, write_table
from interp.data.paper_files import ExampleSource, Generated
from interp.measure.mechanism_scores import MECHANISM_SCORES, all_head_scores
from interp.data.tasks import get_task
from interp.interventions.ablation import ABLATION_KINDS, HeadMeans, ablation_hooks, compute_head_means, random_heads
from interp.interventions.replay import CleanBatch, replay, run_clean
from interp.measure.batching import in_input_order, pad_token_id, padded_batches
from interp.measure.encoding import encode_for
from interp.measure.evaluate import task_prompts
from interp.measure.head_scores import SCORE_NAMES, HeadScores, task_attention_scores
from interp.measure.score_tables import model_dtype, read_head_scores
from interp.measure.teacher_forcing import Accuracy, AnswerScores, check_context, teacher_forced_scores
from interp.prompts import EncodedPrompt, PromptConfig

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
                    progress: bool = True) -> HeadMeans:
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
                       batch_size: int = 8, progress: bool = True) -> HeadScores:
    """Add ``attn_<task>`` scores (mean attention from each output position to its answer's
    source position, over the given prompts; lengths pooled) to ``scores``.

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
    for task, prompts in by_task.items():
        encoded = encode_for(model, prompts, prompt_config)
        scores.scores[f"attn_{task}"] = task_attention_scores(model, prompts, encoded, batch_size, progress)
    return scores


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


def study_head_scores(model: TransformerBridge, stem: Path, config: AblationConfig, n_sequences: int = 100, progress: bool = True,
                      metadata: dict | None = None, log: Log = _quiet) -> HeadScores:
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
                           progress)
        write_table(scores.rows(), stem, metadata=scores.metadata | wanted)
    return scores


def _lowest_layer(heads: Sequence[Head]) -> int:
    return min(h.layer for h in heads)


@dataclass(frozen=True)
class AblationRow:
    """One cell of the ablation table: accuracy on one task and length under one condition."""

    model: str
    condition: str  # baseline, induction, anti_induction or random
    ablation: str  # none, zero or mean
    seed: int | None  # the random-head draw's seed (None for the other conditions)
    task: str
    length: int
    n_examples: int
    accuracy: float
    delta_accuracy: float  # accuracy minus the baseline's on the same prompts
    mean_logprob: float | None
    heads: str
    selected_by: str  # the head score the condition's heads are the top k of


@dataclass(frozen=True)
class AblationCell:
    """A condition x ablation kind of the study, with the heads it ablates."""

    condition: str
    kind: str
    seed: int | None
    heads: tuple[Head, ...]

    def key(self, task: str, length: int) -> tuple:
        return (self.condition, self.kind, self.seed, task, length)


def _ablation_cells(scores: HeadScores, config: AblationConfig) -> list[AblationCell]:
    """The baseline, then every condition under every ablation kind."""
    conditions = ablation_conditions(scores, config)
    return [AblationCell("baseline", "none", None, ())] + [AblationCell(c, kind, seed, tuple(heads))
                                                         for c, seed, heads in conditions for kind in config.kinds]


@dataclass
class _PromptSet:
    """One task and length of a study, with its clean runs once some cell needs them."""

    task: str
    length: int
    encoded: list[EncodedPrompt]
    clean: list[CleanBatch] | None = None


def ablation_study(model: TransformerBridge, scores: HeadScores, config: AblationConfig = AblationConfig(),
                   progress: bool = True, log: Log = _quiet, journal: RowJournal | None = None,
                   replay_clean: bool = True) -> list[AblationRow]:
    """Accuracy on each task and length: clean, then under each condition and ablation kind.

    Each prompt set's clean run keeps the residual stream entering the lowest ablated layer of
    every condition (:mod:`interp.interventions.replay`); a condition then recomputes only the layers from
    there on, and unembeds only the answer positions. ``replay_clean=False`` runs every
    condition as a full hooked forward pass with logits at every position instead (the
    reference the replay is checked and timed against).

    Examples:
        >>> from interp.measure.head_scores import score_heads
        >>> from interp.models import load_model
        >>> model = load_model("tiny-llama", device="cpu")               # `make run`: load_model(), AblationConfig()
        >>> scores = score_heads(model, n_sequences=4, progress=False)
        >>> config = AblationConfig(tasks=("UF",), k=2, n_examples=4, kinds=("zero",), random_seeds=(0,))
        >>> rows = ablation_study(model, scores, config, progress=False)
        >>> sorted({row.condition for row in rows})
        ['anti_induction', 'baseline', 'induction', 'random']
    """
    config.check_model(model.cfg.n_layers, model.cfg.n_heads)
    sets = [_PromptSet(task, length, encode_for(model, prompts, config.prompt_config))
            for (task, length), prompts in ablation_prompt_sets(model, config).items()]
    for prompt_set in sets:
        check_context(model, prompt_set.encoded)
    cells = _ablation_cells(scores, config)
    done = {cell_key(row): row for row in journal_rows(journal)}
    means = reference_means(model, config, progress=progress) if "mean" in config.kinds else None
    layers = {_lowest_layer(cell.heads) for cell in cells if cell.heads}
    by_cell: dict[tuple[int, int], AblationRow] = {}
    bar = tqdm(total=len(cells) * len(sets), desc="ablation study", disable=not progress)
    for set_index, prompt_set in enumerate(sets):
        baseline = 0.0
        for cell_index, cell in enumerate(cells):
            row = done.get(cell.key(prompt_set.task, prompt_set.length))
            if row is None:
                if prompt_set.clean is None and replay_clean:
                    batches = padded_batches(prompt_set.encoded, config.batch_size, pad_token_id(model.tokenizer))
                    prompt_set.clean = [run_clean(model, batch, layers) for batch in batches]
                row = _measure_cell(model, cell, prompt_set, config, means, replay_clean, baseline, log)
                if journal is not None:
                    journal.add(asdict(row))
            baseline = row.accuracy if cell.condition == "baseline" else baseline
            # recomputed for rows read back: a journal of an earlier version has no change from the baseline
            by_cell[(cell_index, set_index)] = replace(row, delta_accuracy=row.accuracy - baseline)
            bar.update()
    bar.close()
    return [by_cell[key] for key in sorted(by_cell)]  # condition by condition, as the summary reads


def cell_key(row: AblationRow) -> tuple:
    """What identifies a row's cell, so that a resumed study can find the cells a journal holds.

    >>> row = AblationRow("m", "induction", "zero", None, "UF", 10, 30, 0.5, -0.25, -1.2, "1.3;1.2", "induction")
    >>> cell_key(row)
    ('induction', 'zero', None, 'UF', 10)
    """
    return (row.condition, row.ablation, row.seed, row.task, row.length)


def journal_rows(journal: RowJournal | None) -> list[AblationRow]:
    """The rows an interrupted study finished (the change from the baseline is recomputed).

    >>> import tempfile
    >>> row = AblationRow("m", "baseline", "none", None, "UF", 10, 30, 0.5, 0.0, -1.2, "", "")
    >>> with RowJournal(Path(tempfile.mkdtemp()) / "ablation_m", {"k": 2}) as journal:
    ...     journal.add(asdict(row))
    ...     journal_rows(journal) == [row], journal_rows(None)
    (True, [])
    """
    return [row_from_mapping(AblationRow, {"delta_accuracy": math.nan, "selected_by": "", **values})
            for values in (journal.done() if journal else [])]


def _measure_cell(model: TransformerBridge, cell: AblationCell, prompt_set: _PromptSet, config: AblationConfig,
                  means: HeadMeans | None, replay_clean: bool, baseline: float, log: Log) -> AblationRow:
    """One cell's accuracy on one prompt set (replayed, or a full hooked pass), and its change from
    ``baseline``, the clean accuracy on the same prompts (measured first)."""
    heads = list(cell.heads)
    if heads:
        log(f"ablating {cell.condition}{'' if cell.seed is None else f' (seed {cell.seed})'} heads "
            f"{format_heads(heads)} ({cell.kind}) on {prompt_set.task} at length {prompt_set.length}")
    hooks = ablation_hooks(model, heads, cell.kind, means) if heads else []
    if replay_clean:
        result = Accuracy.of(_scores(model, prompt_set.clean, len(prompt_set.encoded), heads, hooks))
    else:
        result = Accuracy.of(teacher_forced_scores(model, prompt_set.encoded, config.batch_size, hooks, progress=False,
                                                   every_position=True))
    return AblationRow(model=model_name(model), condition=cell.condition, ablation=cell.kind, seed=cell.seed,
                       task=prompt_set.task, length=prompt_set.length, n_examples=result.n_examples,
                       accuracy=result.accuracy,
                       delta_accuracy=0.0 if cell.condition == "baseline" else result.accuracy - baseline,
                       mean_logprob=result.mean_logprob,
                       heads=format_heads(heads), selected_by=_selected_by(cell.condition, config))


def _selected_by(condition: str, config: AblationConfig) -> str:
    return {"induction": config.induction_by, "anti_induction": config.anti_by}.get(condition, condition)


def _scores(model: TransformerBridge, clean: list[CleanBatch], n: int, heads: Sequence[Head], hooks) -> AnswerScores:
    """Scores of every batch: the clean ones, or replayed from the lowest ablated layer."""
    if not heads:
        return AnswerScores.from_rows(in_input_order(n, [(c.batch.indices, c.rows) for c in clean]))
    layer = _lowest_layer(heads)
    return AnswerScores.from_rows(in_input_order(n, [(c.batch.indices, replay(model, c, layer, hooks)[0]) for c in clean]))


# What a journal row must hold to be reused by a resumed study.
ABLATION_ROW_SHAPE: RowShape = {"model": str, "condition": str, "ablation": str, "seed": (int, type(None)), "task": str,
                                "length": int, "n_examples": int, "accuracy": NUMBER, "mean_logprob": OPTIONAL_NUMBER,
                                "heads": str}

ABLATION_COLUMNS = [f.name for f in fields(AblationRow)]


@dataclass(frozen=True)
class AblationSummaryRow:
    """One condition x ablation kind: per task(-length) column, the accuracy, its change from the
    baseline and, over random-head seeds, their spread (``"0.50 (-0.25) [0.40-0.60]"``)."""

    condition: str
    ablation: str
    cells: tuple[tuple[str, str], ...]  # (task@length, cell text), in the study's order

    def as_row(self) -> dict[str, str]:
        """The table row: one column per task(-length)."""
        return {"condition": self.condition, "ablation": self.ablation, **dict(self.cells)}


def ablation_summary(rows: Sequence[AblationRow]) -> list[AblationSummaryRow]:
    """One row per condition x ablation, one column per task(-length): accuracy and change from the
    baseline; random-head seeds are averaged, with their spread (min-max).

    >>> row = AblationRow("m", "baseline", "none", None, "UF", 10, 4, 0.5, 0.0, -1.0, "", "baseline")
    >>> ablation_summary([row])[0].as_row()
    {'condition': 'baseline', 'ablation': 'none', 'UF@10': '0.50 (+0.00)'}
    """
    groups: dict[tuple[str, str], dict[str, list[AblationRow]]] = {}
    for r in rows:
        groups.setdefault((r.condition, r.ablation), {}).setdefault(f"{r.task}@{r.length}", []).append(r)
    table = []
    for (condition, kind), by_column in groups.items():
        cells = []
        for column, items in by_column.items():
            accs = [i.accuracy for i in items]
            cell = f"{statistics.mean(accs):.2f} ({statistics.mean(i.delta_accuracy for i in items):+.2f})"
            if len(items) > 1:
                cell += f" [{min(accs):.2f}-{max(accs):.2f}]"
            cells.append((column, cell))
        table.append(AblationSummaryRow(condition, kind, tuple(cells)))
    return table
