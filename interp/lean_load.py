"""Build a compatibility-mode bridge over a converted checkpoint folder holding one copy of the weights.

Why: ``enable_compatibility_mode()`` hands TransformerLens' ``ProcessWeights.process_weights`` the
whole state dict, and each of its steps (fold layer norms, centre the unembedding, fold value
biases) clones every tensor while the previous copy and the model's raw weights are still alive.
For Qwen2.5-1.5B (7.1 GB of fp32 weights) that peaked at 20-21 GB. Reading the checkpoint through
``from_pretrained``'s memory map does not help either: the pages a processing step touches stay
resident until the whole file is unmapped.

So the model is built with empty (meta) parameters, booted, and then filled:

* warm: the processed weights stored by ``bridge_cache`` are installed by assignment (memory
  mapped, copy-on-write: their pages count only once, when a forward pass reads them);
* cold: the raw tensors are read from the checkpoint with ``pread`` one chunk at a time (the
  embeddings, then the final norm and unembedding, then each block), processed by the same
  ``ProcessWeights.process_weights`` on that chunk alone, and installed before the next chunk
  is read. Every step of TransformerLens' processing reads one block's tensors, or the
  embeddings, or the final norm with the unembedding, never two of these together (the one
  exception, centring LayerNorm models' embeddings, gets a throw-away copy of them), so the
  result is bit-identical to processing everything at once; ``tests/test_paper_model.py``
  checks that on Llama, GPT-2 and Qwen2-shaped models, in fp32 and bf16.

Adapters that preprocess the whole state dict, or models with batched MoE experts, are not
chunked: their raw weights are read into the model and processed by TransformerLens as usual.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Iterator

import torch
from safetensors import safe_open
from transformer_lens.model_bridge.architecture_adapter import ArchitectureAdapter
from transformer_lens.weight_processing import ProcessWeights

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"


class CheckpointFolder:
    """Raw tensors of a safetensors checkpoint folder, read one at a time with ``pread`` (memory
    that is freed with the tensor, unlike a memory map's pages)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        if (self.folder / INDEX_FILE).exists():
            weight_map = json.loads((self.folder / INDEX_FILE).read_text())["weight_map"]
        elif (self.folder / SINGLE_FILE).exists():
            with safe_open(self.folder / SINGLE_FILE, framework="pt") as handle:
                weight_map = dict.fromkeys(handle.keys(), SINGLE_FILE)
        else:
            raise FileNotFoundError(f"{self.folder} holds neither {SINGLE_FILE} nor {INDEX_FILE}: "
                                    f"not a converted checkpoint (delete the folder to convert again)")
        self.weight_map: dict[str, str] = weight_map
        self._handles: dict[str, object] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.weight_map

    def read(self, name: str, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        file = self.weight_map[name]
        if file not in self._handles:
            self._handles[file] = safe_open(self.folder / file, framework="pt", backend="pread")
        return self._handles[file].get_tensor(name).to(device=device, dtype=dtype)


def empty_hf_model(folder: Path, dtype: torch.dtype, device: torch.device):
    """The model of ``folder`` with its parameters on the meta device (no memory) and its buffers
    (rotary frequencies) computed for real on ``device``, as ``from_pretrained`` would."""
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(folder)
    with torch.device(device), init_empty_weights(include_buffers=False):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.tie_weights()  # from_config skips tying meta parameters; from_pretrained ties them
    return model.eval()


def is_empty(model: torch.nn.Module) -> bool:
    return any(p.is_meta for p in model.parameters())


def _parameter_names(model: torch.nn.Module) -> dict[int, list[str]]:
    """Every checkpoint name of each parameter (tied weights have several), keyed by the
    parameter's id. A booted bridge wraps each HF module, adding ``._original_component`` to
    the module paths; the checkpoint names are the paths without it."""
    names: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), []).append(name.replace("._original_component", ""))
    return names


def _checkpoint_name(names: list[str], checkpoint: CheckpointFolder, what: str) -> str:
    for name in names:
        if name in checkpoint:
            return name
    raise KeyError(f"{checkpoint.folder} has no tensor for {what} (looked for {names}); convert it again")


def raw_tensor_reader(bridge, checkpoint: CheckpointFolder) -> Callable[[str], torch.Tensor]:
    """A reader of the raw tensor behind each TransformerLens key of ``bridge.state_dict()``.
    Keys are matched to checkpoint names through the parameters themselves (identity), so no
    naming convention is assumed."""
    model = bridge.original_model
    dtype, device = bridge.cfg.dtype, torch.device(bridge.cfg.device)
    names = _parameter_names(model)
    current = bridge.state_dict(keep_vars=True)

    def read(key: str) -> torch.Tensor:
        value = current[key]
        if not value.is_meta:  # real already: a buffer, or a parameter of a loaded model
            return value.detach()
        name = _checkpoint_name(names.get(id(value), []), checkpoint, key)
        return checkpoint.read(name, dtype, device)

    return read


def materialize_synthetic_buffers(bridge) -> None:
    """Buffers the bridge added while booting an empty model are on the meta device too. The only
    kind TransformerLens adds is the fixed zero bias of a bias-free unembedding
    (``UnembeddingBridge.set_original_component``): give it its zeros; anything else is an error."""
    device = torch.device(bridge.cfg.device)
    for module_name, module in bridge.original_model.named_modules():
        for name, buffer in list(module.named_buffers(recurse=False)):
            if not buffer.is_meta:
                continue
            if name != "bias":
                raise RuntimeError(f"buffer {module_name}.{name} of the empty model is on the meta device and not in "
                                   f"the checkpoint; load this model with from_pretrained instead")
            setattr(module, name, torch.zeros(buffer.shape, dtype=buffer.dtype, device=device))


EMBEDDINGS = ("embed.", "pos_embed.")


def chunks(keys: list[str], n_layers: int) -> Iterator[tuple[str, list[str]]]:
    """(role, keys): the embeddings, the other global tensors (final norm, unembedding), then
    block by block. The two largest chunks go first, while little else is resident, and apart:
    processing upcasts a chunk to fp32 and clones it twice."""
    blocks = [[k for k in keys if k.startswith(f"blocks.{layer}.")] for layer in range(n_layers)]
    in_blocks = {k for block in blocks for k in block}
    global_keys = [k for k in keys if k not in in_blocks]
    yield "embeddings", [k for k in global_keys if k.startswith(EMBEDDINGS)]
    yield "globals", [k for k in global_keys if not k.startswith(EMBEDDINGS)]
    yield from (("block", block) for block in blocks if block)


def can_process_in_chunks(bridge) -> bool:
    """Chunking is exact only when no step looks across chunks: the adapter must not preprocess
    the whole state dict, and there must be no batched experts (folded on the live model)."""
    from transformer_lens.model_bridge.generalized_components.moe import has_batched_experts

    adapter = bridge.adapter
    if adapter is None or type(adapter).preprocess_weights is not ArchitectureAdapter.preprocess_weights:
        return False
    if (getattr(bridge.cfg, "output_logits_soft_cap", None) or -1) > 0:  # process_weights skips centring then
        return False
    if any(name.startswith(("encoder_blocks", "decoder_blocks")) for name in bridge.real_components):
        return False
    return not any(has_batched_experts(module) for module in bridge.original_model.modules())


def _to_tl_prefixes(state_dict: dict[str, torch.Tensor], bridge) -> dict[str, torch.Tensor]:
    """Keys an adapter step may give back in HF form (``model.layers.0...``) renamed to the TL
    form ``distribute_weights_to_components`` routes by, as ``TransformerBridge.process_weights``
    does."""
    hf_to_tl = {remote: tl for tl, (remote, _) in bridge.real_components.items() if remote and remote != tl}
    renamed = {}
    for key, value in state_dict.items():
        for hf_prefix, tl_prefix in hf_to_tl.items():
            if key.startswith(hf_prefix + "."):
                key = f"{tl_prefix}.{key[len(hf_prefix) + 1:]}"
                break
        renamed[key] = value
    return renamed


def process_in_chunks(bridge, checkpoint: CheckpointFolder, progress: bool = False) -> None:
    """Process and install the raw weights of ``checkpoint`` into ``bridge`` (booted on an empty
    model, compatibility mode enabled with ``no_processing=True``) one chunk at a time, leaving
    it as ``enable_compatibility_mode()`` would."""
    from tqdm.auto import tqdm

    if bridge._weights_processed:
        raise ValueError("the bridge's weights are already processed")
    read = raw_tensor_reader(bridge, checkpoint)
    keys = list(bridge.state_dict())
    embeddings = [k for k in keys if k.startswith(EMBEDDINGS)]
    # center_writing_weights centres the embeddings and every block's output weights in one call
    # and refuses to run without the embeddings: other chunks get a copy to centre and throw away.
    needs_embeddings = getattr(bridge.cfg, "normalization_type", "LN") in ("LN", "LNPre") \
        and not getattr(bridge.cfg, "final_rms", False)
    bridge._weights_processed = True  # as process_weights does: a failure leaves no raw basis
    all_chunks = [(role, chunk) for role, chunk in chunks(keys, bridge.cfg.n_layers) if chunk]
    for role, chunk in tqdm(all_chunks, desc="process weights", disable=not progress, leave=False):
        state_dict = {key: read(key) for key in chunk}
        borrowed = needs_embeddings and role != "embeddings"
        if borrowed:
            state_dict.update({key: read(key) for key in embeddings})
        processed = ProcessWeights.process_weights(
            state_dict, bridge.cfg, fold_ln=True, center_writing_weights=True, center_unembed=role == "globals",
            fold_value_biases=True, refactor_factored_attn_matrices=False, adapter=bridge.adapter)
        if borrowed:
            processed = {k: v for k, v in processed.items() if not k.startswith(EMBEDDINGS)}
        ProcessWeights.distribute_weights_to_components(state_dict=_to_tl_prefixes(processed, bridge),
                                                        component_mapping=bridge.real_components)
        del state_dict, processed
    bridge.adapter.postprocess_weights(bridge)


def process_whole(bridge, checkpoint: CheckpointFolder) -> None:
    """Fallback for models that cannot be chunked: read every raw weight into the model, then
    let TransformerLens process them all at once (its usual memory peak)."""
    fill_from_checkpoint(bridge, checkpoint)
    bridge.process_weights()


def fill_from_checkpoint(bridge, checkpoint: CheckpointFolder) -> None:
    """Give every parameter still on the meta device its raw tensor from the checkpoint (those
    processing does not touch, or all of them). Tied parameters stay tied."""
    model = bridge.original_model
    dtype, device = bridge.cfg.dtype, torch.device(bridge.cfg.device)
    names = _parameter_names(model)
    filled: dict[int, torch.nn.Parameter] = {}
    for module_name, module in model.named_modules():
        for param_name, param in list(module.named_parameters(recurse=False)):
            if not param.is_meta:
                continue
            if id(param) not in filled:
                name = _checkpoint_name(names[id(param)], checkpoint, f"{module_name}.{param_name}")
                filled[id(param)] = torch.nn.Parameter(checkpoint.read(name, dtype, device),
                                                       requires_grad=param.requires_grad)
            setattr(module, param_name, filled[id(param)])


def require_filled(model: torch.nn.Module) -> None:
    empty = [name for name, tensor in [*model.named_parameters(), *model.named_buffers()] if tensor.is_meta]
    if empty:
        raise RuntimeError(f"{len(empty)} tensors of the model were never filled (first: {empty[0]}); "
                           f"the checkpoint or the processed-weight cache is incomplete: delete it and load again")
