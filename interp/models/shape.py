"""A model's dimensions, known without running it: from a Hugging Face ``config.json`` (checks made
before loading any weight) or from a loaded model (on the meta device too)."""

from __future__ import annotations

from dataclasses import dataclass


def _first(config: dict, *keys: str) -> int | None:
    for key in keys:
        if isinstance(config.get(key), int):
            return config[key]
    return None


@dataclass(frozen=True)
class ModelShape:
    """Layers, query heads and whatever else is known (``None`` where the source does not say).

    >>> ModelShape.from_config({"num_hidden_layers": 30, "num_attention_heads": 9, "max_position_embeddings": 8192})
    ModelShape(n_layers=30, n_heads=9, n_ctx=8192, d_model=None, vocab_size=None, n_params=None)
    """

    n_layers: int
    n_heads: int
    n_ctx: int | None = None
    d_model: int | None = None
    vocab_size: int | None = None
    n_params: int | None = None

    @classmethod
    def from_config(cls, config: dict) -> "ModelShape | None":
        """From a Hugging Face ``config.json`` as a dict (multimodal ones: their ``text_config``);
        None when it lacks layers or heads."""
        config = config.get("text_config", config)
        n_layers = _first(config, "num_hidden_layers", "n_layer", "num_layers")
        n_heads = _first(config, "num_attention_heads", "n_head")
        if n_layers is None or n_heads is None:
            return None
        return cls(n_layers, n_heads, _first(config, "max_position_embeddings", "n_positions", "n_ctx"),
                   _first(config, "hidden_size", "n_embd", "d_model"), _first(config, "vocab_size"))
