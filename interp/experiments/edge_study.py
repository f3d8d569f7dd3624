"""The paper's edge-patching experiment: does removing induction edges break UF, anti-induction edges UB?

Per (task, length) cell and batch of prompts, two forward passes:

1. **counterfactual** -- the prompt up to the last copy with every previous-token edge ``i-1 -> i`` cut (value
   zeroed, no renormalisation) in all layers and heads; the keys and values of the last shot's string, which
   hold every source the patched edges read, are kept.
2. **branched** -- the prompt up to the last copy once, then the copy once per condition (no intervention,
   induction edges' keys replaced, anti-induction edges' values replaced, and one branch per layer and edge
   kind for the sweep); logits only at the scored positions.

Scoring as the repo's ``patch_induction_heads.py``, through the toolkit's one teacher-forced result type
([`AnswerScores`][interp.measure.teacher_forcing.AnswerScores] per branch, summarised by ``Accuracy``): ``correct`` =
argmax right at all ``L`` copy tokens, ``mean_logprob`` = mean log-probability of them (the repo's loss is its
negative). The first copy token is predicted at the ``,`` before the copy, which no patched edge touches (the
repo patches queries at the copy only); the last copy token's query predicts EOS, which is not scored, so it is
not computed. [`interp.experiments.edge_tables.upgrade_row`][interp.experiments.edge_tables.upgrade_row] rewrites tables with the earlier columns (``n``, ``loss``, ...) to these.
The rows, their columns and their short summaries are `interp.experiments.edge_rows`' (importable from here too).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace

import torch
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from interp.core.executor import NO_MODEL, Executor, ModelSource, SerialExecutor
from interp.core.journal import RowJournal, RowShape
from interp.core.tables import row_from_mapping
# the rows and their summaries live in edge_rows; every name stays importable from here
from interp.experiments.edge_rows import (EDGE_COLUMNS, EDGE_SWEEP_COLUMNS, EdgeRow, EdgeSweepRow,  # noqa: F401
                                          branch_summary, claim_summary, layers_label, summary_table, sweep_summary)
from interp.interventions.circuits.attention import previous_token_cut_hooks
from interp.interventions.edges.branching import BranchedTokens, branch, logits_from_hook, run_branched
from interp.interventions.edges.data import DEFAULT_SHOTS, TASKS, CopyingPrompts, check_format, check_length, check_task, copying_prompts
from interp.interventions.edges.layout import AttentionLayout, attention_layout, check_heads, check_layers
from interp.interventions.edges.patching import EdgePatch, Edges, capture_source_hooks, edge_patch_hooks
from interp.measure.teacher_forcing import Accuracy, AnswerScores, score_answer
from interp.prompts import AnswerEnd
from interp.models.bridge import TransformerBridge

# condition -> (edge set whose edges are patched, what is replaced); "none" is the clean continuation
CONDITIONS: dict[str, tuple[str, str] | None] = {"none": None, "induction": ("induction", "key"),
                                                  "anti_induction": ("anti_induction", "value")}


@dataclass(frozen=True)
class EdgeStudyConfig:
    """The protocol's defaults (paper's section 4.4 and the repo's ``mechanistic/``), and what may vary."""

    tasks: tuple[str, ...] = TASKS
    lengths: tuple[int, ...] = (3, 5, 7, 9)
    n: int = 100
    n_shots: int = DEFAULT_SHOTS
    seed: int = 0
    batch_size: int = 8
    layers: tuple[int, ...] | None = None  # layers whose edges are patched (None: all)
    heads: tuple[int, ...] | None = None  # query heads whose edges are patched (None: all)
    sweep_n: int = 0  # per-layer sweep on the first sweep_n prompts of each cell (0: none)
    sweep_lengths: tuple[int, ...] | None = None  # lengths swept (None: all of `lengths`)
    prepend_bos: bool | None = None  # None: as the model's tokenizer does (cfg.default_prepend_bos)
    prompt_format: str = "few-shot"  # or "single-shot": the zero-shot line the toolkit's UF / UB models learned

    def __post_init__(self) -> None:
        if check_format(self.prompt_format) == "single-shot" and self.n_shots != 1:
            raise ValueError(f"n_shots={self.n_shots}: a single-shot prompt has one shot")
        for task in self.tasks:
            check_task(task)
        for length in (*self.lengths, *(self.sweep_lengths or ())):
            check_length(length)
        if not self.tasks or not self.lengths:
            raise ValueError("tasks and lengths must not be empty")
        if self.n < 1:
            raise ValueError(f"n={self.n}: at least one prompt per cell is needed")
        if self.n_shots < 1:
            raise ValueError(f"n_shots={self.n_shots}: at least one shot (the test) is needed")
        if self.batch_size < 1:
            raise ValueError(f"batch_size={self.batch_size} must be >= 1")
        if not 0 <= self.sweep_n <= self.n:
            raise ValueError(f"sweep_n={self.sweep_n} must be between 0 and n={self.n}")

    def swept(self, length: int) -> bool:
        return self.sweep_n > 0 and (self.sweep_lengths is None or length in self.sweep_lengths)


@dataclass(frozen=True)
class Branch:
    """One continuation of the shared prompt: a condition, patched in ``layers`` (None: the configured ones)."""

    condition: str
    layers: tuple[int, ...] | None = None
    sweep: bool = False  # a per-layer sweep branch (kept apart even when its layers equal the configured ones)


def _branches_for(config: EdgeStudyConfig, layout: AttentionLayout, swept: bool) -> list[Branch]:
    main = [Branch(name, config.layers) for name in CONDITIONS]
    if not swept:
        return main
    return main + [Branch(name, (layer,), sweep=True) for name in CONDITIONS if name != "none"
                   for layer in range(layout.n_layers)]


def copy_scores(logits: Float[Tensor, "batch copy d_vocab"], targets: Int[Tensor, "batch copy"]) -> AnswerScores:
    """Teacher-forced copy logits scored as every answer in the toolkit is (``score_answer``); no end marker,
    since the position after the copy is not computed.

    >>> copy_scores(torch.eye(5)[None, [1, 2]] * 9, torch.tensor([[1, 2]])).correct.tolist()
    [True]
    """
    return AnswerScores.from_rows([score_answer(row, ids, AnswerEnd.not_required()) for row, ids in zip(logits, targets.tolist())])


def _counterfactual_sources(model: TransformerBridge, layout: AttentionLayout, prompts: CopyingPrompts, rows: slice):
    """Keys and values of the last shot's string when every previous-token edge before the copy is cut."""
    trunk = prompts.tokens[rows, : prompts.copy_start]
    positions = torch.arange(prompts.string_start, prompts.copy_start).expand(trunk.shape[0], -1)
    capture, store = capture_source_hooks(layout, positions)
    hooks = previous_token_cut_hooks(layout, trunk.shape[0], prompts.copy_start) + capture
    with torch.no_grad():
        model.run_with_hooks(trunk.to(model.cfg.device), fwd_hooks=[*hooks, logits_from_hook(trunk.shape[1])])
    return store


def _branch_patches(prompts: CopyingPrompts, branched: BranchedTokens, branches: Sequence[Branch], store,
                    heads: tuple[int, ...] | None, rows: slice) -> list[EdgePatch]:
    patches = []
    for index, spec in enumerate(branches):
        if CONDITIONS[spec.condition] is None:
            continue
        edge_set, kind = CONDITIONS[spec.condition]
        edges = prompts.edges(edge_set, rows)
        # the last copy position only predicts EOS (not scored) and is not in the branches
        keep = edges.query < branched.trunk_length + branched.branch_length
        edges = Edges(edges.query[keep].view(edges.batch, -1), edges.source[keep].view(edges.batch, -1))
        replacement = store.at(kind, edges.source)
        patches.append(EdgePatch(kind, branched.in_branch(edges, index), replacement, spec.layers, heads))
    return patches


def branch_logits(model: TransformerBridge, layout: AttentionLayout, prompts: CopyingPrompts, rows: slice, branches: Sequence[Branch],
                  heads: tuple[int, ...] | None = None) -> dict[Branch, Float[Tensor, "batch copy d_vocab"]]:
    """Logits at the scored positions of the prompts in ``rows`` under every branch, from one counterfactual
    and one branched forward pass.

    >>> from interp.models import load_model
    >>> from interp.interventions.edges import copying_prompts
    >>> model = load_model("tiny-gpt2", device="cpu")
    >>> prompts = copying_prompts(model.tokenizer, "UF", 3, 2, n_shots=2)
    >>> branches = [Branch(condition) for condition in CONDITIONS]
    >>> logits = branch_logits(model, attention_layout(model), prompts, slice(None), branches)
    >>> {spec.condition: tuple(value.shape) for spec, value in logits.items()}   # [batch, copy, d_vocab]
    {'none': (2, 3, 354), 'induction': (2, 3, 354), 'anti_induction': (2, 3, 354)}
    >>> clean = model(prompts.tokens)[:, prompts.scored_positions()]
    >>> bool(torch.allclose(logits[Branch("none")], clean, atol=1e-4))   # the unpatched branch is the plain run
    True
    """
    store = _counterfactual_sources(model, layout, prompts, rows)
    start = prompts.copy_start
    continuation = prompts.tokens[rows, start : start + prompts.length - 1]
    branched = branch(prompts.tokens[rows, :start], continuation, len(branches))
    patches = _branch_patches(prompts, branched, branches, store, heads, rows)
    logits = run_branched(model, branched, edge_patch_hooks(layout, patches))  # from position start - 1 on
    picked = {}
    for index, spec in enumerate(branches):
        offset = 1 + index * branched.branch_length
        picked[spec] = torch.cat([logits[:, :1], logits[:, offset : offset + branched.branch_length]], dim=1)
    return picked



def _cell_rows(task: str, length: int, scores: Mapping[Branch, AnswerScores], config: EdgeStudyConfig,
               meta: dict) -> tuple[list[EdgeRow], list[EdgeSweepRow]]:
    """Table rows of one cell: one per condition, and one per (edge kind, layer) of the sweep."""
    cell = {**meta, "task": task, "length": length}
    heads = layers_label(config.heads)
    main = [EdgeRow(**cell, condition=condition, **branch_summary(scores[Branch(condition, config.layers)]),
                    layers=layers_label(config.layers), heads=heads) for condition in CONDITIONS]
    sweep = []
    swept = sorted((spec for spec in scores if spec.sweep), key=lambda spec: (spec.condition, spec.layers))
    if swept:
        none, n = scores[Branch("none", config.layers)], len(scores[swept[0]])  # the sweep's prompts come first
        clean = Accuracy.of(AnswerScores(none.correct[:n], none.token_accuracy[:n], none.mean_logprob[:n]))
        for spec in swept:
            summary = branch_summary(scores[spec])
            sweep.append(EdgeSweepRow(**cell, edge=spec.condition, layer=spec.layers[0], **summary,
                                      delta_accuracy=summary["accuracy"] - clean.accuracy,
                                      delta_mean_logprob=summary["mean_logprob"] - clean.mean_logprob, heads=heads))
    return main, sweep


def _run_cell(model: TransformerBridge, layout: AttentionLayout, prompts: CopyingPrompts, config: EdgeStudyConfig,
              progress: tqdm | None = None) -> dict[Branch, AnswerScores]:
    """Scores of every prompt of one (task, length) cell under every branch, batch by batch."""
    parts: dict[Branch, list[AnswerScores]] = defaultdict(list)
    swept = config.swept(prompts.length)
    boundaries = sorted({0, prompts.n, *(range(0, prompts.n, config.batch_size))} | ({config.sweep_n} if swept else set()))
    for begin, end in zip(boundaries, boundaries[1:]):
        rows = slice(begin, end)
        branches = _branches_for(config, layout, swept and begin < config.sweep_n)
        for spec, logits in branch_logits(model, layout, prompts, rows, branches, config.heads).items():
            parts[spec].append(copy_scores(logits, prompts.targets()[rows]))
        if progress is not None:
            progress.update(end - begin)
    return {spec: AnswerScores.concat(batches) for spec, batches in parts.items()}


# What a journal row (one finished cell) must hold to be reused by a resumed study.
EDGE_ROW_SHAPE: RowShape = {"task": str, "length": int, "main": list, "sweep": list}


def edge_study(model: TransformerBridge, config: EdgeStudyConfig = EdgeStudyConfig(), *, model_label: str = "", adapter: str | None = None,
               progress: bool = False, journal: RowJournal | None = None,
               layout: AttentionLayout | None = None, executor: Executor | None = None,
               model_source: ModelSource = NO_MODEL) -> tuple[list[EdgeRow], list[EdgeSweepRow]]:
    """Run every (task, length) cell; returns (condition rows, per-layer sweep rows). With a
    ``journal`` each finished cell is recorded, and cells an earlier run finished are reused.
    Cells run on ``executor`` (default: one after the other here); a distributed one loads the
    model on each worker from ``model_source``.

    Examples:
        >>> from interp.models import load_model
        >>> model = load_model("tiny-llama", device="cpu")               # the paper's: load_model(), EdgeStudyConfig()
        >>> config = EdgeStudyConfig(tasks=("UF",), lengths=(3,), n=4, sweep_n=2)
        >>> rows, sweep_rows = edge_study(model, config, model_label="tiny-llama", progress=False)
        >>> [row.condition for row in rows]
        ['none', 'induction', 'anti_induction']
        >>> len(claim_summary(rows))
        1
    """
    layout = layout or attention_layout(model)
    config_layers = check_layers(config.layers, layout.n_layers) if config.layers is not None else None
    check_heads(config.heads, layout.n_heads)
    bos = bool(getattr(model.cfg, "default_prepend_bos", False)) if config.prepend_bos is None else config.prepend_bos
    config = replace(config, layers=config_layers, prepend_bos=bos)
    meta = {"model": model_label, "adapter": adapter or "", "format": config.prompt_format, "shots": config.n_shots,
            "seed": config.seed, "bos": config.prepend_bos}
    cells = [(task, length) for task in config.tasks for length in config.lengths]
    done = {(r["task"], r["length"]): r for r in (journal.done() if journal else [])}
    by_cell: dict[tuple[str, int], tuple[list[EdgeRow], list[EdgeSweepRow]]] = {
        cell: ([row_from_mapping(EdgeRow, row) for row in done[cell]["main"]],
               [row_from_mapping(EdgeSweepRow, row) for row in done[cell]["sweep"]]) for cell in cells if cell in done}
    todo = [cell for cell in cells if cell not in by_cell]
    with tqdm(total=len(cells) * config.n, initial=len(by_cell) * config.n, desc="edge patching",
              disable=not progress, unit="prompt") as bar:
        shared = _EdgeShared(layout, config, meta)
        for index, (main, sweep) in (executor or SerialExecutor()).map(_edge_cell, todo, model_source, shared, model):
            task, length = todo[index]
            if journal is not None:
                journal.add({"task": task, "length": length, "main": [asdict(r) for r in main],
                             "sweep": [asdict(r) for r in sweep]})
            by_cell[(task, length)] = (main, sweep)
            bar.update(config.n)
    return ([row for cell in cells for row in by_cell[cell][0]], [row for cell in cells for row in by_cell[cell][1]])


@dataclass(frozen=True)
class _EdgeShared:
    """What every cell of an edge study reads."""

    layout: AttentionLayout
    config: EdgeStudyConfig
    meta: dict


def _edge_cell(model: TransformerBridge, shared: _EdgeShared,
               cell: tuple[str, int]) -> tuple[list[EdgeRow], list[EdgeSweepRow]]:
    """One (task, length) cell on whichever worker runs it (module-level, so that it pickles)."""
    task, length = cell
    config = shared.config
    prompts = copying_prompts(model.tokenizer, task, length, config.n, n_shots=config.n_shots, seed=config.seed,
                              prepend_bos=config.prepend_bos, fmt=config.prompt_format)
    return _cell_rows(task, length, _run_cell(model, shared.layout, prompts, config), config, shared.meta)
