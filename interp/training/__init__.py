"""Fine-tuning a causal LM on one task, with resumable checkpoints and a memory check up front.

The model is a plain Hugging Face model (or one wrapped by ``peft`` for LoRA), never the bridge:
training needs autograd through the HF modules. Evaluation during training goes through the
project's own ``interp.measure.evaluate.evaluate_task`` by way of [`HFForward`][interp.training.evaluation.HFForward], which shows an HF
model the way the evaluators see a bridge (the [`interp.core.lm.LanguageModel`][interp.core.lm.LanguageModel] protocol), so
training and every analysis score exactly alike.

Training data is a pure function of ``(seed, step)``: each step's examples, demonstrations and
position offsets come from generators seeded by the step number. A run killed at any point and
resumed from its last checkpoint (weights, AdamW, scheduler, RNG states, history) therefore
replays the same batches and ends with the same weights as a run never interrupted.

Modules: ``config``, ``data``, ``evaluation``, ``memory``, ``checkpoint``, ``loop``; the fine-tuning
experiment itself is [`interp.experiments.finetune`][interp.experiments.finetune].
"""

from interp.core.naming import model_label
from interp.training.checkpoint import CHECKPOINT_NAME, CheckpointUnreadable, read_checkpoint, save_checkpoint, trainable_state
from interp.training.config import DEFAULT_LENGTHS, PRECISIONS, SCHEDULES, Precision, TrainConfig, check_lengths
from interp.training.data import IGNORE_INDEX, Batch, TrainItem, batch_loss, collate, end_token_id, training_items, training_prompts
from interp.training.evaluation import HFForward, LengthScore, autocast_context, evaluate_lengths
from interp.training.loop import EvaluationRow, TrainResult, lr_factor, train
from interp.training.memory import (GIB, InsufficientMemoryError, MemoryEstimate, check_memory, device_memory_bytes,
                     estimate_training_memory, plan_memory)

__all__ = [
    "CHECKPOINT_NAME", "DEFAULT_LENGTHS", "GIB", "IGNORE_INDEX", "PRECISIONS", "SCHEDULES", "Batch", "CheckpointUnreadable",
    "EvaluationRow", "HFForward", "LengthScore", "InsufficientMemoryError", "MemoryEstimate", "Precision", "TrainConfig",
    "TrainItem", "TrainResult", "autocast_context", "batch_loss", "check_lengths", "check_memory",
    "collate", "device_memory_bytes", "end_token_id", "estimate_training_memory", "evaluate_lengths", "lr_factor", "model_label", "plan_memory", "read_checkpoint", "save_checkpoint", "train",
    "trainable_state", "training_items", "training_prompts", ]
