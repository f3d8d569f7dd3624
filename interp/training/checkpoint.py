"""Checkpoints of a training run: trainable weights, optimizer, scheduler, RNG states and history,
written atomically, so a killed run resumes where it stopped and ends with the same weights.

A checkpoint is one safetensors file: the tensors (weights, AdamW moments, RNG states) as
tensors and everything else as JSON in its header ([`tensor_tree`][interp.training.tensor_tree]). Nothing in it is a
pickle, so a file planted in a run folder can at worst be refused, never run. Checkpoints of
older versions (``checkpoint.pt``) are read with ``torch.load(weights_only=True)``, torch's
loader that accepts tensors and plain containers only.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import Tensor

from interp.core.tables import atomic_path
from interp.core.weights_files import READ_ERRORS, first_line, unreadable_reason
from interp.training.config import TrainConfig
from interp.training.tensor_tree import pack, unpack

CHECKPOINT_NAME = "checkpoint.safetensors"
LEGACY_CHECKPOINT_NAME = "checkpoint.pt"
FORMAT = "interp.training checkpoint 1"
REQUIRED = ("step", "config", "model", "optimizer", "scheduler", "rng")
# Fields a resumed run may change without changing what it computes.
LOGISTICS = ("eval_every", "eval_batch_size", "checkpoint_every")
WAY_OUT = "delete it or start afresh with --no-resume (resume=False)"


def trainable_state(model: torch.nn.Module) -> dict[str, Tensor]:
    """The parameters training changes (all of them, or just the adapter's).

    >>> model = torch.nn.Linear(2, 1)
    >>> _ = model.bias.requires_grad_(False)
    >>> list(trainable_state(model))
    ['weight']
    """
    return {name: p.detach().cpu().clone() for name, p in model.named_parameters() if p.requires_grad}


def rng_state() -> dict:
    """The state of every generator training draws from (Python's, torch's, CUDA's), to checkpoint.

    >>> state = rng_state()
    >>> first = torch.rand(1)
    >>> torch.set_rng_state(state["torch"])
    >>> torch.equal(torch.rand(1), first)
    True
    """
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def check_run_dir(run_dir: str | Path | None, argument: str = "run_dir") -> None:
    """Refuse a run folder that names a file (or lies under one) before any training starts.

    >>> check_run_dir("results/runs/finetune_tiny-gpt2_UF")
    """
    if run_dir is None:
        return
    path = Path(run_dir)
    for folder in (path, *path.parents):
        if folder.exists():
            if not folder.is_dir():
                raise ValueError(f"{argument}: {path} cannot be a run folder: {folder} is a file")
            break
    for name in (CHECKPOINT_NAME, LEGACY_CHECKPOINT_NAME):  # a checkpoint could never be written over these
        if (path / name).exists() and not (path / name).is_file():
            raise ValueError(f"{argument}: {path / name} is not a file, so no checkpoint can be written there; "
                             f"remove it or choose another run folder")


def save_checkpoint(path: Path, payload: dict) -> None:
    """Write ``payload`` to a temporary file renamed over ``path``: a kill mid-write leaves the
    previous checkpoint intact.

    >>> save_checkpoint(Path(run_dir) / CHECKPOINT_NAME, {"step": 3, "model": trainable_state(model), ...})  # doctest: +SKIP
    """
    tensors: dict[str, Tensor] = {}
    tree = json.dumps(pack(payload, tensors))
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata={"format": FORMAT, "payload": tree})


def find_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint a run folder holds (this version's, else an older version's), or None.

    >>> find_checkpoint(Path("/nonexistent")) is None
    True
    """
    for name in (CHECKPOINT_NAME, LEGACY_CHECKPOINT_NAME):
        if (Path(run_dir) / name).is_file():
            return Path(run_dir) / name
    return None


def _comparable(config: dict) -> dict:
    return {k: v for k, v in config.items() if k not in LOGISTICS}


class CheckpointUnreadable(ValueError):
    """A checkpoint file that cannot be read back (truncated, overwritten, not a checkpoint)."""


def _read_safetensors(path: Path) -> dict:
    try:
        with safe_open(str(path), framework="pt", device="cpu") as stored:
            metadata = stored.metadata() or {}
            tensors = {key: stored.get_tensor(key) for key in stored.keys()}
    except READ_ERRORS as err:
        raise CheckpointUnreadable(f"checkpoint {path} cannot be read ({unreadable_reason(err)}); {WAY_OUT}") from None
    if metadata.get("format") != FORMAT:
        raise CheckpointUnreadable(f"checkpoint {path} is not a checkpoint of interp.training (no {FORMAT!r} mark); "
                                   f"{WAY_OUT}")
    try:
        return unpack(json.loads(metadata["payload"]), tensors)
    except (KeyError, ValueError, TypeError) as err:
        raise CheckpointUnreadable(f"checkpoint {path} has a damaged header ({first_line(err)}); {WAY_OUT}") from None


def _read_legacy(path: Path) -> dict:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - torch.load fails with UnpicklingError, EOFError, RuntimeError, ...
        raise CheckpointUnreadable(f"checkpoint {path} cannot be read ({unreadable_reason(err)}); {WAY_OUT}") from None


def read_checkpoint(path: Path) -> dict:
    """The payload of a checkpoint, or one clear error naming the file and the way out.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / CHECKPOINT_NAME
    >>> save_checkpoint(path, {"step": 3, "config": {}, "model": {"w": torch.ones(2)}, "optimizer": {},
    ...                        "scheduler": {}, "rng": {}})
    >>> payload = read_checkpoint(path)
    >>> payload["step"], payload["model"]
    (3, {'w': tensor([1., 1.])})
    >>> _ = path.write_bytes(b"not a checkpoint")
    >>> read_checkpoint(path)
    Traceback (most recent call last):
    interp.training.checkpoint.CheckpointUnreadable: checkpoint ... cannot be read (...); delete it or start afresh ...
    """
    path = Path(path)
    payload = _read_legacy(path) if path.suffix == ".pt" else _read_safetensors(path)
    missing = [k for k in REQUIRED if not isinstance(payload, dict) or k not in payload]
    if missing:
        raise CheckpointUnreadable(f"checkpoint {path} lacks {missing}: it is not a checkpoint of interp.training; "
                                   f"{WAY_OUT}")
    return payload


def restore(path: Path, model: torch.nn.Module, optimizer, scheduler, scaler, config: TrainConfig):
    """Load a checkpoint of this same configuration into the model, optimizer, scheduler, scaler
    and RNGs; returns ``(step, history, losses, stopped)`` for the run to go on from.

    >>> import tempfile
    >>> config = TrainConfig(task="UF")
    >>> model = torch.nn.Linear(2, 1)
    >>> optimizer = torch.optim.AdamW(model.parameters())
    >>> scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    >>> path = Path(tempfile.mkdtemp()) / CHECKPOINT_NAME
    >>> save_checkpoint(path, {"step": 3, "config": config.as_dict(), "model": {"weight": torch.zeros(1, 2)},
    ...                        "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
    ...                        "rng": rng_state(), "history": [], "losses": [(3, 0.5)]})
    >>> restore(path, model, optimizer, scheduler, None, config)
    (3, [], [(3, 0.5)], False)
    >>> model.weight.tolist()
    [[0.0, 0.0]]
    """
    payload = read_checkpoint(path)
    if not isinstance(payload["config"], dict):
        raise CheckpointUnreadable(f"checkpoint {path} holds no configuration table; {WAY_OUT}")
    saved, current = _comparable(payload["config"]), _comparable(config.as_dict())
    if saved != current:
        diff = {k: (saved.get(k), current.get(k)) for k in set(saved) | set(current) if saved.get(k) != current.get(k)}
        raise ValueError(f"checkpoint {path} was made with a different configuration {diff} "
                         f"(saved, now); pass resume=False (--no-resume) or another run folder")
    _check_step(path, payload["step"], config)
    _check_weights(path, payload["model"], dict(model.named_parameters()))
    _check_finite(path, "optimizer state", payload["optimizer"])
    try:  # what is left can only be refused by the loaders themselves
        optimizer.load_state_dict(payload["optimizer"])
        scheduler.load_state_dict(payload["scheduler"])
        if scaler is not None and payload.get("scaler") is not None:
            scaler.load_state_dict(payload["scaler"])
        _set_rng_state(payload["rng"])
        history, losses = list(payload["history"]), [(int(s), float(l)) for s, l in payload["losses"]]
    except (RuntimeError, TypeError, ValueError, KeyError, IndexError, AttributeError) as err:
        raise CheckpointUnreadable(f"checkpoint {path} holds a damaged optimizer, scheduler or RNG state "
                                   f"({type(err).__name__}: {first_line(err)}); {WAY_OUT}") from None
    with torch.no_grad():
        params = dict(model.named_parameters())
        for name, value in payload["model"].items():
            params[name].copy_(value)
    return payload["step"], history, losses, payload.get("stopped", False)


def _check_step(path: Path, step: object, config: TrainConfig) -> None:
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= config.steps:
        raise CheckpointUnreadable(f"checkpoint {path} has step {step!r}, expected an integer from 0 to "
                                   f"{config.steps}; {WAY_OUT}")


def _check_weights(path: Path, saved: object, params: dict[str, Tensor]) -> None:
    """Every saved weight is a finite tensor of a parameter this model has, in its shape."""
    if not isinstance(saved, dict):
        raise CheckpointUnreadable(f"checkpoint {path} holds no weights table; {WAY_OUT}")
    missing = [n for n in saved if n not in params]
    if missing:
        raise ValueError(f"checkpoint {path} holds parameters this model lacks: {missing[:5]}")
    for name, value in saved.items():
        if not isinstance(value, Tensor) or value.shape != params[name].shape:
            got = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
            raise CheckpointUnreadable(f"checkpoint {path}: weight {name} is {got} where the model's is "
                                       f"{tuple(params[name].shape)}; {WAY_OUT}")
    _check_finite(path, "weights", saved)


def _check_finite(path: Path, what: str, tree: object) -> None:
    """Refuse a checkpoint whose run had already diverged: resuming it would train on NaN."""
    bad = [name for name, tensor in _tensors(tree) if tensor.is_floating_point() and not torch.isfinite(tensor).all()]
    if bad:
        raise CheckpointUnreadable(f"checkpoint {path} holds non-finite {what} ({len(bad)} tensors, e.g. {bad[0]}): "
                                   f"the run it saved had diverged; {WAY_OUT}")


def _tensors(tree: object, path: str = "") -> list[tuple[str, Tensor]]:
    if isinstance(tree, Tensor):
        return [(path, tree)]
    if isinstance(tree, dict):
        return [t for key, value in tree.items() for t in _tensors(value, f"{path}.{key}".lstrip("."))]
    if isinstance(tree, (list, tuple)):
        return [t for i, value in enumerate(tree) for t in _tensors(value, f"{path}.{i}".lstrip("."))]
    return []
