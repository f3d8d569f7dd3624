"""What a circuit is found for: clean prompts, their counterfactual, the answer tokens and the metric.

The metric of a prompt is the mean log-probability of its answer tokens, teacher-forced (each scored
position predicts the next answer token); a prompt is *correct* when every answer token is the argmax.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from interp.interventions.circuits.roles import position_roles
from interp.interventions.edges.data import CopyingPrompts, check_task, copying_prompts

COUNTERFACTUALS: tuple[str, ...] = ("corrupt", "zero", "mean")
RETRIEVAL_TASKS: tuple[str, ...] = ("UR", "UL")
METRICS: tuple[str, ...] = ("logit_diff", "logprob")
CORRUPT_SEED_OFFSET = 10_000  # the counterfactual strings: another seed, the same length and layout


@dataclass(frozen=True)
class CircuitTask:
    """Prompts sharing one layout, the positions whose next-token logits are scored, and their answers."""

    name: str
    clean: Int[Tensor, "batch pos"]
    corrupt: Int[Tensor, "batch pos"]
    positions: Int[Tensor, " slot"]
    targets: Int[Tensor, "batch slot"]
    roles: tuple[str, ...]
    prompts: CopyingPrompts | None = None
    metric_kind: str = "logit_diff"

    def __post_init__(self) -> None:
        if self.metric_kind not in METRICS:
            raise ValueError(f"metric_kind={self.metric_kind!r}; expected one of {', '.join(METRICS)}")
        if self.clean.shape != self.corrupt.shape:
            raise ValueError(f"clean {tuple(self.clean.shape)} and corrupt {tuple(self.corrupt.shape)} prompts differ in shape")
        if len(self.roles) != self.clean.shape[1]:
            raise ValueError(f"{len(self.roles)} roles for {self.clean.shape[1]} positions")

    @property
    def n(self) -> int:
        return self.clean.shape[0]

    def rows(self, rows: slice) -> "CircuitTask":
        return CircuitTask(self.name, self.clean[rows], self.corrupt[rows], self.positions, self.targets[rows],
                           self.roles, None, self.metric_kind)

    @property
    def corrupt_targets(self) -> Int[Tensor, "batch slot"]:
        """The counterfactual's answers: the tokens the corrupt prompts have where the clean ones have theirs."""
        return self.corrupt[:, self.positions + 1]

    def metric(self, logits: Float[Tensor, "row pos vocab"]) -> Float[Tensor, " row"]:
        """Per row, the mean over answer tokens of ``logit_diff`` (the answer's logit minus the
        counterfactual answer's; not saturated where a model is certain) or ``logprob`` (the answer's
        log-probability). Rows may repeat the prompts in groups (``row = g * n + i``)."""
        return self.scored_metric(logits[:, self.positions.to(logits.device)])

    def scored_metric(self, scored: Float[Tensor, "row slot vocab"]) -> Float[Tensor, " row"]:
        """`metric` of the logits at the scored positions only."""
        groups = scored.shape[0] // self.targets.shape[0]
        scored = scored.float()
        if self.metric_kind == "logprob":
            scored = scored.log_softmax(-1)
        targets = self.targets.repeat(groups, 1).to(scored.device)
        value = scored.gather(-1, targets[..., None])[..., 0]
        if self.metric_kind == "logit_diff":
            other = self.corrupt_targets.repeat(groups, 1).to(scored.device)
            value = value - scored.gather(-1, other[..., None])[..., 0]
        return value.mean(-1)

    def correct(self, logits: Float[Tensor, "row pos vocab"]) -> Bool[Tensor, " row"]:
        """Whether every answer token is the argmax, per row (groups as in `metric`)."""
        return self.scored_correct(logits[:, self.positions.to(logits.device)])

    def scored_correct(self, scored: Float[Tensor, "row slot vocab"]) -> Bool[Tensor, " row"]:
        """`correct` of the logits at the scored positions only."""
        groups = scored.shape[0] // self.targets.shape[0]
        targets = self.targets.repeat(groups, 1).to(scored.device)
        return (scored.argmax(-1) == targets).all(-1)


def copying_task(tokenizer, task: str, length: int, n: int, *, seed: int = 0, fmt: str = "single-shot",
                 n_shots: int = 1, prepend_bos: bool = False, metric_kind: str = "logit_diff") -> CircuitTask:
    """UF / UB prompts of `interp.interventions.edges.data` with a corrupt twin: the same prompt up to the test
    string, another test string (drawn with seed ``seed + CORRUPT_SEED_OFFSET``) and its copy. Earlier shots are
    shared, so every activation before the test string is the same in both runs: what a circuit carries from the
    clean to the corrupt run is the test string alone, not the letters of the demonstrations.

    >>> from interp.models import tiny_tokenizer
    >>> t = copying_task(tiny_tokenizer(), "UB", 3, 4, fmt="few-shot", n_shots=2)
    >>> start = t.prompts.string_start
    >>> bool(t.clean[:, :start].equal(t.corrupt[:, :start])), bool((t.clean[:, start:] != t.corrupt[:, start:]).any())
    (True, True)
    """
    check_task(task)
    shots = 1 if fmt == "single-shot" else n_shots
    clean = copying_prompts(tokenizer, task, length, n, n_shots=shots, seed=seed, prepend_bos=prepend_bos, fmt=fmt)
    other = copying_prompts(tokenizer, task, length, n, n_shots=shots, seed=seed + CORRUPT_SEED_OFFSET,
                            prepend_bos=prepend_bos, fmt=fmt)
    corrupt = clean.tokens.clone()
    corrupt[:, clean.string_start:] = other.tokens[:, clean.string_start:]
    return CircuitTask(task.upper(), clean.tokens, corrupt, clean.scored_positions(), clean.targets(),
                       position_roles(clean, prepend_bos), clean, metric_kind)


def retrieval_task(tokenizer, task: str, length: int, n: int, *, seed: int = 0, prepend_bos: bool = False,
                   metric_kind: str = "logit_diff") -> CircuitTask:
    """UR / UL zero-shot lines ``x1 .. x(n-1) | q:`` with their one-token answer; the corrupt twin is
    another context and query (seed ``seed + CORRUPT_SEED_OFFSET``). Every prompt must encode to one
    layout (one token per item, as in the planted models' tokenizer). Roles: ``x0`` .. (the context),
    ``q`` (the query), ``answer``, else ``prompt``.

    >>> from interp.models.planted_vocab import planted_tokenizer
    >>> t = retrieval_task(planted_tokenizer(), "UR", 6, 3)
    >>> t.targets.shape, t.roles[-3:]
    (torch.Size([3, 1]), ('q', 'prompt', 'answer'))
    """
    from interp.data.tasks import generate_examples
    from interp.prompts import PromptConfig, build_prompts, encode_prompts

    upper = str(task).strip().upper()
    if upper not in RETRIEVAL_TASKS:
        raise ValueError(f"task {task!r} is not a unique retrieval task; expected one of {', '.join(RETRIEVAL_TASKS)}")

    def encoded(offset: int):
        prompts = build_prompts(generate_examples(upper, length, n, seed=seed + offset), PromptConfig(n_shots=0))
        rows = encode_prompts(tokenizer, prompts, prepend_bos=prepend_bos)
        ids = [list(r.prompt_ids) + list(r.answer_ids) for r in rows]
        if len({len(i) for i in ids}) != 1 or any(len(r.answer_ids) != 1 for r in rows):
            raise ValueError(f"{upper} prompts of length {length} do not share one layout with one-token answers "
                             "for this tokenizer")
        return torch.tensor(ids), len(rows[0].prompt_ids)

    clean, n_prompt = encoded(0)
    corrupt, _ = encoded(CORRUPT_SEED_OFFSET)
    roles = ["prompt"] * clean.shape[1]
    if prepend_bos:
        roles[0] = "bos"
    context_start = n_prompt - 3 - (length - 1)  # the line ends with the items, "|", q, ":"
    for i in range(length - 1):
        roles[context_start + i] = f"x{i}"
    roles[n_prompt - 2], roles[n_prompt] = "q", "answer"
    return CircuitTask(upper, clean, corrupt, torch.tensor([n_prompt - 1]), clean[:, n_prompt:n_prompt + 1], tuple(roles),
                       None, metric_kind)
