"""The one module that knows TransformerLens beyond its public API.

Every other module talks to a model through hook names (:func:`act_name`), ``run_with_hooks``,
``run_with_cache`` and ``model.hooks()``. What needs more lives here, each with a test in
``tests/test_bridge.py`` that fails loudly when a TransformerLens release renames it:

* booting a bridge around an already-loaded Hugging Face model (public:
  ``TransformerBridge.boot_transformers``);
* installing processed weights without redoing the arithmetic: the private flag
  ``_weights_processed``, ``real_components`` and the adapter's ``postprocess_weights``
  (:data:`PRIVATE_NAMES` lists them);
* swapping a block's wrapped module for a pass-through (public ``set_original_component``);
* stopping a forward pass once a hook has fired.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn
from transformer_lens.model_bridge import TransformerBridge
from transformer_lens.utilities import get_act_name
from transformer_lens.weight_processing import ProcessWeights

Hook = tuple[str | Callable[[str], bool], Callable]

# Names outside TransformerLens' documented API that this module relies on (tests check each).
PRIVATE_NAMES = ("TransformerBridge._weights_processed", "TransformerBridge.real_components",
                 "ArchitectureAdapter.postprocess_weights", "ProcessWeights.distribute_weights_to_components")


def act_name(name: str, layer: int | None = None) -> str:
    """TransformerLens' hook name: ``act_name("pattern", 3) == "blocks.3.attn.hook_pattern"``."""
    return get_act_name(name, layer)


def is_act(name: str) -> Callable[[str], bool]:
    """A ``names_filter`` that keeps one kind of hook in every layer (``is_act("pattern")``)."""
    suffix = act_name(name, 0).split(".", 2)[-1]
    return lambda hook_name: hook_name.endswith(suffix)


# --------------------------------------------------------------------------- booting


def boot(hf_model, tokenizer, name: str, device: torch.device) -> TransformerBridge:
    """A bridge around ``hf_model`` (not yet in compatibility mode)."""
    return TransformerBridge.boot_transformers(name, hf_model=hf_model, tokenizer=tokenizer, device=device,
                                               dtype=hf_model.dtype)


def enable_compatibility(bridge: TransformerBridge, process_weights: bool) -> None:
    """HookedTransformer hook names; with ``process_weights`` also its weight processing
    (layer norms folded, writing weights centred), else the weights are installed later."""
    bridge.enable_compatibility_mode(disable_warnings=True, no_processing=not process_weights)
    if process_weights:
        make_weights_contiguous(bridge)


def process_weights(bridge: TransformerBridge) -> None:
    """Process the weights of a bridge put in compatibility mode without processing."""
    bridge.process_weights()
    make_weights_contiguous(bridge)


def weights_processed(bridge: TransformerBridge) -> bool:
    return bool(bridge._weights_processed)


def make_weights_contiguous(bridge: TransformerBridge) -> None:
    """Give every parameter a contiguous layout.

    Processing leaves some weights as transposed views (GPT-2's split ``c_attn``), while weights
    read back from a file are contiguous; the two layouts take different matmul kernels and
    differ in the last bit. One layout for both paths makes them compute identically."""
    with torch.no_grad():
        for param in bridge.parameters():
            if not param.is_contiguous():
                param.data = param.data.contiguous()


def processed_state_dict(bridge: TransformerBridge) -> dict[str, Tensor]:
    """The processed weights as CPU tensors that can be saved (tied weights get their own copy)."""
    if not weights_processed(bridge):
        raise ValueError("the bridge's weights are not processed: call enable_compatibility(bridge, True) first")
    tensors: dict[str, Tensor] = {}
    seen: set[int] = set()
    for key, value in bridge.state_dict().items():
        value = value.detach().to("cpu").contiguous()
        if value.data_ptr() in seen:  # safetensors refuses shared storage
            value = value.clone()
        seen.add(value.data_ptr())
        tensors[key] = value
    return tensors


def state_dict_mismatch(bridge: TransformerBridge, state_dict: dict[str, Tensor]) -> str | None:
    """Why ``state_dict`` cannot be installed into ``bridge`` (keys or shapes), or None."""
    expected = bridge.state_dict()
    missing, extra = sorted(set(expected) - set(state_dict)), sorted(set(state_dict) - set(expected))
    if missing or extra:
        return f"missing {missing[:5]}, unexpected {extra[:5]}"
    shapes = [k for k in expected if tuple(expected[k].shape) != tuple(state_dict[k].shape)]
    if shapes:
        return f"shapes differ for {shapes[:5]}"
    return None


def install_processed_weights(bridge: TransformerBridge, state_dict: dict[str, Tensor]) -> None:
    """Put processed weights into a bridge in compatibility mode without processing, leaving it
    as ``process_weights`` would (TransformerLens' own distribution path, then the adapter's
    post-processing)."""
    if weights_processed(bridge):
        raise ValueError("the bridge's weights are already processed")
    problem = state_dict_mismatch(bridge, state_dict)
    if problem:
        raise ValueError(f"the processed weights do not match this model: {problem}")
    device = next(bridge.original_model.parameters()).device
    state_dict = {k: v.to(device) for k, v in state_dict.items()}
    ProcessWeights.distribute_weights_to_components(state_dict=state_dict, component_mapping=bridge.real_components)
    if bridge.adapter is not None:
        bridge.adapter.postprocess_weights(bridge)
    bridge._weights_processed = True
    make_weights_contiguous(bridge)


# --------------------------------------------------------------------------- running parts of the model


class _PassThrough(nn.Module):
    """Stands in for a skipped block: returns its hidden-state input untouched."""

    def forward(self, hidden_states, *args, **kwargs):
        return hidden_states


@contextmanager
def bypass_blocks_below(model: TransformerBridge, layer: int, unembed: bool = True) -> Iterator[None]:
    """Inside, blocks ``0..layer-1`` cost nothing (a forward that starts at ``layer`` discards
    their output anyway) and, with ``unembed``, the unembedding returns the final normalized
    residual, so callers unembed only the positions they need (:func:`unembed_residual`)."""
    swapped = [(block, block.original_component) for block in list(model.blocks)[:layer]]
    if unembed:
        swapped.append((model.unembed, model.unembed.original_component))
    try:
        for component, _ in swapped:
            component.set_original_component(_PassThrough())
        yield
    finally:
        for component, original in swapped:
            component.set_original_component(original)


def unembed_residual(model: TransformerBridge, residual: Float[Tensor, "n d_model"]) -> Float[Tensor, "n d_vocab"]:
    """The model's own unembedding applied to final (normalized) residuals."""
    return model.unembed.original_component(residual)


def run_from_layer(model: TransformerBridge, residual: Float[Tensor, "batch pos d_model"], layer: int,
                   fwd_hooks: Sequence[Hook] = ()) -> Float[Tensor, "batch pos d_model"]:
    """Blocks ``layer..`` on ``residual`` (the stream entering ``layer``); returns the final
    normalized residual (no unembedding)."""
    with torch.no_grad(), bypass_blocks_below(model, layer):
        return model.run_with_hooks(residual, start_at_layer=layer, fwd_hooks=list(fwd_hooks))


class _Stop(Exception):
    """Raised from a hook to end a forward pass early."""


def run_until(model: TransformerBridge, tokens: Int[Tensor, "batch pos"], last_hook: str,
              fwd_hooks: Sequence[Hook] = ()) -> None:
    """Run the forward pass with ``fwd_hooks`` and stop as soon as ``last_hook`` has fired (its
    own hooks in ``fwd_hooks`` included): the layers after it, and the unembedding, never run."""

    if last_hook not in model.hook_dict:
        raise ValueError(f"the model has no hook {last_hook!r} (e.g. {act_name('pattern', 0)!r})")

    def stop(value, hook):
        raise _Stop

    with torch.no_grad(), model.hooks(fwd_hooks=[*fwd_hooks, (last_hook, stop)]):
        try:
            model(tokens.to(model.cfg.device))
        except _Stop:
            return
    raise RuntimeError(f"hook {last_hook!r} never fired: the forward pass ran to the end")
