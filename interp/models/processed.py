"""The processed-weight cache: a bridge's weights after TransformerLens' compatibility-mode
processing (layer norms folded, writing weights centred), stored beside the raw weights.

Processing clones every tensor, several seconds on a CPU, while the result depends only on the
raw weights, the dtype, the device type and the TransformerLens version; so it is stored once
per combination and installed on later loads. The file is only a speed-up: one that differs
from what was written (its SHA-256 is compared whenever its stat differs from the record, see
`interp.models.store.verify`: flipped bytes under a restored modification time still
change the file's ``ctime``) is rebuilt from the raw weights, which are first checked in full
so that damaged raw weights never get a fresh checksum; one that cannot be written is skipped
with a warning.
"""

from __future__ import annotations

import importlib.metadata
import logging
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor

from interp.models.bridge import TransformerBridge
from interp.models import bridge as tl
from interp.core.tables import atomic_path
from interp.models.converted import PROCESSED_PREFIX, verify_converted
from interp.models.devices import dtype_name
from interp.models.lean import CheckpointFolder
from interp.models.store import MANIFEST, CacheDamaged, forget_file, record_files, remove_stale_staging, verify

logger = logging.getLogger(__name__)


def processed_weights_file(model_dir: Path, dtype: torch.dtype, device: torch.device) -> Path:
    """Where the processed weights of the model stored in ``model_dir`` live.

    >>> processed_weights_file(Path("m"), torch.float32, torch.device("cpu")).name  # doctest: +ELLIPSIS
    'processed-tl...-float32-cpu.safetensors'
    """
    version = importlib.metadata.version("transformer-lens")
    return Path(model_dir) / f"{PROCESSED_PREFIX}tl{version}-{dtype_name(dtype)}-{torch.device(device).type}.safetensors"


def save_processed_weights(bridge: TransformerBridge, target: Path) -> None:
    """Write ``bridge``'s processed weights to ``target`` atomically and record it in the manifest.

    >>> save_processed_weights(bridge, processed_weights_file(folder, torch.float32, torch.device("cpu")))  # doctest: +SKIP
    """
    tensors = tl.processed_state_dict(bridge)
    with atomic_path(target) as staging:
        save_file(tensors, str(staging))
    record_files(target.parent, [target.name])


def read_processed_weights(source: Path, device: torch.device | str = "cpu") -> dict[str, Tensor]:
    """The stored tensors (memory-mapped: they take memory as they are used); [`CacheDamaged`][interp.models.store.CacheDamaged]
    when the file is not what was written (its checksum is compared whenever its stat changed).

    >>> state = read_processed_weights(processed_weights_file(folder, torch.float32, torch.device("cpu")))  # doctest: +SKIP
    """
    verify(source.parent, [source.name])
    try:
        state_dict = load_file(str(source), device=str(device))
    except Exception as err:  # noqa: BLE001 - safetensors raises its own error type for bad files
        raise CacheDamaged(source, f"unreadable ({err})") from None
    for key, value in state_dict.items():
        if value.is_floating_point() and not torch.isfinite(value).all():
            raise CacheDamaged(source, f"tensor {key} holds NaN or infinite values")
    return state_dict


def _stored(path: Path, device: torch.device) -> dict[str, Tensor] | None:
    if not path.is_file():
        return None
    try:
        return read_processed_weights(path, device)
    except CacheDamaged as err:
        logger.warning("processed-weight cache %s: %s; processing the raw weights again", path, err.reason)
        forget_file(path.parent, path.name)
        return None


def _verify_raw_in_full(folder: Path) -> None:
    """Hash the raw weights before processing them: what is processed gets a fresh checksum, so
    damage that slipped past the stat check must be caught here or never. A folder without a
    manifest is not the cache's (a user's ``processed_cache``) and has nothing to compare with."""
    try:
        verify_converted(folder, full=True)
    except CacheDamaged as err:
        if err.path.name != MANIFEST:
            raise


def install_or_process(bridge: TransformerBridge, cache_folder: Path, raw: CheckpointFolder | None = None) -> None:
    """Bring a freshly booted bridge into compatibility mode, from the cache when it can.

    With ``raw`` the bridge's model is empty ([`interp.models.lean.empty_hf_model`][interp.models.lean.empty_hf_model]) and is
    filled from that checkpoint: the processed weights are installed by assignment, or the raw
    ones are processed chunk by chunk, so two copies of the weights are never in memory.

    >>> install_or_process(bridge, embedded_folder())  # doctest: +SKIP
    """
    device = torch.device(bridge.cfg.device)
    path = processed_weights_file(cache_folder, bridge.cfg.dtype, device)
    remove_stale_staging(path.parent, [path.name, MANIFEST])  # what a killed save left behind
    usable = not path.exists() or path.is_file()
    if not usable:
        logger.warning("processed-weight cache %s is not a file; processing the raw weights on every load until "
                       "it is removed", path)
    state_dict = _stored(path, device)
    tl.enable_compatibility(bridge, process_weights=state_dict is None and raw is None)
    if state_dict is not None:
        try:
            tl.install_processed_weights(bridge, state_dict)
            if raw is not None:
                tl.fill_empty_parameters(bridge, raw.read)
            return
        except ValueError as err:
            logger.warning("processed-weight cache %s: %s; processing the raw weights again", path, err)
            forget_file(path.parent, path.name)
    _verify_raw_in_full(cache_folder)
    if raw is not None:
        if tl.can_process_in_chunks(bridge):
            tl.process_in_chunks(bridge, raw.read, progress=True)
            tl.fill_empty_parameters(bridge, raw.read)  # what processing does not touch
        else:
            tl.fill_empty_parameters(bridge, raw.read)
            tl.process_weights(bridge)
    elif not tl.weights_processed(bridge):
        tl.process_weights(bridge)
    if not usable:
        return
    try:
        save_processed_weights(bridge, path)
    except (OSError, SafetensorError) as err:
        logger.warning("could not write the processed-weight cache %s (%s); loads will process the weights again",
                       path, err)
