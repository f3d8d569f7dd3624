"""Models converted into the cache (from a GGUF file): loaded when sound, converted again when not.

A converted folder is only a copy of something this machine can rebuild, so a damaged one (a
truncated ``model.safetensors``, a deleted ``tokenizer.json``, bytes changed since conversion,
weights that are not finite) is converted again with one log line saying why, instead of
breaking every script with a library error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import (AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase)

from .store import CacheDamaged, publish_folder, read_manifest, verify

logger = logging.getLogger(__name__)

PROCESSED_PREFIX = "processed-"


def check_finite(model: torch.nn.Module, source: Path | str) -> None:
    """Raise :class:`CacheDamaged` naming ``source`` when a weight holds NaN or infinity."""
    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise CacheDamaged(Path(source), f"weight {name} holds NaN or infinite values")


def _load(folder: Path, dtype: torch.dtype) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    raw = [name for name in read_manifest(folder) if not name.startswith(PROCESSED_PREFIX)]
    verify(folder, raw)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
    check_finite(model, folder)
    return model.eval(), AutoTokenizer.from_pretrained(folder)


def load_converted(folder: Path, dtype: torch.dtype, convert: Callable[[Path], None],
                   what: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The model converted into ``folder``; converted (again) with ``convert(staging_folder)``
    when the folder is missing or damaged. A fresh conversion that is itself unusable raises."""
    folder = Path(folder)
    if folder.exists():
        try:
            return _load(folder, dtype)
        except Exception as err:  # noqa: BLE001 - any failure to read a rebuildable copy means: rebuild it
            logger.warning("%s: the converted model in %s is unusable (%s); converting it again", what, folder, err)
    else:
        logger.info("first load of %s: converting it into %s", what, folder)
    publish_folder(folder, convert)
    try:
        return _load(folder, dtype)
    except CacheDamaged as err:
        raise CacheDamaged(err.path, f"{err.reason}, right after converting {what}: its source is damaged") from None
