"""GGUF -> Hugging Face folder (sharded fp32 safetensors, config, tokenizer), tensor by tensor.

Why not ``from_pretrained(gguf_file=...)`` + ``save_pretrained``: that materializes the whole
dequantized model (7.1 GB for Qwen2.5-1.5B, 9.1 GB peak) only to write it out again. Here the
GGUF file is memory-mapped by the ``gguf`` package's reader, each tensor is dequantized by the
``gguf`` package (a block of rows at a time for the large ones), and shards of at most
``shard_bytes`` are written one after another, so the peak stays near one shard. The config and
tokenizer still come from transformers' own GGUF readers, and tensor names from the ``gguf``
package's name map, as transformers does; the dequantized values are bit-identical to
transformers' (checked on Qwen2.5-Coder-1.5B and, in the tests, on the embedded SmolLM2).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

ROWS_PER_BLOCK = 16384  # dequantize large tensors in row blocks: numpy's temporaries stay ~0.3 GB


@dataclass(frozen=True)
class StorageQuirks:
    """What llama.cpp's converter changed in an architecture's tensors, undone here as
    transformers' GGUF tensor processors undo it."""

    permuted_qk: bool = False  # Llama's q/k rows permuted for llama.cpp's rotary layout
    norm_offset: float = 0.0  # Gemma's RMSNorm scales by (1 + w); llama.cpp stores 1 + w


# Architectures not listed are refused rather than converted wrongly.
ARCHITECTURES = {"llama": StorageQuirks(permuted_qk=True), "qwen2": StorageQuirks(),
                 "gemma3": StorageQuirks(norm_offset=1.0)}


@dataclass(frozen=True)
class ConversionConfig:
    shard_bytes: int = 1 << 30
    dtype: torch.dtype = torch.float32
    progress: bool = False


def _gguf_architecture(reader) -> str:
    field = reader.fields["general.architecture"]
    return bytes(field.parts[field.data[0]]).decode()


def _hf_names(model: nn.Module, architecture: str, n_layers: int) -> dict[str, str]:
    """GGUF tensor name -> HF parameter name, through the ``gguf`` package's name map."""
    from gguf import MODEL_ARCH_NAMES, get_tensor_name_map

    arch = next((key for key, value in MODEL_ARCH_NAMES.items() if value == architecture), None)
    if arch is None:
        raise ValueError(f"the gguf package does not know the architecture {architecture!r}")
    name_map = get_tensor_name_map(arch, n_layers)
    names = {}
    for hf_name in model.state_dict():
        base, _, suffix = hf_name.rpartition(".")
        gguf_base = name_map.get_name(base)
        if gguf_base is not None:
            names[f"{gguf_base}.{suffix}"] = hf_name
    return names


def reverse_permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's q/k row permutation (as transformers' LlamaTensorProcessor does).

    >>> reverse_permute(np.arange(8 * 3).reshape(8, 3), n_head=2).shape  # rows reordered within each head
    (8, 3)
    """
    dim = weights.shape[0] // n_head // 2
    return weights.reshape(n_head, dim, 2, *weights.shape[1:]).swapaxes(2, 1).reshape(weights.shape)


def _dequantized(tensor, config, architecture: str) -> torch.Tensor:
    from gguf import dequantize

    data = tensor.data
    rows = data.shape[0]
    first = dequantize(data[:ROWS_PER_BLOCK], tensor.tensor_type)
    # A fresh array of our own: writable (the reader's memory map is not) and filled block by block.
    values = np.empty((rows, *first.shape[1:]), dtype=np.float32)
    values[:ROWS_PER_BLOCK] = first
    del first
    for start in range(ROWS_PER_BLOCK, rows, ROWS_PER_BLOCK):
        values[start:start + ROWS_PER_BLOCK] = dequantize(data[start:start + ROWS_PER_BLOCK], tensor.tensor_type)
    quirks = ARCHITECTURES[architecture]
    if quirks.permuted_qk and (".attn_q." in tensor.name or ".attn_k." in tensor.name):
        heads = config.num_attention_heads if ".attn_q." in tensor.name else config.num_key_value_heads
        values = np.ascontiguousarray(reverse_permute(values, heads))
    if quirks.norm_offset and "norm.weight" in tensor.name:
        values -= np.float32(quirks.norm_offset)
    return torch.from_numpy(values)


def _shard_plan(tensors, names: dict[str, str], shard_bytes: int, element_bytes: int) -> list[list]:
    """Tensors grouped, in file order, into shards of at most ``shard_bytes`` (a larger tensor
    gets a shard of its own)."""
    shards: list[list] = [[]]
    size = 0
    for tensor in tensors:
        if tensor.name not in names:
            continue
        nbytes = int(np.prod(tensor.shape)) * element_bytes
        if shards[-1] and size + nbytes > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(tensor)
        size += nbytes
    return shards


def convert_gguf_to_hf(gguf_path: Path, folder: Path, settings: ConversionConfig = ConversionConfig()) -> None:
    """Write the model in ``gguf_path`` into ``folder`` (which the caller publishes atomically).

    >>> import tempfile
    >>> from interp.models.paper import GEMMA_3_270M
    >>> folder = Path(tempfile.mkdtemp())
    >>> convert_gguf_to_hf(GEMMA_3_270M.gguf_path(), folder, ConversionConfig(progress=False))  # a 253 MB GGUF  # doctest: +SKIP
    >>> json.loads((folder / "config.json").read_text())["architectures"]  # doctest: +SKIP
    ['Gemma3ForCausalLM']
    """
    from accelerate import init_empty_weights
    from gguf import GGUFReader
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM

    gguf_path, folder = Path(gguf_path), Path(folder)
    reader = GGUFReader(gguf_path)
    architecture = _gguf_architecture(reader)
    if architecture not in ARCHITECTURES:
        raise ValueError(f"{gguf_path.name}: architecture {architecture!r} is not supported by this converter "
                         f"(supported: {sorted(ARCHITECTURES)}); convert it with transformers' from_pretrained(gguf_file=...)")
    config = AutoConfig.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    with init_empty_weights(include_buffers=False):
        skeleton = AutoModelForCausalLM.from_config(config)
    skeleton.tie_weights()
    expected = {name: tuple(p.shape) for name, p in skeleton.state_dict().items()}
    names = _hf_names(skeleton, architecture, config.num_hidden_layers)
    element_bytes = torch.finfo(settings.dtype).bits // 8
    plan = _shard_plan(reader.tensors, names, settings.shard_bytes, element_bytes)
    weight_map: dict[str, str] = {}
    total = 0
    bar = tqdm(total=sum(len(s) for s in plan), desc=f"dequantize {gguf_path.name}", unit="tensor",
               disable=not settings.progress)
    for index, shard in enumerate(plan, start=1):
        file = f"model-{index:05d}-of-{len(plan):05d}.safetensors"
        tensors = {}
        for tensor in shard:
            name = names[tensor.name]
            value = _dequantized(tensor, config, architecture).to(settings.dtype)
            if tuple(value.shape) != expected[name]:
                raise ValueError(f"{gguf_path.name}: {tensor.name} dequantizes to {tuple(value.shape)}, "
                                 f"but {name} is {expected[name]}")
            tensors[name] = value
            weight_map[name] = file
            total += value.numel() * element_bytes
            bar.update()
        save_file(tensors, str(folder / file), metadata={"format": "pt"})
        (folder / file).chmod(0o644)  # safetensors writes 0600; the cache is meant to be shared
        del tensors
    bar.close()
    tied = {"lm_head.weight"} if config.tie_word_embeddings else set()
    missing = sorted(set(expected) - set(weight_map) - tied)
    if missing:
        raise ValueError(f"{gguf_path.name} has no tensor for {len(missing)} weights of the model (first: {missing[0]})")
    config.dtype = settings.dtype
    config.architectures = [type(skeleton).__name__]  # as save_pretrained records it
    _write_index_and_config(folder, gguf_path, config, weight_map, total)


def _write_index_and_config(folder: Path, gguf_path: Path, config, weight_map: dict[str, str], total: int) -> None:
    """The shards' index, the config, the generation config and the tokenizer beside the shards."""
    from transformers import AutoTokenizer, GenerationConfig

    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    config.save_pretrained(folder)
    GenerationConfig.from_model_config(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name).save_pretrained(folder)
