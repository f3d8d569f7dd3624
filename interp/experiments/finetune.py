"""A whole fine-tuning run: load, check memory, train, write the results table, save the adapter."""

from __future__ import annotations

import logging
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from interp.models.adapters import add_lora, save_adapter
from interp.models import (EMBEDDED_MODEL, TINY_MODELS, canonical_name, load_hf_model, local_checkpoint, resolve_device,
                      resolve_dtype)
from interp.core.naming import model_label, result_stem
from interp.core.tables import atomic_write_text, write_table
from interp.models.store import publish_folder
from interp.training.checkpoint import check_run_dir
from interp.training.config import TrainConfig
from interp.training.loop import TrainResult, train
from interp.training.memory import GIB, MemoryEstimate, check_memory, plan_memory

logger = logging.getLogger(__name__)


@dataclass
class FinetuneResult:
    result: TrainResult
    table: list[Path]
    adapter: Path | None = None
    model_dir: Path | None = None
    memory: MemoryEstimate | None = None
    info: dict = field(default_factory=dict)


def _meta_model(name: str):
    """The model built on the meta device (no weights read) when ``name`` is a local checkpoint,
    so that a plan too large for the device fails before gigabytes are loaded."""
    resolved = canonical_name(name)
    if resolved == EMBEDDED_MODEL or resolved in TINY_MODELS:
        return None
    checkpoint = local_checkpoint(resolved)
    if checkpoint is None:
        return None
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(checkpoint))
    return model, AutoTokenizer.from_pretrained(checkpoint)


def finetune(model_name: str, config: TrainConfig, *, run_dir: str | os.PathLike | None = None,
             results_dir: str | os.PathLike = "results", device: str | None = None, dtype: str | None = None,
             adapter_out: str | os.PathLike | None = None, save_model: bool = False,
             memory_budget_gib: float | None = None, resume: bool = True, progress: bool = False,
             tag: str | None = None, command: str | None = None) -> FinetuneResult:
    """Load ``model_name``, check memory, train, and write ``results/finetune_<model>_<task>.csv``.

    ``config.lora`` trains an adapter (saved to ``adapter_out``) instead of every weight. The
    memory check runs before weights are loaded for local checkpoints (GPT-2 XL) and refuses a
    plan that cannot fit, with the arithmetic in the message.

    >>> finetune("smollm2-135m", TrainConfig(task="UB", steps=200), device="cpu")  # doctest: +SKIP
    """
    label = model_label(model_name)
    stem = result_stem(results_dir, "finetune", model_name, variant=(config.task, tag or ""))
    run_dir = Path(run_dir) if run_dir is not None else Path(results_dir) / "runs" / stem.name
    check_run_dir(run_dir, "--run-dir")  # before any weight is loaded: a file there would fail only at the end
    check_run_dir(adapter_out, "--adapter-out")
    budget = int(memory_budget_gib * GIB) if memory_budget_gib is not None else None
    model, tokenizer, memory = _trainable_model(model_name, config, resolve_device(device), resolve_dtype(dtype), budget)

    result = train(model, tokenizer, config, run_dir, resume=resume, progress=progress)

    command = command or " ".join(shlex.quote(a) for a in sys.argv)
    info = _run_info(label, config, result, memory, command)
    table = _write_history(result, label, config, stem, info)
    adapter_path = model_dir = None
    if config.lora is not None and adapter_out is not None:
        adapter_path = save_adapter(model, adapter_out, info=info, base_model=label)
        _write_adapter_readme(adapter_path, info)
    if save_model:
        model_dir = _save_model(model, tokenizer, config, run_dir)
    return FinetuneResult(result, table, adapter_path, model_dir, memory, info)


def _trainable_model(model_name: str, config: TrainConfig, torch_device: torch.device, weight_dtype: torch.dtype,
                     budget: int | None) -> tuple[torch.nn.Module, object, MemoryEstimate]:
    """The model on its device, ready to train (LoRA-wrapped or every weight), after its memory
    plan was checked against ``budget`` (before loading weights where the checkpoint allows)."""
    weight_bytes = torch.tensor([], dtype=weight_dtype).element_size()
    what = f"{model_label(model_name)} {'LoRA' if config.lora else 'full'} fine-tuning"
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
        return add_lora(model, config.lora), tokenizer, memory
    model.requires_grad_(True)
    return model, tokenizer, memory


def _save_model(model: torch.nn.Module, tokenizer, config: TrainConfig, run_dir: Path) -> Path:
    """The trained model (LoRA merged in) and its tokenizer as ``run_dir/model``."""
    to_save = model.merge_and_unload() if config.lora is not None else model
    bad = [name for name, p in to_save.named_parameters() if not torch.isfinite(p).all()]
    if bad:  # a merged adapter can overflow where neither part did
        raise ValueError(f"--save-model: the trained model has non-finite weights ({len(bad)} tensors, e.g. "
                         f"{bad[0]}); nothing was saved to {run_dir / 'model'}")

    def write(folder: Path) -> None:
        to_save.save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    # published in one rename: a run killed while saving leaves no half-written model behind
    return publish_folder(run_dir / "model", write)


@dataclass(frozen=True)
class FinetuneRow:
    """One evaluation of a fine-tuning run at one length (a row of ``finetune_<model>_<task>``)."""

    model: str
    task: str
    method: str  # lora or full
    step: int
    split: str
    length: int
    accuracy: float
    loss: float
    train_loss: float
    token_accuracy: float
    n_examples: int
    stderr: float


def _write_history(result: TrainResult, label: str, config: TrainConfig, stem: Path, info: dict) -> list[Path]:
    """The run's evaluations as ``<stem>.{csv,json,md}``, with ``info`` as metadata."""
    method = "lora" if config.lora else "full"
    rows = [FinetuneRow(model=label, task=config.task, method=method, step=row.step, split=row.split,
                        length=row.length, accuracy=row.accuracy, loss=row.loss, train_loss=row.train_loss,
                        token_accuracy=row.token_accuracy, n_examples=row.n_examples, stderr=row.stderr)
            for row in result.history]
    return write_table(rows, stem, metadata=info)


def _accuracy_summary(result: TrainResult, step: int) -> dict[str, dict[int, float]]:
    """``{"id": {length: accuracy}, "ood": {...}}`` at one evaluation step."""
    summary: dict[str, dict[int, float]] = {}
    for row in result.evaluations(step):
        summary.setdefault(row.split, {})[row.length] = row.accuracy
    return summary


def _run_info(label: str, config: TrainConfig, result: TrainResult, memory: MemoryEstimate | None,
             command: str) -> dict:
    steps = sorted({row.step for row in result.history})
    return {
        "base_model": label, "task": config.task, "command": command, "seed": config.seed,
        "config": config.as_dict(), "final_step": result.final_step, "stopped_early": result.stopped_early,
        "before": _accuracy_summary(result, steps[0]) if steps else {},
        "after": _accuracy_summary(result, steps[-1]) if steps else {},
        "after_step": steps[-1] if steps else None,
        "memory_estimate": memory.describe() if memory else None,
        # a CPU run's trajectory depends on the thread count in its last digits (reductions split otherwise)
        "torch_threads": torch.get_num_threads(),
        "scoring": "teacher-forced exact match (interp.measure.evaluate.evaluate_task), answer must end with the line's end marker",
    }


def _write_adapter_readme(path: Path, info: dict) -> Path:
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
