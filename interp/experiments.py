"""The paper's experiments as functions over a model: in-context accuracy per task and length
(directional bias), and accuracy under head ablation. Scripts in ``analyses/`` call these."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

from .ablation import ABLATION_KINDS, HeadMeans, ablation_hooks, compute_head_means, random_heads
from .evaluate import evaluate_prompts, resolve_prepend_bos, summarize, task_prompts
from .heads import Head, format_heads
from .prompts import PromptConfig, encode_prompts
from .scoring import HeadScores, model_name, task_attention_scores
from .tasks import DIRECTIONAL_PAIRS, TaskSpec, check_vocabulary, get_task
from .vocab import single_token_vocabulary

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


# --------------------------------------------------------------------------- directional bias


def directional_bias(model, tasks: Sequence[TaskSpec], lengths: Sequence[int], n_examples: int = 50, seed: int = 0,
                     prompt_config: PromptConfig = PromptConfig(), vocabulary: Sequence[str] | None = None,
                     batch_size: int = 8, progress: bool = True, log: Log = _quiet,
                     on_row: Callable[[list[dict]], None] | None = None) -> list[dict]:
    """Accuracy of ``model`` on every task x length. A combination the vocabulary cannot express
    (unique copying longer than the number of single-token items) gets a row with accuracy None
    and the reason, rather than an error, so a sweep over lengths still completes."""
    vocabulary = vocabulary or single_token_vocabulary(model.tokenizer)
    rows: list[dict] = []
    for spec in tasks:
        for length in lengths:
            row = {"model": model_name(model), "task": spec.name, "length": length}
            try:
                check_vocabulary(spec, length, vocabulary)
            except ValueError as err:
                log(f"skipping {spec.name} at length {length}: {err}")
                rows.append(row | {"n_examples": 0, "accuracy": None, "note": str(err)})
                continue
            result = summarize(
                evaluate_prompts(model, task_prompts(model, spec, length, n_examples, seed, prompt_config, vocabulary),
                                 prompt_config, batch_size, progress=progress and f"{spec.name} n={length}"),
                spec.name, length, prompt_config, seed)
            rows.append(row | result.as_row() | {"note": ""})
            if on_row:
                on_row(rows)
    return rows


def pair_table(rows: Sequence[dict], pairs: Sequence[tuple[str, str]] = DIRECTIONAL_PAIRS) -> list[dict]:
    """Right/forward vs left/backward accuracy side by side, with the gap, per length."""
    by_key = {(r["task"], r["length"]): r.get("accuracy") for r in rows}
    lengths = sorted({r["length"] for r in rows})
    table = []
    for right, left in pairs:
        for length in lengths:
            a, b = by_key.get((right, length)), by_key.get((left, length))
            if a is None and b is None:
                continue
            gap = a - b if a is not None and b is not None else None
            table.append({"pair": f"{right} vs {left}", "length": length, "right_or_forward": a,
                          "left_or_backward": b, "gap": gap})
    return table


# --------------------------------------------------------------------------- ablation study


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

    def __post_init__(self) -> None:
        for kind in self.kinds:
            if kind not in ABLATION_KINDS:
                raise ValueError(f"ablation kind {kind!r} is not one of {ABLATION_KINDS}")
        if self.k < 1:
            raise ValueError(f"k={self.k} must be >= 1")
        for task in self.tasks:
            get_task(task)


def ablation_conditions(scores: HeadScores, config: AblationConfig) -> list[tuple[str, int | None, list[Head]]]:
    """(condition, random seed, heads): top-k induction, top-k anti-induction, k random (per seed,
    drawn from the heads in neither top list)."""
    induction = scores.top_heads("induction", config.k)
    anti = scores.top_heads("anti_induction", config.k)
    conditions: list[tuple[str, int | None, list[Head]]] = [("induction", None, induction), ("anti_induction", None, anti)]
    for seed in config.random_seeds:
        conditions.append(("random", seed, random_heads(scores.n_layers, scores.n_heads, config.k, seed,
                                                        exclude=induction + anti)))
    return conditions


def reference_means(model, config: AblationConfig, vocabulary: Sequence[str], progress: bool = True) -> HeadMeans:
    """Mean ``hook_z`` over all tokens of reference prompts of every task (a seed of their own)."""
    prompts = [p for task in config.tasks for length in config.lengths
               for p in task_prompts(model, task, length, config.n_reference, config.seed + 10_000,
                                     config.prompt_config, vocabulary)]
    encoded = encode_prompts(model.tokenizer, prompts, resolve_prepend_bos(model, config.prompt_config))
    return compute_head_means(model, encoded, per_position=False, batch_size=config.batch_size, progress=progress)


def add_task_attention(model, scores: HeadScores, prompt_sets: dict[tuple[str, int], Sequence], prompt_config: PromptConfig,
                       batch_size: int = 8, progress: bool = True) -> HeadScores:
    """Add ``attn_<task>`` scores (mean attention from each output position to its answer's
    source position, over the given prompts; lengths pooled) to ``scores``."""
    bos = resolve_prepend_bos(model, prompt_config)
    by_task: dict[str, list] = {}
    for (task, _), prompts in prompt_sets.items():
        by_task.setdefault(task, []).extend(prompts)
    for task, prompts in by_task.items():
        encoded = encode_prompts(model.tokenizer, prompts, bos)
        scores.scores[f"attn_{task}"] = task_attention_scores(model, prompts, encoded, batch_size, progress)
    return scores


def ablation_prompt_sets(model, config: AblationConfig, vocabulary: Sequence[str] | None = None) -> dict[tuple[str, int], list]:
    """The seeded evaluation prompts of every task and length of an ablation study."""
    vocabulary = vocabulary or single_token_vocabulary(model.tokenizer)
    return {(t, n): task_prompts(model, t, n, config.n_examples, config.seed, config.prompt_config, vocabulary)
            for t in config.tasks for n in config.lengths}


def ablation_study(model, scores: HeadScores, config: AblationConfig = AblationConfig(), progress: bool = True,
                   log: Log = _quiet, on_row: Callable[[list[dict]], None] | None = None) -> list[dict]:
    """Accuracy on each task and length: clean, then under each condition and ablation kind."""
    vocabulary = single_token_vocabulary(model.tokenizer)
    means = reference_means(model, config, vocabulary, progress) if "mean" in config.kinds else None
    name = model_name(model)
    prompt_sets = ablation_prompt_sets(model, config, vocabulary)
    rows: list[dict] = []
    baseline: dict[tuple[str, int], float] = {}

    def record(condition: str, kind: str, seed: int | None, heads: Sequence[Head], hooks) -> None:
        for (task, length), prompts in prompt_sets.items():
            label = f"{condition}/{kind} {task} n={length}"
            result = summarize(evaluate_prompts(model, prompts, config.prompt_config, config.batch_size, hooks,
                                                progress and label), task, length, config.prompt_config, config.seed)
            if condition == "baseline":
                baseline[(task, length)] = result.accuracy
            rows.append({"model": name, "condition": condition, "ablation": kind, "seed": seed, "task": task,
                         "length": length, "n_examples": result.n_examples, "accuracy": result.accuracy,
                         "delta_accuracy": result.accuracy - baseline[(task, length)],
                         "mean_logprob": result.mean_logprob, "heads": format_heads(heads)})
            if on_row:
                on_row(rows)

    record("baseline", "none", None, [], ())
    for condition, seed, heads in ablation_conditions(scores, config):
        for kind in config.kinds:
            log(f"ablating {condition}{'' if seed is None else f' (seed {seed})'} heads {format_heads(heads)} ({kind})")
            record(condition, kind, seed, heads, ablation_hooks(model, heads, kind, means))
    return rows


def ablation_summary(rows: Sequence[dict]) -> list[dict]:
    """One row per condition x ablation, one column per task(-length): accuracy and change from the
    baseline; random-head seeds are averaged, with their spread (min-max)."""
    groups: dict[tuple[str, str], dict[str, list[dict]]] = {}
    for r in rows:
        groups.setdefault((r["condition"], r["ablation"]), {}).setdefault(f"{r['task']}@{r['length']}", []).append(r)
    table = []
    for (condition, kind), cells in groups.items():
        out = {"condition": condition, "ablation": kind}
        for key, items in cells.items():
            accs = [i["accuracy"] for i in items]
            deltas = [i["delta_accuracy"] for i in items]
            cell = f"{statistics.mean(accs):.2f} ({statistics.mean(deltas):+.2f})"
            if len(items) > 1:
                cell += f" [{min(accs):.2f}-{max(accs):.2f}]"
            out[key] = cell
        table.append(out)
    return table
