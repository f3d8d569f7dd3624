"""Per prompt: the copy clean, on the counterfactual prompt, and with each removal under each counterfactual.

Three metrics over the answers a read of a copy position can carry (every copied token after the
first: the first is predicted at the separator, which has no earlier occurrence), each a mean over
those answers: ``logit_diff`` (the answer's logit minus the counterfactual answer's, the circuit
study's metric: blind to any third token), ``margin`` (the answer's logit minus the largest other
logit: negative wherever another token wins) and ``logprob`` (the answer's log-probability); and
``correct``, the exact copy (teacher-forced, every answer token the argmax, the first included, as
`CircuitTask.correct`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
from jaxtyping import Bool, Float
from torch import Tensor
from tqdm.auto import tqdm

from interp.core.naming import model_name
from interp.experiments.routes.reads import Removal, removal_entries, route_removals
from interp.experiments.routes.removal import (ROUTE_COUNTERFACTUALS, Heads, check_counterfactuals, chunk_counterfactual,
                                               heads_label, removal_patches, task_means)
from interp.interventions.circuits.task import CircuitTask
from interp.interventions.edges.layout import AttentionLayout, attention_layout
from interp.interventions.edges.patching import edge_patch_hooks
from interp.models.bridge import TransformerBridge

METRIC_NAMES: tuple[str, ...] = ("logit_diff", "margin", "logprob")


@dataclass(frozen=True)
class AnswerScores:
    """Per prompt, the three metrics (see the module) and the exact copy."""

    logit_diff: Float[Tensor, " row"]
    margin: Float[Tensor, " row"]
    logprob: Float[Tensor, " row"]
    correct: Bool[Tensor, " row"]


def answer_scores(task: CircuitTask, logits: Float[Tensor, "row pos vocab"]) -> AnswerScores:
    """The metrics over the answers after the first, and the exact copy over all of them.

    >>> import torch
    >>> from interp.models import tiny_tokenizer
    >>> from interp.interventions.circuits.task import copying_task
    >>> task = copying_task(tiny_tokenizer(), "UF", 3, 1)
    >>> logits = torch.zeros(1, task.clean.shape[1], len(tiny_tokenizer()))
    >>> logits[0, task.positions, task.targets[0]] = 2.0      # every answer wins by 2 logits
    >>> s = answer_scores(task, logits)
    >>> float(s.logit_diff[0]), float(s.margin[0]), bool(s.correct[0])
    (2.0, 2.0, True)
    """
    later = CircuitTask(task.name, task.clean, task.corrupt, task.positions[1:], task.targets[:, 1:], task.roles, None,
                        "logit_diff")
    scored = logits[:, later.positions.to(logits.device)].float()
    targets = later.targets.to(logits.device)[..., None]
    answer = scored.gather(-1, targets)[..., 0]
    others = scored.scatter(-1, targets, float("-inf")).amax(-1)
    logprob = scored.log_softmax(-1).gather(-1, targets)[..., 0]
    return AnswerScores(later.metric(logits).cpu(), (answer - others).mean(-1).cpu(), logprob.mean(-1).cpu(),
                        task.correct(logits).cpu())


@dataclass(frozen=True)
class RouteRow:
    """One prompt of one removal under one counterfactual: a row of the route table.

    ``route`` is the read removed (necessity) or kept (sufficiency), ``o-1+o`` for the joint removal;
    ``removed``: attention entries replaced per prompt (each in every patched head); ``skipped``: reads
    asked for whose source lies before the prompt. ``*_metric`` are the logit difference (the share's
    metric), ``counterfactual_*`` the counterfactual prompt's own run, ``correct`` the clean exact copy."""

    model: str
    task: str
    length: int
    format: str
    shots: int
    head_set: str
    heads: str
    prompt: int
    route: str
    kind: str
    test: str
    counterfactual: str
    removed: int
    skipped: int
    clean_metric: float
    counterfactual_metric: float
    patched_metric: float
    clean_margin: float
    counterfactual_margin: float
    patched_margin: float
    clean_logprob: float
    counterfactual_logprob: float
    patched_logprob: float
    correct: bool
    patched_correct: bool

    def as_row(self) -> dict:
        return asdict(self)


def route_rows(model: TransformerBridge, task: CircuitTask, *, heads: Heads | None = None, head_set: str = "all",
               removals: Sequence[Removal] | None = None, counterfactuals: Sequence[str] = ROUTE_COUNTERFACTUALS,
               batch_size: int = 8, fmt: str = "", model_label: str | None = None,
               layout: AttentionLayout | None = None, progress: bool = False) -> list[RouteRow]:
    """Every prompt of ``task`` under every removal (default `route_removals`) and counterfactual, the
    removal acting in every layer and head or in ``heads`` (layer -> query heads) only; ``head_set`` names
    the heads, ``fmt`` the prompt format and ``model_label`` (default: the model's name) the model in the rows.

    >>> from interp.models import load_model
    >>> from interp.interventions.circuits.task import copying_task
    >>> from interp.experiments.routes.reads import RouteRead
    >>> model = load_model("planted-ub", device="cpu")
    >>> rows = route_rows(model, copying_task(model.tokenizer, "UB", 4, 2), counterfactuals=["previous_token_cut"],
    ...                   removals=[Removal((RouteRead(r, "value"),)) for r in ("o-1", "o")])
    >>> [(r.route, r.correct, r.patched_correct) for r in rows if r.prompt == 0]   # the planted anti-induction read
    [('o-1', True, True), ('o', True, False)]
    """
    if task.prompts is None:
        raise ValueError(f"task {task.name}: routes need copying prompts (their earlier occurrences)")
    counterfactuals = check_counterfactuals(counterfactuals)
    removals = list(route_removals() if removals is None else removals)
    layout = layout or attention_layout(model)
    prompts = task.prompts
    entries = {removal: removal_entries(prompts, removal) for removal in removals}
    context = {"model": model_label or model_name(model), "task": task.name, "length": prompts.length, "format": fmt,
               "shots": prompts.n_shots, "head_set": head_set, "heads": heads_label(heads)}
    device = model.cfg.device
    rows: list[RouteRow] = []
    with torch.no_grad():
        means = task_means(model, layout, task, counterfactuals, batch_size)
        starts = range(0, task.n, batch_size)
        for start in tqdm(starts, desc=f"routes L={prompts.length}", disable=not progress):
            chunk = task.rows(slice(start, min(task.n, start + batch_size)))
            clean = answer_scores(chunk, model(chunk.clean.to(device)))
            corrupt = answer_scores(chunk, model(chunk.corrupt.to(device)))
            for counterfactual in counterfactuals:
                counter = chunk_counterfactual(model, layout, chunk, counterfactual, means)
                for removal in removals:
                    patches = removal_patches(removal.kind, entries[removal], counter, heads, chunk.n, layout)
                    patched = clean if not patches else answer_scores(
                        chunk, model.run_with_hooks(chunk.clean.to(device), fwd_hooks=edge_patch_hooks(layout, patches)))
                    rows += _rows(context, start, removal, counterfactual, len(entries[removal]),
                                  entries[removal].skipped, clean, corrupt, patched)
    return rows


def _rows(context: dict, start: int, removal: Removal, counterfactual: str, removed: int, skipped: int,
          clean: AnswerScores, corrupt: AnswerScores, patched: AnswerScores) -> list[RouteRow]:
    """One row per prompt of a chunk starting at prompt ``start``."""
    out = []
    for i in range(len(clean.correct)):
        metrics = {f"{run}_{column}": float(getattr(scores, name)[i])
                   for name, column in (("logit_diff", "metric"), ("margin", "margin"), ("logprob", "logprob"))
                   for run, scores in (("clean", clean), ("counterfactual", corrupt), ("patched", patched))}
        out.append(RouteRow(**context, prompt=start + i, route=removal.route, kind=removal.kind, test=removal.test,
                            counterfactual=counterfactual, removed=removed, skipped=skipped, **metrics,
                            correct=bool(clean.correct[i]), patched_correct=bool(patched.correct[i])))
    return out
