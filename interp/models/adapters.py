"""Low-rank adapters (LoRA, via ``peft``): create them for any supported model, keep them in the
repo's ``adapters/`` folder, and merge them into a model before it is wrapped as a bridge.

Merging (rather than running the adapter beside the weights) means every hook, score and ablation
sees one ordinary model: ``load_model("smollm2-135m", adapter="ub")`` is just a model whose UB
baseline is above zero.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PreTrainedModel

from interp.core.weights_files import READ_ERRORS, unreadable_reason
from interp.models.folder import first_non_finite

ADAPTERS_DIR = Path(__file__).resolve().parents[2] / "adapters"
ADAPTER_INFO = "adapter_info.json"

# Attention projections by architecture family: the paper's mechanisms (induction and
# anti-induction) live in attention, so adapting q/k/v/o is enough and keeps adapters small.
_ATTENTION_TARGETS: tuple[tuple[str, ...], ...] = (
    ("q_proj", "k_proj", "v_proj", "o_proj"),  # Llama, Qwen2, SmolLM2, Mistral, Gemma
    ("attn.c_attn", "attn.c_proj"),  # GPT-2 (fused qkv; c_proj alone would also hit the MLP)
    ("query_key_value", "dense"),  # GPT-NeoX / Pythia
)


class AdapterNotFoundError(ValueError):
    """Raised when an adapter name or folder resolves to nothing."""


@dataclass(frozen=True)
class LoraSettings:
    """Shape of a LoRA adapter; ``target_modules=None`` picks the model's attention projections."""

    rank: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    target_modules: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.rank < 1:
            raise ValueError(f"LoRA rank={self.rank} must be >= 1")
        if not (math.isfinite(self.alpha) and self.alpha > 0):
            raise ValueError(f"LoRA alpha={self.alpha} must be a finite number > 0")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"LoRA dropout={self.dropout} must be in [0, 1)")


def _module_names(model: torch.nn.Module) -> list[str]:
    return [name for name, _ in model.named_modules()]


def _matches(name: str, target: str) -> bool:
    # peft's own rule: a target matches a module name exactly or as a dotted suffix
    return name == target or name.endswith("." + target)


def lora_target_modules(model: torch.nn.Module) -> tuple[str, ...]:
    """The attention projections of ``model``, as peft ``target_modules``.

    >>> from interp.models.tiny import tiny_hf_model
    >>> lora_target_modules(tiny_hf_model("tiny-llama")[0])
    ('q_proj', 'k_proj', 'v_proj', 'o_proj')
    """
    names = _module_names(model)
    for family in _ATTENTION_TARGETS:
        if all(any(_matches(n, t) for n in names) for t in family):
            return family
    raise ValueError(
        f"cannot tell which modules of {type(model).__name__} are attention projections; "
        f"pass LoraSettings(target_modules=(...)) naming them"
    )


def _is_gpt2_style(model: torch.nn.Module, targets: Sequence[str]) -> bool:
    """GPT-2 stores its projections as ``Conv1D`` (weights transposed), which peft must be told."""
    for name, module in model.named_modules():
        if any(_matches(name, t) for t in targets):
            return type(module).__name__ == "Conv1D"
    return False


def lora_config(model: torch.nn.Module, settings: LoraSettings = LoraSettings()):
    """A peft ``LoraConfig`` for causal-LM training of ``model``.

    >>> from interp.models.tiny import tiny_hf_model
    >>> lora_config(tiny_hf_model("tiny-llama")[0]).task_type == "CAUSAL_LM"
    True
    """
    from peft import LoraConfig, TaskType

    targets = settings.target_modules or lora_target_modules(model)
    return LoraConfig(task_type=TaskType.CAUSAL_LM, r=settings.rank, lora_alpha=settings.alpha,
                      lora_dropout=settings.dropout, target_modules=list(targets),
                      fan_in_fan_out=_is_gpt2_style(model, targets), bias="none")


def add_lora(model: PreTrainedModel, settings: LoraSettings = LoraSettings()):
    """Wrap ``model`` with a fresh LoRA adapter; only the adapter's weights require gradients.

    peft initialises B to zero, so the wrapped model computes exactly what ``model`` did.

    >>> from interp.models.tiny import tiny_hf_model
    >>> peft_model = add_lora(tiny_hf_model("tiny-llama")[0])
    >>> sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    8192
    """
    from peft import get_peft_model

    return get_peft_model(model, lora_config(model, settings))


def lora_parameter_count(model: torch.nn.Module, settings: LoraSettings = LoraSettings()) -> int:
    """Trainable parameters an adapter of ``settings`` adds; works on a meta-device model, so the
    memory estimate can run before any weight is loaded.

    >>> from interp.models.tiny import tiny_hf_model
    >>> lora_parameter_count(tiny_hf_model("tiny-llama")[0])
    8192
    """
    targets = settings.target_modules or lora_target_modules(model)
    total = 0
    for name, module in model.named_modules():
        if any(_matches(name, t) for t in targets):
            weight = getattr(module, "weight", None)
            if weight is not None and weight.ndim == 2:
                total += settings.rank * (weight.shape[0] + weight.shape[1])
    return total


# --------------------------------------------------------------------------- stored adapters


def available_adapters(root: Path = ADAPTERS_DIR) -> list[str]:
    """Names of the adapters kept under ``root`` (folders holding an ``adapter_config.json``).

    >>> available_adapters()  # run from the repository's root  # doctest: +SKIP
    ['ub', 'ul']
    """
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "adapter_config.json").exists())


def resolve_adapter(adapter: str | os.PathLike, root: Path = ADAPTERS_DIR) -> Path:
    """A folder path, or a name under the repo's ``adapters/`` (case-insensitive), -> its folder.

    >>> resolve_adapter("UB").name  # doctest: +SKIP
    'ub'
    """
    path = Path(adapter).expanduser()
    if (path / "adapter_config.json").exists():
        return path
    for name in available_adapters(root):
        if name.lower() == str(adapter).lower():
            return root / name
    available = ", ".join(available_adapters(root)) or "none"
    raise AdapterNotFoundError(
        f"adapter {str(adapter)!r} was not found: it is neither a folder holding an adapter_config.json "
        f"nor a name under {root} (available there: {available}). Train one with "
        f"analyses/finetune.py --lora --adapter-out adapters/<name>"
    )


def adapter_info(adapter: str | os.PathLike, root: Path = ADAPTERS_DIR) -> dict:
    """What the training run recorded beside the adapter (command, seed, accuracies), if anything.

    >>> adapter_info("ub")["seed"]  # doctest: +SKIP
    0
    """
    info = resolve_adapter(adapter, root) / ADAPTER_INFO
    return json.loads(info.read_text()) if info.exists() else {}


def recorded_base_model(path: Path) -> str | None:
    """The base model an adapter says it was trained on (``adapter_info.json``, else peft's config).

    >>> recorded_base_model(resolve_adapter("ub"))  # doctest: +SKIP
    'smollm2-135m'
    """
    base = adapter_info(path).get("base_model")
    if base:
        return str(base)
    config = Path(path) / "adapter_config.json"
    try:
        return json.loads(config.read_text()).get("base_model_name_or_path") or None
    except (OSError, ValueError):
        return None


def merge_adapter(model: PreTrainedModel, adapter: str | os.PathLike, root: Path = ADAPTERS_DIR,
                  base_model: str | None = None) -> PreTrainedModel:
    """``model`` with the adapter's low-rank updates added into its weights (a plain HF model again).

    With ``base_model`` (the name ``model`` was loaded by), an adapter recorded for another base
    model is refused before anything is merged: when the shapes happen to fit, peft would merge it
    with no more than a warning.

    >>> merged = merge_adapter(hf_model, "ub", base_model="smollm2-135m")  # doctest: +SKIP
    """
    from peft import PeftModel

    from interp.core.naming import model_label

    path = resolve_adapter(adapter, root)
    recorded = recorded_base_model(path)
    if base_model is not None and recorded is not None and model_label(recorded) != model_label(base_model):
        raise ValueError(f"--adapter: {path} was trained on {recorded!r}, not on {base_model!r}; "
                         f"load it with --model {recorded}")
    try:
        wrapped = PeftModel.from_pretrained(model, str(path))
    except READ_ERRORS as err:
        weights = ", ".join(p.name for p in sorted(path.glob("adapter_model.*"))) or "no adapter_model file"
        raise ValueError(f"adapter {path} ({weights}) cannot be read: {unreadable_reason(err)}; "
                         f"train it again or delete it") from None
    except (RuntimeError, ValueError, KeyError) as err:
        raise ValueError(f"adapter {path} does not fit this model (it was trained on {recorded or 'unknown'!r}): {err}") from err
    merged = wrapped.merge_and_unload()
    # A NaN in the adapter, or a scale such as lora_alpha 1e39, turns the merged weights non-finite,
    # and every score read from them into zeros.
    if (name := first_non_finite(merged)) is not None:
        raise ValueError(f"adapter {path}: merging it makes weight {name} NaN or infinite (its weights or its "
                         f"lora_alpha / r in adapter_config.json are broken); train it again or delete it")
    return merged.eval()


def save_adapter(peft_model, path: str | os.PathLike, info: dict | None = None, base_model: str | None = None) -> Path:
    """Save only the adapter weights (a few MB) and, beside them, ``info`` as JSON.

    >>> save_adapter(peft_model, "adapters/ub", info={"seed": 0}, base_model="smollm2-135m")  # doctest: +SKIP
    PosixPath('adapters/ub')
    """
    from interp.core.tables import atomic_write_text

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if base_model is not None:
        # The default is the base model's local path (a cache folder on one machine); a
        # name that load_model understands is what a reader of the repo needs.
        for config in peft_model.peft_config.values():
            config.base_model_name_or_path = base_model
    # Embedding layers are never adapted here; saying so stops peft from looking the base
    # model up on the hub to check whether the vocabulary changed.
    peft_model.save_pretrained(str(path), save_embedding_layers=False)
    if info is not None:
        atomic_write_text(path / ADAPTER_INFO, json.dumps(info, indent=2, default=str) + "\n")
    return path
