"""Fine-tuning a causal LM on one task, with resumable checkpoints and a memory check up front.

The model is a plain Hugging Face model (or one wrapped by ``peft`` for LoRA), never the bridge:
training needs autograd through the HF modules. Evaluation during training goes through the
project's own ``interp.evaluate.evaluate_task`` by way of :class:`HFForward`, a thin view that
gives an HF model the three things the evaluator reads from a bridge (``cfg.device``,
``tokenizer``, ``__call__ -> logits``), so training and every analysis score exactly alike.

Training data is a pure function of ``(seed, step)``: each step's examples, demonstrations and
position offsets come from generators seeded by the step number. A run killed at any point and
resumed from its last checkpoint (weights, AdamW, scheduler, RNG states, history) therefore
replays the same batches and ends with the same weights as a run never interrupted.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import os
import random
import shlex
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Literal, Sequence

import torch
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from .adapters import LoraSettings
from .evaluate import evaluate_task
from .models import tokenizer_adds_bos
from .prompts import Prompt, PromptConfig, build_prompts, encode_prompts
from .results import atomic_path
from .tasks import ALNUM, TaskSpec, check_vocabulary, generate_example, get_task

logger = logging.getLogger(__name__)

IGNORE_INDEX = -100
CHECKPOINT_NAME = "checkpoint.pt"
Precision = Literal["fp32", "bf16", "fp16"]
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16")
GIB = 1024**3


# --------------------------------------------------------------------------- configuration


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
    schedule: Literal["linear", "cosine", "constant"] = "linear"
    max_grad_norm: float = 1.0
    seed: int = 0
    n_shots: int = 5  # the prompt format every analysis uses; the paper's own runs used 0
    template: str = "bare"
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
        if self.lr <= 0:
            raise ValueError(f"lr={self.lr} must be positive")
        if not 0.0 <= self.warmup_frac < 1.0:
            raise ValueError(f"warmup_frac={self.warmup_frac} must be in [0, 1)")
        if self.schedule not in ("linear", "cosine", "constant"):
            raise ValueError(f"schedule={self.schedule!r} must be 'linear', 'cosine' or 'constant'")
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


# Fields a resumed run may change without changing what it computes.
_LOGISTICS = ("eval_every", "eval_batch_size", "checkpoint_every")


def check_lengths(config: TrainConfig, vocabulary: Sequence[str]) -> None:
    """Refuse lengths the vocabulary cannot express, naming the split, before any training."""
    for split, lengths in (("train", config.train_lengths), ("id", config.id_lengths), ("ood", config.ood_lengths)):
        for length in lengths:
            try:
                check_vocabulary(config.spec, length, vocabulary)
                generate_example(config.spec, length, 0, vocabulary)
            except ValueError as err:
                raise ValueError(f"{split} length {length} is not usable for {config.task}: {err}") from err


# --------------------------------------------------------------------------- data


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
    """The examples (with demonstrations) of optimizer step ``step``: a function of (seed, step)."""
    rng = _step_rng("examples", config, step)
    examples = [generate_example(config.spec, rng.choice(config.train_lengths), rng, vocabulary)
                for _ in range(config.batch_size)]
    # build_prompts seeds each prompt's demos by (seed, index); a per-step seed far from the
    # small evaluation seeds keeps training demos distinct from evaluation demos.
    demo_seed = 1_000_003 * (config.seed + 1) + step
    return build_prompts(examples, PromptConfig(n_shots=config.n_shots, template=config.template),
                         seed=demo_seed, vocabulary=vocabulary)


def end_token_id(tokenizer, prompt: Prompt) -> int:
    """The token the model must emit after the answer (first token of the line's end marker)."""
    ids = tokenizer.encode(prompt.end_text, add_special_tokens=False)
    if not ids:
        raise ValueError(f"end marker {prompt.end_text!r} encodes to no token")
    return ids[0]


def training_items(config: TrainConfig, step: int, tokenizer, vocabulary: Sequence[str],
                   prepend_bos: bool) -> list[TrainItem]:
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
    """Right-pad (causal models never let real positions see the padding) and shift labels."""
    width = max(len(it.ids) for it in items)
    tokens = torch.full((len(items), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(items), width), dtype=torch.long)
    targets = torch.full((len(items), width), IGNORE_INDEX, dtype=torch.long)
    for row, it in enumerate(items):
        ids = torch.tensor(it.ids)
        tokens[row, : len(ids)] = ids
        mask[row, : len(ids)] = 1
        targets[row, it.answer_start - 1 : len(ids) - 1] = ids[it.answer_start :]
    positions = None
    if with_positions:
        offsets = torch.tensor([it.offset for it in items])
        positions = offsets[:, None] + torch.arange(width)[None, :]
        if max_position is not None:
            positions = positions.clamp(max=max_position - 1)  # only padding can exceed it
    first = min(it.answer_start for it in items) - 1
    return Batch(tokens, mask, targets, positions, first)


def _base_model(model):
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _accepts(model, argument: str) -> bool:
    return argument in inspect.signature(_base_model(model).forward).parameters


def batch_loss(model, batch: Batch, normaliser: int, autocast) -> Float[Tensor, ""]:
    """Summed cross-entropy of the answer tokens, divided by the whole step's answer-token count,
    so gradient accumulation adds up to exactly the full-batch mean."""
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


# --------------------------------------------------------------------------- evaluation


class HFForward:
    """An HF model seen the way ``interp.evaluate`` sees a bridge: ``cfg.device``,
    ``cfg.default_prepend_bos``, ``tokenizer`` and ``model(tokens) -> logits``."""

    def __init__(self, model, tokenizer, prepend_bos: bool, precision: Precision = "fp32"):
        self.model = model
        self.tokenizer = tokenizer
        device = next(model.parameters()).device
        self.cfg = type("Cfg", (), {"device": device, "default_prepend_bos": prepend_bos})()
        self.precision = precision

    def __call__(self, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos vocab"]:
        with autocast_context(self.cfg.device, self.precision)():
            tokens = tokens.to(self.cfg.device)
            # An all-ones mask is what the bridge computes with (right padding is harmless to a
            # causal model); passing it only stops HF warning that padding might be attended.
            return self.model(input_ids=tokens, attention_mask=torch.ones_like(tokens)).logits.float()


def autocast_context(device: torch.device, precision: Precision) -> Callable[[], contextlib.AbstractContextManager]:
    if precision == "fp32":
        return contextlib.nullcontext
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return lambda: torch.autocast(device_type=device.type, dtype=dtype)


def evaluate_lengths(model, tokenizer, config: TrainConfig, split: str, lengths: Sequence[int],
                     vocabulary: Sequence[str], prepend_bos: bool, n_examples: int | None = None) -> list[dict]:
    """Exact match at each length through ``evaluate_task``; one row per length."""
    view = HFForward(model, tokenizer, prepend_bos, config.precision)
    was_training = model.training
    model.eval()
    rows = []
    try:
        for length in lengths:
            result = evaluate_task(view, config.spec, length, n_examples or config.eval_examples,
                                   seed=config.eval_seed, prompt_config=config.prompt_config(prepend_bos),
                                   vocabulary=vocabulary, batch_size=config.eval_batch_size, progress=False)
            rows.append({"split": split, "length": length, "accuracy": result.accuracy,
                         "loss": -result.mean_logprob, "token_accuracy": result.token_accuracy,
                         "n_examples": result.n_examples, "stderr": result.stderr})
    finally:
        model.train(was_training)
    return rows


# --------------------------------------------------------------------------- memory


@dataclass(frozen=True)
class ModelShape:
    """What the memory estimate needs to know about a model."""

    n_params: int
    n_layers: int
    d_model: int
    n_heads: int
    vocab_size: int

    @classmethod
    def of(cls, model) -> "ModelShape":
        """Works on a meta-device model too (nothing is read but shapes)."""
        base = _base_model(model)
        cfg = base.config
        n_params = sum(p.numel() for name, p in base.named_parameters() if "lora_" not in name)
        return cls(n_params, cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.vocab_size)


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
    2.5 x heads x seq attention values, only the layer inputs when checkpointing; plus logits."""
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
    """Total memory of a CUDA device, or of the machine for the CPU; None when unknown."""
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
    """Raise :class:`InsufficientMemoryError` when ``estimate`` exceeds the budget (the device's
    memory unless given)."""
    budget = budget_bytes if budget_bytes is not None else device_memory_bytes(device)
    if budget is None or estimate.total <= budget:
        return
    raise InsufficientMemoryError(
        f"{what} needs {estimate.describe()} but {device} has {_gib(budget)}; "
        f"use --lora, a smaller micro-batch (--grad-accum), --gradient-checkpointing, "
        f"--precision bf16, or a larger device"
    )


# --------------------------------------------------------------------------- checkpoints


def trainable_state(model) -> dict[str, Tensor]:
    """The parameters training changes (all of them, or just the adapter's)."""
    return {name: p.detach().cpu().clone() for name, p in model.named_parameters() if p.requires_grad}


def _rng_state() -> dict:
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: Path, payload: dict) -> None:
    """``torch.save`` to a temporary file renamed over ``path``: a kill mid-write leaves the
    previous checkpoint intact."""
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


def _comparable(config: dict) -> dict:
    return {k: v for k, v in config.items() if k not in _LOGISTICS}


# --------------------------------------------------------------------------- training loop


@dataclass
class TrainResult:
    history: list[dict]  # evaluation rows: step, split, length, accuracy, loss, train_loss, ...
    losses: list[tuple[int, float]]  # (step, training loss) for every optimizer step
    final_step: int
    resumed_from: int | None = None
    stopped_early: bool = False

    def evaluations(self, step: int | None = None) -> list[dict]:
        """The rows of one evaluation (the last one by default)."""
        if not self.history:
            return []
        step = self.history[-1]["step"] if step is None else step
        return [row for row in self.history if row["step"] == step]


def _optimizer(model, config: TrainConfig) -> torch.optim.Optimizer:
    # HF Trainer's convention: no weight decay on biases and norm gains (1-D parameters).
    decay, no_decay = [], []
    for _, p in model.named_parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 else no_decay).append(p)
    if not decay and not no_decay:
        raise ValueError("the model has no trainable parameters")
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=config.lr)


def lr_factor(config: TrainConfig, step: int) -> float:
    """Multiplier of the learning rate for optimizer step ``step`` (0-based, as LambdaLR counts)."""
    warmup = int(config.warmup_frac * config.steps)
    if step < warmup:
        return (step + 1) / warmup
    if config.schedule == "constant":
        return 1.0
    progress = (step - warmup) / max(1, config.steps - warmup)
    if config.schedule == "linear":
        return max(0.0, 1.0 - progress)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def train(model, tokenizer, config: TrainConfig, run_dir: str | os.PathLike | None = None, *,
          vocabulary: Sequence[str] | None = None, resume: bool = True, progress: bool = True,
          on_step: Callable[[int, float], None] | None = None) -> TrainResult:
    """Train ``model`` (in place) on ``config.task``; checkpoints go to ``run_dir``.

    With ``resume`` and a checkpoint in ``run_dir`` the run continues from it (its config must
    match, apart from evaluation/checkpoint intervals). ``on_step(step, loss)`` runs after every
    optimizer step and its checkpoint; an exception there stops training like a kill would.
    Seeds the global RNGs (for dropout) when starting fresh."""
    from .vocab import single_token_vocabulary

    vocabulary = tuple(vocabulary or single_token_vocabulary(tokenizer, ALNUM))
    check_lengths(config, vocabulary)
    prepend_bos = config.prompt_config(tokenizer_adds_bos(tokenizer)).prepend_bos
    device = next(model.parameters()).device
    autocast = autocast_context(device, config.precision)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    _check_positions(model, config)

    optimizer = _optimizer(model, config)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(config, s))
    scaler = torch.amp.GradScaler(device.type) if config.precision == "fp16" else None

    checkpoint_path = Path(run_dir) / CHECKPOINT_NAME if run_dir is not None else None
    history: list[dict] = []
    losses: list[tuple[int, float]] = []
    start, resumed_from, stopped = 0, None, False
    if resume and checkpoint_path is not None and checkpoint_path.exists():
        start, history, losses, stopped = _restore(checkpoint_path, model, optimizer, scheduler, scaler, config)
        resumed_from = start
        logger.info("resumed %s from step %d", checkpoint_path, start)
    else:
        torch.manual_seed(config.seed)
        random.seed(config.seed)

    def evaluate(step: int, train_loss: float) -> None:
        for split, lengths in (("id", config.id_lengths), ("ood", config.ood_lengths)):
            for row in evaluate_lengths(model, tokenizer, config, split, lengths, vocabulary, prepend_bos):
                history.append({"step": step, **row, "train_loss": train_loss})

    def checkpoint(step: int) -> None:
        if checkpoint_path is None:
            return
        save_checkpoint(checkpoint_path, {
            "step": step, "config": config.as_dict(), "model": trainable_state(model),
            "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
            "scaler": scaler.state_dict() if scaler is not None else None, "rng": _rng_state(),
            "history": history, "losses": losses, "stopped": stopped,
        })

    if start == 0 and config.eval_examples:
        evaluate(0, float("nan"))  # the baseline: what the model did before any update
    model.train()
    bar = tqdm(total=config.steps, initial=start, desc=f"train {config.task}", disable=not progress,
               dynamic_ncols=True)
    step = start
    try:
        while step < config.steps and not stopped:
            step += 1
            loss = _optimizer_step(model, config, step, tokenizer, vocabulary, prepend_bos, pad_id, optimizer,
                                   scheduler, scaler, autocast)
            losses.append((step, loss))
            if config.eval_examples and (step % config.eval_every == 0 or step == config.steps):
                since = [l for s, l in losses if s > step - config.eval_every]
                evaluate(step, sum(since) / len(since))
                stopped = _reached(config, history, step) and step < config.steps
            if step % config.checkpoint_every == 0 or step == config.steps or stopped:
                checkpoint(step)
            bar.update(1)
            bar.set_postfix(_postfix(loss, history), refresh=False)
            if on_step is not None:
                on_step(step, loss)
    finally:
        bar.close()
    model.eval()
    return TrainResult(history, losses, step, resumed_from, stopped)


def _optimizer_step(model, config: TrainConfig, step: int, tokenizer, vocabulary, prepend_bos: bool, pad_id: int,
                    optimizer, scheduler, scaler, autocast) -> float:
    items = training_items(config, step, tokenizer, vocabulary, prepend_bos)
    micro = [items[i : i + config.micro_batch] for i in range(0, len(items), config.micro_batch)]
    batches = [collate(m, pad_id, config.max_position is not None, config.max_position) for m in micro]
    normaliser = sum(b.n_targets for b in batches)
    total = 0.0
    for batch in batches:
        loss = batch_loss(model, batch, normaliser, autocast)
        (scaler.scale(loss) if scaler is not None else loss).backward()
        total += loss.item()
    if scaler is not None:
        scaler.unscale_(optimizer)
    if config.max_grad_norm:
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], config.max_grad_norm)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return total


def _reached(config: TrainConfig, history: list[dict], step: int) -> bool:
    if config.stop_at_accuracy is None:
        return False
    rows = [r for r in history if r["step"] == step and r["split"] == "id"]
    return bool(rows) and all(r["accuracy"] >= config.stop_at_accuracy for r in rows)


def _postfix(loss: float, history: list[dict]) -> dict:
    postfix = {"loss": f"{loss:.3f}"}
    if history:
        last = history[-1]["step"]
        for split in ("id", "ood"):
            accs = [r["accuracy"] for r in history if r["step"] == last and r["split"] == split]
            if accs:
                postfix[f"{split}_acc"] = f"{sum(accs) / len(accs):.2f}"
    return postfix


def _restore(path: Path, model, optimizer, scheduler, scaler, config: TrainConfig):
    payload = torch.load(path, map_location="cpu", weights_only=False)
    saved, current = _comparable(payload["config"]), _comparable(config.as_dict())
    if saved != current:
        diff = {k: (saved.get(k), current.get(k)) for k in set(saved) | set(current) if saved.get(k) != current.get(k)}
        raise ValueError(f"checkpoint {path} was made with a different configuration {diff} "
                         f"(saved, now); pass resume=False (--no-resume) or another run folder")
    params = dict(model.named_parameters())
    missing = [n for n in payload["model"] if n not in params]
    if missing:
        raise ValueError(f"checkpoint {path} holds parameters this model lacks: {missing[:5]}")
    with torch.no_grad():
        for name, value in payload["model"].items():
            params[name].copy_(value)
    optimizer.load_state_dict(payload["optimizer"])
    scheduler.load_state_dict(payload["scheduler"])
    if scaler is not None and payload.get("scaler") is not None:
        scaler.load_state_dict(payload["scaler"])
    _set_rng_state(payload["rng"])
    return payload["step"], payload["history"], payload["losses"], payload.get("stopped", False)


def _check_positions(model, config: TrainConfig) -> None:
    if config.max_position is None:
        return
    cfg = _base_model(model).config
    limit = getattr(cfg, "n_positions", None) or getattr(cfg, "max_position_embeddings", None)
    if limit is not None and config.max_position > limit:
        raise ValueError(f"max_position={config.max_position} exceeds the model's {limit} positions")


# --------------------------------------------------------------------------- the whole run


@dataclass
class FinetuneResult:
    result: TrainResult
    table: list[Path]
    adapter: Path | None = None
    model_dir: Path | None = None
    memory: MemoryEstimate | None = None
    info: dict = field(default_factory=dict)


def model_label(name: str) -> str:
    """A file-name-safe short name: ``openai-community/gpt2-xl`` -> ``gpt2-xl``."""
    from .models import ALIASES

    resolved = ALIASES.get(name.lower(), name)
    return Path(resolved.rstrip("/")).name or "model"


def _meta_model(name: str):
    """The model built on the meta device (no weights read) when ``name`` is a local checkpoint,
    so that a plan too large for the device fails before gigabytes are loaded."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from .models import ALIASES, EMBEDDED_MODEL, TINY_MODELS, local_checkpoint

    resolved = ALIASES.get(name.lower(), name)
    if resolved == EMBEDDED_MODEL or resolved in TINY_MODELS:
        return None
    checkpoint = local_checkpoint(resolved)
    if checkpoint is None:
        return None
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(checkpoint))
    return model, AutoTokenizer.from_pretrained(checkpoint)


def plan_memory(model, tokenizer, config: TrainConfig, weight_bytes: int,
                vocabulary: Sequence[str] | None = None) -> MemoryEstimate:
    """The estimate for ``config`` on ``model`` (real or meta), at the longest training length."""
    from .adapters import lora_parameter_count
    from .vocab import single_token_vocabulary

    vocabulary = tuple(vocabulary or single_token_vocabulary(tokenizer, ALNUM))
    shape = ModelShape.of(model)
    n_trainable = lora_parameter_count(model, config.lora) if config.lora else shape.n_params
    longest = replace(config, train_lengths=(max(config.train_lengths),), batch_size=config.grad_accum)
    prepend_bos = config.prompt_config(tokenizer_adds_bos(tokenizer)).prepend_bos
    seq_len = max(len(it.ids) for it in training_items(longest, 0, tokenizer, vocabulary, prepend_bos))
    return estimate_training_memory(shape, n_trainable, seq_len, config.micro_batch, weight_bytes,
                                    config.precision, config.gradient_checkpointing)


def finetune(model_name: str, config: TrainConfig, *, run_dir: str | os.PathLike | None = None,
             results_dir: str | os.PathLike = "results", device: str | None = None, dtype: str | None = None,
             adapter_out: str | os.PathLike | None = None, save_model: bool = False,
             memory_budget_gib: float | None = None, resume: bool = True, progress: bool = True,
             tag: str | None = None, command: str | None = None) -> FinetuneResult:
    """Load ``model_name``, check memory, train, and write ``results/finetune_<model>_<task>.csv``.

    ``config.lora`` trains an adapter (saved to ``adapter_out``) instead of every weight. The
    memory check runs before weights are loaded for local checkpoints (GPT-2 XL) and refuses a
    plan that cannot fit, with the arithmetic in the message."""
    from .models import load_hf_model, resolve_device, resolve_dtype
    from .results import write_table

    torch_device = resolve_device(device)
    weight_dtype = resolve_dtype(dtype)
    weight_bytes = torch.tensor([], dtype=weight_dtype).element_size()
    budget = int(memory_budget_gib * GIB) if memory_budget_gib is not None else None
    label = model_label(model_name)
    what = f"{label} {'LoRA' if config.lora else 'full'} fine-tuning"

    memory = None
    meta = _meta_model(model_name)
    if meta is not None:
        memory = plan_memory(*meta, config, weight_bytes)
        check_memory(memory, torch_device, budget, what)
        del meta
    model, tokenizer = load_hf_model(model_name, dtype=weight_dtype)
    if memory is None:
        memory = plan_memory(model, tokenizer, config, weight_bytes)
        check_memory(memory, torch_device, budget, what)
    logger.info("%s: estimated memory %s", what, memory.describe())
    if weight_dtype != torch.float32 and config.lr < 1e-4:
        logger.warning("training %s weights at lr=%g: updates smaller than the dtype's resolution are lost; "
                       "prefer fp32 weights with --precision bf16", weight_dtype, config.lr)

    model = model.to(torch_device)
    if config.gradient_checkpointing:
        model.config.use_cache = False
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if config.lora is not None:
        from .adapters import add_lora

        model = add_lora(model, config.lora)
    else:
        model.requires_grad_(True)

    run_dir = Path(run_dir) if run_dir is not None else Path(results_dir) / "runs" / f"finetune_{label}_{config.task}{'_' + tag if tag else ''}"
    result = train(model, tokenizer, config, run_dir, resume=resume, progress=progress)

    stem = Path(results_dir) / f"finetune_{label}_{config.task}{'_' + tag if tag else ''}"
    method = "lora" if config.lora else "full"
    rows = [{"model": label, "task": config.task, "method": method, **row} for row in result.history]
    columns = ["model", "task", "method", "step", "split", "length", "accuracy", "loss", "train_loss",
               "token_accuracy", "n_examples", "stderr"]
    command = command or " ".join(shlex.quote(a) for a in sys.argv)
    info = run_info(label, config, result, memory, command)
    table = write_table(rows, stem, columns=columns, metadata=info)

    adapter_path = model_dir = None
    if config.lora is not None and adapter_out is not None:
        from .adapters import save_adapter

        adapter_path = save_adapter(model, adapter_out, info=info, base_model=label)
        write_adapter_readme(adapter_path, info)
    if save_model:
        model_dir = run_dir / "model"
        to_save = model.merge_and_unload() if config.lora is not None else model
        to_save.save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)
    return FinetuneResult(result, table, adapter_path, model_dir, memory, info)


def accuracy_summary(result: TrainResult, step: int) -> dict[str, dict[int, float]]:
    """``{"id": {length: accuracy}, "ood": {...}}`` at one evaluation step."""
    summary: dict[str, dict[int, float]] = {}
    for row in result.evaluations(step):
        summary.setdefault(row["split"], {})[row["length"]] = row["accuracy"]
    return summary


def run_info(label: str, config: TrainConfig, result: TrainResult, memory: MemoryEstimate | None,
             command: str) -> dict:
    steps = sorted({row["step"] for row in result.history})
    return {
        "base_model": label, "task": config.task, "command": command, "seed": config.seed,
        "config": config.as_dict(), "final_step": result.final_step, "stopped_early": result.stopped_early,
        "before": accuracy_summary(result, steps[0]) if steps else {},
        "after": accuracy_summary(result, steps[-1]) if steps else {},
        "after_step": steps[-1] if steps else None,
        "memory_estimate": memory.describe() if memory else None,
        "scoring": "teacher-forced exact match (interp.evaluate.evaluate_task), answer must end with the line's end marker",
    }


def write_adapter_readme(path: Path, info: dict) -> Path:
    from .results import atomic_write_text

    cfg = info["config"]
    lines = [
        f"# LoRA adapter: {info['base_model']} on {info['task']}", "",
        f"Trained by `{info['command']}` (seed {info['seed']}, {info['final_step']} steps, "
        f"batch {cfg['batch_size']}, lr {cfg['lr']}, rank {cfg['lora']['rank']} on "
        f"{', '.join(cfg['lora']['target_modules'] or ['attention projections'])}).",
        f"Training lengths {min(cfg['train_lengths'])}-{max(cfg['train_lengths'])}, "
        f"{cfg['n_shots']}-shot `{cfg['template']}` prompts (the format of interp.prompts that every analysis uses).",
        "", "Use it with any analysis: `--adapter " + path.name + "`, or `load_model(..., adapter=\"" + path.name + "\")`.",
        "", f"Exact match ({info['scoring']}), {cfg['eval_examples']} examples per length, eval seed {cfg['eval_seed']}:", "",
        "| split | length | before | after |", "|---|---|---|---|",
    ]
    for split in ("id", "ood"):
        for length, after in info["after"].get(split, {}).items():
            before = info["before"].get(split, {}).get(length, float("nan"))
            lines.append(f"| {split} | {length} | {before:.2f} | {after:.2f} |")
    return atomic_write_text(path / "README.md", "\n".join(lines) + "\n")
