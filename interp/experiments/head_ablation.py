"""Accuracy under head ablation: the top-k induction heads, the top-k anti-induction heads and
k random heads (per seed), each zero- and mean-ablated, on each task and length.

Each prompt set's clean run keeps the residual stream entering the lowest ablated layer of every
condition ([`interp.interventions.replay`][interp.interventions.replay]); a condition then recomputes only the layers from there on, and
unembeds only the answer positions. With a `interp.core.tables.RowJournal`, finished cells are
recorded as they finish and a re-run with the same configuration skips them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from interp.core.executor import NO_MODEL, Executor, ModelSource, SerialExecutor
from interp.core.heads import Head, format_heads
from interp.core.journal import NUMBER, OPTIONAL_NUMBER, RowJournal, RowShape
from interp.core.naming import model_name
from interp.core.stats import wilson_interval
from interp.core.tables import row_from_mapping
from interp.interventions.ablation import HeadMeans, ablation_hooks
from interp.interventions.replay import CleanBatch, replay, run_clean
from interp.measure.batching import in_input_order, pad_token_id, padded_batches
from interp.measure.encoding import encode_for
from interp.measure.head_scores import HeadScores
from interp.measure.teacher_forcing import Accuracy, AnswerScores, check_context, teacher_forced_scores
from interp.experiments.ablation_setup import (AblationConfig, ablation_conditions, ablation_prompt_sets,
                                              reference_means)
from interp.prompts import EncodedPrompt

if TYPE_CHECKING:
    from transformer_lens.model_bridge import TransformerBridge

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


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
    ci_low: float  # 95% Wilson interval of the accuracy, as every accuracy of the toolkit
    ci_high: float
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
                   progress: bool = False, log: Log = _quiet, journal: RowJournal | None = None,
                   replay_clean: bool = True, executor: Executor | None = None,
                   model_source: ModelSource = NO_MODEL) -> list[AblationRow]:
    """Accuracy on each task and length: clean, then under each condition and ablation kind.

    Each prompt set's clean run keeps the residual stream entering the lowest ablated layer of
    every condition ([`interp.interventions.replay`][interp.interventions.replay]); a condition then recomputes only the layers from
    there on, and unembeds only the answer positions. ``replay_clean=False`` runs every
    condition as a full hooked forward pass with logits at every position instead (the
    reference the replay is checked and timed against).

    Cells run on ``executor`` (default: one after the other here); a distributed one loads the
    model on each worker from ``model_source``. Every executor gives the same rows.

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
    by_cell: dict[tuple[int, int], AblationRow] = {}
    todo = []
    for set_index, prompt_set in enumerate(sets):
        for cell_index, cell in enumerate(cells):
            row = done.get(cell.key(prompt_set.task, prompt_set.length))
            if row is None:
                todo.append((cell_index, set_index))
            else:
                by_cell[(cell_index, set_index)] = row
    bar = tqdm(total=len(cells) * len(sets), initial=len(by_cell), desc="ablation study", disable=not progress)
    if todo:
        means = reference_means(model, config, progress=progress) if "mean" in config.kinds else None
        shared = _AblationShared(sets, config, means, {_lowest_layer(c.heads) for c in cells if c.heads}, replay_clean)
        items = [(cells[cell_index], set_index) for cell_index, set_index in todo]
        for index, row in (executor or SerialExecutor()).map(_ablation_cell, items, model_source, shared, model):
            cell, set_index = items[index]
            if cell.heads:
                log(f"ablated {cell.condition}{'' if cell.seed is None else f' (seed {cell.seed})'} heads "
                    f"{format_heads(cell.heads)} ({cell.kind}) on {sets[set_index].task} at length {sets[set_index].length}")
            if journal is not None:
                journal.add(asdict(row))
            by_cell[todo[index]] = row
            bar.update()
    bar.close()
    # The change from the baseline is taken here, once every cell of a prompt set is in (a journal
    # of an earlier version has none; a worker's row does not know its baseline).
    baseline = {set_index: row.accuracy for (cell_index, set_index), row in by_cell.items() if cell_index == 0}
    return [replace(by_cell[key], delta_accuracy=0.0 if key[0] == 0 else by_cell[key].accuracy - baseline[key[1]])
            for key in sorted(by_cell)]  # condition by condition, as the summary reads


@dataclass
class _AblationShared:
    """What every cell of a study reads; a worker's copy memoises the clean runs of its prompt sets."""

    sets: list[_PromptSet]
    config: AblationConfig
    means: HeadMeans | None
    layers: set[int]
    replay_clean: bool


def _ablation_cell(model: TransformerBridge, shared: _AblationShared, item: tuple[AblationCell, int]) -> AblationRow:
    """One cell on whichever worker runs it (module-level, so that it pickles)."""
    cell, set_index = item
    prompt_set = shared.sets[set_index]
    if prompt_set.clean is None and shared.replay_clean:
        batches = padded_batches(prompt_set.encoded, shared.config.batch_size, pad_token_id(model.tokenizer))
        prompt_set.clean = [run_clean(model, batch, shared.layers) for batch in batches]
    return _measure_cell(model, cell, prompt_set, shared.config, shared.means, shared.replay_clean)


def cell_key(row: AblationRow) -> tuple:
    """What identifies a row's cell, so that a resumed study can find the cells a journal holds.

    >>> row = AblationRow("m", "induction", "zero", None, "UF", 10, 30, 0.5, 0.33, 0.67, -0.25, -1.2, "1.3;1.2", "induction")
    >>> cell_key(row)
    ('induction', 'zero', None, 'UF', 10)
    """
    return (row.condition, row.ablation, row.seed, row.task, row.length)


def journal_rows(journal: RowJournal | None) -> list[AblationRow]:
    """The rows an interrupted study finished (a journal of an earlier version: the change from the
    baseline left to be recomputed, the interval computed from the accuracy and n).

    >>> import tempfile
    >>> from pathlib import Path
    >>> row = AblationRow("m", "baseline", "none", None, "UF", 10, 30, 0.5, 0.33, 0.67, 0.0, -1.2, "", "")
    >>> with RowJournal(Path(tempfile.mkdtemp()) / "ablation_m", {"k": 2}) as journal:
    ...     journal.add(asdict(row))
    ...     journal_rows(journal) == [row], journal_rows(None)
    (True, [])
    """
    def interval(values: dict) -> dict:
        low, high = wilson_interval(round(values["accuracy"] * values["n_examples"]), values["n_examples"])
        return {"ci_low": low, "ci_high": high}

    return [row_from_mapping(AblationRow, {"delta_accuracy": math.nan, "selected_by": "",
                                           **({} if "ci_low" in values else interval(values)), **values})
            for values in (journal.done() if journal else [])]


def _measure_cell(model: TransformerBridge, cell: AblationCell, prompt_set: _PromptSet, config: AblationConfig,
                  means: HeadMeans | None, replay_clean: bool) -> AblationRow:
    """One cell's accuracy on one prompt set (replayed, or a full hooked pass); its change from the
    baseline is left at 0 for the study to fill in."""
    heads = list(cell.heads)
    hooks = ablation_hooks(model, heads, cell.kind, means) if heads else []
    if replay_clean:
        result = Accuracy.of(_scores(model, prompt_set.clean, len(prompt_set.encoded), heads, hooks))
    else:
        result = Accuracy.of(teacher_forced_scores(model, prompt_set.encoded, config.batch_size, hooks, progress=False,
                                                   every_position=True))
    return AblationRow(model=model_name(model), condition=cell.condition, ablation=cell.kind, seed=cell.seed,
                       task=prompt_set.task, length=prompt_set.length, n_examples=result.n_examples,
                       accuracy=result.accuracy, ci_low=result.ci_low, ci_high=result.ci_high,
                       delta_accuracy=0.0,
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

    >>> row = AblationRow("m", "baseline", "none", None, "UF", 10, 4, 0.5, 0.15, 0.85, 0.0, -1.0, "", "baseline")
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
