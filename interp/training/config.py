"""One fine-tuning run's configuration, with the paper's GPT-2 settings as defaults."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal, get_args

from interp.models.adapters import LoraSettings
from interp.prompts import PromptConfig
from interp.data.tasks import TaskSpec, check_vocabulary, generate_example, get_task

Precision = Literal["fp32", "bf16", "fp16"]
PRECISIONS: tuple[str, ...] = get_args(Precision)
Schedule = Literal["linear", "cosine", "constant"]
SCHEDULES: tuple[str, ...] = get_args(Schedule)


# The paper fine-tunes GPT-2 1.5B on strings up to 62 unique characters (copying) and on
# flip-flop strings up to 100 characters, testing beyond; these are the same splits in this
# project's prompt format. Unique copying is capped by the vocabulary (52 letters for SmolLM2).
DEFAULT_LENGTHS: dict[tuple[str, bool], dict[str, tuple[int, ...]]] = {
    ("copying", True): {"train": tuple(range(5, 31)), "id": (10, 30), "ood": (40, 50)},
    ("copying", False): {"train": tuple(range(5, 51)), "id": (20, 50), "ood": (75, 100)},
    ("retrieval", True): {"train": tuple(range(5, 51)), "id": (20, 50), "ood": (75, 100)},
    ("retrieval", False): {"train": tuple(range(7, 51)), "id": (20, 50), "ood": (75, 100)},
}


@dataclass(frozen=True)
class TrainConfig:
    """One fine-tuning run. Defaults are the paper's GPT-2 settings (HF Trainer: AdamW, lr 1e-5,
    weight decay 0.01, 15% linear warmup then linear decay, gradient clipping at 1, batch 64;
    15 epochs of ~45k examples is ~10k steps)."""

    task: str = "UF"
    train_lengths: tuple[int, ...] = ()  # () -> DEFAULT_LENGTHS for the task's family
    id_lengths: tuple[int, ...] = ()
    ood_lengths: tuple[int, ...] = ()
    steps: int = 10_000
    batch_size: int = 64  # examples per optimizer step (split into grad_accum micro-batches)
    grad_accum: int = 1
    lr: float = 1e-5
    weight_decay: float = 0.01
    warmup_frac: float = 0.15
    schedule: Schedule = "linear"
    max_grad_norm: float = 1.0
    seed: int = 0
    n_shots: int = 5  # the prompt format every analysis uses; the paper's own runs used 0
    template: str | None = "bare"  # None: the protocol's first template (as --template unset)
    prepend_bos: bool | None = None  # None: whatever the model's tokenizer does (as the bridge)
    max_position: int | None = None  # random position-id offset in [0, max_position - len]
    precision: Precision = "fp32"  # autocast dtype; weights stay in their loaded dtype
    gradient_checkpointing: bool = False
    lora: LoraSettings | None = None
    eval_every: int = 500
    eval_examples: int = 100
    eval_batch_size: int = 16
    eval_seed: int = 1234
    checkpoint_every: int = 500
    stop_at_accuracy: float | None = None  # stop once every in-distribution length reaches it

    def __post_init__(self) -> None:
        spec = get_task(self.task)
        object.__setattr__(self, "task", spec.name)
        defaults = DEFAULT_LENGTHS[(spec.family, spec.unique)]
        for split, key in (("train", "train_lengths"), ("id", "id_lengths"), ("ood", "ood_lengths")):
            value = tuple(int(n) for n in getattr(self, key)) or defaults[split]
            object.__setattr__(self, key, value)
        positive = {"steps": self.steps, "batch_size": self.batch_size, "grad_accum": self.grad_accum,
                    "eval_every": self.eval_every, "checkpoint_every": self.checkpoint_every,
                    "eval_batch_size": self.eval_batch_size}
        for name, value in positive.items():
            if value < 1:
                raise ValueError(f"{name}={value} must be >= 1")
        if self.batch_size % self.grad_accum:
            raise ValueError(f"batch_size={self.batch_size} must be a multiple of grad_accum={self.grad_accum}")
        check_hyperparameters(self.lr, self.weight_decay, self.max_grad_norm)
        if not 0.0 <= self.warmup_frac < 1.0:
            raise ValueError(f"warmup_frac={self.warmup_frac} must be in [0, 1)")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule={self.schedule!r} must be one of {SCHEDULES}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision={self.precision!r} must be one of {PRECISIONS}")
        if self.eval_examples < 0:
            raise ValueError(f"eval_examples={self.eval_examples} must be >= 0")
        if self.max_position is not None and self.max_position < 1:
            raise ValueError(f"max_position={self.max_position} must be positive")
        PromptConfig(n_shots=self.n_shots, template=self.template)  # validates both

    @property
    def spec(self) -> TaskSpec:
        return get_task(self.task)

    @property
    def micro_batch(self) -> int:
        return self.batch_size // self.grad_accum

    def prompt_config(self, prepend_bos: bool) -> PromptConfig:
        return PromptConfig(n_shots=self.n_shots, template=self.template,
                            prepend_bos=prepend_bos if self.prepend_bos is None else self.prepend_bos)

    def as_dict(self) -> dict:
        return asdict(self)


def check_hyperparameters(lr: float, weight_decay: float, max_grad_norm: float) -> None:
    """Refuse values that ruin training silently: NaN, infinity, a negative clipping norm
    (clip_grad_norm_ then flips every gradient) or decay.

    >>> check_hyperparameters(1e-5, 0.01, 1.0)
    """
    rules = (("lr", lr, "a finite number > 0", lambda v: v > 0),
             ("weight_decay", weight_decay, "a finite number >= 0", lambda v: v >= 0),
             ("max_grad_norm", max_grad_norm, "a finite number > 0 (or 0: no clipping)", lambda v: v >= 0))
    for name, value, expected, holds in rules:
        if not (isinstance(value, (int, float)) and math.isfinite(value) and holds(value)):
            raise ValueError(f"{name}={value} must be {expected}")


def check_lengths(config: TrainConfig, vocabulary: Sequence[str]) -> None:
    """Refuse lengths the vocabulary cannot express, naming the split, before any training.

    >>> check_lengths(TrainConfig(task="UF", train_lengths=(5,), id_lengths=(5,), ood_lengths=(30,)), "abcdefghij")
    Traceback (most recent call last):
    ValueError: ood length 30 is not usable for UF: vocabulary of 10 items is too small for UF at length 30: ...
    """
    for split, lengths in (("train", config.train_lengths), ("id", config.id_lengths), ("ood", config.ood_lengths)):
        for length in lengths:
            try:
                check_vocabulary(config.spec, length, vocabulary)
                generate_example(config.spec, length, 0, vocabulary)
            except ValueError as err:
                raise ValueError(f"{split} length {length} is not usable for {config.task}: {err}") from err
