"""Checks of an edge-patching request against the model's shape, before any weights are loaded.

The shape comes from the model's ``config.json`` (or the tiny models' own config); when it cannot be read
without loading (the embedded model before its first conversion), the checks run after loading instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from collections.abc import Sequence

from interp.models import ALIASES, EMBEDDED_MODEL, TINY_MODELS, TinyModelConfig, embedded_cache_path, local_checkpoint
from interp.interventions.edges.data import prompt_length
from interp.interventions.edges.patching import check_heads, check_layers


@dataclass(frozen=True)
class ModelShape:
    n_layers: int
    n_heads: int
    n_ctx: int


def _first(config: dict, *keys: str) -> int | None:
    for key in keys:
        if isinstance(config.get(key), int):
            return config[key]
    return None


def shape_from_config(config: dict) -> ModelShape | None:
    """Layers, query heads and context length from a Hugging Face ``config.json`` (None if it lacks them)."""
    config = config.get("text_config", config)
    values = (_first(config, "num_hidden_layers", "n_layer", "num_layers"), _first(config, "num_attention_heads", "n_head"),
              _first(config, "max_position_embeddings", "n_positions", "n_ctx"))
    return ModelShape(*values) if all(v is not None for v in values) else None


def model_shape(name_or_path: str) -> ModelShape | None:
    """The shape of a model known to ``interp.models.load_model``, read without loading its weights."""
    name = ALIASES.get(name_or_path.lower(), name_or_path)
    if name in TINY_MODELS:
        tiny = TinyModelConfig()
        return ModelShape(tiny.n_layers, tiny.n_heads, tiny.n_ctx)
    folder = embedded_cache_path() if name == EMBEDDED_MODEL else local_checkpoint(name)
    if folder is None or not (folder / "config.json").exists():
        return None
    try:
        return shape_from_config(json.loads((folder / "config.json").read_text()))
    except (OSError, ValueError):
        return None


def check_request(shape: ModelShape, lengths: Sequence[int], n_shots: int, bos: bool,
                  layers: Sequence[int] | None, heads: Sequence[int] | None) -> None:
    """Raise ``ValueError`` naming the argument when the request does not fit the model."""
    check_layers(layers, shape.n_layers, "--layers")
    check_heads(heads, shape.n_heads, "--heads")
    longest = max(lengths)
    needed = prompt_length(longest, n_shots, bos)
    if needed > shape.n_ctx:
        raise ValueError(f"--lengths: a {n_shots}-shot prompt of length {longest} takes {needed} tokens, more than the "
                         f"model's context of {shape.n_ctx}")
