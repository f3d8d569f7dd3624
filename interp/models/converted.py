"""Models converted into the cache (from a GGUF file): used when sound, converted again when not.

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
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from interp.models.folder import ModelFolderError, first_non_finite, load_tokenizer, load_weights
from interp.models.store import (CacheDamaged, CachePathError, check_cache_entry, clear_leftovers, conversion_lock,
                                 publish_folder, read_manifest, verify)

logger = logging.getLogger(__name__)

PROCESSED_PREFIX = "processed-"
Convert = Callable[[Path], None]


def check_finite(model: torch.nn.Module, source: Path | str) -> None:
    """Raise [`CacheDamaged`][interp.models.store.CacheDamaged] naming ``source`` when a weight holds NaN or infinity.

    >>> check_finite(torch.nn.Linear(2, 2), "a checkpoint")  # no NaN or infinity: nothing raised
    """
    if (name := first_non_finite(model)) is not None:
        raise CacheDamaged(Path(source), f"weight {name} holds NaN or infinite values")


def verify_converted(folder: Path, full: bool = False) -> None:
    """The raw files of a converted folder (everything but processed weights) as written
    (``full``: every file hashed, whatever its stat says).

    >>> verify_converted(embedded_folder(), full=True)  # doctest: +SKIP
    """
    raw = [name for name in read_manifest(folder) if not name.startswith(PROCESSED_PREFIX)]
    verify(folder, raw, full=full)


def convert_again(folder: Path, convert: Convert, what: str, reason: str) -> Path:
    """Log why the conversion in ``folder`` is unusable, then convert it again; returns ``folder``.

    >>> convert_again(folder, convert_embedded, "smollm2-135m", "checksum mismatch")  # doctest: +SKIP
    """
    before = folder.resolve()
    with conversion_lock(folder):
        if folder.resolve() != before and _sound(folder):  # converted by another process while we waited
            return folder
        logger.warning("%s: the converted model in %s is unusable (%s); converting it again", what, folder, reason)
        return publish_folder(folder, convert, locked=True)


def ensure_converted(folder: Path, convert: Convert, what: str) -> Path:
    """``folder`` once it holds a sound conversion: converted on first use, again when damaged.
    Staging folders that killed or concurrent conversions left behind are removed on the way.

    >>> folder = ensure_converted(embedded_cache_path(), convert_embedded, "smollm2-135m")  # doctest: +SKIP
    """
    folder = Path(folder)
    check_cache_entry(folder)
    clear_leftovers(folder)
    if not folder.exists():
        with conversion_lock(folder):  # simultaneous first loads: one converts, the others wait for it
            if folder.exists() and _sound(folder):
                return folder
            logger.info("first load of %s: converting it into %s", what, folder)
            return publish_folder(folder, convert, locked=True)
    try:
        verify_converted(folder)
    except CacheDamaged as err:
        return convert_again(folder, convert, what, str(err))
    return folder


def _sound(folder: Path) -> bool:
    try:
        check_cache_entry(folder)
        verify_converted(folder)
        return True
    except (CacheDamaged, CachePathError):
        return False


def _load(folder: Path, dtype: torch.dtype) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    try:  # a converted folder is ours: its weights are trusted to fit, and any fault is damage
        return load_weights(folder, dtype, allow_large=True), load_tokenizer(folder)
    except ModelFolderError as err:
        raise CacheDamaged(folder, str(err)) from None


def load_converted(folder: Path, dtype: torch.dtype, convert: Convert,
                   what: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The Hugging Face model converted into ``folder`` (converted with ``convert(staging_folder)``
    when missing or damaged). A fresh conversion that is itself unusable raises.

    >>> model, tokenizer = load_converted(embedded_cache_path(), torch.float32, convert_embedded, "smollm2-135m")  # doctest: +SKIP
    """
    folder = ensure_converted(folder, convert, what)
    try:
        return _load(folder, dtype)
    except Exception as err:  # noqa: BLE001 - any failure to read a rebuildable copy means: rebuild it
        convert_again(folder, convert, what, str(err))
    try:
        return _load(folder, dtype)
    except CacheDamaged as err:
        raise CacheDamaged(err.path, f"{err.reason}, right after converting {what}: its source is damaged") from None
