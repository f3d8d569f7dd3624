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
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace

import torch
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from interp.core.executor import NO_MODEL, Executor, ModelSource, SerialExecutor
from interp.core.journal import RowJournal, RowShape
from interp.core.naming import CONDITION_LABELS
from interp.core.stats import mean_and_sem
from interp.core.tables import as_mapping, row_from_mapping
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


def branch_summary(scores: AnswerScores) -> dict:
    """``Accuracy``'s columns, and the standard error of the mean log-prob (the figures' error bars).

    >>> sorted(branch_summary(AnswerScores.from_rows([(True, 1.0, -0.5, ()), (False, 0.5, -1.5, ())])))[:3]
    ['accuracy', 'ci_high', 'ci_low']
    """
    return Accuracy.of(scores).as_row() | {"mean_logprob_se": mean_and_sem(scores.mean_logprob.tolist())[1]}


def layers_label(layers: Sequence[int] | None) -> str:
    """``"all"`` or ``"0;5"``.

    >>> layers_label((0, 5))
    '0;5'
    """
    return "all" if layers is None else ";".join(map(str, layers))


@dataclass(frozen=True)
class _EdgeMeasurement:
    """What every edge-table row holds: the run's settings, the cell, and the copy's exact match with
    its binomial standard error and Wilson interval ([`Accuracy`][interp.measure.teacher_forcing.Accuracy])
    and mean log-prob with its standard error."""

    model: str
    adapter: str | None
    format: str
    shots: int
    seed: int
    bos: bool
    task: str
    length: int
    n_examples: int
    accuracy: float
    stderr: float
    ci_low: float
    ci_high: float
    mean_logprob: float
    token_accuracy: float
    mean_logprob_se: float


@dataclass(frozen=True)
class EdgeRow(_EdgeMeasurement):
    """One condition of one (task, length) cell."""

    condition: str  # none, induction or anti_induction (edges removed)
    layers: str  # the patched layers ("all" or "0;5")
    heads: str


@dataclass(frozen=True)
class EdgeSweepRow(_EdgeMeasurement):
    """One edge kind patched in one layer alone, on the sweep's prompts of a cell, with the change from
    the clean continuation of the same prompts."""

    edge: str  # induction or anti_induction
    layer: int
    delta_accuracy: float
    delta_mean_logprob: float
    heads: str


# The tables' column order: the cell, what was patched, then the measurement.
_SETTINGS = ["model", "adapter", "format", "shots", "seed", "bos", "task", "length"]
_MEASURED = [f.name for f in fields(_EdgeMeasurement) if f.name not in _SETTINGS]
EDGE_COLUMNS = [*_SETTINGS, "condition", *_MEASURED, "layers", "heads"]
EDGE_SWEEP_COLUMNS = [*_SETTINGS, "edge", "layer", *_MEASURED, "delta_accuracy", "delta_mean_logprob", "heads"]


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


def summary_table(rows: Sequence[EdgeRow | Mapping]) -> list[dict]:
    """One line per (task, length): accuracy [95% CI] and mean log-prob +- s.e. per condition, for printing.

    >>> row = {"task": "UF", "length": 3, "n_examples": 4, "condition": "none", "accuracy": 0.5, "ci_low": 0.15,
    ...        "ci_high": 0.85, "mean_logprob": -1.5, "mean_logprob_se": 0.25}
    >>> summary_table([row])[0]["acc none"]
    '0.50 [0.15, 0.85]'
    """
    rows = [as_mapping(row) for row in rows]
    lines: dict[tuple, dict] = {}
    for row in rows:
        line = lines.setdefault((row["task"], row["length"]), {"task": row["task"], "L": row["length"], "n": row["n_examples"]})
        line[f"acc {row['condition']}"] = f"{row['accuracy']:.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}]"
    for row in rows:
        line = lines[(row["task"], row["length"])]
        line[f"log-prob {row['condition']}"] = f"{row['mean_logprob']:.2f} ± {row['mean_logprob_se']:.2f}"
    return list(lines.values())


def claim_summary(rows: Sequence[EdgeRow | Mapping]) -> list[str]:
    """One line per task: accuracy pooled over lengths under each condition, and the change from none.

    >>> rows = [{"task": "UF", "condition": c, "accuracy": a, "n_examples": 10}
    ...         for c, a in (("none", 1.0), ("induction", 0.2), ("anti_induction", 0.9))]
    >>> claim_summary(rows)[0].split("; ")[1]
    'induction edges removed 0.20 [0.06, 0.51] (-0.80)'
    """
    rows = [as_mapping(row) for row in rows]
    pooled: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        counts = pooled[(row["task"], row["condition"])]
        counts[0] += round(row["accuracy"] * row["n_examples"])
        counts[1] += row["n_examples"]
    lines = []
    for task in dict.fromkeys(row["task"] for row in rows):
        base = pooled[(task, "none")]
        base_acc = base[0] / base[1]
        parts = [f"{task}: no intervention {base_acc:.2f}"]
        for condition in ("induction", "anti_induction"):
            pooled_accuracy = Accuracy.of_counts(*pooled[(task, condition)])
            acc, lo, hi = pooled_accuracy.accuracy, pooled_accuracy.ci_low, pooled_accuracy.ci_high
            parts.append(f"{CONDITION_LABELS[condition]} {acc:.2f} [{lo:.2f}, {hi:.2f}] ({acc - base_acc:+.2f})")
        lines.append("; ".join(parts) + f" (all lengths pooled, n = {base[1]})")
    return lines


def sweep_summary(rows: Sequence[EdgeSweepRow | Mapping], top: int = 3) -> list[dict]:
    """Per (task, length, edge kind): the layers whose edges alone lower the copy's mean log-prob most.

    >>> rows = [{"task": "UF", "length": 5, "edge": "induction", "layer": layer, "n_examples": 2,
    ...          "delta_mean_logprob": delta, "delta_accuracy": 0.0} for layer, delta in enumerate((-0.1, -2.0, 0.3))]
    >>> sweep_summary(rows, top=2)[0]["top layers (Δ log-prob)"]
    '1 (-2.00), 0 (-0.10)'
    """
    groups: dict[tuple, list[Mapping]] = defaultdict(list)
    for row in map(as_mapping, rows):
        groups[(row["task"], row["length"], row["edge"])].append(row)
    lines = []
    for (task, length, edge), group in groups.items():
        best = sorted(group, key=lambda r: r["delta_mean_logprob"])[:top]
        lines.append({"task": task, "L": length, "edges": edge, "n": group[0]["n_examples"],
                      "top layers (Δ log-prob)": ", ".join(f"{r['layer']} ({r['delta_mean_logprob']:+.2f})" for r in best),
                      "largest Δ accuracy": f"{min(r['delta_accuracy'] for r in group):+.2f}"})
    return lines
