"""Cache of a bridge's processed weights, so a warm load skips TransformerLens weight processing.

``enable_compatibility_mode()`` folds layer norms and centres the writing weights, which on a
CPU takes several seconds (it clones every tensor), far longer than reading the weights. The
processed tensors depend only on the raw weights, the dtype, the device type and the
TransformerLens version, so they are stored once, keyed by all of those, and later installed
with TransformerLens' own ``distribute_weights_to_components``: the arithmetic is skipped, the
installation path is the library's.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformer_lens.weight_processing import ProcessWeights

from .results import atomic_path


def processed_weights_file(model_dir: Path, dtype: torch.dtype, device: torch.device) -> Path:
    """Where the processed weights for a model stored in ``model_dir`` live."""
    version = importlib.metadata.version("transformer-lens")
    dtype_name = str(dtype).removeprefix("torch.")
    return Path(model_dir) / f"processed-tl{version}-{dtype_name}-{device.type}.safetensors"


def save_processed_weights(bridge, target: Path) -> None:
    """Write ``bridge``'s processed state dict to ``target`` atomically (temp file + rename)."""
    if not bridge._weights_processed:
        raise ValueError("the bridge's weights are not processed: call enable_compatibility_mode() first")
    tensors: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for key, value in bridge.state_dict().items():
        value = value.detach().to("cpu").contiguous()
        # safetensors refuses shared storage (tied embeddings): give repeats their own copy.
        if value.data_ptr() in seen:
            value = value.clone()
        seen.add(value.data_ptr())
        tensors[key] = value
    with atomic_path(target) as staging:
        save_file(tensors, str(staging))


def install_processed_weights(bridge, source: Path, device: torch.device | None = None) -> None:
    """Put the processed weights from ``source`` into a bridge booted with
    ``enable_compatibility_mode(no_processing=True)``, leaving it as ``process_weights`` would.

    The bridge's model may be empty (parameters on the meta device, ``device`` then says where
    the weights go): they are installed by assignment, memory-mapped copy-on-write, so the raw
    weights are never read and the processed ones take memory only as they are used."""
    if bridge._weights_processed:
        raise ValueError("the bridge's weights are already processed")
    device = device or next(bridge.original_model.parameters()).device
    state_dict = load_file(str(source), device=str(device))
    expected = set(bridge.state_dict())
    # Folding value biases gives bias-free output projections (Qwen2's o_proj) a bias, which
    # set_processed_weights creates: such a bias is not in the fresh bridge, its weight is.
    created = {key for key in set(state_dict) - expected
               if key.endswith(".bias") and key.removesuffix(".bias") + ".weight" in expected}
    if set(state_dict) - created != expected:
        missing, extra = sorted(expected - set(state_dict)), sorted(set(state_dict) - expected - created)
        raise ValueError(f"{source} does not match this model: missing {missing[:5]}, unexpected {extra[:5]}")
    ProcessWeights.distribute_weights_to_components(state_dict=state_dict, component_mapping=bridge.real_components)
    if bridge.adapter is not None:
        bridge.adapter.postprocess_weights(bridge)
    bridge._weights_processed = True
