"""Head scores that see the mechanism, beside the paper's three ([`interp.measure.head_scores`][interp.measure.head_scores]).

The paper's anti-induction score is attention from ``p`` to ``p - n - 1`` on random tokens
repeated once. There, "the token before the earlier occurrence of the current token" is also
"the earlier occurrence of the previous token", and only the second is reachable from token
content in one step; a head that copies backwards in one step attends to the earlier occurrence
*itself* and reads its predecessor through its value. These scores separate the cases:

* ``duplicate_token``: attention to the earlier occurrence itself (``p - n``) on the paper's probe;
* ``reversed_induction`` / ``reversed_duplicate`` / ``reversed_anti_induction``: attention to the
  token after / at / before the earlier occurrence on a *reversed* probe (second half = the first
  reversed, the layout of backward copying). A head that looks for the earlier occurrence of the
  previous token scores on ``reversed_induction`` there, one that truly looks for the token
  before the earlier occurrence on ``reversed_anti_induction``;
* ``k_composition`` / ``v_composition``: the strongest composition (Elhage et al. 2021; as
  TransformerLens' ``composition_scores``: ``|A B|_F / (|A|_F |B|_F)`` on the processed weights)
  of a head's keys / values with the output of a previous-token head in an earlier layer;
* ``duplicate_v_composition``: ``duplicate_token`` times ``v_composition`` relative to the best
  head's: a head that attends to the earlier occurrence and reads its predecessor through the
  value, the one-step backward copier (a UB candidate).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from interp.measure.batching import batched
from interp.models.bridge import TransformerBridge, head_weights
from interp.core.heads import Head
from interp.core.naming import model_name
from interp.measure.head_scores import HeadScores, offset_attention, patterns_of_every_layer, repeated_random_tokens, score_heads, token_pool

MECHANISM_SCORES = ("duplicate_token", "reversed_induction", "reversed_duplicate", "reversed_anti_induction",
                    "k_composition", "v_composition", "duplicate_v_composition")
PREVIOUS_TOKEN_THRESHOLD = 0.3  # heads at or above this previous-token score are the ones composed with


def reversed_random_tokens(pool: Int[Tensor, " pool"], n_sequences: int = 100, half_length: int = 50,
                           seed: int = 0) -> Int[Tensor, "batch pos"]:
    """The paper's probe with the second half reversed: ``t0 .. t(n-1) t(n-1) .. t0``.

    >>> reversed_random_tokens(torch.arange(10), 1, 3, seed=0).shape
    torch.Size([1, 6])
    """
    tokens = repeated_random_tokens(pool, n_sequences, half_length, seed)
    return torch.cat([tokens[:, :half_length], tokens[:, :half_length].flip(1)], dim=1)


def reversed_scores(pattern: Float[Tensor, "batch head_index query_pos key_pos"], half_length: int,
                    bos: int = 0) -> dict[str, Float[Tensor, " head_index"]]:
    """Attention after / at / before the earlier occurrence ``j = 2n - 1 - p`` on a reversed probe,
    over ``p`` in ``[n + 1, 2n - 2]`` (so ``j - 1`` and ``j + 1`` are in the first half and
    ``j`` is never ``p - 1``); ``bos`` = 1 when the probe starts with BOS.

    >>> uniform = torch.tril(torch.ones(1, 2, 8, 8))
    >>> scores = reversed_scores(uniform / uniform.sum(-1, keepdim=True), half_length=4)
    >>> sorted(scores)
    ['reversed_anti_induction', 'reversed_duplicate', 'reversed_induction']
    """
    n = half_length
    queries = torch.arange(n + 1, 2 * n - 1, device=pattern.device)
    earlier = 2 * n - 1 - queries + bos
    queries = queries + bos
    return {name: pattern[:, :, queries, earlier + shift].float().mean(dim=(0, -1))
            for name, shift in (("reversed_induction", 1), ("reversed_duplicate", 0), ("reversed_anti_induction", -1))}


def probe_scores(model: TransformerBridge, half_length: int = 50, n_sequences: int = 100, seed: int = 0, batch_size: int = 20,
                 prepend_bos: bool = False, progress: bool = False) -> dict[str, Float[Tensor, "layer head_index"]]:
    """``duplicate_token`` on the paper's probe and the three ``reversed_*`` scores.

    >>> from interp.models import load_model
    >>> scores = probe_scores(load_model("tiny-llama", device="cpu"), half_length=8, n_sequences=4, progress=False)
    >>> scores["duplicate_token"].shape
    torch.Size([2, 4])
    """
    pool = token_pool(model.tokenizer)
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    totals = {name: torch.zeros(n_layers, n_heads) for name in MECHANISM_SCORES[:4]}
    probes = {"repeated": repeated_random_tokens(pool, n_sequences, half_length, seed),
              "reversed": reversed_random_tokens(pool, n_sequences, half_length, seed)}
    n, bos = half_length, int(prepend_bos)
    if prepend_bos:
        probes = {kind: torch.cat([torch.full((n_sequences, 1), model.tokenizer.bos_token_id), tokens], dim=1)
                  for kind, tokens in probes.items()}
    for kind, tokens in probes.items():
        for chunk in tqdm(list(batched(tokens, batch_size)), desc=f"{kind} probe", disable=not progress, leave=False):

            def add(layer: int, pattern, size=len(chunk), kind=kind) -> None:
                if kind == "repeated":
                    totals["duplicate_token"][layer] += offset_attention(pattern, n, bos + n + 1, bos + 2 * n).cpu() * size
                else:
                    for name, value in reversed_scores(pattern, n, bos).items():
                        totals[name][layer] += value.cpu() * size

            patterns_of_every_layer(model, chunk, add)
    return {name: total / n_sequences for name, total in totals.items()}


def _squared_norm(left: Tensor, right: Tensor) -> Tensor:
    """``|left @ right|_F^2`` for ``left [.., d, r]``, ``right [.., r, d]``, from r x r matrices."""
    return ((left.transpose(-1, -2) @ left) * (right @ right.transpose(-1, -2))).sum(dim=(-2, -1))


def _product_squared_norm(a1: Tensor, b1: Tensor, a2: Tensor, b2: Tensor) -> Tensor:
    """``|a1 b1 a2 b2|_F^2`` for factored ``[d, r1] [r1, d]`` then ``[d, r2] [r2, d]`` (broadcast)."""
    middle = b1 @ a2  # [.., r1, r2]
    inner = middle.transpose(-1, -2) @ (a1.transpose(-1, -2) @ a1) @ middle
    return (inner * (b2 @ b2.transpose(-1, -2))).sum(dim=(-2, -1))


def composition_scores(model: TransformerBridge, writers: Sequence[Head]) -> dict[str, Float[Tensor, "layer head_index"]]:
    """Per head, the largest K- and V-composition score with any of ``writers`` in an earlier layer.

    The writer's OV circuit ``W_V W_O`` is composed with the reader's ``W_K W_Q^T`` (keys) or
    ``W_V W_O`` (values), normalised by both norms: 1 when the reader reads nothing but the writer's
    output, about ``1 / sqrt(rank)`` for matched low-rank maps, near zero when they share nothing.

    >>> from interp.models import load_model
    >>> scores = composition_scores(load_model("tiny-llama", device="cpu"), writers=[Head(0, 1)])
    >>> sorted(scores), scores["k_composition"].shape
    (['k_composition', 'v_composition'], torch.Size([2, 4]))
    """
    weights = head_weights(model)  # per query head: W_Q, W_K, W_V [layer, head, d_model, d_head], W_O [.., d_head, d_model]
    w_q, w_k, w_v, w_o = (weights[name].float() for name in ("W_Q", "W_K", "W_V", "W_O"))
    n_layers, n_heads = w_q.shape[:2]
    scores = {name: torch.zeros(n_layers, n_heads) for name in ("k_composition", "v_composition")}
    readers = {"k_composition": (w_k, w_q.transpose(-1, -2)), "v_composition": (w_v, w_o)}
    for writer in writers:
        a1, b1 = w_v[writer], w_o[writer]
        writer_norm = _squared_norm(a1, b1).sqrt()
        for name, (a2, b2) in readers.items():
            later = slice(writer.layer + 1, n_layers)
            product = _product_squared_norm(a1, b1, a2[later], b2[later]).sqrt()
            reader_norm = _squared_norm(a2[later], b2[later]).sqrt()
            value = torch.nan_to_num(product / (writer_norm * reader_norm), nan=0.0, posinf=0.0)
            scores[name][later] = torch.maximum(scores[name][later], value.cpu())
    return scores


def previous_token_heads(previous_token: Float[Tensor, "layer head_index"],
                         threshold: float = PREVIOUS_TOKEN_THRESHOLD) -> list[Head]:
    """Heads whose previous-token score is at least ``threshold``; the single best when none is.

    >>> previous_token_heads(torch.tensor([[0.1, 0.9], [0.5, 0.2]]), threshold=0.4)
    [Head(0, 1), Head(1, 0)]
    >>> previous_token_heads(torch.tensor([[0.1, 0.3], [0.2, 0.2]]), threshold=0.4)  # none reaches it: the best
    [Head(0, 1)]
    """
    chosen = [Head(int(l), int(h)) for l, h in (previous_token >= threshold).nonzero().tolist()]
    if chosen:
        return chosen
    best = int(previous_token.flatten().argmax())
    return [Head(best // previous_token.shape[1], best % previous_token.shape[1])]


def mechanism_scores(model: TransformerBridge, paper: HeadScores, half_length: int = 50, n_sequences: int = 100, seed: int = 0,
                     prepend_bos: bool = False, progress: bool = False) -> HeadScores:
    """``paper`` (the paper's three scores, [`interp.measure.head_scores.score_heads`][interp.measure.head_scores.score_heads]) with every score of
    `MECHANISM_SCORES` added.

    >>> scores = mechanism_scores(model, score_heads(model))              # doctest: +SKIP
    >>> scores.top_heads("duplicate_v_composition", 1)                    # doctest: +SKIP
    [Head(1, 1)]
    """
    added = probe_scores(model, half_length, n_sequences, seed, prepend_bos=prepend_bos, progress=progress)
    writers = previous_token_heads(paper["previous_token"])
    added |= composition_scores(model, writers)
    v_comp = added["v_composition"]
    relative = v_comp / v_comp.max() if float(v_comp.max()) > 0 else v_comp
    added["duplicate_v_composition"] = added["duplicate_token"] * relative
    metadata = paper.metadata | {"previous_token_heads": [str(h) for h in writers],
                                 "previous_token_threshold": PREVIOUS_TOKEN_THRESHOLD}
    return HeadScores(paper.scores | added, paper.model_name or model_name(model), metadata)


def all_head_scores(model: TransformerBridge, half_length: int = 50, n_sequences: int = 100, seed: int = 0, prepend_bos: bool = False,
                    progress: bool = False) -> HeadScores:
    """The paper's three scores and the mechanism scores of every head, in one table.

    >>> all_head_scores(load_model("planted-ub"), n_sequences=20)["anti_induction"]  # doctest: +SKIP
    """
    paper = score_heads(model, half_length=half_length, n_sequences=n_sequences, seed=seed, prepend_bos=prepend_bos,
                        progress=progress)
    return mechanism_scores(model, paper, half_length, n_sequences, seed, prepend_bos, progress)
