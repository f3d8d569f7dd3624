"""Booting a bridge around an already-loaded Hugging Face model (an empty, meta-device one
included), putting it in compatibility mode, and processing its weights as TransformerLens does."""

from __future__ import annotations

import torch
from torch import nn
from transformer_lens.model_bridge import TransformerBridge


def boot(hf_model, tokenizer, name: str, device: torch.device, repo: str | None = None) -> TransformerBridge:
    """A bridge around ``hf_model`` (not yet in compatibility mode), named ``name`` in its config;
    ``repo`` is the model's Hugging Face repository when ``name`` is not. An empty (meta) model gets
    its synthetic buffers, and is filled later (`install_processed_weights`,
    `process_in_chunks`, `fill_empty_parameters`).

    >>> from interp.models.loading import load_hf_model
    >>> bridge = boot(*load_hf_model("tiny-gpt2"), "tiny-gpt2", torch.device("cpu"))
    >>> bridge.cfg.model_name, weights_processed(bridge)
    ('tiny-gpt2', False)
    """
    bridge = TransformerBridge.boot_transformers(repo or name, hf_model=hf_model, tokenizer=tokenizer,
                                                 device=device, dtype=hf_model.dtype)
    bridge.cfg.model_name = name
    if is_empty(hf_model):
        _materialize_synthetic_buffers(bridge)
    return bridge


def enable_compatibility(bridge: TransformerBridge, process_weights: bool) -> None:
    """HookedTransformer hook names; with ``process_weights`` also its weight processing
    (layer norms folded, writing weights centred), else the weights are installed later.

    >>> from interp.models.bridge import act_name
    >>> from interp.models.loading import load_hf_model
    >>> bridge = boot(*load_hf_model("tiny-gpt2"), "tiny-gpt2", torch.device("cpu"))
    >>> enable_compatibility(bridge, process_weights=True)
    >>> weights_processed(bridge), act_name("pattern", 0) in bridge.hook_dict
    (True, True)
    """
    bridge.enable_compatibility_mode(disable_warnings=True, no_processing=not process_weights)
    if process_weights:
        _make_weights_contiguous(bridge)


def process_weights(bridge: TransformerBridge) -> None:
    """Process the weights of a bridge put in compatibility mode without processing.

    >>> from interp.models.loading import load_hf_model
    >>> bridge = boot(*load_hf_model("tiny-gpt2"), "tiny-gpt2", torch.device("cpu"))
    >>> enable_compatibility(bridge, process_weights=False)
    >>> process_weights(bridge)
    >>> weights_processed(bridge), all(p.is_contiguous() for p in bridge.parameters())
    (True, True)
    """
    bridge.process_weights()
    _make_weights_contiguous(bridge)


def weights_processed(bridge: TransformerBridge) -> bool:
    """Whether the bridge's weights are processed (layer norms folded and so on) or still raw.

    >>> from interp.models import load_model
    >>> weights_processed(load_model("tiny-gpt2", device="cpu"))
    True
    """
    return bool(bridge._weights_processed)


def _make_weights_contiguous(bridge: TransformerBridge) -> None:
    """Give every parameter a contiguous layout.

    Processing leaves some weights as transposed views (GPT-2's split ``c_attn``), while weights
    read back from a file are contiguous; the two layouts take different matmul kernels and
    differ in the last bit. One layout for both paths makes them compute identically."""
    with torch.no_grad():
        for param in bridge.parameters():
            if not param.is_contiguous():
                param.data = param.data.contiguous()


def is_empty(module: nn.Module) -> bool:
    """Whether some parameter is still on the meta device (an empty model, not yet filled).

    >>> is_empty(nn.Linear(2, 2)), is_empty(nn.Linear(2, 2, device="meta"))
    (False, True)
    """
    return any(p.is_meta for p in module.parameters())


def _materialize_synthetic_buffers(bridge: TransformerBridge) -> None:
    """A bias-free unembedding gets a fixed zero ``bias`` buffer when the bridge boots, on the
    meta device for an empty model: give it its zeros. Any other empty buffer is an error."""
    device = torch.device(bridge.cfg.device)
    for module_name, module in bridge.original_model.named_modules():
        for name, buffer in list(module.named_buffers(recurse=False)):
            if not buffer.is_meta:
                continue
            if name != "bias":
                raise RuntimeError(f"buffer {module_name}.{name} of the empty model is on the meta device and not in "
                                   f"the checkpoint; load this model with from_pretrained instead")
            setattr(module, name, torch.zeros(buffer.shape, dtype=buffer.dtype, device=device))
