"""How one head's ablation effect grows on the way from the clean run to the ablated one: the check
to run where an attribution screen and the exact sweep disagree about a head.

An attribution screen ([`interp.interventions.attribution`][interp.interventions.attribution]) reads the slope of the answer
log-probability at the clean run. [`ablation_path`][interp.interventions.ablation_path.ablation_path] measures it exactly at points ``alpha`` of
the path on which that head alone moves ``alpha`` of the way to its ablation
(``z + alpha * (z_ablated - z)``; ``alpha = 1`` is the exact sweep's number). A straight line
says a first-order estimate can be trusted for the head; a flat start and a cliff near
``alpha = 1`` is a threshold (later heads' attention flips only once the head's signal is nearly
gone, or other heads carry the same signal until then) that no gradient taken at the clean run can
see. ``frozen_patterns=True`` pins every later layer's attention patterns to their clean values:
the part of the effect that remains does not run through attention patterns, so the difference
is the part that a QK fix ([`interp.interventions.qk_fix`][interp.interventions.qk_fix]) is about.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import torch
from jaxtyping import Float
from torch import Tensor

from interp.core.heads import Head, validate_heads
from interp.core.results import Tabular
from interp.interventions.ablation import AblationKind, HeadMeans, check_ablation_kind, z_hook_name
from interp.interventions.attribution import ablated_z, answer_logprob
from interp.measure.batching import Hook, pad_token_id, padded_batches
from interp.measure.teacher_forcing import AnswerPositions, select_positions_hook
from interp.models.bridge import TransformerBridge, act_name
from interp.prompts import EncodedPrompt


@dataclass(frozen=True)
class AblationPath(Tabular):
    """The change of the mean answer log-prob (over prompts) at each point of one head's way to
    its ablation.

    >>> AblationPath(Head(16, 0), "zero", [0.5, 1.0], [-0.09, -2.0]).rows()[1]
    {'layer': 16, 'head': 0, 'kind': 'zero', 'alpha': 1.0, 'delta_logprob': -2.0, 'frozen_patterns': False}
    """

    head: Head
    kind: str
    alphas: list[float]
    delta: list[float]  # at each alpha, the change from the clean run
    frozen_patterns: bool = False

    def rows(self) -> list[dict]:
        """One row a point of the way."""
        return [{"layer": self.head.layer, "head": self.head.head, "kind": self.kind, "alpha": alpha,
                 "delta_logprob": delta, "frozen_patterns": self.frozen_patterns}
                for alpha, delta in zip(self.alphas, self.delta)]

    def linear_share(self) -> float:
        """How much of the full effect (at ``alpha = 1``) a straight line through the point nearest
        the clean run predicts: ``(delta / alpha) / delta at 1`` (1 on a line; near 0 or negative
        for a cliff); NaN without a point at 1 or a full effect of 0.

        >>> AblationPath(Head(0, 0), "zero", [0.1, 1.0], [-0.01, -2.0]).linear_share()
        0.05
        >>> AblationPath(Head(0, 0), "zero", [1.0, 0.1], [-2.0, -0.01]).linear_share()
        0.05
        """
        full = [d for a, d in zip(self.alphas, self.delta) if a == 1.0]
        if not full or full[0] == 0:
            return float("nan")
        alpha, delta = min(zip(self.alphas, self.delta))
        return round(delta / alpha / full[0], 12)

    def summary(self) -> str:
        """One line: the head, then ``alpha: change`` for each point.

        >>> AblationPath(Head(16, 0), "zero", [0.5, 1.0], [-0.09, -2.0]).summary()
        '16.0 (zero ablation): 0.5: -0.090, 1: -2.000'
        """
        frozen = ", later patterns frozen" if self.frozen_patterns else ""
        points = ", ".join(f"{a:g}: {d:+.3f}" for a, d in zip(self.alphas, self.delta))
        return f"{self.head} ({self.kind} ablation{frozen}): {points}"


# Closer to the clean run than this, a point measures the rounding of the activations, not the head.
MIN_ALPHA = 1e-3


def path_points(alphas: Sequence[float]) -> list[float]:
    """The points of a path as measured: sorted, each once, ending at 1 (the full ablation, which
    `AblationPath.linear_share` compares with).

    >>> path_points([1.0, 0.5, 0.5]), path_points([0.25])
    ([0.5, 1.0], [0.25, 1.0])
    >>> path_points([1e-300])
    Traceback (most recent call last):
    ValueError: alphas=[1e-300]: expected points in [0.001, 1] (1: the full ablation; a point nearer 0 measures rounding, not the head)
    """
    values = list(alphas)
    if not values or any(not isinstance(a, (int, float)) or not math.isfinite(a) or not MIN_ALPHA <= a <= 1.0
                         for a in values):
        raise ValueError(f"alphas={values}: expected points in [{MIN_ALPHA:g}, 1] (1: the full ablation; a point "
                         f"nearer 0 measures rounding, not the head)")
    return sorted({float(a) for a in values} | {1.0})


def _check_path_args(model: TransformerBridge, head, alphas: Sequence[float], kind: str, means, encoded) -> Head:
    (checked,) = validate_heads([head], model.cfg.n_layers, model.cfg.n_heads, name="head")
    path_points(alphas)
    check_ablation_kind(kind, means)
    if not encoded:
        raise ValueError("encoded prompts must not be empty")
    return checked


def _moving_head(head: Head, alpha: float, kind: AblationKind, means: HeadMeans | None) -> Hook:
    """A hook moving ``head`` alone ``alpha`` of the way to its ablation."""

    def hook(z: Float[Tensor, "batch pos head_index d_head"], hook) -> Tensor:
        z = z.clone()
        target = ablated_z(z, head.layer, kind, means)[:, :, head.head]
        z[:, :, head.head] += alpha * (target - z[:, :, head.head])
        return z

    return z_hook_name(head.layer), hook


def _pinned_patterns(model: TransformerBridge, tokens, head: Head, hooks: list[Hook]) -> list[Hook]:
    """Hooks holding the attention patterns of every layer after ``head``'s at their clean values."""
    names = {act_name("pattern", layer) for layer in range(head.layer + 1, model.cfg.n_layers)}
    with torch.no_grad(), model.hooks(fwd_hooks=hooks):
        _, cache = model.run_with_cache(tokens, names_filter=lambda name: name in names)
    return [(name, lambda pattern, hook, clean=cache[name]: clean) for name in sorted(names)]


def ablation_path(model: TransformerBridge, encoded: Sequence[EncodedPrompt], head, alphas: Sequence[float] = (0.25, 0.5, 0.75, 1.0),
                  kind: AblationKind = "zero", means: HeadMeans | None = None, frozen_patterns: bool = False,
                  batch_size: int = 8) -> AblationPath:
    """The exact change of the mean answer log-prob when ``head`` alone moves ``alpha`` of the
    way to its ablation, for each of ``alphas`` (sorted, with 1 added: `path_points`); at
    ``alpha = 1`` it is ``head_sweep``'s number.

    Examples:
        >>> from interp.models import load_model
        >>> from interp.measure.encoding import encode_for
        >>> from interp.measure.evaluate import task_prompts
        >>> from interp.prompts import PromptConfig
        >>> model, shots = load_model("planted-uf", device="cpu"), PromptConfig(n_shots=0)
        >>> encoded = encode_for(model, task_prompts(model, "UF", 8, 4, prompt_config=shots), shots)
        >>> path = ablation_path(model, encoded, "0.0", alphas=[0.1, 0.5, 1.0])  # the previous-token head
        >>> path.delta[-1] < -1.0, abs(path.linear_share()) < 0.1  # breaks UF, with no slope at the clean run
        (True, True)
    """
    head = _check_path_args(model, head, alphas, kind, means, encoded)
    alphas = path_points(alphas)
    totals = torch.zeros(len(alphas), dtype=torch.float64)
    for batch in padded_batches(encoded, batch_size, pad_token_id(model.tokenizer)):
        where = AnswerPositions.of(batch.items)
        hooks = [select_positions_hook(where.positions)]
        metric = partial(answer_logprob, where=where)
        tokens = batch.tokens.to(model.cfg.device)
        if frozen_patterns:
            hooks += _pinned_patterns(model, tokens, head, hooks)
        with torch.no_grad():
            with model.hooks(fwd_hooks=hooks):
                clean = metric(model(tokens))
            for i, alpha in enumerate(alphas):
                with model.hooks(fwd_hooks=[*hooks, _moving_head(head, alpha, kind, means)]):
                    totals[i] += (metric(model(tokens)) - clean).double().sum().cpu()
    return AblationPath(head, kind, alphas, (totals / len(encoded)).tolist(), frozen_patterns)
