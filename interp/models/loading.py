"""``load_model``: any supported model as a TransformerLens bridge in compatibility mode."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from interp.models.bridge import TransformerBridge
from interp.models import bridge as tl
from interp.core.naming import (EMBEDDED_MODEL, HUB_REPOS, TINY_MODELS, ModelNotFoundError, canonical_name,
                      with_adapter)
from interp.models.converted import convert_again
from interp.models.devices import resolve_device, resolve_dtype
from interp.models.embedded import convert_embedded, embedded_folder, load_embedded_hf
from interp.models.folder import ModelFolderError, check_fits_memory, load_tokenizer, load_weights, read_config
from interp.models.hub import cached_hub_models, local_checkpoint
from interp.models.lean import CheckpointFolder, empty_hf_model
from interp.models.paper import OFFLINE_MODELS, installed_folder, offline_model, paper_model_folder
from interp.models.processed import install_or_process
from interp.models.store import CacheDamaged
from interp.models.planted import PLANTED_MODELS, is_planted, planted_hf_model
from interp.models.tiny import tiny_hf_model
from interp.models.trained import TRAINED_MODELS, TRAINED_REPOS, trained_folder, trained_model


def available_models() -> list[str]:
    """The names ``load_model`` knows without a download: the built-in models and the local hub cache's.

    >>> available_models()[:3]
    ['smollm2-135m', 'tiny-llama', 'tiny-gpt2']
    """
    offline = [name for name, model in OFFLINE_MODELS.items() if installed_folder(model) is not None]
    return [EMBEDDED_MODEL, *TINY_MODELS, *PLANTED_MODELS, *offline, *TRAINED_MODELS, *cached_hub_models()]


def own_model(name: str):
    """(folder, convert again) of a model converted into our own cache, made sound first (converted
    on first use, again when damaged); None for any other name.

    >>> folder, convert = own_model("smollm2-135m")  # doctest: +SKIP
    """
    if name == EMBEDDED_MODEL:
        return embedded_folder(), convert_embedded
    if offline_model(name) is not None:
        return paper_model_folder(offline_model(name))
    return None


def load_hf_model(name_or_path: str, dtype: torch.dtype = torch.float32, device_map: str | dict | None = None,
                  allow_large: bool = False) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The plain Hugging Face model and tokenizer behind ``name_or_path`` (no bridge); a folder
    whose config describes weights larger than this machine's memory is refused unless
    ``allow_large`` (`interp.models.folder.check_fits_memory`).

    >>> model, tokenizer = load_hf_model("tiny-gpt2")
    >>> model.config.n_layer
    2
    """
    name = canonical_name(name_or_path)
    if device_map is not None and name in (EMBEDDED_MODEL, *TINY_MODELS):
        # these are built or converted whole in memory: a split would be silently ignored
        raise ValueError(f"--device-map {device_map!r}: {name} is loaded on one device and cannot be split; "
                         f"leave --device-map out and use --device")
    if name == EMBEDDED_MODEL:
        return load_embedded_hf(dtype)
    if offline_model(name) is not None:
        return _from_folder(paper_model_folder(offline_model(name))[0], dtype, device_map, allow_large)
    if name in TINY_MODELS:
        model, tokenizer = tiny_hf_model(name)
        return model.to(dtype), tokenizer
    if is_planted(name):
        model, tokenizer = planted_hf_model(name)
        return model.to(dtype), tokenizer
    if trained_model(name) is not None:  # the named ones and the from-scratch family's
        return _from_folder(trained_folder(name), dtype, device_map, allow_large)
    checkpoint = local_checkpoint(name)
    if checkpoint is None:
        raise ModelNotFoundError(
            f"model {name_or_path!r} was not found: looked for a local folder with a config.json at "
            f"{Path(name).expanduser().resolve()} and for {name!r} in the local Hugging Face cache "
            f"(downloads are disabled here). Available: {', '.join(available_models())}"
        )
    return _from_folder(checkpoint, dtype, device_map, allow_large)


def _from_folder(checkpoint: Path, dtype: torch.dtype, device_map,
                 allow_large: bool = False) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    extra = {"device_map": device_map} if device_map is not None else {}
    try:
        check_fits_memory(checkpoint, read_config(checkpoint), dtype, allow_large)  # before anything reads it
        tokenizer = load_tokenizer(checkpoint)  # before the weights: cheaper, and the model is useless without it
        model = load_weights(checkpoint, dtype, allow_large, attn_implementation="eager", **extra)
    except ModelFolderError as err:
        raise ModelFolderError(f"--model {err}") from None
    return model, tokenizer


def lean_bridge(name: str, folder: Path, dtype: torch.dtype, device: torch.device):
    """A bridge over a model of our own cache, built on an empty model and filled from its files
    ([`interp.models.lean`][interp.models.lean]): the weights are never in memory twice.

    >>> bridge = lean_bridge("smollm2-135m", embedded_folder(), torch.float32, torch.device("cpu"))  # doctest: +SKIP
    """
    try:
        tokenizer = load_tokenizer(folder)
    except ModelFolderError as err:
        raise CacheDamaged(folder, str(err)) from None
    bridge = _prepared_bridge(empty_hf_model(folder, dtype, device), tokenizer, name, device)
    install_or_process(bridge, folder, CheckpointFolder(folder, dtype, device))
    return _finished(bridge, tokenizer)


def tokenizer_adds_bos(tokenizer: PreTrainedTokenizerBase) -> bool:
    """Whether the model's own tokenizer starts text with BOS (prompts then do too).

    >>> from interp.models.tiny import tiny_tokenizer
    >>> tokenizer_adds_bos(tiny_tokenizer())
    False
    """
    return tokenizer.bos_token_id is not None and tokenizer.encode("a")[:1] == [tokenizer.bos_token_id]


def bridge_from_hf(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, name: str,
                   device: torch.device | None = None, processed_cache: Path | None = None):
    """Wrap an already-loaded HF model as a TransformerBridge with HookedTransformer hook names.

    ``processed_cache`` is the folder of a model converted into the cache: processed weights
    for this dtype and device type are installed from there when present, else stored there.

    >>> bridge = bridge_from_hf(*load_hf_model("tiny-gpt2"), "tiny-gpt2")
    >>> bridge.cfg.n_layers
    2
    """
    if device is not None and getattr(model, "hf_device_map", None) is None:
        model = model.to(device)
    bridge = _prepared_bridge(model, tokenizer, name, device or model.device)
    if processed_cache is None:
        tl.enable_compatibility(bridge, process_weights=True)
    else:
        install_or_process(bridge, Path(processed_cache))
    return _finished(bridge, tokenizer)


def _prepared_bridge(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, name: str, device):
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    base = name.partition("+")[0]  # an adapter's suffix is not part of the repository's name
    return tl.boot(model, tokenizer, name, torch.device(device), repo=HUB_REPOS.get(base) or TRAINED_REPOS.get(base))


def _finished(bridge: TransformerBridge, tokenizer: PreTrainedTokenizerBase):
    # The bridge re-creates the tokenizer with add_bos_token=True; record what the model's own
    # tokenizer does, so prompts look like the text the model was trained on.
    bridge.cfg.default_prepend_bos = tokenizer_adds_bos(tokenizer)
    bridge.eval()
    return bridge


def load_model(name_or_path: str = EMBEDDED_MODEL, device: str | torch.device | None = None,
               dtype: str | torch.dtype | None = None, device_map: str | dict | None = None,
               adapter: str | os.PathLike | None = None, allow_large: bool = False):
    """Load a model as a ``TransformerBridge`` in compatibility mode.

    ``device_map`` (e.g. ``"auto"``) splits a model too large for one GPU with accelerate, for
    local checkpoints; it excludes ``device``. ``adapter`` names a LoRA adapter (a folder, or a
    name under the repo's ``adapters/``) merged into the weights before the bridge is built, so
    every hook and score sees the fine-tuned model; the model's name in results then reads
    ``<model>+<adapter>``. A model folder whose config describes weights larger than this
    machine's memory is refused before anything is built, unless ``allow_large``.

    Examples:
        >>> model = load_model("tiny-llama", device="cpu")   # load_model() is the embedded SmolLM2-135M
        >>> model.cfg.n_layers, model.cfg.n_heads
        (2, 4)
        >>> _, cache = model.run_with_cache(model.to_tokens("a b a b"), names_filter="blocks.0.attn.hook_pattern")
        >>> cache["blocks.0.attn.hook_pattern"].shape[1]    # batch, head, query, key
        4
    """
    if device_map is not None and device not in (None, "auto"):
        raise ValueError("pass either device or device_map, not both")
    torch_dtype = resolve_dtype(dtype)
    torch_device = None if device_map is not None else resolve_device(device)
    name = canonical_name(name_or_path)
    own = own_model(name) if adapter is None and device_map is None else None
    if own is not None:  # models of our own cache keep processed weights beside the raw ones
        folder, convert = own
        try:
            return lean_bridge(name, folder, torch_dtype, torch_device)
        except CacheDamaged as err:  # raw weights damaged in a way the manifest could not see (NaN)
            convert_again(folder, convert, name, str(err))
            return lean_bridge(name, folder, torch_dtype, torch_device)
    model, tokenizer = load_hf_model(name, dtype=torch_dtype, device_map=device_map, allow_large=allow_large)
    if adapter is not None:
        from interp.models.adapters import merge_adapter

        model = merge_adapter(model, adapter, base_model=name)
    return bridge_from_hf(model, tokenizer, with_adapter(name, adapter and str(adapter)), torch_device)
