"""A Hugging Face model folder read with every check a hostile or broken folder needs: its
``config.json`` (readable, sane dimensions, a size that fits this machine's memory) before
anything is built, then its weights (no tensor missing, unexpected, of the wrong shape or not
finite), then its tokenizer; each refusal is one line naming the file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from interp.core.weights_files import READ_ERRORS, first_line, unreadable_reason

CONFIG = "config.json"
# Dimensions a config must give as integers >= 1 when it gives them at all (HF names them variously).
_DIMENSIONS = ("num_hidden_layers", "n_layer", "num_layers", "hidden_size", "n_embd", "d_model",
               "num_attention_heads", "n_head", "intermediate_size", "n_inner", "vocab_size", "num_key_value_heads")
_SHOWN = 5  # tensor names named in a refusal; the rest are counted
ALLOW_LARGE_ENV = "INTERP_ALLOW_LARGE_MODEL"


class ModelFolderError(ValueError):
    """A model folder that cannot give a sound model; the message names the file and what is wrong."""


def _names(keys) -> str:
    keys = sorted(str(k) for k in keys)
    return ", ".join(keys[:_SHOWN]) + (f" and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else "")


def read_config(folder: Path) -> dict:
    """The folder's ``config.json`` as a dict (a multimodal one's ``text_config`` kept inside),
    its dimensions checked; `ModelFolderError` naming the file otherwise.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "config.json").write_text('{"num_hidden_layers": 0}')
    >>> read_config(folder)
    Traceback (most recent call last):
    interp.models.folder.ModelFolderError: .../config.json: num_hidden_layers=0, expected an integer >= 1
    """
    path = Path(folder) / CONFIG
    try:
        config = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ModelFolderError(f"{path} cannot be read as JSON ({first_line(err)}); "
                               f"restore it from the model's source") from None
    if not isinstance(config, dict):
        raise ModelFolderError(f"{path}: expected a JSON object, found {type(config).__name__}")
    text = config.get("text_config", config)
    for key in _DIMENSIONS:
        value = text.get(key) if isinstance(text, dict) else None
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ModelFolderError(f"{path}: {key}={value!r}, expected an integer >= 1")
    return config


def estimated_bytes(config: dict, dtype: torch.dtype) -> int:
    """An upper estimate of the weights' size from the config alone (every attention projection
    counted as d_model x d_model, untied embeddings), made before anything is built.

    >>> gib = estimated_bytes({"num_hidden_layers": 30, "hidden_size": 576, "intermediate_size": 1536,
    ...                        "vocab_size": 49152}, torch.float32) / 2**30
    >>> round(gib, 2)
    0.66
    """
    text = config.get("text_config", config)

    def first(*keys: str, default: int = 0) -> int:
        return next((text[k] for k in keys if isinstance(text.get(k), int)), default)

    layers, width = first("num_hidden_layers", "n_layer", "num_layers"), first("hidden_size", "n_embd", "d_model")
    inner, vocab = first("intermediate_size", "n_inner", default=4 * width), first("vocab_size")
    params = 2 * vocab * width + layers * (4 * width * width + 3 * width * inner)
    return params * torch.finfo(dtype).bits // 8 if dtype.is_floating_point else params * 4


def machine_memory_bytes() -> int:
    """This machine's memory, or the container's limit when that is lower.

    >>> machine_memory_bytes() > 0
    True
    """
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        return min(total, int(limit)) if limit.isdigit() else total
    except OSError:
        return total


def check_fits_memory(folder: Path, config: dict, dtype: torch.dtype, allow_large: bool = False) -> None:
    """Refuse a model whose weights alone would not fit this machine's memory, before building it
    (a hostile config can otherwise run the machine out of memory, taking other jobs with it).
    ``allow_large=True`` or ``INTERP_ALLOW_LARGE_MODEL=1`` skips the check.

    >>> check_fits_memory(Path("m"), {"num_hidden_layers": 2, "hidden_size": 64, "vocab_size": 100}, torch.float32)
    """
    if allow_large or os.environ.get(ALLOW_LARGE_ENV) == "1":
        return
    needed, available = estimated_bytes(config, dtype), machine_memory_bytes()
    if needed > available:
        raise ModelFolderError(
            f"{Path(folder) / CONFIG}: a model of this size needs about {needed / 2**30:,.0f} GiB for its weights "
            f"({torch.finfo(dtype).bits}-bit), more than this machine's {available / 2**30:,.0f} GiB; "
            f"if the config is right, load it with allow_large=True (or {ALLOW_LARGE_ENV}=1)")


def weights_files(folder: Path) -> str:
    """The weight files of ``folder``, for messages.

    >>> weights_files(Path("/nonexistent"))
    'none found'
    """
    found = sorted(p.name for p in Path(folder).glob("*") if p.suffix in (".bin", ".safetensors"))
    return ", ".join(found) or "none found"


def first_non_finite(model: torch.nn.Module) -> str | None:
    """The name of the first weight holding NaN or infinity, None when all are finite.

    >>> first_non_finite(torch.nn.Linear(2, 2)) is None
    True
    """
    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            return name
    return None


def load_weights(folder: Path, dtype: torch.dtype, allow_large: bool = False, **extra) -> PreTrainedModel:
    """The folder's model, every tensor accounted for: a tensor the model needs but the files lack
    (which transformers would initialise at random), one the model has no place for, one of
    the wrong shape, or one that is not finite is refused, naming the tensors.

    >>> model = load_weights(Path("my-model"), torch.float32)  # doctest: +SKIP
    """
    folder = Path(folder)
    check_fits_memory(folder, read_config(folder), dtype, allow_large)
    try:
        model, info = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, output_loading_info=True,
                                                           ignore_mismatched_sizes=True, **extra)
    except READ_ERRORS as err:
        raise ModelFolderError(f"{folder}: its weights ({weights_files(folder)}) cannot be read: "
                               f"{unreadable_reason(err)}") from None
    except (ValueError, KeyError, TypeError, RuntimeError) as err:  # a config transformers cannot build
        raise ModelFolderError(f"{folder / CONFIG} does not describe a model transformers can build "
                               f"({type(err).__name__}: {first_line(err)})") from None
    where = f"{folder} ({weights_files(folder)})"
    if info["mismatched_keys"]:
        shapes = [f"{key} {tuple(found)} where the config needs {tuple(needed)}"
                  for key, found, needed in sorted(info["mismatched_keys"])]
        raise ModelFolderError(f"{where}: tensors of the wrong shape: {_names(shapes)}")
    if info["missing_keys"]:
        raise ModelFolderError(f"{where}: tensors missing (they would be random): {_names(info['missing_keys'])}")
    if info["unexpected_keys"]:
        raise ModelFolderError(f"{where}: tensors this model has no place for: {_names(info['unexpected_keys'])}")
    if (name := first_non_finite(model)) is not None:
        raise ModelFolderError(f"{where}: weight {name} holds NaN or infinite values")
    return model.eval()


def load_tokenizer(folder: Path) -> PreTrainedTokenizerBase:
    """The folder's tokenizer; a file that is not a tokenizer is refused in one line naming it.

    >>> tokenizer = load_tokenizer(Path("my-model"))  # doctest: +SKIP
    """
    folder = Path(folder)
    try:
        return AutoTokenizer.from_pretrained(folder)
    except Exception as err:  # noqa: BLE001 - tokenizers' Rust parser raises bare Exceptions for bad files
        files = sorted(p.name for p in folder.glob("*token*")) or ["no tokenizer files"]
        raise ModelFolderError(f"{folder}: its tokenizer ({', '.join(files)}) cannot be read: "
                               f"{type(err).__name__}: {first_line(err)}") from None
