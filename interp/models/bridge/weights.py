"""Processed weights in and out of a bridge without redoing the arithmetic, and an empty
(meta-device) model filled from files without two copies of the weights ever being in memory:
processed weights installed by assignment, or raw weights read and processed chunk by chunk
(embeddings, final norm + unembedding, then block by block) by TransformerLens' own
``ProcessWeights.process_weights``. Whole-model processing clones every tensor three times while
the raw copy is alive: 21 GB for a 1.5B model in fp32."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import torch
from torch import Tensor, nn
from transformer_lens.model_bridge import TransformerBridge
from transformer_lens.weight_processing import ProcessWeights

from interp.models.bridge.booting import _make_weights_contiguous, weights_processed


def processed_state_dict(bridge: TransformerBridge) -> dict[str, Tensor]:
    """The processed weights as CPU tensors that can be saved (tied weights get their own copy).

    >>> from interp.models import load_model
    >>> tensors = processed_state_dict(load_model("tiny-gpt2", device="cpu"))
    >>> list(tensors)[:3], tuple(tensors["embed.weight"].shape)
    (['embed.weight', 'pos_embed.weight', 'blocks.0.attn.q.weight'], (354, 64))
    """
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


def _state_dict_mismatch(bridge: TransformerBridge, state_dict: dict[str, Tensor]) -> str | None:
    """Why ``state_dict`` cannot be installed into ``bridge`` (keys or shapes), or None."""
    expected = bridge.state_dict(keep_vars=True)
    # Folding value biases gives a bias-free output projection (Qwen2's o_proj) a bias, which
    # installing creates: such a bias is not in a fresh bridge, its weight is.
    created = {k for k in set(state_dict) - set(expected) if k.endswith(".bias") and k[:-5] + ".weight" in expected}
    missing, extra = sorted(set(expected) - set(state_dict)), sorted(set(state_dict) - set(expected) - created)
    if missing or extra:
        return f"missing {missing[:5]}, unexpected {extra[:5]}"
    shapes = [k for k in expected if tuple(expected[k].shape) != tuple(state_dict[k].shape)]
    if shapes:
        return f"shapes differ for {shapes[:5]}"
    return None


def install_processed_weights(bridge: TransformerBridge, state_dict: dict[str, Tensor]) -> None:
    """Put processed weights into a bridge in compatibility mode without processing, leaving it
    as ``process_weights`` would (TransformerLens' own distribution path, then the adapter's
    post-processing). The tensors are installed by assignment: an empty model is filled without
    a copy, and memory-mapped tensors stay mapped.

    >>> from interp.models import load_model
    >>> from interp.models.bridge import boot, enable_compatibility
    >>> from interp.models.loading import load_hf_model
    >>> model = load_model("tiny-gpt2", device="cpu")
    >>> bridge = boot(*load_hf_model("tiny-gpt2"), "tiny-gpt2", torch.device("cpu"))
    >>> enable_compatibility(bridge, process_weights=False)
    >>> install_processed_weights(bridge, processed_state_dict(model))
    >>> tokens = torch.tensor([[3, 7, 11, 5]])
    >>> weights_processed(bridge), bool(torch.allclose(bridge(tokens), model(tokens), atol=1e-6))
    (True, True)
    """
    if weights_processed(bridge):
        raise ValueError("the bridge's weights are already processed")
    problem = _state_dict_mismatch(bridge, {k: v for k, v in state_dict.items()})
    if problem:
        raise ValueError(f"the processed weights do not match this model: {problem}")
    device = torch.device(bridge.cfg.device)
    state_dict = {k: v.to(device) for k, v in state_dict.items()}
    ProcessWeights.distribute_weights_to_components(state_dict=state_dict, component_mapping=bridge.real_components)
    if bridge.adapter is not None:
        bridge.adapter.postprocess_weights(bridge)
    bridge._weights_processed = True
    _make_weights_contiguous(bridge)


# --------------------------------------------------------------------------- filling an empty model

EMBEDDINGS = ("embed.", "pos_embed.")
NamedReader = Callable[[Sequence[str], str], Tensor]  # (checkpoint names of one tensor, what it is) -> the tensor


def _checkpoint_names(model: nn.Module) -> dict[int, list[str]]:
    """Every checkpoint name of each parameter (tied weights have several), keyed by the
    parameter's id: a booted bridge wraps each HF module, adding ``._original_component`` to the
    module paths, and the checkpoint names are the paths without it."""
    names: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), []).append(name.replace("._original_component", ""))
    return names


def fill_empty_parameters(bridge: TransformerBridge, read: NamedReader) -> None:
    """Give every parameter still on the meta device its tensor from ``read`` (the ones
    processing does not touch, or all of them); tied parameters stay tied.

    >>> from accelerate import init_empty_weights
    >>> from transformers import AutoModelForCausalLM
    >>> from interp.models.bridge import boot, is_empty
    >>> from interp.models.loading import load_hf_model
    >>> full, tokenizer = load_hf_model("tiny-llama")
    >>> with init_empty_weights(include_buffers=False):
    ...     empty = AutoModelForCausalLM.from_config(full.config)
    >>> bridge = boot(empty, tokenizer, "tiny-llama", torch.device("cpu"))
    >>> raw = full.state_dict()
    >>> is_empty(bridge.original_model)
    True
    >>> fill_empty_parameters(bridge, lambda names, what: raw[names[0]])
    >>> is_empty(bridge.original_model)
    False
    """
    names = _checkpoint_names(bridge.original_model)
    filled: dict[int, nn.Parameter] = {}
    for module_name, module in bridge.original_model.named_modules():
        for param_name, param in list(module.named_parameters(recurse=False)):
            if param.is_meta:
                if id(param) not in filled:
                    value = read(names[id(param)], f"{module_name}.{param_name}")
                    filled[id(param)] = nn.Parameter(value, requires_grad=param.requires_grad)
                setattr(module, param_name, filled[id(param)])
    empty = [n for n, t in [*bridge.original_model.named_parameters(), *bridge.original_model.named_buffers()] if t.is_meta]
    if empty:
        raise RuntimeError(f"{len(empty)} tensors of the model were never filled (first: {empty[0]})")


def can_process_in_chunks(bridge: TransformerBridge) -> bool:
    """Chunking is exact only when no processing step looks across chunks: the adapter must not
    preprocess the whole state dict, no logit softcap (centring is skipped then), no
    encoder-decoder, and no batched experts (folded on the live model).

    >>> from interp.models.bridge import boot, enable_compatibility
    >>> from interp.models.loading import load_hf_model
    >>> bridge = boot(*load_hf_model("tiny-llama"), "tiny-llama", torch.device("cpu"))
    >>> enable_compatibility(bridge, process_weights=False)
    >>> can_process_in_chunks(bridge)
    True
    """
    from transformer_lens.model_bridge.architecture_adapter import ArchitectureAdapter
    from transformer_lens.model_bridge.generalized_components.moe import has_batched_experts

    adapter = bridge.adapter
    if adapter is None or type(adapter).preprocess_weights is not ArchitectureAdapter.preprocess_weights:
        return False
    if (getattr(bridge.cfg, "output_logits_soft_cap", None) or -1) > 0:
        return False
    if any(name.startswith(("encoder_blocks", "decoder_blocks")) for name in bridge.real_components):
        return False
    return not any(has_batched_experts(module) for module in bridge.original_model.modules())


def _weight_chunks(keys: list[str], n_layers: int) -> Iterator[tuple[str, list[str]]]:
    """(role, keys): the embeddings, the other global tensors (final norm, unembedding), then
    block by block; the two largest chunks go first, while little else is resident."""
    blocks = [[k for k in keys if k.startswith(f"blocks.{layer}.")] for layer in range(n_layers)]
    in_blocks = {k for block in blocks for k in block}
    global_keys = [k for k in keys if k not in in_blocks]
    yield "embeddings", [k for k in global_keys if k.startswith(EMBEDDINGS)]
    yield "globals", [k for k in global_keys if not k.startswith(EMBEDDINGS)]
    yield from (("block", block) for block in blocks if block)


def _tl_keys(state_dict: dict[str, Tensor], bridge: TransformerBridge) -> dict[str, Tensor]:
    """Keys an adapter step may give back in HF form (``model.layers.0...``) in the TL form
    ``distribute_weights_to_components`` routes by, as ``TransformerBridge.process_weights`` does."""
    hf_to_tl = {remote: tl for tl, (remote, _) in bridge.real_components.items() if remote and remote != tl}
    renamed = {}
    for key, value in state_dict.items():
        for hf_prefix, tl_prefix in hf_to_tl.items():
            if key.startswith(hf_prefix + "."):
                key = f"{tl_prefix}.{key[len(hf_prefix) + 1:]}"
                break
        renamed[key] = value
    return renamed


def process_in_chunks(bridge: TransformerBridge, read: NamedReader, progress: bool = False) -> None:
    """Process the raw weights ``read`` gives into a bridge booted on an empty model (compatibility
    mode without processing) one chunk at a time, leaving it as ``enable_compatibility_mode()``
    would: every processing step reads one block's own tensors (and the globals only the global
    chunk), so the result is bit-identical to processing everything at once.

    >>> from accelerate import init_empty_weights
    >>> from transformers import AutoModelForCausalLM
    >>> from interp.models import load_model
    >>> from interp.models.bridge import boot, enable_compatibility
    >>> from interp.models.loading import load_hf_model
    >>> full, tokenizer = load_hf_model("tiny-llama")
    >>> with init_empty_weights(include_buffers=False):
    ...     empty = AutoModelForCausalLM.from_config(full.config)
    >>> bridge = boot(empty, tokenizer, "tiny-llama", torch.device("cpu"))
    >>> enable_compatibility(bridge, process_weights=False)
    >>> raw, read = full.state_dict(), []
    >>> process_in_chunks(bridge, lambda names, what: read.append(what) or raw[names[0]])
    >>> read[:3], len(read)   # the embeddings, the globals, then block by block
    (['embed.weight', 'ln_final.weight', 'unembed.weight'], 21)
    >>> tokens = torch.tensor([[3, 7, 11, 5]])
    >>> bool(torch.allclose(bridge(tokens), load_model("tiny-llama", device="cpu")(tokens), atol=1e-6))
    True
    """
    from tqdm.auto import tqdm

    if weights_processed(bridge):
        raise ValueError("the bridge's weights are already processed")
    names = _checkpoint_names(bridge.original_model)
    current = bridge.state_dict(keep_vars=True)

    def raw(key: str) -> Tensor:
        value = current[key]
        return value.detach() if not value.is_meta else read(names.get(id(value), []), key)

    keys = list(current)
    embeddings = [k for k in keys if k.startswith(EMBEDDINGS)]
    # centring the writing weights needs the embeddings beside every block: other chunks get a
    # copy to centre and throw away.
    needs_embeddings = getattr(bridge.cfg, "normalization_type", "LN") in ("LN", "LNPre") \
        and not getattr(bridge.cfg, "final_rms", False)
    bridge._weights_processed = True  # as process_weights does: a failure leaves no raw basis
    all_chunks = [(role, chunk) for role, chunk in _weight_chunks(keys, bridge.cfg.n_layers) if chunk]
    for role, chunk in tqdm(all_chunks, desc="process weights", disable=not progress, leave=False):
        state_dict = {key: raw(key) for key in chunk}
        borrowed = needs_embeddings and role != "embeddings"
        if borrowed:
            state_dict.update({key: raw(key) for key in embeddings})
        processed = ProcessWeights.process_weights(
            state_dict, bridge.cfg, fold_ln=True, center_writing_weights=True, center_unembed=role == "globals",
            fold_value_biases=True, refactor_factored_attn_matrices=False, adapter=bridge.adapter)
        if borrowed:
            processed = {k: v for k, v in processed.items() if not k.startswith(EMBEDDINGS)}
        ProcessWeights.distribute_weights_to_components(state_dict=_tl_keys(processed, bridge),
                                                        component_mapping=bridge.real_components)
        del state_dict, processed
    bridge.adapter.postprocess_weights(bridge)
    _make_weights_contiguous(bridge)
