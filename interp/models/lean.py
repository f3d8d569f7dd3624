"""Reading a converted checkpoint without ever holding two copies of its weights.

A model of our own cache is built with empty (meta) parameters and filled from its files
([`interp.models.bridge`][interp.models.bridge]): processed weights by assignment, or raw tensors one at a time, read with
``pread`` so that their memory goes when they do (a memory map's pages would stay resident).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors import safe_open
from torch import Tensor

from interp.models.store import CacheDamaged

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"


class CheckpointFolder:
    """Raw tensors of a safetensors checkpoint folder, read one at a time; a tensor that is not
    finite is refused, naming its file."""

    def __init__(self, folder: Path, dtype: torch.dtype, device: torch.device):
        self.folder, self.dtype, self.device = Path(folder), dtype, device
        if (self.folder / INDEX_FILE).exists():
            weight_map = json.loads((self.folder / INDEX_FILE).read_text())["weight_map"]
        elif (self.folder / SINGLE_FILE).exists():
            with safe_open(self.folder / SINGLE_FILE, framework="pt") as handle:
                weight_map = dict.fromkeys(handle.keys(), SINGLE_FILE)
        else:
            raise CacheDamaged(self.folder, f"holds neither {SINGLE_FILE} nor {INDEX_FILE}")
        self.weight_map: dict[str, str] = weight_map
        self._handles: dict[str, object] = {}

    def read(self, names: Sequence[str], what: str) -> Tensor:
        """The tensor stored under the first of ``names`` the checkpoint has (tied weights have several)."""
        name = next((n for n in names if n in self.weight_map), None)
        if name is None:
            raise CacheDamaged(self.folder, f"no tensor for {what} (looked for {list(names)})")
        file = self.weight_map[name]
        if file not in self._handles:
            self._handles[file] = safe_open(self.folder / file, framework="pt", backend="pread")
        tensor = self._handles[file].get_tensor(name).to(device=self.device, dtype=self.dtype)
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise CacheDamaged(self.folder / file, f"weight {name} holds NaN or infinite values")
        return tensor


def empty_hf_model(folder: Path, dtype: torch.dtype, device: torch.device):
    """The model of ``folder`` with its parameters on the meta device (no memory) and its buffers
    (rotary frequencies) computed for real on ``device``, as ``from_pretrained`` would.

    >>> model = empty_hf_model(Path("~/.cache/interp/smollm2-135m/hf").expanduser(), torch.float32, torch.device("cpu"))  # doctest: +SKIP
    >>> next(model.parameters()).device  # doctest: +SKIP
    device(type='meta')
    """
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(folder)
    with torch.device(device), init_empty_weights(include_buffers=False):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.tie_weights()  # from_config skips tying meta parameters; from_pretrained ties them
    return model.eval()
