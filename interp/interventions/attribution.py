"""Attribution patching: a first-order estimate of every head's ablation effect at once.

The exact sweep (``interp.interventions.sweep.head_sweep``) ablates one head per forward pass. Here the change
of the answer log-probability under ablating head ``(l, h)`` alone is estimated as

    delta ~= sum over positions and d_head of  dM/dz[l, h] * (z_ablated - z_clean)[l, h]

with ``M`` the exact sweep's metric (each prompt's mean answer-token log-probability) and ``z``
the head's ``hook_z`` slice: one forward and one backward pass per batch give it for all heads.
It is a screen that says where to look before paying for the exact sweep; it misses what a
linearization cannot see (a saturated softmax downstream, paths that cancel, an ablation that
moves the residual stream far off its usual range).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import einops
import torch
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from interp.core.lm import HookedModel
from interp.interventions.ablation import AblationKind, HeadMeans, check_ablation_kind
from interp.measure.batching import Hook, in_input_order, pad_token_id, padded_batches
from interp.models.bridge import TransformerBridge, act_name
from interp.interventions.edges.layout import AttentionLayout, attention_layout
from interp.core.heads import Head
from interp.core.naming import model_name as name_of_model
from interp.core.results import Tabular, heads_summary, ranked_heads, score_and_k
from interp.prompts import EncodedPrompt
from interp.interventions.qk_fix import hook_names, qk_corrections
from interp.measure.teacher_forcing import AnswerPositions, AnswerScores, answer_rows, select_positions_hook

Metric = Callable[[Float[Tensor, "batch out_pos vocab"]], Float[Tensor, " batch"]]


# --------------------------------------------------------------------------- the metric


def answer_logprob(logits: Float[Tensor, "batch slot vocab"], where: AnswerPositions) -> Float[Tensor, " batch"]:
    """Each row's mean log-probability of its answer tokens from the logits at ``where.positions``
    (differentiable; the same number as ``interp.measure.teacher_forcing.score_answer``'s mean log-prob).

    >>> from interp.measure.encoding import encode_for
    >>> from interp.measure.evaluate import task_prompts
    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")
    >>> encoded = encode_for(model, task_prompts(model, "UF", 4, n_examples=2))
    >>> batch = next(padded_batches(encoded, 2, pad_token_id(model.tokenizer), sort_by_length=False))
    >>> where = AnswerPositions.of(batch.items)
    >>> logits = model(batch.tokens).gather(1, where.positions[..., None].expand(-1, -1, 354))
    >>> answer_logprob(logits, where).shape
    torch.Size([2])
    """
    log_probs = logits.float().log_softmax(-1).gather(-1, where.answer_ids.to(logits.device)[..., None])[..., 0]
    mask = where.is_answer.to(logits.device)
    return (log_probs * mask).sum(-1) / mask.sum(-1)


# --------------------------------------------------------------------------- attribution


def ablated_z(z: Float[Tensor, "batch pos head_index d_head"], layer: int, kind: AblationKind,
              means: HeadMeans | None) -> Float[Tensor, "batch pos head_index d_head"]:
    """What ``interp.interventions.ablation`` puts in place of every head's ``hook_z`` slice.

    >>> ablated_z(torch.ones(1, 2, 3, 4), layer=0, kind="zero", means=None).abs().sum().item()
    0.0
    """
    if kind == "zero":
        return torch.zeros_like(z)
    return means.for_layer(layer, z.shape[1]).to(z.device, z.dtype).expand_as(z)


@dataclass(frozen=True)
class AttributionPass:
    """One forward and backward pass of [`attribution_pass`][interp.interventions.attribution.attribution_pass]: the logits, each layer's
    ``hook_z`` (before any mixing) with the metric's gradient there, and the ``watched`` hooks'
    values with their gradients."""

    logits: Float[Tensor, "batch out_pos vocab"]
    z: dict[int, Float[Tensor, "batch pos head_index d_head"]]
    z_grads: dict[int, Float[Tensor, "batch pos head_index d_head"]]
    watched: dict[str, Tensor]
    watched_grads: dict[str, Tensor]


def attribution_pass(model: HookedModel, tokens: Int[Tensor, "batch pos"], metric: Metric, kind: AblationKind = "zero",
                     means: HeadMeans | None = None, fwd_hooks: Sequence[Hook] = (), alpha: float = 0.0,
                     watch: Sequence[str] = (), keep: Sequence[str] = ()) -> AttributionPass:
    """The forward and backward pass behind [`head_attributions`][interp.interventions.attribution.head_attributions]; ``watch`` names further
    hooks whose values and gradients are returned, ``keep`` hooks whose values alone are (both in
    ``watched``; a kept value is detached).

    >>> run = attribution_pass(model, batch.tokens, metric, watch=["blocks.1.attn.hook_pattern"])  # doctest: +SKIP
    >>> sorted(run.z), sorted(run.watched_grads)  # doctest: +SKIP
    ([0, 1], ['blocks.1.attn.hook_pattern'])
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha={alpha} must be between 0 (clean) and 1 (every head ablated)")
    names = [act_name("z", layer) for layer in range(model.cfg.n_layers)]
    unmixed: dict[str, Tensor] = {}
    used: dict[str, Tensor] = {}

    def mix(z: Float[Tensor, "batch pos head_index d_head"], hook, layer: int) -> Float[Tensor, "batch pos head_index d_head"]:
        unmixed[hook.name] = z.detach()
        if alpha:
            z = z + alpha * (ablated_z(z, layer, kind, means) - z)
        # Returned even when unchanged: the bridge passes a hook's return value on, so this is
        # the tensor the rest of the forward pass depends on (given None it goes on with another).
        used[hook.name] = z
        return z

    def record(value: Tensor, hook) -> Tensor:
        used[hook.name] = value
        return value

    def remember(value: Tensor, hook) -> None:
        unmixed[hook.name] = value.detach()

    mixers = [(name, partial(mix, layer=layer)) for layer, name in enumerate(names)]
    recorders = [(name, record) for name in watch] + [(name, remember) for name in keep]
    with torch.enable_grad(), model.hooks(fwd_hooks=[*fwd_hooks, *mixers, *recorders]):
        logits = model(tokens.to(model.cfg.device))
        values = metric(logits)
        # Rows do not interact, so the gradient of the sum holds each row's own gradient. Only
        # these inputs' gradients are computed: no weight gradients.
        grads = torch.autograd.grad(values.sum(), [used[name] for name in [*names, *watch]])
    missing = [name for name in keep if name not in unmixed]
    if missing:
        raise ValueError(f"hooks {missing} never fired; expected names like {act_name('pattern', 0)!r}")
    return AttributionPass(logits.detach(), {layer: unmixed[name] for layer, name in enumerate(names)},
                           dict(enumerate(grads[:len(names)])),
                           {name: used[name].detach() for name in watch} | {name: unmixed[name] for name in keep},
                           dict(zip(watch, grads[len(names):])))


def z_changes(run: AttributionPass, kind: AblationKind, means: HeadMeans | None
              ) -> dict[int, Float[Tensor, "batch pos head_index d_head"]]:
    """Per layer, what ablating each head alone changes in its ``hook_z`` slice.

    >>> run = attribution_pass(model, batch.tokens, metric)  # doctest: +SKIP
    >>> changes = z_changes(run, "zero", None)  # minus each head's z, per layer  # doctest: +SKIP
    """
    return {layer: ablated_z(z, layer, kind, means) - z for layer, z in run.z.items()}


def first_order(run: AttributionPass, changes: dict[int, Tensor]) -> Float[Tensor, "batch layer head_index"]:
    """``<dmetric/dz, z_ablated - z>`` per head, summed over positions and ``d_head``.

    >>> run = attribution_pass(model, batch.tokens, metric)  # doctest: +SKIP
    >>> first_order(run, z_changes(run, "zero", None)).shape  # batch, layer, head  # doctest: +SKIP
    torch.Size([2, 2, 4])
    """
    return torch.stack([einops.einsum(run.z_grads[layer].float(), changes[layer].float(),
                                      "batch pos head d_head, batch pos head d_head -> batch head")
                        for layer in sorted(changes)], dim=1).cpu()


def head_attributions(model: HookedModel, tokens: Int[Tensor, "batch pos"], metric: Metric, kind: AblationKind = "zero",
                      means: HeadMeans | None = None, fwd_hooks: Sequence[Hook] = (), alpha: float = 0.0
                      ) -> tuple[Float[Tensor, "batch out_pos vocab"], Float[Tensor, "batch layer head_index"]]:
    """The logits, and for every head ``<dmetric/dz, z_ablated - z>`` summed over positions and
    ``d_head``, per row of ``tokens``, from one forward and one backward pass.

    With ``alpha=0`` this is the first-order change of ``metric`` when that head's ``hook_z``
    slice alone is ablated. With ``alpha > 0`` every head runs ``alpha`` of the way to its
    ablation (``z + alpha * (z_ablated - z)``) and the gradient is taken there: one point of an
    integrated-gradients path. ``fwd_hooks`` stay active throughout (e.g. heads already
    ablated, or ``select_positions_hook``, in which case the logits are those positions' only).

    >>> logits, delta = head_attributions(model, batch.tokens, metric)  # doctest: +SKIP
    >>> delta.shape  # batch, layer, head  # doctest: +SKIP
    torch.Size([2, 2, 4])
    """
    run = attribution_pass(model, tokens, metric, kind, means, fwd_hooks, alpha)
    return run.logits, first_order(run, z_changes(run, kind, means))


SCREENS = ("atp*", "first-order")
DEFAULT_QK_ROWS = 64  # pattern rows per prompt the QK fix recomputes (see interp.interventions.qk_fix)


def atp_star_attributions(model: TransformerBridge, tokens: Int[Tensor, "batch pos"], metric: Metric, kind: AblationKind = "zero",
                          means: HeadMeans | None = None, fwd_hooks: Sequence[Hook] = (),
                          layout: AttentionLayout | None = None, qk_rows: int | None = DEFAULT_QK_ROWS
                          ) -> tuple[Float[Tensor, "batch out_pos vocab"], Float[Tensor, "batch layer head_index"]]:
    """[`head_attributions`][interp.interventions.attribution.head_attributions] with AtP*'s QK fix ([`interp.interventions.qk_fix`][interp.interventions.qk_fix]): each head's effect on
    later heads' attention patterns through their queries and keys is taken through the softmax
    exactly, for the ``qk_rows`` pattern rows per prompt (``None``: all) that can matter most.

    >>> logits, delta = atp_star_attributions(model, tokens, metric)  # doctest: +SKIP
    >>> delta.shape  # batch, layer, head  # doctest: +SKIP
    """
    layout = layout or attention_layout(model)
    patterns, kept = hook_names(layout)
    run = attribution_pass(model, tokens, metric, kind, means, fwd_hooks, watch=patterns, keep=kept)
    changes = z_changes(run, kind, means)
    fix = qk_corrections(model, layout, run.watched, [run.watched_grads[name] for name in patterns], changes, qk_rows)
    return run.logits, first_order(run, changes) + fix


@dataclass(frozen=True, repr=False)
class AttributionResult(Tabular):
    """Estimated effect of ablating each head alone, per prompt, with the exact clean scores.

    >>> from interp.measure.teacher_forcing import AnswerScores
    >>> clean = AnswerScores.from_rows([(True, 1.0, -0.5, ()), (False, 0.5, -1.5, ())])
    >>> screen = AttributionResult("zero", clean, torch.tensor([[[-0.4, 0.1]], [[-0.2, 0.3]]]), model_name="demo")
    >>> screen
    AttributionResult(demo, attribution patching, zero ablation, n=2 prompts, 1 layers x 2 heads; clean accuracy 0.500; most harmful (log-prob change): 0.0 -0.300, 0.1 0.200)
    >>> screen.top_heads(1), round(screen.rows()[0]["delta_logprob"], 3)
    ([Head(0, 0)], -0.3)
    """

    kind: str
    clean: AnswerScores
    delta: Float[Tensor, "batch layer head_index"]  # estimated change of each prompt's mean answer log-prob
    method: str = "attribution patching"
    model_name: str = ""

    def __repr__(self) -> str:
        n_layers, n_heads = self.delta.shape[1:]
        top = heads_summary(self.delta_logprob(), self.top_heads(min(3, n_layers * n_heads)))
        return (f"AttributionResult({self.model_name or 'no model'}, {self.method}, {self.kind} ablation, "
                f"n={len(self.clean)} prompts, {n_layers} layers x {n_heads} heads; clean accuracy "
                f"{self.clean.accuracy:.3f}; most harmful (log-prob change): {top})")

    @property
    def heads(self) -> list[Head]:
        n_layers, n_heads = self.delta.shape[1:]
        return [Head(layer, head) for layer in range(n_layers) for head in range(n_heads)]

    def delta_logprob(self) -> Float[Tensor, "layer head_index"]:
        """Estimated change of the mean answer log-probability over all prompts."""
        return self.delta.mean(0)

    def top_heads(self, score: str | int, k: int | None = None) -> list[Head]:
        """The ``k`` heads whose ablation is estimated to lower the answer log-prob most:
        ``top_heads("delta_logprob", k)`` as on every result type, or ``top_heads(k)``."""
        _, k = score_and_k(score, k, "delta_logprob")
        return ranked_heads(self.delta_logprob(), k, descending=False)

    def flagged_heads(self, k: int) -> list[Head]:
        """The ``k`` heads with the largest estimated change either way: the order in which
        [`verify_screen`][interp.interventions.verify.verify_screen] checks them exactly (a head whose ablation effect a linearization gets wrong often still shows a
        large estimate, of the wrong sign)."""
        return ranked_heads(self.delta_logprob().abs(), k)

    def rows(self, task: str | None = None, length: int | None = None, model_name: str | None = None) -> list[dict]:
        """One row a head, like ``SweepResult.rows``, for what a first-order estimate can say: the
        log-prob columns (accuracy is left out: exact match changes in jumps that a gradient cannot
        see). ``task`` / ``length`` columns are added when given."""
        base_lp = self.clean.mean_logprob.mean().item()
        estimate = self.delta_logprob()
        where = {"task": task} if task is not None else {}
        where |= {"length": length} if length is not None else {}
        return [{"model": self.model_name if model_name is None else model_name, **where, "layer": head.layer,
                 "head": head.head, "mean_logprob": base_lp + estimate[head].item(),
                 "delta_logprob": estimate[head].item(), "estimate": f"{self.method} ({self.kind})"}
                for head in self.heads]


def attribution_sweep(model: TransformerBridge, encoded: Sequence[EncodedPrompt], kind: str = "zero",
                      means: HeadMeans | None = None, batch_size: int = 8, steps: int = 1,
                      fwd_hooks: Sequence[Hook] = (), progress: bool = False, screen: str = "atp*",
                      qk_rows: int | None = DEFAULT_QK_ROWS) -> AttributionResult:
    """Estimate of each head's single-head ablation effect on ``encoded`` prompts: the screen to
    run before ``interp.interventions.sweep.head_sweep``, at the cost of one forward and one backward pass per
    batch instead of one (partial) forward pass per head.

    ``screen="atp*"`` (default) adds AtP*'s QK fix ([`atp_star_attributions`][interp.interventions.attribution.atp_star_attributions], ``qk_rows``
    pattern rows per prompt recomputed); ``"first-order"`` is plain attribution patching, where
    ``steps > 1`` averages the gradient over ``steps`` points of the path on which every head
    moves towards its ablation at once (midpoint rule; integrated gradients), at ``steps`` times
    the cost plus one clean forward pass.

    Examples:
        >>> from interp.models import load_model
        >>> from interp.measure.encoding import encode_for
        >>> from interp.measure.evaluate import task_prompts
        >>> model = load_model("tiny-llama", device="cpu")
        >>> encoded = encode_for(model, task_prompts(model, "UF", 5, n_examples=4))
        >>> screen = attribution_sweep(model, encoded, "zero", progress=False)
        >>> screen.delta_logprob().shape                               # layer x head, estimated change
        torch.Size([2, 4])
    """
    _check_sweep_args(encoded, kind, means, steps, screen, qk_rows)
    alphas = [0.0] if steps == 1 else [(i + 0.5) / steps for i in range(steps)]
    clean_parts, delta_parts = [], []
    layout = attention_layout(model) if screen == "atp*" else None
    batches = list(padded_batches(encoded, batch_size, pad_token_id(model.tokenizer)))
    for batch in tqdm(batches, desc="attribution", disable=not progress, leave=False):
        where = AnswerPositions.of(batch.items)
        hooks = [*fwd_hooks, select_positions_hook(where.positions)]
        logits, delta = _batch_estimate(model, batch.tokens, partial(answer_logprob, where=where), kind, means, hooks,
                                        screen, alphas, layout, qk_rows)
        clean_parts.append((batch.indices, answer_rows(logits, batch.items)))
        delta_parts.append((batch.indices, list(delta)))
    method = ("AtP* (QK fix)" if screen == "atp*" else "attribution patching" if steps == 1
              else f"integrated gradients ({steps} steps)")
    n = len(encoded)
    return AttributionResult(kind, AnswerScores.from_rows(in_input_order(n, clean_parts)),
                             torch.stack(in_input_order(n, delta_parts)), method, name_of_model(model))


def _check_sweep_args(encoded: Sequence[EncodedPrompt], kind: str, means: HeadMeans | None, steps: int, screen: str,
                      qk_rows: int | None) -> None:
    """One clear error for the first of [`attribution_sweep`][interp.interventions.attribution.attribution_sweep]'s arguments that cannot work."""
    if screen not in SCREENS:
        raise ValueError(f"screen={screen!r}; expected one of {SCREENS}")
    if screen == "atp*" and steps != 1:
        raise ValueError(f"steps={steps}: integrated gradients need screen='first-order' (AtP* takes one gradient)")
    if qk_rows is not None and qk_rows < 1:
        raise ValueError(f"qk_rows={qk_rows} must be >= 1 (or None: every pattern row)")
    check_ablation_kind(kind, means)
    if not encoded:
        raise ValueError("encoded prompts must not be empty")
    if steps < 1:
        raise ValueError(f"steps={steps} must be >= 1 (1: attribution patching, more: integrated gradients)")


def _batch_estimate(model: TransformerBridge, tokens: Int[Tensor, "batch pos"], metric: Metric, kind: AblationKind,
                    means: HeadMeans | None, hooks: Sequence[Hook], screen: str, alphas: list[float],
                    layout: AttentionLayout | None, qk_rows: int | None
                    ) -> tuple[Float[Tensor, "batch out_pos vocab"], Float[Tensor, "batch layer head_index"]]:
    """One batch's clean logits and per-head estimate (averaged over the integrated-gradient points)."""
    estimates = []
    if screen == "atp*":
        logits, delta = atp_star_attributions(model, tokens, metric, kind, means, hooks, layout, qk_rows)
        estimates.append(delta)
    for alpha in alphas if screen == "first-order" else []:
        logits, delta = head_attributions(model, tokens, metric, kind, means, hooks, alpha)
        estimates.append(delta)
    if alphas != [0.0]:  # the gradient points were all off the clean run: one clean pass for the scores
        with torch.no_grad(), model.hooks(fwd_hooks=hooks):
            logits = model(tokens.to(model.cfg.device))
    return logits, torch.stack(estimates).mean(0)

# --------------------------------------------------------------------------- agreement with the exact sweep


@dataclass(frozen=True)
class Agreement:
    """How well an estimate ranks heads like the exact sweep does."""

    spearman: float  # rank correlation over all heads
    pearson: float
    k: int
    overlap: int  # heads among the k largest drops of both
    overlap_magnitude: int  # heads among the k largest |changes| of both
    top_exact: list[Head]
    top_estimate: list[Head]

    def summary(self) -> str:
        return (f"Spearman {self.spearman:.3f}, Pearson {self.pearson:.3f}, top-{self.k} overlap {self.overlap}/{self.k} "
                f"(largest |change|: {self.overlap_magnitude}/{self.k})")


def _lowest(values: Tensor, k: int) -> list[int]:
    return torch.argsort(values, stable=True)[:k].tolist()


def agreement(estimate: Float[Tensor, "layer head_index"], exact: Float[Tensor, "layer head_index"], k: int = 10) -> Agreement:
    """Rank correlation over all heads, and overlap of the ``k`` heads whose ablation lowers the
    answer log-prob most (and of the ``k`` largest changes either way).

    >>> estimate = torch.tensor([[-1.0, 0.1], [-0.5, 0.0]])
    >>> exact = torch.tensor([[-2.0, 0.2], [-0.4, 0.1]])
    >>> agreement(estimate, exact, k=2).summary()
    'Spearman 1.000, Pearson 0.960, top-2 overlap 2/2 (largest |change|: 2/2)'
    """
    from scipy.stats import pearsonr, spearmanr

    if estimate.shape != exact.shape:
        raise ValueError(f"estimate has shape {tuple(estimate.shape)} but exact has {tuple(exact.shape)}")
    if torch.isnan(exact).any() or torch.isnan(estimate).any():
        raise ValueError("agreement needs every head in both: sweep all heads, or compare the swept ones only")
    est, ref = estimate.flatten().double(), exact.flatten().double()
    if not 0 < k <= len(ref):
        raise ValueError(f"k={k} must be between 1 and the number of heads ({len(ref)})")
    n_heads = exact.shape[1]

    def heads(indices: list[int]) -> list[Head]:
        return [Head(i // n_heads, i % n_heads) for i in indices]

    top_ref, top_est = _lowest(ref, k), _lowest(est, k)
    overlap_magnitude = len(set(_lowest(-ref.abs(), k)) & set(_lowest(-est.abs(), k)))
    return Agreement(float(spearmanr(est.numpy(), ref.numpy()).statistic), float(pearsonr(est.numpy(), ref.numpy()).statistic),
                     k, len(set(top_ref) & set(top_est)), overlap_magnitude, heads(top_ref), heads(top_est))
