"""Will a training run fit? A rough estimate of its memory, checked before any weight is loaded
when the model is a local checkpoint (GPT-2 XL), so impossible plans fail in seconds."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from interp.models.adapters import lora_parameter_count
from interp.models import tokenizer_adds_bos
from interp.models.shape import ModelShape
from interp.data.tasks import ALNUM
from interp.data.vocab import single_token_vocabulary
from interp.training.config import Precision, TrainConfig
from interp.training.data import base_model, training_items

GIB = 1024**3


def _training_shape(model: torch.nn.Module) -> ModelShape:
    """What the memory estimate needs to know about a Hugging Face model (LoRA weights not
    counted); works on a meta-device model too (nothing is read but shapes)."""
    base = base_model(model)
    cfg = base.config
    n_params = sum(p.numel() for name, p in base.named_parameters() if "lora_" not in name)
    return ModelShape(cfg.num_hidden_layers, cfg.num_attention_heads, d_model=cfg.hidden_size, vocab_size=cfg.vocab_size,
                      n_params=n_params)


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes needed by a training run: a rough figure meant to catch impossible plans early."""

    weights: int
    grads: int
    optimizer: int
    activations: int

    @property
    def total(self) -> int:
        return self.weights + self.grads + self.optimizer + self.activations

    def describe(self) -> str:
        unit, size = ("GiB", GIB) if self.total >= GIB else ("MiB", 1024**2)
        g = lambda n: f"{n / size:.1f}"  # noqa: E731
        return (f"~{g(self.total)} {unit} (weights {g(self.weights)} + grads {g(self.grads)} + "
                f"AdamW {g(self.optimizer)} + activations ~{g(self.activations)})")


class InsufficientMemoryError(ValueError):
    """The planned run cannot fit the device's memory."""


def estimate_training_memory(shape: ModelShape, n_trainable: int, seq_len: int, micro_batch: int,
                             weight_bytes: int = 4, precision: Precision = "fp32",
                             gradient_checkpointing: bool = False) -> MemoryEstimate:
    """Weights for every parameter; gradients and two AdamW moments for the trainable ones (in
    the weights' dtype, so fp32 master weights under autocast cost 4+4+8 bytes a parameter);
    activations after Korthikanti et al. (2022): per layer and token ~17 d_model values plus
    2.5 x heads x seq attention values, only the layer inputs when checkpointing; plus logits.

    >>> smollm2 = ModelShape(30, 9, d_model=576, vocab_size=49152, n_params=134_515_008)
    >>> estimate_training_memory(smollm2, n_trainable=134_515_008, seq_len=64, micro_batch=8).describe()
    '~2.9 GiB (weights 0.5 + grads 0.5 + AdamW 1.0 + activations ~0.9)'
    """
    act_bytes = 2 if precision in ("bf16", "fp16") or weight_bytes == 2 else 4
    tokens = seq_len * micro_batch
    per_layer = tokens * (17 * shape.d_model + 2.5 * shape.n_heads * seq_len) * act_bytes
    if gradient_checkpointing:
        layers = shape.n_layers * tokens * shape.d_model * act_bytes + per_layer
    else:
        layers = shape.n_layers * per_layer
    logits = 3 * tokens * shape.vocab_size * 4  # fp32 logits, their softmax and gradient
    return MemoryEstimate(weights=shape.n_params * weight_bytes, grads=n_trainable * weight_bytes,
                          optimizer=2 * n_trainable * weight_bytes, activations=int(layers + logits))


def device_memory_bytes(device: torch.device) -> int | None:
    """Total memory of a CUDA device, or of the machine for the CPU; None when unknown.

    >>> device_memory_bytes(torch.device("cpu")) > GIB, device_memory_bytes(torch.device("meta"))
    (True, None)
    """
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device.index or 0).total_memory
    if device.type == "cpu":
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            return None
    return None


def _gib(n: int) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / 1024**2:.1f} MiB"


def check_memory(estimate: MemoryEstimate, device: torch.device, budget_bytes: int | None = None,
                 what: str = "this run") -> None:
    """Raise [`InsufficientMemoryError`][interp.training.memory.InsufficientMemoryError] when ``estimate`` exceeds the budget (the device's
    memory unless given).

    >>> estimate = MemoryEstimate(weights=GIB, grads=GIB, optimizer=2 * GIB, activations=GIB)
    >>> check_memory(estimate, torch.device("cpu"), budget_bytes=8 * GIB)  # fits: nothing happens
    >>> check_memory(estimate, torch.device("cpu"), budget_bytes=4 * GIB)
    Traceback (most recent call last):
    interp.training.memory.InsufficientMemoryError: this run needs ~5.0 GiB (...) but cpu has 4.0 GiB; use --lora, ...
    """
    budget = budget_bytes if budget_bytes is not None else device_memory_bytes(device)
    if budget is None or estimate.total <= budget:
        return
    raise InsufficientMemoryError(
        f"{what} needs {estimate.describe()} but {device} has {_gib(budget)}; "
        f"use --lora, a smaller micro-batch (--grad-accum), --gradient-checkpointing, "
        f"--precision bf16, or a larger device"
    )


def plan_memory(model: torch.nn.Module, tokenizer, config: TrainConfig, weight_bytes: int,
                vocabulary: Sequence[str] | None = None) -> MemoryEstimate:
    """The estimate for ``config`` on ``model`` (real or meta), at the longest training length.

    >>> from interp.models.tiny import tiny_hf_model
    >>> model, tokenizer = tiny_hf_model("tiny-gpt2")
    >>> config = TrainConfig(task="UF", train_lengths=(3,), batch_size=2, n_shots=0, template=None)
    >>> plan_memory(model, tokenizer, config, weight_bytes=4).describe()
    '~2.7 MiB (weights 0.6 + grads 0.6 + AdamW 1.2 + activations ~0.3)'
    """
    vocabulary = tuple(vocabulary or single_token_vocabulary(tokenizer, ALNUM))
    shape = _training_shape(model)
    n_trainable = lora_parameter_count(model, config.lora) if config.lora else shape.n_params
    longest = replace(config, train_lengths=(max(config.train_lengths),), batch_size=config.grad_accum)
    prepend_bos = config.prompt_config(tokenizer_adds_bos(tokenizer)).prepend_bos
    seq_len = max(len(it.ids) for it in training_items(longest, 0, tokenizer, vocabulary, prepend_bos))
    return estimate_training_memory(shape, n_trainable, seq_len, config.micro_batch, weight_bytes,
                                    config.precision, config.gradient_checkpointing)
