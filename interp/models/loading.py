"""``load_model``: any supported model as a TransformerLens bridge in compatibility mode."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from transformers import (AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase)

from .. import bridge as tl
from ..naming import (EMBEDDED_MODEL, TINY_MODELS, ModelNotFoundError, canonical_name, with_adapter)
from .converted import check_finite
from .devices import resolve_device, resolve_dtype
from .embedded import embedded_cache_path, load_embedded_hf
from .hub import cached_hub_models, local_checkpoint
from .processed import install_or_process
from .tiny import tiny_hf_model


def available_models() -> list[str]:
    return [EMBEDDED_MODEL, *TINY_MODELS, *cached_hub_models()]


def load_hf_model(name_or_path: str, dtype: torch.dtype = torch.float32,
                  device_map: str | dict | None = None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The plain Hugging Face model and tokenizer behind ``name_or_path`` (no bridge)."""
    name = canonical_name(name_or_path)
    if name == EMBEDDED_MODEL:
        return load_embedded_hf(dtype)
    if name in TINY_MODELS:
        model, tokenizer = tiny_hf_model(name)
        return model.to(dtype), tokenizer
    checkpoint = local_checkpoint(name)
    if checkpoint is None:
        raise ModelNotFoundError(
            f"model {name_or_path!r} was not found: looked for a local folder with a config.json at "
            f"{Path(name).expanduser().resolve()} and for {name!r} in the local Hugging Face cache "
            f"(downloads are disabled here). Available: {', '.join(available_models())}"
        )
    extra = {"device_map": device_map} if device_map is not None else {}
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=dtype, attn_implementation="eager", **extra)
    check_finite(model, checkpoint)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    return model.eval(), tokenizer


def tokenizer_adds_bos(tokenizer: PreTrainedTokenizerBase) -> bool:
    """Whether the model's own tokenizer starts text with BOS (prompts then do too)."""
    return tokenizer.bos_token_id is not None and tokenizer.encode("a")[:1] == [tokenizer.bos_token_id]


def bridge_from_hf(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, name: str,
                   device: torch.device | None = None, processed_cache: Path | None = None):
    """Wrap an already-loaded HF model as a TransformerBridge with HookedTransformer hook names.

    ``processed_cache`` is the folder of a model converted into the cache: processed weights
    for this dtype and device type are installed from there when present, else stored there."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    # The bridge re-creates the tokenizer with add_bos_token=True; record what the model's own
    # tokenizer does, so prompts look like the text the model was trained on.
    adds_bos = tokenizer_adds_bos(tokenizer)
    if device is not None and getattr(model, "hf_device_map", None) is None:
        model = model.to(device)
    bridge = tl.boot(model, tokenizer, name, device or model.device)
    if processed_cache is None:
        tl.enable_compatibility(bridge, process_weights=True)
    else:
        install_or_process(bridge, Path(processed_cache))
    bridge.cfg.default_prepend_bos = adds_bos
    bridge.eval()
    return bridge


def load_model(name_or_path: str = EMBEDDED_MODEL, device: str | torch.device | None = None,
               dtype: str | torch.dtype | None = None, device_map: str | dict | None = None,
               adapter: str | os.PathLike | None = None):
    """Load a model as a ``TransformerBridge`` in compatibility mode.

    ``device_map`` (e.g. ``"auto"``) splits a model too large for one GPU with accelerate, for
    local checkpoints; it excludes ``device``. ``adapter`` names a LoRA adapter (a folder, or a
    name under the repo's ``adapters/``) merged into the weights before the bridge is built, so
    every hook and score sees the fine-tuned model; the model's name in results then reads
    ``<model>+<adapter>``.
    """
    if device_map is not None and device not in (None, "auto"):
        raise ValueError("pass either device or device_map, not both")
    torch_dtype = resolve_dtype(dtype)
    torch_device = None if device_map is not None else resolve_device(device)
    name = canonical_name(name_or_path)
    model, tokenizer = load_hf_model(name, dtype=torch_dtype, device_map=device_map)
    if adapter is not None:
        from ..adapters import merge_adapter

        model = merge_adapter(model, adapter, base_model=name)
    # Only models converted into our own cache keep processed weights beside the raw ones (and
    # lose them when converted again).
    processed_cache = embedded_cache_path() if name == EMBEDDED_MODEL and adapter is None else None
    return bridge_from_hf(model, tokenizer, with_adapter(name, adapter and str(adapter)), torch_device, processed_cache)
