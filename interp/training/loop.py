"""The training loop: AdamW with the HF Trainer's conventions, a warmup-then-decay schedule,
gradient accumulation, optional autocast, evaluation and checkpoints at fixed intervals."""

from __future__ import annotations

import logging
import math
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from interp.measure.batching import pad_token_id
from interp.models import tokenizer_adds_bos
from interp.data.tasks import ALNUM
from interp.data.vocab import single_token_vocabulary
from interp.training.checkpoint import (CHECKPOINT_NAME, check_run_dir, find_checkpoint, restore, rng_state,
                                        save_checkpoint, trainable_state)
from interp.training.config import TrainConfig, check_lengths
from interp.training.data import base_model, batch_loss, collate, training_items
from interp.training.evaluation import autocast_context, evaluate_lengths

logger = logging.getLogger(__name__)


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
    vocabulary = tuple(vocabulary or single_token_vocabulary(tokenizer, ALNUM))
    check_lengths(config, vocabulary)
    prepend_bos = config.prompt_config(tokenizer_adds_bos(tokenizer)).prepend_bos
    device = next(model.parameters()).device
    autocast = autocast_context(device, config.precision)
    pad_id = pad_token_id(tokenizer)
    _check_positions(model, config)
    check_run_dir(run_dir)

    optimizer = _optimizer(model, config)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(config, s))
    scaler = torch.amp.GradScaler(device.type) if config.precision == "fp16" else None

    checkpoint_path = Path(run_dir) / CHECKPOINT_NAME if run_dir is not None else None
    found = find_checkpoint(Path(run_dir)) if resume and run_dir is not None else None
    start, history, losses, stopped = _starting_point(found, model, optimizer, scheduler, scaler, config)
    resumed_from = start if found is not None else None

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
            "scaler": scaler.state_dict() if scaler is not None else None, "rng": rng_state(),
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
            check_finite_loss(loss, step, config)
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


def _starting_point(found: Path | None, model, optimizer, scheduler, scaler, config: TrainConfig):
    """(step, history, losses, stopped) from the checkpoint ``found``, or a fresh, seeded start."""
    if found is None:
        torch.manual_seed(config.seed)
        random.seed(config.seed)
        return 0, [], [], False
    start, history, losses, stopped = restore(found, model, optimizer, scheduler, scaler, config)
    logger.info("resumed %s from step %d", found, start)
    return start, history, losses, stopped


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


class TrainingDiverged(ValueError):
    """The training loss became NaN or infinite: the weights are ruined from that step on."""


def check_finite_loss(loss: float, step: int, config: TrainConfig) -> None:
    """Stop a run whose loss is no longer a number, before that step is checkpointed.

    >>> check_finite_loss(2.5, 1, TrainConfig())
    """
    if not math.isfinite(loss):
        raise TrainingDiverged(f"training diverged: the loss is {loss} at step {step} (lr={config.lr:g}, "
                               f"weight_decay={config.weight_decay:g}, max_grad_norm={config.max_grad_norm:g}); "
                               f"nothing after the last checkpoint was kept: lower --lr and start again")


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


def _check_positions(model, config: TrainConfig) -> None:
    if config.max_position is None:
        return
    cfg = base_model(model).config
    limit = getattr(cfg, "n_positions", None) or getattr(cfg, "max_position_embeddings", None)
    if limit is not None and config.max_position > limit:
        raise ValueError(f"max_position={config.max_position} exceeds the model's {limit} positions")
