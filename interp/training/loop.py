"""The training loop: AdamW with the HF Trainer's conventions, a warmup-then-decay schedule,
gradient accumulation, optional autocast, evaluation and checkpoints at fixed intervals."""

from __future__ import annotations

import logging
import math
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from interp.core.tables import row_from_mapping
from interp.measure.batching import pad_token_id
from interp.models import tokenizer_adds_bos
from interp.data.tasks import ALNUM
from interp.data.vocab import single_token_vocabulary
from interp.training.checkpoint import (CHECKPOINT_NAME, WAY_OUT, CheckpointUnreadable, check_run_dir, find_checkpoint,
                                        restore, rng_state, save_checkpoint, trainable_state)
from interp.training.config import TrainConfig, check_lengths
from interp.training.data import base_model, batch_loss, collate, training_items
from interp.training.evaluation import LengthScore, autocast_context, evaluate_lengths

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvaluationRow:
    """One length's exact match at one evaluation of a run, with the mean training loss since the last."""

    step: int
    split: str
    length: int
    accuracy: float
    loss: float
    token_accuracy: float
    n_examples: int
    stderr: float
    train_loss: float

    @classmethod
    def of(cls, step: int, score: LengthScore, train_loss: float) -> "EvaluationRow":
        return cls(step=step, **asdict(score), train_loss=train_loss)


@dataclass
class TrainResult:
    history: list[EvaluationRow]  # every evaluation, in order
    losses: list[tuple[int, float]]  # (step, training loss) for every optimizer step
    final_step: int
    resumed_from: int | None = None
    stopped_early: bool = False

    def evaluations(self, step: int | None = None) -> list[EvaluationRow]:
        """The rows of one evaluation (the last one by default)."""
        if not self.history:
            return []
        step = self.history[-1].step if step is None else step
        return [row for row in self.history if row.step == step]


def _optimizer(model: torch.nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
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
    """Multiplier of the learning rate for optimizer step ``step`` (0-based, as LambdaLR counts).

    >>> config = TrainConfig(steps=10, warmup_frac=0.2)  # 2 warmup steps, then linear decay
    >>> [lr_factor(config, step) for step in (0, 1, 2, 6, 9)]
    [0.5, 1.0, 1.0, 0.5, 0.125]
    """
    warmup = int(config.warmup_frac * config.steps)
    if step < warmup:
        return (step + 1) / warmup
    if config.schedule == "constant":
        return 1.0
    progress = (step - warmup) / max(1, config.steps - warmup)
    if config.schedule == "linear":
        return max(0.0, 1.0 - progress)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


@dataclass
class _Run:
    """What a training run evaluates and checkpoints, and the history it has so far."""

    model: torch.nn.Module
    tokenizer: object
    config: TrainConfig
    vocabulary: tuple[str, ...]
    prepend_bos: bool
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    scaler: torch.amp.GradScaler | None
    checkpoint_path: Path | None
    history: list[EvaluationRow] = field(default_factory=list)
    losses: list[tuple[int, float]] = field(default_factory=list)
    stopped: bool = False

    def evaluate(self, step: int, train_loss: float) -> None:
        for split, lengths in (("id", self.config.id_lengths), ("ood", self.config.ood_lengths)):
            scores = evaluate_lengths(self.model, self.tokenizer, self.config, split, lengths, self.vocabulary,
                                      self.prepend_bos)
            self.history += [EvaluationRow.of(step, score, train_loss) for score in scores]

    def checkpoint(self, step: int) -> None:
        if self.checkpoint_path is None:
            return
        save_checkpoint(self.checkpoint_path, {
            "step": step, "config": self.config.as_dict(), "model": trainable_state(self.model),
            "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler is not None else None, "rng": rng_state(),
            "history": [asdict(row) for row in self.history], "losses": self.losses, "stopped": self.stopped,
        })


def train(model: torch.nn.Module, tokenizer, config: TrainConfig, run_dir: str | os.PathLike | None = None, *,
          vocabulary: Sequence[str] | None = None, resume: bool = True, progress: bool = False,
          on_step: Callable[[int, float], None] | None = None) -> TrainResult:
    """Train ``model`` (in place) on ``config.task``; checkpoints go to ``run_dir``.

    With ``resume`` and a checkpoint in ``run_dir`` the run continues from it (its config must
    match, apart from evaluation/checkpoint intervals). ``on_step(step, loss)`` runs after every
    optimizer step and its checkpoint; an exception there stops training like a kill would.
    Seeds the global RNGs (for dropout) when starting fresh.

    >>> result = train(model, tokenizer, TrainConfig(task="UF", steps=10), "runs/uf")  # doctest: +SKIP
    >>> result.evaluations()[0].accuracy  # doctest: +SKIP
    0.9
    """
    vocabulary = tuple(vocabulary or single_token_vocabulary(tokenizer, ALNUM))
    check_lengths(config, vocabulary)
    prepend_bos = config.prompt_config(tokenizer_adds_bos(tokenizer)).prepend_bos
    autocast = autocast_context(next(model.parameters()).device, config.precision)
    pad_id = pad_token_id(tokenizer)
    _check_positions(model, config)
    check_run_dir(run_dir)
    run = _new_run(model, tokenizer, config, vocabulary, prepend_bos, run_dir)
    found = find_checkpoint(Path(run_dir)) if resume and run_dir is not None else None
    start, run.history, run.losses, run.stopped = _starting_point(found, run, config)
    if start == 0 and config.eval_examples:
        run.evaluate(0, float("nan"))  # the baseline: what the model did before any update
    model.train()
    bar = tqdm(total=config.steps, initial=start, desc=f"train {config.task}", disable=not progress,
               dynamic_ncols=True)
    step = start
    try:
        while step < config.steps and not run.stopped:
            step += 1
            loss = _optimizer_step(model, config, step, tokenizer, vocabulary, prepend_bos, pad_id, run.optimizer,
                                   run.scheduler, run.scaler, autocast)
            check_finite_loss(loss, step, config)
            run.losses.append((step, loss))
            evaluates = config.eval_examples and (step % config.eval_every == 0 or step == config.steps)
            if evaluates or step % config.checkpoint_every == 0 or step == config.steps:
                check_finite_weights(model, step, config)  # the last step's update has no later loss to show it
            if evaluates:
                since = [l for s, l in run.losses if s > step - config.eval_every]
                run.evaluate(step, sum(since) / len(since))
                check_finite_evaluation(run.history, step, config)
                run.stopped = _reached(config, run.history, step) and step < config.steps
            if step % config.checkpoint_every == 0 or step == config.steps or run.stopped:
                run.checkpoint(step)
            bar.update(1)
            bar.set_postfix(_postfix(loss, run.history), refresh=False)
            if on_step is not None:
                on_step(step, loss)
    finally:
        bar.close()
    model.eval()
    return TrainResult(run.history, run.losses, step, start if found is not None else None, run.stopped)


def _new_run(model: torch.nn.Module, tokenizer, config: TrainConfig, vocabulary: tuple[str, ...], prepend_bos: bool,
             run_dir: str | os.PathLike | None) -> _Run:
    """The optimizer (AdamW), its schedule and, for fp16, the gradient scaler of a run."""
    optimizer = _optimizer(model, config)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(config, s))
    device = next(model.parameters()).device
    scaler = torch.amp.GradScaler(device.type) if config.precision == "fp16" else None
    checkpoint_path = Path(run_dir) / CHECKPOINT_NAME if run_dir is not None else None
    return _Run(model, tokenizer, config, vocabulary, prepend_bos, optimizer, scheduler, scaler, checkpoint_path)


def _starting_point(found: Path | None, run: _Run,
                    config: TrainConfig) -> tuple[int, list[EvaluationRow], list[tuple[int, float]], bool]:
    """(step, history, losses, stopped) from the checkpoint ``found``, or a fresh, seeded start."""
    if found is None:
        torch.manual_seed(config.seed)
        random.seed(config.seed)
        return 0, [], [], False
    start, history, losses, stopped = restore(found, run.model, run.optimizer, run.scheduler, run.scaler, config)
    try:
        rows = [row_from_mapping(EvaluationRow, row) for row in history]
    except TypeError as err:
        raise CheckpointUnreadable(f"checkpoint {found} holds a damaged history ({err}); {WAY_OUT}") from None
    logger.info("resumed %s from step %d", found, start)
    return start, rows, losses, stopped


def _optimizer_step(model: torch.nn.Module, config: TrainConfig, step: int, tokenizer, vocabulary, prepend_bos: bool, pad_id: int,
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


class TrainingDiverged(ValueError):
    """The training loss became NaN or infinite: the weights are ruined from that step on."""


def check_finite_loss(loss: float, step: int, config: TrainConfig) -> None:
    """Stop a run whose loss is no longer a number, before that step is checkpointed.

    >>> check_finite_loss(2.5, 1, TrainConfig())
    """
    if not math.isfinite(loss):
        raise _diverged(f"the loss is {loss} at step {step}", config)


def check_finite_weights(model: torch.nn.Module, step: int, config: TrainConfig) -> None:
    """Stop a run whose update left weights that are not numbers, before they are checkpointed.

    >>> check_finite_weights(torch.nn.Linear(2, 1), 1, TrainConfig())
    """
    bad = [name for name, p in model.named_parameters() if p.requires_grad and not torch.isfinite(p).all()]
    if bad:
        raise _diverged(f"{len(bad)} weight tensors are not finite after step {step} (e.g. {bad[0]})", config)


def check_finite_evaluation(history: list[EvaluationRow], step: int, config: TrainConfig) -> None:
    """Stop a run whose model scores its evaluation with a loss that is not a number.

    >>> check_finite_evaluation([], 1, TrainConfig())
    """
    bad = [row for row in history if row.step == step and not math.isfinite(row.loss)]
    if bad:
        raise _diverged(f"the evaluation loss is {bad[0].loss} at step {step} ({bad[0].split} length "
                        f"{bad[0].length})", config)


def _diverged(what: str, config: TrainConfig) -> TrainingDiverged:
    return TrainingDiverged(f"training diverged: {what} (lr={config.lr:g}, weight_decay={config.weight_decay:g}, "
                            f"max_grad_norm={config.max_grad_norm:g}); nothing after the last checkpoint was kept: "
                            f"lower --lr and start again")


def _reached(config: TrainConfig, history: list[EvaluationRow], step: int) -> bool:
    if config.stop_at_accuracy is None:
        return False
    rows = [r for r in history if r.step == step and r.split == "id"]
    return bool(rows) and all(r.accuracy >= config.stop_at_accuracy for r in rows)


def _postfix(loss: float, history: list[EvaluationRow]) -> dict:
    postfix = {"loss": f"{loss:.3f}"}
    if history:
        last = history[-1].step
        for split in ("id", "ood"):
            accs = [r.accuracy for r in history if r.step == last and r.split == split]
            if accs:
                postfix[f"{split}_acc"] = f"{sum(accs) / len(accs):.2f}"
    return postfix


def _check_positions(model: torch.nn.Module, config: TrainConfig) -> None:
    if config.max_position is None:
        return
    cfg = base_model(model).config
    limit = getattr(cfg, "n_positions", None) or getattr(cfg, "max_position_embeddings", None)
    if limit is not None and config.max_position > limit:
        raise ValueError(f"max_position={config.max_position} exceeds the model's {limit} positions")
