"""Planted-circuit models: GPT-2-style transformers whose attention weights are written by hand.

They are positive controls: every instrument of the toolkit (head scores, ablation, the single
head sweep, edge patching, attention views) is checked against circuits whose heads and
mechanisms are known. Names understood by ``load_model``:

* ``"planted-uf"``: forward copying (UF) by induction;
* ``"planted-ub"``: backward copying (UB) by V-composition, plus a head-level anti-induction
  head that copies nothing;
* ``"planted-both"``: both circuits, switched by the task marker of the ``obey`` template (the
  rule's word ``same`` or ``reverse``);
* ``"planted-ur"`` / ``"planted-ul"``: right / left retrieval (UR / UL) in the retrieval line
  ``x1 .. xn | q: y``, by a head that reads the previous token in its query;
* any of them with ``@STRENGTH`` (``"planted-ub@0.5"``): the planted weights mixed with seeded
  random ones, see [`PlantedConfig`][interp.models.planted.PlantedConfig].

Prompts are the toolkit's zero-shot lines (template ``bare``, ``n_shots=0``; ``planted-both``
needs ``obey`` for its marker): copying ``<bos> x1 .. xn : x1 .. xn <eos>`` and retrieval
``x1 .. xn | q: y`` then a newline, items a-z A-Z 0-9, up to ``n`` = 52 (the context is 128 tokens). The tokenizer and the residual layout are in
[`interp.models.planted_vocab`][interp.models.planted_vocab].

**Construction.** Two layers, four heads each, MLPs zero, LayerNorm gains one. The embedding
writes the token and the position as centred one-hot blocks (``tok``, ``pos``), so LayerNorm
only rescales (by about ``sqrt(d_model / active blocks)``, which the weights divide out).

* ``0.0`` previous-token head: queries position ``i``, keys position ``j + 1``; reads the token
  and writes it into the ``prev`` block. Previous-token score 1.
* ``0.1`` marker head (``planted-both`` only): attends to the rule word ``same`` or ``reverse``
  and writes the task flag that gates ``1.0`` and ``1.1`` (each attends to position 0, whose
  value is empty, when the flag names the other task).
* ``1.0`` induction head (K-composition with ``0.0``): the query is the current token, the key
  the ``prev`` block, so it attends to the token *after* the earlier occurrence and copies it
  (``:`` queries for the token after ``<bos>``, and ``:`` is copied as ``<eos>``). Carries UF.
  Induction score 1.
* ``1.1`` backward-copying head, the paper's anti-induction *edge* (V-composition with ``0.0``):
  it attends to the earlier occurrence of the current token itself (query and key both the
  token; a key bias of ``-5`` nats per position picks the earliest occurrence, so not itself) and
  reads that position's ``prev`` block through its value: the item before the earlier
  occurrence. At ``:`` it attends to itself and copies the last item. Carries UB. Duplicate-token
  score 1, anti-induction score 0.
* ``1.2`` head-level anti-induction head (Q-composition with ``0.0``): the query is the ``prev``
  block, the key the token, so it attends to the earliest occurrence of the *previous* token.
  On the paper's probe (random tokens repeated once) that is the position before the earlier
  occurrence of the current token: anti-induction score 1. Its output weights are zero; it
  copies nothing and ablating it changes nothing.

**Head level and edge level.** The paper's anti-induction *score* rates where a head attends
(``A[p, p - n - 1]``); its anti-induction *edges* name the route by which UB's answer travels
(the item before the earlier occurrence, read through the value of a head at that occurrence).
A causal head cannot locate "the token before the earlier occurrence of the current token" from
token content in one step (that position cannot yet know what follows it), so a one-step
backward copier is ``1.1``: anti-induction edges, anti-induction score 0; and the head with the
full score, ``1.2``, looks for the earlier occurrence of the previous token, which coincides
with the wanted position only on the repeated probe (on a reversed probe it attends to the token
*after* the earlier occurrence) and cannot copy backwards. A head truly attending to the token
before the earlier occurrence needs two steps through positions (a head that finds the earlier
occurrence and writes its position, then a head that queries the position before it); it is not
planted here.

**Retrieval.** In the retrieval line the answer is predicted at ``:``, one position after the
query ``q``; there the current token says nothing and the query sits in the ``prev`` block. So
the retrieval heads read the previous token in their *query* (Q-composition with ``0.0``):

* ``1.3`` of ``planted-ur``, right retrieval: query ``prev``, key ``prev`` (K-composition too),
  so it attends to the position whose previous token is ``q``, the item right of ``q``'s earlier
  occurrence, and copies that token. Carries UR. On the repeated probe that position is the
  earlier occurrence of the *current* token: duplicate-token score 1, induction score 0.
* ``1.3`` of ``planted-ul``, left retrieval: query ``prev``, key the token, so it attends to
  ``q``'s earlier occurrence and reads that position's ``prev`` block through its value: the item
  left of ``q``. Carries UL. Its attention is the pattern of ``1.2`` (anti-induction score 1),
  so in the retrieval line the paper's anti-induction score does name the head that retrieves
  leftwards: there the query token is one position before the prediction, which is exactly the
  offset the score's probe rewards.

The line's end (a newline after the one-token answer) comes from the direct path: the
unembedding reads ``prev = ":"`` as a newline, outvoting the retrieval head there.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedModel, PreTrainedTokenizerBase

from interp.core.heads import Head
from interp.core.naming import ModelNotFoundError
from interp.data.tasks import ALNUM
from interp.models.planted_noise import einops_heads, mix_heads, mix_with_noise
from interp.models.planted_vocab import (BOS_MARKER, COPY_RULE_WORDS, EDGE_SEPARATORS, END_MARKER, SEPARATOR, ResidualLayout, first_id, last_id, planted_tokenizer,
                            single_id)

PREVIOUS_TOKEN_HEAD, MARKER_HEAD = Head(0, 0), Head(0, 1)
INDUCTION_HEAD, BACKWARD_HEAD, HEAD_LEVEL_ANTI_HEAD = Head(1, 0), Head(1, 1), Head(1, 2)
RETRIEVAL_HEAD = Head(1, 3)  # right retrieval in planted-ur, left retrieval in planted-ul
CIRCUITS = {"planted-uf": ("uf",), "planted-ub": ("ub",), "planted-both": ("uf", "ub"),
            "planted-ur": ("ur",), "planted-ul": ("ul",)}
RETRIEVAL_COLON = ":"  # the retrieval line's query marker, ``q:`` (the copying line's separator is " :")
PLANTED_MODELS = tuple(CIRCUITS)
N_CTX, N_LAYERS = 128, 2
MATCH_NATS, EARLIEST_NATS_PER_POSITION, GATE_NATS, LOGIT_NATS = 20.0, 5.0, 3000.0, 30.0


@dataclass(frozen=True)
class PlantedConfig:
    """Which circuits a planted model carries and how strongly.

    ``strength`` in [0, 1]: every weight is ``strength * planted + (1 - strength) * random``,
    the random part seeded by ``seed`` and scaled to the planted part's norm, per head for
    attention (``W_Q``, ``W_K``, ``W_V``, ``W_O``, ``b_Q`` of each head; empty heads get the mean
    norm of their layer's planted heads) and per tensor for the embeddings and the unembedding.
    So 0.5 mixes equal norms and 0 is pure noise. MLPs stay zero and LayerNorm gains one."""

    circuits: tuple[str, ...] = ("uf",)
    strength: float = 1.0
    seed: int = 0
    marker: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.strength <= 1.0:
            raise ValueError(f"strength={self.strength} must be between 0 and 1")
        unknown = set(self.circuits) - {"uf", "ub", "ur", "ul"}
        if unknown or not self.circuits:
            raise ValueError(f"circuits={self.circuits!r}: expected a non-empty subset of ('uf', 'ub', 'ur', 'ul')")

    @classmethod
    def from_name(cls, name: str, seed: int = 0) -> "PlantedConfig":
        """``"planted-ub"`` or ``"planted-ub@0.25"`` -> its config."""
        match = re.fullmatch(r"(planted-[a-z]+)(?:@([0-9.]+))?", name)
        if match is None or match.group(1) not in CIRCUITS:
            raise ModelNotFoundError(f"unknown planted model {name!r}; expected one of {PLANTED_MODELS}, "
                                     f"optionally with @STRENGTH (e.g. 'planted-ub@0.5')")
        strength = float(match.group(2)) if match.group(2) else 1.0
        circuits = CIRCUITS[match.group(1)]
        return cls(circuits, strength, seed, marker=len(circuits) > 1)


def is_planted(name: str) -> bool:
    """Whether ``name`` is one of the planted-circuit models (``planted-ub``, ...).

    >>> is_planted("planted-ub"), is_planted("tiny-gpt2")
    (True, False)
    """
    return str(name).startswith("planted-")


def planted_heads(name: str) -> dict[str, Head]:
    """The heads a planted model carries, by role.

    >>> planted_heads("planted-ub")["backward"]
    Head(1, 1)
    """
    config = PlantedConfig.from_name(name)
    heads = {"previous_token": PREVIOUS_TOKEN_HEAD}
    if config.marker:
        heads["marker"] = MARKER_HEAD
    if "uf" in config.circuits:
        heads["induction"] = INDUCTION_HEAD
    if "ub" in config.circuits:
        heads |= {"backward": BACKWARD_HEAD, "head_level_anti": HEAD_LEVEL_ANTI_HEAD}
    if "ur" in config.circuits:
        heads["right_retrieval"] = RETRIEVAL_HEAD
    if "ul" in config.circuits:
        heads["left_retrieval"] = RETRIEVAL_HEAD
    return heads


def separator_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Tokens that end a string to copy: the prompt's ``:`` and the edge protocol's ``,``.

    >>> separator_ids(planted_tokenizer())
    [170, 3]
    """
    return [single_id(tokenizer, SEPARATOR), single_id(tokenizer, EDGE_SEPARATORS[0])]


def start_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Tokens just before a string to copy: the end of ``<bos>`` and the tokenizer's BOS.

    >>> start_ids(planted_tokenizer())
    [17, 0]
    """
    return [last_id(tokenizer, BOS_MARKER), tokenizer.bos_token_id]


def copyable_ids(tokenizer: PreTrainedTokenizerBase) -> dict[int, int]:
    """Token -> the token a copying head writes for it: each item to itself, a separator to ``<eos>``.

    >>> tokenizer = planted_tokenizer()
    >>> copyable_ids(tokenizer)[first_id(tokenizer, " a")] == first_id(tokenizer, " a")  # an item copies to itself
    True
    """
    return {t: t for t in item_ids(tokenizer)} | {sep: first_id(tokenizer, END_MARKER) for sep in separator_ids(tokenizer)}


def item_ids(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """The token of each item ``" x"`` (a-z A-Z 0-9), in that order.

    >>> len(item_ids(planted_tokenizer()))
    62
    """
    return [single_id(tokenizer, " " + item) for item in ALNUM]


class _Writer:
    """Fills the weights of one GPT-2 model, head by head, in residual-layout coordinates.

    ``scale[layer]`` is the value one active one-hot coordinate has after the LayerNorm in front
    of that layer (``sqrt(d_model / active blocks)``): reading weights divide by it."""

    def __init__(self, layout: ResidualLayout, n_heads: int, scales: tuple[float, float]):
        d, dh = layout.d_model, layout.d_head
        self.layout, self.scales = layout, scales
        self.q = torch.zeros(N_LAYERS, n_heads, d, dh)
        self.k = torch.zeros(N_LAYERS, n_heads, d, dh)
        self.v = torch.zeros(N_LAYERS, n_heads, d, dh)
        self.o = torch.zeros(N_LAYERS, n_heads, dh, d)
        self.b_q = torch.zeros(N_LAYERS, n_heads, dh)

    def amplitude(self, nats: float) -> float:
        """Query and key amplitude whose product is ``nats`` after GPT-2's 1/sqrt(d_head)."""
        return math.sqrt(nats * math.sqrt(self.layout.d_head))

    def match(self, head: Head, query_rows: list[int], key_rows: list[int], nats: float,
              extra: tuple[list[int], list[int]] = ([], [])) -> None:
        """Query row ``query_rows[i]`` matches key row ``key_rows[i]`` with ``nats`` of logit;
        ``extra`` = (query rows, key rows) share one more slot: any of them matches any."""
        a = self.amplitude(nats) / self.scales[head.layer]
        groups = [([qr], [kr]) for qr, kr in zip(query_rows, key_rows)] + ([extra] if extra[0] else [])
        for slot, (q_rows, k_rows) in enumerate(groups):
            self.q[head.layer, head.head, q_rows, slot] += a
            self.k[head.layer, head.head, k_rows, slot] += a

    def key_bias(self, head: Head, slot: int, nats_by_row: dict[int, float]) -> None:
        """A logit ``nats_by_row[row]`` added to every query's score of a key holding ``row``."""
        a = self.amplitude(1.0)
        self.b_q[head.layer, head.head, slot] = a
        for row, nats in nats_by_row.items():
            self.k[head.layer, head.head, row, slot] += nats * a / self.scales[head.layer]

    def gate(self, head: Head, slot: int, closed_when: int) -> None:
        """Attend to position 0 (an empty value) when the flag row ``closed_when`` is set."""
        lay = self.layout
        a = self.amplitude(GATE_NATS) / self.scales[head.layer]
        other = lay.flag + 1 - (closed_when - lay.flag)
        self.q[head.layer, head.head, closed_when, slot] = a
        self.q[head.layer, head.head, other, slot] = -a
        self.k[head.layer, head.head, lay.pos, slot] = a

    def copy(self, head: Head, pairs: dict[int, int], from_block: int, to_block: int, magnitude: float = 1.0) -> None:
        """Value reads ``from_block + src``, output writes ``to_block + dst`` for each pair."""
        for slot, (src, dst) in enumerate(pairs.items()):
            self.v[head.layer, head.head, from_block + src, slot] = 1.0 / self.scales[head.layer]
            self.o[head.layer, head.head, slot, to_block + dst] = magnitude


FLAG_VALUE = 1 / math.sqrt(2)  # per coordinate: the flag block has norm 1 like the one-hot blocks


def _plant_heads(writer: _Writer, tokenizer: PreTrainedTokenizerBase, config: PlantedConfig) -> None:
    lay, vocab = writer.layout, writer.layout.d_vocab
    everything = list(range(vocab))
    writer.match(PREVIOUS_TOKEN_HEAD, [lay.pos + i for i in range(1, lay.n_ctx)],
                 [lay.pos + i - 1 for i in range(1, lay.n_ctx)], MATCH_NATS)
    writer.copy(PREVIOUS_TOKEN_HEAD, {t: t for t in everything}, lay.tok, lay.prev)
    earliest = {lay.pos + j: -EARLIEST_NATS_PER_POSITION * j for j in range(lay.n_ctx)}
    unique_match = EARLIEST_NATS_PER_POSITION * lay.n_ctx + MATCH_NATS  # beats the bias of any position
    copied = copyable_ids(tokenizer)
    separators, starts = separator_ids(tokenizer), start_ids(tokenizer)
    if config.marker:
        _plant_marker(writer, tokenizer)
    if "uf" in config.circuits:
        plain = [t for t in everything if t not in separators]  # a separator queries for a string's start
        writer.match(INDUCTION_HEAD, [lay.tok + t for t in plain], [lay.prev + t for t in plain], MATCH_NATS,
                     extra=([lay.tok + t for t in separators], [lay.prev + t for t in starts]))
        writer.copy(INDUCTION_HEAD, copied, lay.tok, lay.out)
        if config.marker:
            writer.gate(INDUCTION_HEAD, vocab + 1, closed_when=lay.flag)
    if "ub" in config.circuits:
        writer.match(BACKWARD_HEAD, [lay.tok + t for t in everything], [lay.tok + t for t in everything], unique_match)
        writer.key_bias(BACKWARD_HEAD, vocab, earliest)
        items = {t: t for t in copied if t not in separators}
        writer.copy(BACKWARD_HEAD, items | {t: first_id(tokenizer, END_MARKER) for t in starts}, lay.prev, lay.out)
        if config.marker:
            writer.gate(BACKWARD_HEAD, vocab + 1, closed_when=lay.flag + 1)
        writer.match(HEAD_LEVEL_ANTI_HEAD, [lay.prev + t for t in everything], [lay.tok + t for t in everything],
                     unique_match)
        writer.key_bias(HEAD_LEVEL_ANTI_HEAD, vocab, earliest)
    if "ur" in config.circuits or "ul" in config.circuits:
        _plant_retrieval(writer, tokenizer, "ur" in config.circuits, earliest, unique_match)


def _plant_retrieval(writer: _Writer, tokenizer: PreTrainedTokenizerBase, right: bool, earliest: dict[int, float],
                     unique_match: float) -> None:
    """Head 1.3 queries with the previous token (at ``:`` that is the query ``q``) and finds ``q``'s
    earliest occurrence: right retrieval keys on ``prev`` and copies the token there (the item after
    ``q``); left retrieval keys on the token and copies its ``prev`` block (the item before ``q``)."""
    lay, everything = writer.layout, list(range(writer.layout.d_vocab))
    key_block = lay.prev if right else lay.tok
    writer.match(RETRIEVAL_HEAD, [lay.prev + t for t in everything], [key_block + t for t in everything], unique_match)
    writer.key_bias(RETRIEVAL_HEAD, lay.d_vocab, earliest)
    writer.copy(RETRIEVAL_HEAD, {t: t for t in item_ids(tokenizer)}, lay.tok if right else lay.prev, lay.out)


def _plant_marker(writer: _Writer, tokenizer: PreTrainedTokenizerBase) -> None:
    """Head 0.1 attends to the rule's direction word and writes the flag (+, -) for reverse."""
    lay = writer.layout
    words = {direction: single_id(tokenizer, word) for direction, word in COPY_RULE_WORDS.items()}
    writer.key_bias(MARKER_HEAD, 0, {lay.tok + t: MATCH_NATS for t in words.values()})
    scale = writer.scales[MARKER_HEAD.layer]
    writer.v[MARKER_HEAD.layer, MARKER_HEAD.head, lay.tok + words["backward"], 1] = 1.0 / scale
    writer.v[MARKER_HEAD.layer, MARKER_HEAD.head, lay.tok + words["forward"], 1] = -1.0 / scale
    writer.o[MARKER_HEAD.layer, MARKER_HEAD.head, 1, lay.flag] = FLAG_VALUE
    writer.o[MARKER_HEAD.layer, MARKER_HEAD.head, 1, lay.flag + 1] = -FLAG_VALUE


def _centred_one_hots(count: int, offset: int, d_model: int) -> torch.Tensor:
    """Row ``i``: one at ``offset + i`` minus the block mean, so LayerNorm only rescales."""
    rows = torch.zeros(count, d_model)
    rows[:, offset: offset + count] = torch.eye(count) - 1.0 / count
    return rows


def planted_state(config: PlantedConfig, tokenizer: PreTrainedTokenizerBase) -> tuple[GPT2Config, dict[str, torch.Tensor]]:
    """The GPT-2 config and the full (planted, then mixed) state dict of a planted model.

    >>> config, state = planted_state(PlantedConfig.from_name("planted-ub"), planted_tokenizer())
    >>> config.n_layer, len(state) > 0
    (2, True)
    """
    layout = ResidualLayout(len(tokenizer), N_CTX)
    d, dh = layout.d_model, layout.d_head
    n_heads = d // dh
    blocks = 3 + (1 if config.marker else 0)  # tok, pos, prev (and flag) enter layer 1
    writer = _Writer(layout, n_heads, (math.sqrt(d / 2), math.sqrt(d / blocks)))
    _plant_heads(writer, tokenizer, config)
    mix_heads([writer.q, writer.k, writer.v, writer.o, writer.b_q], config.strength, config.seed)
    hf_config = GPT2Config(vocab_size=len(tokenizer), n_embd=d, n_layer=N_LAYERS, n_head=n_heads, n_positions=N_CTX,
                           n_inner=4 * d, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                           pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False, attn_pdrop=0.0,
                           resid_pdrop=0.0, embd_pdrop=0.0)
    state = {"transformer.wte.weight": _centred_one_hots(len(tokenizer), layout.tok, d),
             "transformer.wpe.weight": _centred_one_hots(N_CTX, layout.pos, d)}
    for layer in range(N_LAYERS):
        prefix = f"transformer.h.{layer}.attn."
        qkv = [einops_heads(t[layer]) for t in (writer.q, writer.k, writer.v)]
        state[prefix + "c_attn.weight"] = torch.cat(qkv, dim=1)
        state[prefix + "c_attn.bias"] = torch.cat([writer.b_q[layer].flatten(), torch.zeros(2 * d)])
        state[prefix + "c_proj.weight"] = writer.o[layer].reshape(n_heads * dh, d)
        state[prefix + "c_proj.bias"] = torch.zeros(d)
    final_scale = math.sqrt(d / (blocks + 1))
    unembed = torch.zeros(len(tokenizer), d)
    unembed[:, layout.out: layout.out + len(tokenizer)] = torch.eye(len(tokenizer)) * LOGIT_NATS / final_scale
    # the direct path spells the rest of the end marker and the newline after it, so that free
    # generation writes the line's end as text: " <" -> "eos" -> ">" -> newline
    marker = tokenizer.encode(END_MARKER + "\n", add_special_tokens=False)
    for current, following in zip(marker, marker[1:]):
        unembed[following, layout.tok + current] = 2 * LOGIT_NATS / final_scale  # outvotes a copying head
    # a retrieval answer is one token: the position after ``q:`` ends the line
    unembed[single_id(tokenizer, "\n"), layout.prev + single_id(tokenizer, RETRIEVAL_COLON)] = 2 * LOGIT_NATS / final_scale
    state["lm_head.weight"] = unembed
    embeddings = {k: v for k, v in state.items() if ".h." not in k}  # the heads are mixed already
    return hf_config, state | mix_with_noise(embeddings, config.strength, config.seed)


def planted_hf_model(name: str, seed: int = 0) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The Hugging Face model behind ``name`` (e.g. ``"planted-ub"``, ``"planted-ub@0.5"``).

    >>> model, tokenizer = planted_hf_model("planted-uf")
    >>> model.config.n_layer
    2
    """
    config = PlantedConfig.from_name(name, seed)
    tokenizer = planted_tokenizer()
    hf_config, state = planted_state(config, tokenizer)
    model = GPT2LMHeadModel(hf_config)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected:
        raise RuntimeError(f"planted weights not in GPT-2: {unexpected[:5]}")
    with torch.no_grad():
        for block in model.transformer.h:  # MLPs contribute nothing; LayerNorm only rescales
            for param in block.mlp.parameters():
                param.zero_()
            for norm in (block.ln_1, block.ln_2):
                norm.weight.fill_(1.0)
                norm.bias.zero_()
        model.transformer.ln_f.weight.fill_(1.0)
        model.transformer.ln_f.bias.zero_()
    return model.eval(), tokenizer
