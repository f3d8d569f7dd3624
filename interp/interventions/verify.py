"""The verified head screen: rank heads by an attribution screen, then ablate the top of that
order exactly until a budget of exact evaluations is spent (AtP*'s verification step).

An exact evaluation is one head ablated alone over all prompts (one head of
[`interp.interventions.sweep.head_sweep`][interp.interventions.sweep.head_sweep]). The order is the screen's largest estimated change
*either way* ([`AttributionResult.flagged_heads`][interp.interventions.attribution.AttributionResult.flagged_heads]): a head whose effect a gradient at the clean
run gets wrong often still shows a large estimate, of the wrong sign.

[`verified_recall`][interp.interventions.verify.verified_recall] is the cost of that order: how many exact evaluations it spends
before it has found the exact sweep's top heads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from interp.core.heads import Head
from interp.core.results import Tabular, heads_summary, ranked_heads, score_and_k
from interp.interventions.ablation import HeadMeans
from interp.interventions.attribution import AttributionResult
from interp.interventions.sweep import SweepResult, head_sweep
from interp.models.bridge import TransformerBridge
from interp.prompts import EncodedPrompt


def check_budget(budget: int, n_heads: int, name: str = "budget") -> None:
    """One clear error unless ``1 <= budget <= n_heads`` (exact evaluations, one a head).

    >>> check_budget(3, 8)
    >>> check_budget(9, 8)
    Traceback (most recent call last):
    ValueError: budget=9 exact evaluations, but the model has 8 heads
    """
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise ValueError(f"{name}={budget!r}: expected a whole number of exact evaluations")
    if budget < 1:
        raise ValueError(f"{name}={budget} must be >= 1 (one exact evaluation a head; no verification: use the screen)")
    if budget > n_heads:
        raise ValueError(f"{name}={budget} exact evaluations, but the model has {n_heads} heads")


@dataclass(frozen=True, repr=False)
class VerifiedScreen(Tabular):
    """A screen whose first ``len(exact.heads)`` heads, in its order, were ablated exactly.

    >>> from interp.measure.teacher_forcing import AnswerScores
    >>> clean = AnswerScores.from_rows([(True, 1.0, -0.5, ()), (True, 1.0, -0.5, ())])
    >>> worse = AnswerScores.from_rows([(False, 0.0, -2.5, ()), (True, 1.0, -0.5, ())])
    >>> screen = AttributionResult("zero", clean, torch.tensor([[[0.4, -0.1]], [[0.4, -0.1]]]), model_name="demo")
    >>> verified = VerifiedScreen(screen, SweepResult([Head(0, 0)], clean, [worse], "demo"))
    >>> verified
    VerifiedScreen(demo, attribution patching, zero ablation, n=2 prompts, 1 of 2 heads verified; most harmful (log-prob change): 0.0 -1.000 (verified), 0.1 -0.100 (estimated))
    >>> [(r["layer"], r["head"], r["status"]) for r in verified.rows()]
    [(0, 0, 'verified'), (0, 1, 'estimated')]
    """

    screen: AttributionResult
    exact: SweepResult  # the verified heads, in the order they were verified

    def __repr__(self) -> str:
        table = self.delta_logprob()
        top = heads_summary(table, self.top_heads(min(3, table.numel())))
        verified = set(self.exact.heads)
        flags = iter(["verified" if h in verified else "estimated" for h in self.top_heads(min(3, table.numel()))])
        top = ", ".join(f"{part} ({next(flags)})" for part in top.split(", "))
        return (f"VerifiedScreen({self.screen.model_name or 'no model'}, {self.screen.method}, "
                f"{self.screen.kind} ablation, n={len(self.screen.clean)} prompts, {len(self.exact.heads)} of "
                f"{table.numel()} heads verified; most harmful (log-prob change): {top})")

    @property
    def verified_heads(self) -> list[Head]:
        return list(self.exact.heads)

    def delta_logprob(self) -> Float[Tensor, "layer head_index"]:
        """Change of the mean answer log-prob: exact for the verified heads, estimated for the rest."""
        estimate = self.screen.delta_logprob()
        checked = self.exact.delta_logprob_table(*estimate.shape)
        return torch.where(torch.isnan(checked), estimate, checked)

    def top_heads(self, score: str | int, k: int | None = None) -> list[Head]:
        """The ``k`` heads whose ablation lowers the answer log-prob most, verified or estimated:
        ``top_heads("delta_logprob", k)`` as on every result type, or ``top_heads(k)``."""
        _, k = score_and_k(score, k, "delta_logprob")
        return ranked_heads(self.delta_logprob(), k, descending=False)

    def rows(self, task: str | None = None, length: int | None = None, model_name: str | None = None) -> list[dict]:
        """One row a head, most harmful first: its change in mean answer log-prob (exact where
        verified), the screen's estimate, the exact accuracy where verified (None where not),
        ``status`` (``"verified"`` / ``"estimated"``) and ``verify_rank`` (the screen's order, 1 first)."""
        table, estimate = self.delta_logprob(), self.screen.delta_logprob()
        base_lp = self.screen.clean.mean_logprob.mean().item()
        order = {h: i + 1 for i, h in enumerate(self.screen.flagged_heads(estimate.numel()))}
        accuracy = {h: scores.accuracy for h, scores in zip(self.exact.heads, self.exact.ablated)}
        where = {"task": task} if task is not None else {}
        where |= {"length": length} if length is not None else {}
        return [{"model": self.screen.model_name if model_name is None else model_name, **where, "layer": head.layer,
                 "head": head.head, "mean_logprob": base_lp + table[head].item(), "delta_logprob": table[head].item(),
                 "estimated_delta_logprob": estimate[head].item(), "accuracy": accuracy.get(head),
                 "status": "verified" if head in accuracy else "estimated", "verify_rank": order[head],
                 "estimate": f"exact ({self.screen.kind})" if head in accuracy
                 else f"{self.screen.method} ({self.screen.kind})"}
                for head in self.top_heads(estimate.numel())]


def verify_screen(model: TransformerBridge, encoded: Sequence[EncodedPrompt], screen: AttributionResult, budget: int,
                  means: HeadMeans | None = None, batch_size: int = 8, progress: bool = False) -> VerifiedScreen:
    """Ablate the screen's first ``budget`` heads (largest estimated change either way) exactly,
    batched as in ``head_sweep``, and rank every head by its exact change where verified and its
    estimate elsewhere.

    Examples:
        >>> from interp.models import load_model
        >>> from interp.measure.encoding import encode_for
        >>> from interp.measure.evaluate import task_prompts
        >>> from interp.interventions.attribution import attribution_sweep
        >>> model = load_model("tiny-llama", device="cpu")
        >>> encoded = encode_for(model, task_prompts(model, "UF", 5, n_examples=4))
        >>> screen = attribution_sweep(model, encoded, "zero")
        >>> verified = verify_screen(model, encoded, screen, budget=3)   # 3 of 8 heads exact
        >>> sum(r["status"] == "verified" for r in verified.rows())
        3
    """
    n_layers, n_heads = screen.delta.shape[1:]
    check_budget(budget, n_layers * n_heads)
    order = screen.flagged_heads(budget)
    exact = head_sweep(model, encoded, order, screen.kind, means, batch_size, progress)
    return VerifiedScreen(screen, exact)


@dataclass(frozen=True)
class RecallCurve(Tabular):
    """How many of the exact top ``k`` heads an order has found after each exact evaluation.

    >>> order = [Head(0, 1), Head(0, 0), Head(1, 0), Head(1, 1)]
    >>> curve = verified_recall(order, torch.tensor([[-1.0, -2.0], [0.0, 0.1]]), k=2)
    >>> curve.found, curve.needed(2)
    ([1, 2, 2, 2], 2)
    """

    order: list[Head]  # the order heads are verified in
    found: list[int]  # after 1, 2, ... exact evaluations: how many of top_exact are among them
    top_exact: list[Head]

    @property
    def k(self) -> int:
        return len(self.top_exact)

    def needed(self, m: int) -> int:
        """Exact evaluations the order spends before ``m`` of the exact top ``k`` are found."""
        if not 1 <= m <= self.k:
            raise ValueError(f"m={m} must be between 1 and k={self.k}")
        return next(i + 1 for i, n in enumerate(self.found) if n >= m)

    def rows(self) -> list[dict]:
        """One row an exact evaluation: how many spent, the head verified, how many of the top found."""
        top = set(self.top_exact)
        return [{"spent": i + 1, "layer": h.layer, "head": h.head, "in_exact_top": h in top, "found": n, "k": self.k}
                for i, (h, n) in enumerate(zip(self.order, self.found))]


def verified_recall(order: Sequence[Head], exact: Float[Tensor, "layer head_index"], k: int = 10) -> RecallCurve:
    """The cost of verified recall: after each exact evaluation in ``order`` (every head, e.g.
    ``screen.flagged_heads(n_heads)``), how many of the ``k`` heads whose exact ablation lowers
    the answer log-prob most (``exact``: the full sweep's layer x head table) have been found.

    >>> curve = verified_recall([Head(1, 0), Head(0, 0), Head(0, 1), Head(1, 1)],
    ...                         torch.tensor([[-1.0, -2.0], [0.0, 0.1]]), k=2)
    >>> curve.found, curve.needed(1), curve.needed(2)
    ([0, 1, 2, 2], 2, 3)
    """
    if torch.isnan(exact).any():
        raise ValueError("exact must hold every head: the cost of recall needs the full exact sweep")
    if not 1 <= k <= exact.numel():
        raise ValueError(f"k={k} must be between 1 and the number of heads ({exact.numel()})")
    order = list(order)
    if sorted(order) != sorted(Head(l, h) for l in range(exact.shape[0]) for h in range(exact.shape[1])):
        raise ValueError(f"order must list each of the {exact.numel()} heads once")
    top = ranked_heads(exact, k, descending=False)
    wanted, found, n = set(top), [], 0
    for head in order:
        n += head in wanted
        found.append(n)
    return RecallCurve(order, found, top)
