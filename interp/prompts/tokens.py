"""Text as token ids, the one way the prompt code tokenizes: a special token's string inside the
text stays text. The copying lines' ``<bos>`` / ``<eos>`` markers are literal, but Gemma's tokenizer
would read them as its own BOS and EOS, and a BOS on every line stops Gemma-3-270M copying at all."""

from __future__ import annotations

from transformers import PreTrainedTokenizerBase


def text_ids(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    """The tokens of ``text`` as plain text.

    >>> from interp.models import tiny_tokenizer
    >>> text_ids(tiny_tokenizer(), "a b") == tiny_tokenizer().encode("a b", add_special_tokens=False)
    True
    """
    return tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)
