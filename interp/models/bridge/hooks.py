"""Hook names: TransformerLens' name for a hook and a ``names_filter`` for one kind of hook."""

from __future__ import annotations

from collections.abc import Callable

from transformer_lens.utilities import get_act_name


def act_name(name: str, layer: int | None = None) -> str:
    """TransformerLens' hook name: ``act_name("pattern", 3) == "blocks.3.attn.hook_pattern"``.

    >>> act_name("pattern", 3)
    'blocks.3.attn.hook_pattern'
    """
    return get_act_name(name, layer)


def is_act(name: str) -> Callable[[str], bool]:
    """A ``names_filter`` that keeps one kind of hook in every layer (``is_act("pattern")``).

    >>> is_act("pattern")("blocks.3.attn.hook_pattern"), is_act("pattern")("blocks.3.attn.hook_z")
    (True, False)
    """
    suffix = act_name(name, 0).split(".", 2)[-1]
    return lambda hook_name: hook_name.endswith(suffix)
