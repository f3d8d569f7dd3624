"""Checks of an edge-patching request against the model's shape, before any weights are loaded.

The shape comes from the model's ``config.json`` (or the tiny models' own config); when it cannot be read
without loading (the embedded model before its first conversion), the checks run after loading instead.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from interp.models import ALIASES, EMBEDDED_MODEL, TINY_MODELS, TinyModelConfig, embedded_cache_path, local_checkpoint
from interp.models.shape import ModelShape
from interp.interventions.edges.data import prompt_length
from interp.interventions.edges.layout import check_heads, check_layers


def model_shape(name_or_path: str) -> ModelShape | None:
    """The shape of a model known to ``interp.models.load_model``, read without loading its weights.

    >>> model_shape("tiny-gpt2")
    ModelShape(n_layers=2, n_heads=4, n_ctx=512, d_model=None, vocab_size=None, n_params=None)
    """
    name = ALIASES.get(name_or_path.lower(), name_or_path)
    if name in TINY_MODELS:
        tiny = TinyModelConfig()
        return ModelShape(tiny.n_layers, tiny.n_heads, tiny.n_ctx)
    folder = embedded_cache_path() if name == EMBEDDED_MODEL else local_checkpoint(name)
    if folder is None or not (folder / "config.json").exists():
        return None
    try:
        return ModelShape.from_config(json.loads((folder / "config.json").read_text()))
    except (OSError, ValueError):
        return None


def check_request(shape: ModelShape, lengths: Sequence[int], n_shots: int, bos: bool,
                  layers: Sequence[int] | None, heads: Sequence[int] | None, fmt: str = "few-shot") -> None:
    """Raise ``ValueError`` naming the argument when the request does not fit the model.

    >>> shape = model_shape("tiny-gpt2")
    >>> check_request(shape, lengths=[5], n_shots=11, bos=True, layers=[1], heads=None) is None
    True
    >>> check_request(shape, lengths=[5], n_shots=11, bos=True, layers=[2], heads=None)
    Traceback (most recent call last):
    ValueError: --layers: layer(s) [2] out of range; the model has layers 0-1
    """
    check_layers(layers, shape.n_layers, "--layers")
    check_heads(heads, shape.n_heads, "--heads")
    longest = max(lengths)
    needed = prompt_length(longest, n_shots, bos, fmt=fmt)
    if needed > shape.n_ctx:
        raise ValueError(f"--lengths: a {n_shots}-shot prompt of length {longest} takes {needed} tokens, more than the "
                         f"model's context of {shape.n_ctx}")
