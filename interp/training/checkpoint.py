"""Checkpoints of a training run: trainable weights, optimizer, scheduler, RNG states and history,
written atomically, so a killed run resumes where it stopped and ends with the same weights."""

from __future__ import annotations

import random
from pathlib import Path

import torch
from torch import Tensor

from interp.core.tables import atomic_path
from interp.training.config import TrainConfig

CHECKPOINT_NAME = "checkpoint.pt"
# Fields a resumed run may change without changing what it computes.
LOGISTICS = ("eval_every", "eval_batch_size", "checkpoint_every")


def trainable_state(model) -> dict[str, Tensor]:
    """The parameters training changes (all of them, or just the adapter's)."""
    return {name: p.detach().cpu().clone() for name, p in model.named_parameters() if p.requires_grad}


def rng_state() -> dict:
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
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
    return {k: v for k, v in config.items() if k not in LOGISTICS}


class CheckpointUnreadable(ValueError):
    """A checkpoint file that cannot be read back (truncated, overwritten, not a checkpoint)."""


def read_checkpoint(path: Path) -> dict:
    """The payload of a checkpoint, or one clear error naming the file and the way out."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=False)
        missing = [k for k in ("step", "config", "model", "optimizer", "scheduler", "rng") if k not in payload]
    except Exception as err:  # noqa: BLE001 - torch.load fails with EOFError, UnpicklingError, RuntimeError, ...
        raise CheckpointUnreadable(f"checkpoint {path} cannot be read ({type(err).__name__}: {err}); delete it or "
                                   f"start afresh with --no-resume (resume=False)") from None
    if missing:
        raise CheckpointUnreadable(f"checkpoint {path} lacks {missing}: it is not a checkpoint of interp.training; "
                                   f"delete it or start afresh with --no-resume (resume=False)")
    return payload


def restore(path: Path, model, optimizer, scheduler, scaler, config: TrainConfig):
    payload = read_checkpoint(path)
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
    set_rng_state(payload["rng"])
    return payload["step"], payload["history"], payload["losses"], payload.get("stopped", False)
