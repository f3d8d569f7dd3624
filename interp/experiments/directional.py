"""In-context accuracy per task and length (the directional-bias experiment), and the pairs
(UR vs UL, UF vs UB, ...) side by side.

Under the paper's protocol every task is evaluated with each of the paper's templates for its
family and the tables report the mean over templates with their spread, as the paper's figures do.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields, replace

from interp.core.executor import NO_MODEL, Executor, ModelSource, SerialExecutor
from interp.core.journal import OPTIONAL_NUMBER, RowJournal, RowShape
from interp.core.lm import LanguageModel
from interp.core.naming import model_name
from interp.core.tables import row_from_mapping
from interp.data.paper_files import ExampleSource, Generated, PaperData
from interp.data.tasks import DIRECTIONAL_PAIRS, TaskSpec, check_vocabulary
from interp.measure.encoding import encode_for
from interp.measure.evaluate import evaluate_prompts, task_prompts
from interp.measure.teacher_forcing import Accuracy, check_context
from interp.prompts import PromptConfig

Log = Callable[[str], None]


@dataclass(frozen=True)
class DirectionalRow:
    """One task x length x template: exact match with its binomial standard error and Wilson interval. A cell the
    vocabulary cannot express has accuracy None, and ``note`` says why."""

    model: str
    task: str
    length: int
    template: str | None
    n_examples: int
    accuracy: float | None
    stderr: float | None = None
    ci_low: float | None = None  # 95% Wilson interval of the accuracy, as every accuracy of the toolkit
    ci_high: float | None = None
    mean_logprob: float | None = None
    token_accuracy: float | None = None
    n_shots: int | None = None
    protocol: str | None = None
    seed: int | None = None
    note: str = ""


@dataclass(frozen=True)
class TemplateSummaryRow:
    """One task and length over its templates: the mean accuracy, its spread over templates."""

    task: str
    length: int
    n_templates: int
    templates: str  # ";"-joined
    accuracy: float | None
    template_sd: float | None
    template_min: float | None
    template_max: float | None
    n_examples: int


@dataclass(frozen=True)
class PairRow:
    """Right/forward against left/backward accuracy at one length (None where a side was not run)."""

    pair: str
    length: int
    right_or_forward: float | None
    left_or_backward: float | None
    gap: float | None


DIRECTIONAL_COLUMNS = [f.name for f in fields(DirectionalRow)]
# What a journal row must hold to be reused by a resumed run.
DIRECTIONAL_ROW_SHAPE: RowShape = {"model": str, "task": str, "length": int, "template": (str, type(None)),
                                   "n_examples": int, "accuracy": OPTIONAL_NUMBER}


def _quiet(_: str) -> None:
    pass


def cell_configs(spec: TaskSpec, prompt_config: PromptConfig, every_template: bool) -> list[PromptConfig]:
    """The prompt configurations a task is evaluated under: one, or every template of the
    protocol for the task's family.

    >>> from interp.data.tasks import get_task
    >>> [c.template for c in cell_configs(get_task("UR"), PromptConfig(), every_template=False)]
    ['bare']
    >>> [c.template for c in cell_configs(get_task("UR"), PromptConfig(protocol="paper"), every_template=True)]
    ['simple_rule', 'math_rule', 'simple_rule_explained', 'math_rule_explained']
    """
    if not every_template:
        return [replace(prompt_config, template=prompt_config.template_for(spec.family))]
    return [replace(prompt_config, template=t) for t in prompt_config.templates_for(spec.family)]


def task_lengths(spec: TaskSpec, lengths: Sequence[int], source: ExampleSource) -> list[int]:
    """The lengths a task is evaluated at: the given ones, or those the paper's files hold.

    >>> from interp.data.tasks import get_task
    >>> task_lengths(get_task("UR"), [5, 10], Generated())
    [5, 10]
    """
    return source.lengths(spec.name) if isinstance(source, PaperData) else list(lengths)


def directional_bias(model: LanguageModel, tasks: Sequence[TaskSpec], lengths: Sequence[int], n_examples: int = 50,
                     seed: int = 0, prompt_config: PromptConfig = PromptConfig(), vocabulary: Sequence[str] | None = None,
                     batch_size: int = 8, progress: bool = False, log: Log = _quiet,
                     journal: RowJournal | None = None, source: ExampleSource | None = None,
                     every_template: bool = False, executor: Executor | None = None,
                     model_source: ModelSource = NO_MODEL) -> list[DirectionalRow]:
    """Accuracy of ``model`` on every task x length (x template with ``every_template``). A cell
    the vocabulary cannot express (unique copying longer than the number of items) gets a row
    with accuracy None and the reason, rather than an error, so a sweep still completes.

    Cells run on ``executor`` (default: one after the other here); a distributed one loads the
    model on each worker from ``model_source``. Every executor gives the same rows.

    Examples:
        >>> from interp.data.tasks import get_task
        >>> from interp.models import load_model
        >>> model = load_model("tiny-llama", device="cpu")
        >>> rows = directional_bias(model, [get_task("UR"), get_task("UL")], lengths=[5], n_examples=4, progress=False)
        >>> [(row.task, row.length) for row in rows]
        [('UR', 5), ('UL', 5)]
        >>> len(pair_table(rows)) >= 1                                  # UR vs UL side by side
        True
    """
    source = source or Generated(tuple(vocabulary) if vocabulary else None)
    executor = executor or SerialExecutor()
    done = {(r.task, r.length, r.template): r
            for r in (row_from_mapping(DirectionalRow, values) for values in (journal.done() if journal else []))}
    cells = [(spec, length, config) for spec in tasks for length in task_lengths(spec, lengths, source)
             for config in cell_configs(spec, prompt_config, every_template)]
    rows: list[DirectionalRow | None] = [done.get((spec.name, length, config.template)) for spec, length, config in cells]
    todo = [i for i, row in enumerate(rows) if row is None]
    # A bar per cell only where cells run here, one at a time.
    shared = _DirectionalShared(source, n_examples, seed, batch_size, progress and executor.name == "serial")
    for index, row in executor.map(_directional_cell, [cells[i] for i in todo], model_source, shared, model):
        if row.note:
            log(f"skipping {row.task} at length {row.length}: {row.note}")
        if journal is not None:
            journal.add(asdict(row))
        rows[todo[index]] = row
    return rows


@dataclass(frozen=True)
class _DirectionalShared:
    """What every cell of an evaluation reads."""

    source: ExampleSource
    n_examples: int
    seed: int
    batch_size: int
    progress: bool


def _directional_cell(model: LanguageModel, shared: _DirectionalShared,
                      cell: tuple[TaskSpec, int, PromptConfig]) -> DirectionalRow:
    """One task x length x template, or the row saying why the vocabulary cannot express it
    (module-level, so that it pickles for a worker)."""
    spec, length, config = cell
    try:
        check_vocabulary(spec, length, shared.source.items(spec))
    except ValueError as err:
        return DirectionalRow(model_name(model), spec.name, length, config.template, 0, None, note=str(err))
    prompts = task_prompts(model, spec, length, shared.n_examples, shared.seed, config, source=shared.source)
    result = Accuracy.of(evaluate_prompts(model, prompts, config, shared.batch_size,
                                          progress=shared.progress and f"{spec.name} length {length} {config.template}"))
    return DirectionalRow(model_name(model), spec.name, length, config.template_for(spec.family), result.n_examples,
                          result.accuracy, stderr=result.stderr, ci_low=result.ci_low, ci_high=result.ci_high,
                          mean_logprob=result.mean_logprob, token_accuracy=result.token_accuracy,
                          n_shots=config.n_shots, protocol=config.protocol, seed=shared.seed)


def check_directional_inputs(model: LanguageModel, tasks: Sequence[TaskSpec], lengths: Sequence[int], n_examples: int, seed: int = 0,
                             prompt_config: PromptConfig = PromptConfig(), vocabulary: Sequence[str] | None = None,
                             source: ExampleSource | None = None, every_template: bool = False) -> None:
    """Every prompt of the evaluation against the model's context (and the data against ``n``),
    before any forward pass; cells the vocabulary cannot express are skipped by the evaluation.

    >>> from interp.data.tasks import get_task
    >>> from interp.models import load_model
    >>> model = load_model("tiny-gpt2", device="cpu")
    >>> check_directional_inputs(model, [get_task("UR")], [10], n_examples=4)  # fits: nothing to report
    >>> check_directional_inputs(model, [get_task("UR")], [60], n_examples=4,
    ...                          prompt_config=PromptConfig(n_shots=10, demo_length=60))
    Traceback (most recent call last):
    ValueError: UR at length 60: the longest prompt + answer has 703 tokens but the model's context (cfg.n_ctx) is 512: ...
    """
    source = source or Generated(tuple(vocabulary) if vocabulary else None)
    for spec in tasks:
        for length in task_lengths(spec, lengths, source):
            try:
                check_vocabulary(spec, length, source.items(spec))
            except ValueError:
                continue
            for config in cell_configs(spec, prompt_config, every_template):
                prompts = task_prompts(model, spec, length, n_examples, seed, config, source=source)
                try:
                    check_context(model, encode_for(model, prompts, config))
                except ValueError as err:
                    raise ValueError(f"{spec.name} at length {length}: {err}") from None


def over_templates(rows: Sequence[DirectionalRow]) -> list[TemplateSummaryRow]:
    """One row per task and length: the mean accuracy over templates, with the standard
    deviation and range over them (a single template: its accuracy, spread 0).

    >>> rows = [DirectionalRow("m", "UR", 5, "bare", 4, 1.0), DirectionalRow("m", "UR", 5, "obey", 4, 0.5),
    ...         DirectionalRow("m", "UL", 5, "bare", 4, 0.25)]
    >>> [(r.task, r.n_templates, r.accuracy, r.template_min, r.template_max) for r in over_templates(rows)]
    [('UR', 2, 0.75, 0.5, 1.0), ('UL', 1, 0.25, 0.25, 0.25)]
    """
    cells: dict[tuple[str, int], list[DirectionalRow]] = {}
    for r in rows:
        cells.setdefault((r.task, r.length), []).append(r)
    table = []
    for (task, length), items in cells.items():
        accs = [r.accuracy for r in items if r.accuracy is not None]
        table.append(TemplateSummaryRow(
            task=task, length=length, n_templates=len(accs), templates=";".join(str(r.template) for r in items),
            accuracy=statistics.fmean(accs) if accs else None,
            template_sd=statistics.stdev(accs) if len(accs) > 1 else (0.0 if accs else None),
            template_min=min(accs, default=None), template_max=max(accs, default=None), n_examples=items[0].n_examples))
    return table


def pair_table(rows: Sequence[DirectionalRow], pairs: Sequence[tuple[str, str]] = DIRECTIONAL_PAIRS) -> list[PairRow]:
    """Right/forward vs left/backward accuracy side by side, with the gap, per length (rows of
    several templates are averaged first).

    >>> rows = [DirectionalRow("m", "UR", 5, "bare", 4, 1.0), DirectionalRow("m", "UR", 5, "obey", 4, 0.5),
    ...         DirectionalRow("m", "UL", 5, "bare", 4, 0.25)]
    >>> pair_table(rows)
    [PairRow(pair='UR vs UL', length=5, right_or_forward=0.75, left_or_backward=0.25, gap=0.5)]
    """
    by_key = {(r.task, r.length): r.accuracy for r in over_templates(rows)}
    lengths = sorted({r.length for r in rows})
    table = []
    for right, left in pairs:
        for length in lengths:
            a, b = by_key.get((right, length)), by_key.get((left, length))
            if a is None and b is None:
                continue
            gap = a - b if a is not None and b is not None else None
            table.append(PairRow(f"{right} vs {left}", length, a, b, gap))
    return table
