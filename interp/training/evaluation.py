"""Evaluation during training, through the same ``interp.measure.evaluate.evaluate_task`` every analysis
uses: [`HFForward`][interp.training.evaluation.HFForward] shows a plain Hugging Face model the way the evaluators see a bridge
(the [`interp.core.lm.LanguageModel`][interp.core.lm.LanguageModel] protocol), so training and analyses score exactly alike."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.measure.evaluate import evaluate_task
from interp.core.lm import LMConfig
from interp.training.config import Precision, TrainConfig


class HFForward:
    """An HF model seen the way ``interp.measure.evaluate`` sees a bridge: ``cfg.device``,
    ``cfg.default_prepend_bos``, ``tokenizer`` and ``model(tokens) -> logits``."""

    def __init__(self, model: torch.nn.Module, tokenizer, prepend_bos: bool, precision: Precision = "fp32"):
        self.model = model
        self.tokenizer = tokenizer
        config = getattr(model, "config", None)
        n_ctx = getattr(config, "n_positions", None) or getattr(config, "max_position_embeddings", None)
        self.cfg = LMConfig(next(model.parameters()).device, prepend_bos, n_ctx)
        self.precision = precision

    def __call__(self, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos d_vocab"]:
        with autocast_context(self.cfg.device, self.precision)():
            tokens = tokens.to(self.cfg.device)
            # An all-ones mask is what the bridge computes with (right padding is harmless to a
            # causal model); passing it only stops HF warning that padding might be attended.
            return self.model(input_ids=tokens, attention_mask=torch.ones_like(tokens)).logits.float()


def autocast_context(device: torch.device, precision: Precision) -> Callable[[], contextlib.AbstractContextManager]:
    """A factory of the context that runs a forward pass in ``precision`` on ``device`` (autocast
    for bf16 / fp16, nothing for fp32); a factory, since each pass needs a fresh context.

    >>> with autocast_context(torch.device("cpu"), "bf16")():
    ...     (torch.ones(2, 2) @ torch.ones(2, 2)).dtype
    torch.bfloat16
    """
    if precision == "fp32":
        return contextlib.nullcontext
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return lambda: torch.autocast(device_type=device.type, dtype=dtype)


@dataclass(frozen=True)
class LengthScore:
    """Exact match at one length of one split (``id``: trained lengths, ``ood``: longer ones)."""

    split: str
    length: int
    accuracy: float
    loss: float  # minus the mean answer log-prob
    token_accuracy: float
    n_examples: int
    stderr: float


def evaluate_lengths(model: torch.nn.Module, tokenizer, config: TrainConfig, split: str, lengths: Sequence[int],
                     vocabulary: Sequence[str], prepend_bos: bool, n_examples: int | None = None) -> list[LengthScore]:
    """Exact match at each length through ``evaluate_task``; one row per length.

    >>> scores = evaluate_lengths(model, tokenizer, TrainConfig(task="UF"), "id", [5], ALNUM, True)  # doctest: +SKIP
    >>> scores[0].accuracy  # doctest: +SKIP
    0.0
    """
    view = HFForward(model, tokenizer, prepend_bos, config.precision)
    was_training = model.training
    model.eval()
    rows = []
    try:
        for length in lengths:
            result = evaluate_task(view, config.spec, length, n_examples or config.eval_examples,
                                   seed=config.eval_seed, prompt_config=config.prompt_config(prepend_bos),
                                   vocabulary=vocabulary, batch_size=config.eval_batch_size, progress=False)
            rows.append(LengthScore(split, length, result.accuracy, -result.mean_logprob, result.token_accuracy,
                                    result.n_examples, result.stderr))
    finally:
        model.train(was_training)
    return rows
