"""Per-head attention scores: induction, anti-induction and previous-token, from ``hook_pattern``.

On a random sequence of ``n`` tokens repeated twice (the paper's probe: 50 tokens, no BOS), a
token at position ``p`` of the second copy has its earlier occurrence at ``p - n``. Then

* induction score      = mean attention ``A[p, p - n + 1]`` (the token *after* the earlier occurrence),
* anti-induction score = mean attention ``A[p, p - n - 1]`` (the token *before* it),
* previous-token score = mean attention ``A[p, p - 1]``,

averaged over ``p`` in ``[n + 1, 2n - 1]`` (where all three exist), all sequences and batches.
Query heads are scored (``hook_pattern`` has one pattern per query head, also under GQA).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import einops
import torch
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from interp.measure.batching import batched, pad_token_id, padded_batches
from interp.models.bridge import TransformerBridge, act_name, run_until
from interp.core.heads import Head
from interp.core.naming import model_name
from interp.core.results import Tabular, heads_summary, ranked_heads
from interp.prompts import EncodedPrompt, Prompt, prompt_layout
from interp.prompts.tokens import text_ids

SCORE_NAMES = ("induction", "anti_induction", "previous_token")


def patterns_of_every_layer(model: TransformerBridge, tokens: Int[Tensor, "batch pos"],
                            reduce: Callable[[int, Float[Tensor, "batch head_index query_pos key_pos"]], None]) -> None:
    """Call ``reduce(layer, pattern)`` on each layer's attention pattern, in one forward pass that
    stops right after the last layer's pattern (its MLP and the unembedding never run), so no
    pattern outlives its reduction.

    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")
    >>> shapes = {}
    >>> patterns_of_every_layer(model, torch.tensor([[1, 2, 3]]), lambda layer, pattern: shapes.update({layer: pattern.shape}))
    >>> shapes  # batch, head, query, key
    {0: torch.Size([1, 4, 3, 3]), 1: torch.Size([1, 4, 3, 3])}
    """

    def hook(pattern, hook):
        reduce(hook.layer(), pattern)

    names = [act_name("pattern", layer) for layer in range(model.cfg.n_layers)]
    run_until(model, tokens, names[-1], [(name, hook) for name in names])


# --------------------------------------------------------------------------- probe sequences


def token_pool(tokenizer, exclude_special: bool = True) -> Int[Tensor, " pool"]:
    """All token ids except the special ones (BOS/EOS/PAD...), the pool random probes draw from.

    >>> from interp.models.tiny import tiny_tokenizer
    >>> token_pool(tiny_tokenizer()).shape
    torch.Size([352])
    """
    special = set(tokenizer.all_special_ids) if exclude_special else set()
    return torch.tensor([i for i in range(len(tokenizer)) if i not in special])


def repeated_random_tokens(pool: Int[Tensor, " pool"], n_sequences: int = 100, half_length: int = 50, seed: int = 0,
                           bos_id: int | None = None) -> Int[Tensor, "batch pos"]:
    """``n_sequences`` random sequences of ``half_length`` tokens drawn from ``pool``, each repeated
    twice; optionally preceded by ``bos_id``. Tokens within a half are distinct, so every token of
    the second copy has exactly one earlier occurrence.

    >>> tokens = repeated_random_tokens(torch.arange(10, 30), n_sequences=2, half_length=4)
    >>> tokens.shape, bool((tokens[:, :4] == tokens[:, 4:]).all())
    (torch.Size([2, 8]), True)
    """
    if half_length < 3:
        raise ValueError(f"half_length={half_length} must be >= 3")
    if len(pool) < half_length:
        raise ValueError(f"token pool of {len(pool)} ids is smaller than half_length={half_length}")
    generator = torch.Generator().manual_seed(seed)
    picks = torch.stack([torch.randperm(len(pool), generator=generator)[:half_length] for _ in range(n_sequences)])
    half = pool[picks]
    tokens = torch.cat([half, half], dim=1)
    if bos_id is not None:
        tokens = torch.cat([torch.full((n_sequences, 1), bos_id), tokens], dim=1)
    return tokens


# --------------------------------------------------------------------------- scores from patterns


def offset_attention(pattern: Float[Tensor, "batch head_index query_pos key_pos"], offset: int, q_start: int,
                     q_stop: int) -> Float[Tensor, " head_index"]:
    """Mean over batch and query positions ``q`` in ``[q_start, q_stop)`` of ``A[q, q - offset]``.

    >>> uniform = torch.tril(torch.ones(1, 2, 6, 6))
    >>> uniform = uniform / uniform.sum(-1, keepdim=True)  # every query spreads evenly over its keys
    >>> [round(x, 3) for x in offset_attention(uniform, offset=1, q_start=1, q_stop=6).tolist()]
    [0.29, 0.29]
    """
    diagonal = torch.diagonal(pattern, offset=-offset, dim1=-2, dim2=-1)  # [batch, head, q - offset]
    return diagonal[..., q_start - offset : q_stop - offset].float().mean(dim=(0, -1))


def repeat_scores(pattern: Float[Tensor, "batch head_index query_pos key_pos"], half_length: int,
                  bos: int = 0) -> dict[str, Float[Tensor, " head_index"]]:
    """The three scores of one layer's pattern on repeated sequences (``bos`` = 1 when prefixed).

    >>> uniform = torch.tril(torch.ones(1, 2, 6, 6))
    >>> scores = repeat_scores(uniform / uniform.sum(-1, keepdim=True), half_length=3)
    >>> sorted(scores), scores["induction"].shape
    (['anti_induction', 'induction', 'previous_token'], torch.Size([2]))
    """
    n = half_length
    start, stop = bos + n + 1, bos + 2 * n  # second-copy positions where p - n - 1 is still in the first copy
    return {
        "induction": offset_attention(pattern, n - 1, start, stop),
        "anti_induction": offset_attention(pattern, n + 1, start, stop),
        "previous_token": offset_attention(pattern, 1, start, stop),
    }


@dataclass(repr=False)
class HeadScores(Tabular):
    """Layer x head score matrices, with helpers for ranking and tables.

    >>> scores = HeadScores({"induction": torch.tensor([[0.1, 0.9], [0.5, 0.2]])}, "demo", {"n_sequences": 4})
    >>> scores
    HeadScores(demo, 2 layers x 2 heads, n_sequences=4; top induction: 0.1 0.900, 1.0 0.500, 1.1 0.200)
    >>> scores.top_heads("induction", 1), scores.to_pandas().shape
    ([Head(0, 1)], (4, 5))
    """

    scores: dict[str, Float[Tensor, "layer head_index"]]
    model_name: str = ""
    metadata: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        if not self.scores:
            return f"HeadScores({self.model_name or 'no model'}, no scores)"
        n = f", n_sequences={self.metadata['n_sequences']}" if "n_sequences" in self.metadata else ""
        k = min(3, self.n_layers * self.n_heads)
        tops = "; ".join(f"top {name}: {heads_summary(m, self.top_heads(name, k))}" for name, m in self.scores.items())
        return f"HeadScores({self.model_name or 'no model'}, {self.n_layers} layers x {self.n_heads} heads{n}; {tops})"

    @property
    def n_layers(self) -> int:
        return next(iter(self.scores.values())).shape[0]

    @property
    def n_heads(self) -> int:
        return next(iter(self.scores.values())).shape[1]

    def __getitem__(self, name: str) -> Float[Tensor, "layer head_index"]:
        if name not in self.scores:
            raise KeyError(f"no score {name!r}; available: {sorted(self.scores)}")
        return self.scores[name]

    def top_heads(self, score: str | int, k: int | None = None) -> list[Head]:
        """The ``k`` heads with the highest ``score``, best first: ``top_heads("induction", 10)``, as
        on every result type (``top_heads(k)`` where the result holds one score)."""
        if k is None:
            if len(self.scores) != 1 or not isinstance(score, int):
                raise TypeError(f"top_heads(score, k): name one of {sorted(self.scores)} and k")
            score, k = next(iter(self.scores)), score
        return ranked_heads(self[score], k)

    def ranks(self, name: str) -> Int[Tensor, "layer head_index"]:
        """1 = highest score."""
        flat = self[name].flatten()
        order = torch.argsort(flat, descending=True, stable=True)
        ranks = torch.empty_like(order)
        ranks[order] = torch.arange(1, flat.numel() + 1)
        return ranks.view(self.n_layers, self.n_heads)

    def rows(self) -> list[dict]:
        """Tidy table: one row per (layer, head) with each score and its rank."""
        ranks = {name: self.ranks(name) for name in self.scores}
        rows = []
        for layer in range(self.n_layers):
            for head in range(self.n_heads):
                row: dict = {"model": self.model_name, "layer": layer, "head": head}
                row |= {name: round(float(m[layer, head]), 6) for name, m in self.scores.items()}
                row |= {f"{name}_rank": int(r[layer, head]) for name, r in ranks.items()}
                rows.append(row)
        return rows

    @classmethod
    def from_rows(cls, rows: Sequence[dict], names: Sequence[str] | None = None) -> "HeadScores":
        """Scores read back from `rows` (``names``: every score column by default)."""
        if names is None:
            names = [c for c in rows[0] if c not in ("model", "layer", "head") and not c.endswith("_rank")]
        n_layers = max(int(r["layer"]) for r in rows) + 1
        n_heads = max(int(r["head"]) for r in rows) + 1
        scores = {name: torch.full((n_layers, n_heads), math.nan) for name in names}
        for r in rows:
            for name in names:
                scores[name][int(r["layer"]), int(r["head"])] = float(r[name])
        return cls(scores, str(rows[0].get("model", "")))


def score_heads(model: TransformerBridge, tokens: Int[Tensor, "batch pos"] | None = None, *, half_length: int = 50,
                n_sequences: int = 100, seed: int = 0, prepend_bos: bool = False, batch_size: int = 20,
                progress: bool = False) -> HeadScores:
    """Induction, anti-induction and previous-token scores of every head.

    Without ``tokens``, probes are drawn as the paper does (``n_sequences`` random sequences of
    ``half_length`` tokens repeated twice, no BOS). Each layer's pattern is reduced to per-head
    means as soon as it is computed, and the forward pass stops after the last layer's pattern.

    Examples:
        >>> from interp.models import load_model
        >>> model = load_model("tiny-llama", device="cpu")
        >>> scores = score_heads(model, n_sequences=4, half_length=10, progress=False)
        >>> scores["induction"].shape                  # layer x head; on SmolLM2 the best is head 18.6
        torch.Size([2, 4])
        >>> len(scores.top_heads("anti_induction", 3))
        3
    """
    if n_sequences < 1:
        raise ValueError(f"n_sequences={n_sequences} must be >= 1")
    bos = 1 if prepend_bos else 0
    if tokens is None:
        bos_id = model.tokenizer.bos_token_id if prepend_bos else None
        tokens = repeated_random_tokens(token_pool(model.tokenizer), n_sequences, half_length, seed, bos_id)
    elif tokens.shape[1] != bos + 2 * half_length:
        raise ValueError(f"tokens have length {tokens.shape[1]}; expected {bos + 2 * half_length} "
                         f"(2 x half_length={half_length}{' + BOS' if bos else ''})")
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    totals = {name: torch.zeros(n_layers, n_heads) for name in SCORE_NAMES}
    for chunk in tqdm(list(batched(tokens, batch_size)), desc="scoring heads", disable=not progress, leave=False):

        def add(layer: int, pattern, size=len(chunk)) -> None:
            for name, value in repeat_scores(pattern, half_length, bos).items():
                totals[name][layer] += value.cpu() * size

        patterns_of_every_layer(model, chunk, add)
    scores = {name: total / len(tokens) for name, total in totals.items()}
    return HeadScores(scores, model_name(model), {"probe": "repeated_random", "half_length": half_length,
                                                   "n_sequences": len(tokens), "seed": seed, "prepend_bos": prepend_bos})


# --------------------------------------------------------------------------- scores on task prompts


def answer_source_positions(tokenizer, prompt: Prompt, encoded: EncodedPrompt) -> list[tuple[int, int]]:
    """(output position, source position) token-index pairs of a prompt + answer sequence.

    The output position is the one whose logits predict answer item ``t`` (its first token); the
    source is where that item sits in the test line's context (its first token of its own
    characters, [`interp.prompts.layout`][interp.prompts.layout]).

    >>> from interp.measure.encoding import encode_for
    >>> from interp.measure.evaluate import task_prompts
    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")
    >>> from interp.prompts import PromptConfig
    >>> prompts = task_prompts(model, "UR", 5, n_examples=1, prompt_config=PromptConfig(n_shots=0))
    >>> [(output, source)] = answer_source_positions(model.tokenizer, prompts[0], encode_for(model, prompts)[0])
    >>> output > source
    True
    """
    bos = len(encoded.prompt_ids) - len(text_ids(tokenizer, prompt.text))
    return prompt_layout(tokenizer, prompt, bool(bos), encoded=encoded).source_pairs()


def task_attention_scores(model: TransformerBridge, prompts: Sequence[Prompt], encoded: Sequence[EncodedPrompt], batch_size: int = 8,
                          progress: bool = False) -> Float[Tensor, "layer head_index"]:
    """Mean attention from each output position to its answer's source position, per head.

    >>> from interp.measure.encoding import encode_for
    >>> from interp.measure.evaluate import task_prompts
    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")
    >>> prompts = task_prompts(model, "UB", 4, n_examples=2)
    >>> task_attention_scores(model, prompts, encode_for(model, prompts), progress=False).shape  # layer x head
    torch.Size([2, 4])
    """
    pairs = [answer_source_positions(model.tokenizer, p, e) for p, e in zip(prompts, encoded)]
    total = torch.zeros(model.cfg.n_layers, model.cfg.n_heads)
    count = 0
    for batch in padded_batches(encoded, batch_size, pad_token_id(model.tokenizer), sort_by_length=False,
                                progress=progress and "task attention"):
        rows = torch.tensor([r for r, i in enumerate(batch.indices) for _ in pairs[i]])
        queries = torch.tensor([q for i in batch.indices for q, _ in pairs[i]])
        keys = torch.tensor([k for i in batch.indices for _, k in pairs[i]])

        def add(layer: int, pattern) -> None:
            total[layer] += pattern[rows, :, queries, keys].float().sum(0).cpu()  # [pair, head_index] -> head_index

        patterns_of_every_layer(model, batch.tokens, add)
        count += len(rows)
    return total / max(count, 1)


# --------------------------------------------------------------------------- TransformerLens-style detection


def detection_scores(pattern: Float[Tensor, "batch head_index query_pos key_pos"],
                     detection: Float[Tensor, "batch query_pos key_pos"]) -> Float[Tensor, " head_index"]:
    """``transformer_lens.head_detector``'s "mul" measure, batched: the share of a head's attention
    that falls on the detection pattern, averaged over sequences.

    >>> uniform = torch.tril(torch.ones(1, 2, 4, 4))
    >>> uniform = uniform / uniform.sum(-1, keepdim=True)
    >>> detection_scores(uniform, induction_detection_pattern(torch.tensor([[5, 6, 5, 6]]))).shape
    torch.Size([2])
    """
    matched = einops.einsum(pattern.float(), detection.float(), "batch head query key, batch query key -> batch head")
    return (matched / pattern.float().sum(dim=(-2, -1))).mean(0)


def induction_detection_pattern(tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch query_pos key_pos"]:
    """1 at ``[q, k]`` when the token before ``k`` equals the token at ``q`` (k <= q), as TL builds it.

    >>> induction_detection_pattern(torch.tensor([[5, 6, 5, 6]]))[0].nonzero().tolist()  # (query, key) pairs
    [[2, 1], [3, 2]]
    """
    same = tokens[:, :, None] == tokens[:, None, :]  # [batch, q, k'] duplicate tokens, k' < q
    duplicate = torch.tril(same, diagonal=-1)
    shifted = torch.zeros_like(duplicate)
    shifted[:, :, 1:] = duplicate[:, :, :-1]
    return torch.tril(shifted).float()


def detect_induction_batched(model: TransformerBridge, tokens: Int[Tensor, "batch pos"], batch_size: int = 20,
                             progress: bool = False) -> Float[Tensor, "layer head_index"]:
    """The same numbers as ``detect_head(model, seqs, "induction_head")``, from one batched pass.

    >>> from interp.models import load_model
    >>> model = load_model("tiny-llama", device="cpu")
    >>> tokens = repeated_random_tokens(token_pool(model.tokenizer), n_sequences=4, half_length=8)
    >>> detect_induction_batched(model, tokens).shape
    torch.Size([2, 4])
    """
    total = torch.zeros(model.cfg.n_layers, model.cfg.n_heads)
    for chunk in tqdm(list(batched(tokens, batch_size)), desc="detect", disable=not progress, leave=False):
        detection = induction_detection_pattern(chunk).to(model.cfg.device)

        def add(layer: int, pattern, size=len(chunk), detection=detection) -> None:
            total[layer] += detection_scores(pattern, detection).cpu() * size

        patterns_of_every_layer(model, chunk, add)
    return total / len(tokens)


def spearman(a: Tensor, b: Tensor) -> float:
    """Rank correlation of two score matrices (ties get their mean rank).

    >>> spearman(torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([[10.0, 20.0], [30.0, 45.0]]))
    1.0
    """
    from scipy.stats import spearmanr

    return float(spearmanr(a.flatten().numpy(), b.flatten().numpy()).statistic)
