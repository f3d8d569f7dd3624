"""Vocabularies of task items.

The default is the paper's: retrieval over the 62 symbols a-z A-Z 0-9, copying over the 52
letters. Items appear in prompts after a space and may take several tokens (SmolLM2 and Qwen2
write ``" 7"`` as a space and a digit): exact match then requires every token of an item.
``single_token_vocabulary`` keeps only the items that are one token as ``" " + item``, the
toolkit's earlier default, for analyses that need one token per item.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from transformers import PreTrainedTokenizerBase

from interp.data.tasks import ALNUM, LETTERS, TaskSpec, get_task

ITEM_PREFIX = " "


def paper_vocabulary(task: str | TaskSpec) -> tuple[str, ...]:
    """The paper's items for a task: a-z A-Z 0-9 for retrieval, a-z A-Z for copying.

    >>> len(paper_vocabulary("UR")), len(paper_vocabulary("UF"))
    (62, 52)
    """
    spec = task if isinstance(task, TaskSpec) else get_task(task)
    return ALNUM if spec.family == "retrieval" else LETTERS


def item_token_id(tokenizer: PreTrainedTokenizerBase, item: str) -> int | None:
    """The single token id of ``" " + item``, or None when it takes several tokens.

    >>> from interp.models.tiny import tiny_tokenizer
    >>> item_token_id(tiny_tokenizer(), "a")
    319
    """
    ids = tokenizer.encode(ITEM_PREFIX + item, add_special_tokens=False)
    return ids[0] if len(ids) == 1 else None


def single_token_vocabulary(tokenizer: PreTrainedTokenizerBase, candidates: Sequence[str] = ALNUM) -> tuple[str, ...]:
    """The candidates that are one token each, in their given order.

    >>> from interp.models.tiny import tiny_tokenizer
    >>> len(single_token_vocabulary(tiny_tokenizer()))  # a-z A-Z 0-9 are all single tokens here
    62
    """
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
    so the choice is deterministic for a given tokenizer.

    >>> from transformers import AutoTokenizer
    >>> words = word_vocabulary(AutoTokenizer.from_pretrained("HuggingFaceTB/SmolLM2-135M-Instruct"), size=100)  # doctest: +SKIP
    """
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
    """Map each item to its token id, with one error naming every item that is not one token.

    >>> from interp.models.tiny import tiny_tokenizer
    >>> item_token_ids(tiny_tokenizer(), ["a", "b"])
    {'a': 319, 'b': 296}
    """
    mapping = {item: item_token_id(tokenizer, item) for item in items}
    bad = [item for item, tid in mapping.items() if tid is None]
    if bad:
        raise ValueError(f"items {bad[:10]} are not single tokens for this tokenizer (as {ITEM_PREFIX!r} + item)")
    return mapping  # type: ignore[return-value]
