"""Vocabularies of items that are each exactly one token for a given tokenizer.

Items appear in prompts separated by spaces, so the unit that must be a single token is
``" " + item``. SmolLM2's tokenizer, for instance, splits ``" 7"`` into a space and a digit,
so its alphanumeric vocabulary keeps the 52 letters only.
"""

from __future__ import annotations

import re
from typing import Sequence

from transformers import PreTrainedTokenizerBase

from .tasks import ALNUM

ITEM_PREFIX = " "


def item_token_id(tokenizer: PreTrainedTokenizerBase, item: str) -> int | None:
    """The single token id of ``" " + item``, or None when it takes several tokens."""
    ids = tokenizer.encode(ITEM_PREFIX + item, add_special_tokens=False)
    return ids[0] if len(ids) == 1 else None


def single_token_vocabulary(tokenizer: PreTrainedTokenizerBase, candidates: Sequence[str] = ALNUM) -> tuple[str, ...]:
    """The candidates that are one token each, in their given order."""
    kept = tuple(c for c in candidates if item_token_id(tokenizer, c) is not None)
    if len(kept) < 3:
        raise ValueError(
            f"only {len(kept)} of {len(candidates)} candidate items are single tokens for this tokenizer; "
            f"pass other candidates (e.g. word_vocabulary(tokenizer))"
        )
    return kept


def word_vocabulary(tokenizer: PreTrainedTokenizerBase, size: int = 200, min_chars: int = 3) -> tuple[str, ...]:
    """Lower-case alphabetic words that are single tokens, for unique tasks longer than 52.

    Sorted by token id, which for BPE tokenizers roughly follows merge order (frequent first),
    so the choice is deterministic for a given tokenizer."""
    words = []
    for token_id in range(len(tokenizer)):
        text = tokenizer.decode([token_id])
        word = text[len(ITEM_PREFIX):]
        if text.startswith(ITEM_PREFIX) and re.fullmatch(rf"[a-z]{{{min_chars},}}", word) \
                and item_token_id(tokenizer, word) == token_id:
            words.append(word)
            if len(words) == size:
                break
    if len(words) < size:
        raise ValueError(f"the tokenizer has only {len(words)} single-token words of >= {min_chars} letters; asked for {size}")
    return tuple(words)


def item_token_ids(tokenizer: PreTrainedTokenizerBase, items: Sequence[str]) -> dict[str, int]:
    """Map each item to its token id, with one error naming every item that is not one token."""
    mapping = {item: item_token_id(tokenizer, item) for item in items}
    bad = [item for item, tid in mapping.items() if tid is None]
    if bad:
        raise ValueError(f"items {bad[:10]} are not single tokens for this tokenizer (as {ITEM_PREFIX!r} + item)")
    return mapping  # type: ignore[return-value]
