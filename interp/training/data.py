"""Training data as a pure function of ``(seed, step)``, collated into right-padded batches with
labels on the answer only, and the loss of one micro-batch."""

from __future__ import annotations

import inspect
import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.measure.batching import right_pad
from interp.prompts import Prompt, PromptConfig, build_prompts, encode_prompts
from interp.prompts.tokens import text_ids
from interp.data.tasks import generate_example
from interp.training.config import TrainConfig

IGNORE_INDEX = -100


@dataclass(frozen=True)
class TrainItem:
    """One training sequence: the loss covers ``ids[answer_start:]`` (the answer and the token
    that ends it, since exact match also needs the model to stop)."""

    ids: tuple[int, ...]
    answer_start: int
    offset: int = 0


def _step_rng(kind: str, config: TrainConfig, step: int) -> random.Random:
    # Keyed by strings so training never draws the evaluation's examples (eval uses
    # generate_examples' own "task:length:seed" keys) and every step is independent.
    return random.Random(f"train-{kind}:{config.task}:{config.seed}:{step}")


def training_prompts(config: TrainConfig, step: int, vocabulary: Sequence[str]) -> list[Prompt]:
    """The examples (with demonstrations) of optimizer step ``step``: a function of (seed, step).

    >>> from interp.data.tasks import ALNUM
    >>> config = TrainConfig(task="UF", train_lengths=(3,), batch_size=2, n_shots=0, template=None)
    >>> prompts = training_prompts(config, 0, ALNUM)
    >>> len(prompts), prompts[0].text, prompts[0].answer_text
    (2, '<bos> x m 2 :', ' x m 2')
    >>> training_prompts(config, 0, ALNUM) == prompts, training_prompts(config, 1, ALNUM) == prompts
    (True, False)
    """
    rng = _step_rng("examples", config, step)
    examples = [generate_example(config.spec, rng.choice(config.train_lengths), rng, vocabulary)
                for _ in range(config.batch_size)]
    # build_prompts seeds each prompt's demos by (seed, index); a per-step seed far from the
    # small evaluation seeds keeps training demos distinct from evaluation demos.
    demo_seed = 1_000_003 * (config.seed + 1) + step
    return build_prompts(examples, PromptConfig(n_shots=config.n_shots, template=config.template),
                         seed=demo_seed, vocabulary=vocabulary)


def end_token_id(tokenizer, prompt: Prompt) -> int:
    """The token the model must emit after the answer (first token of the line's end marker).

    >>> from interp.data.tasks import ALNUM
    >>> from interp.models.tiny import tiny_tokenizer
    >>> tokenizer = tiny_tokenizer()
    >>> prompt = training_prompts(TrainConfig(task="UF", n_shots=0, template=None), 0, ALNUM)[0]
    >>> prompt.end_text, tokenizer.convert_ids_to_tokens(end_token_id(tokenizer, prompt))  # the tiny tokenizer splits it
    (' <eos>', 'Ġ')
    """
    ids = text_ids(tokenizer, prompt.end_text)
    if not ids:
        raise ValueError(f"end marker {prompt.end_text!r} encodes to no token")
    return ids[0]


def training_items(config: TrainConfig, step: int, tokenizer, vocabulary: Sequence[str],
                   prepend_bos: bool) -> list[TrainItem]:
    """The tokenized sequences of optimizer step ``step`` ([`training_prompts`][interp.training.data.training_prompts], each followed
    by its end token), with random position offsets when ``config.max_position`` is set.

    >>> from interp.data.tasks import ALNUM
    >>> from interp.models.tiny import tiny_tokenizer
    >>> tokenizer = tiny_tokenizer()
    >>> config = TrainConfig(task="UF", train_lengths=(3,), batch_size=2, n_shots=0, template=None)
    >>> item = training_items(config, 0, tokenizer, ALNUM, prepend_bos=True)[0]
    >>> tokenizer.decode(item.ids[:item.answer_start]), tokenizer.decode(item.ids[item.answer_start:])
    ('<|endoftext|><bos> x m 2 :', ' x m 2 ')
    """
    prompts = training_prompts(config, step, vocabulary)
    encoded = encode_prompts(tokenizer, prompts, prepend_bos=prepend_bos)
    offsets = _step_rng("offsets", config, step)
    items = []
    for prompt, enc in zip(prompts, encoded):
        ids = enc.ids + (end_token_id(tokenizer, prompt),)
        offset = 0
        if config.max_position is not None:
            if len(ids) > config.max_position:
                raise ValueError(f"a training sequence of {len(ids)} tokens exceeds max_position={config.max_position}")
            offset = offsets.randint(0, config.max_position - len(ids))
        items.append(TrainItem(ids, enc.answer_start, offset))
    return items


@dataclass(frozen=True)
class Batch:
    tokens: Int[Tensor, "batch pos"]
    attention_mask: Int[Tensor, "batch pos"]  # 0 on padding (by length, never by token value)
    targets: Int[Tensor, "batch pos"]  # targets[:, t] is the label for the logits at t (or -100)
    position_ids: Int[Tensor, "batch pos"] | None
    first_target: int  # earliest position with a label: logits before it are never needed

    @property
    def n_targets(self) -> int:
        return int((self.targets != IGNORE_INDEX).sum())


def collate(items: Sequence[TrainItem], pad_id: int, with_positions: bool,
            max_position: int | None = None) -> Batch:
    """Right-pad (causal models never let real positions see the padding) and shift labels.

    >>> batch = collate([TrainItem((1, 2, 3, 4), answer_start=2), TrainItem((1, 2, 3), answer_start=2)],
    ...                 pad_id=0, with_positions=False)
    >>> batch.tokens.tolist(), batch.targets.tolist()  # the logits at t predict token t + 1
    ([[1, 2, 3, 4], [1, 2, 3, 0]], [[-100, 3, 4, -100], [-100, 3, -100, -100]])
    """
    tokens, real = right_pad([it.ids for it in items], pad_id)
    width = tokens.shape[1]
    targets = torch.full((len(items), width), IGNORE_INDEX, dtype=torch.long)
    for row, it in enumerate(items):
        ids = torch.tensor(it.ids)
        targets[row, it.answer_start - 1 : len(ids) - 1] = ids[it.answer_start :]
    positions = None
    if with_positions:
        offsets = torch.tensor([it.offset for it in items])
        positions = offsets[:, None] + torch.arange(width)[None, :]
        if max_position is not None:
            positions = positions.clamp(max=max_position - 1)  # only padding can exceed it
    first = min(it.answer_start for it in items) - 1
    return Batch(tokens, real.long(), targets, positions, first)


def base_model(model: torch.nn.Module) -> torch.nn.Module:
    """The Hugging Face model itself: unwrapped from ``peft`` under LoRA, else ``model``.

    >>> from interp.models.adapters import add_lora
    >>> from interp.models.tiny import tiny_hf_model
    >>> model = tiny_hf_model("tiny-gpt2")[0]
    >>> base_model(add_lora(model)) is model, base_model(model) is model
    (True, True)
    """
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _accepts(model: torch.nn.Module, argument: str) -> bool:
    return argument in inspect.signature(base_model(model).forward).parameters


def batch_loss(model: torch.nn.Module, batch: Batch, normaliser: int, autocast) -> Float[Tensor, ""]:
    """Summed cross-entropy of the answer tokens, divided by the whole step's answer-token count,
    so gradient accumulation adds up to exactly the full-batch mean.

    >>> from contextlib import nullcontext
    >>> from interp.data.tasks import ALNUM
    >>> from interp.models.tiny import tiny_hf_model
    >>> model, tokenizer = tiny_hf_model("tiny-gpt2")
    >>> _ = model.eval()  # no dropout, so the two ways below see the same network
    >>> config = TrainConfig(task="UF", train_lengths=(3,), batch_size=2, n_shots=0, template=None)
    >>> items = training_items(config, 0, tokenizer, ALNUM, prepend_bos=True)
    >>> n = collate(items, 0, with_positions=False).n_targets
    >>> full = batch_loss(model, collate(items, 0, with_positions=False), n, nullcontext)
    >>> halves = sum(batch_loss(model, collate([item], 0, with_positions=False), n, nullcontext) for item in items)
    >>> torch.allclose(full, halves)
    True
    """
    device = next(model.parameters()).device
    kwargs = {"input_ids": batch.tokens.to(device), "attention_mask": batch.attention_mask.to(device)}
    if batch.position_ids is not None:
        kwargs["position_ids"] = batch.position_ids.to(device)
    width = batch.tokens.shape[1]
    targets = batch.targets
    if _accepts(model, "logits_to_keep"):
        # The vocabulary projection of prompt positions is wasted work (a third of the
        # compute for SmolLM2's 49k vocabulary); keep only the positions that carry labels.
        keep = width - batch.first_target
        kwargs["logits_to_keep"] = keep
        targets = targets[:, width - keep :]
    with autocast():
        logits = model(**kwargs).logits
    loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), targets.to(device).flatten(),
                                             ignore_index=IGNORE_INDEX, reduction="sum")
    return loss / normaliser
