"""Prompts as token ids, with items of any number of tokens.

The prompt is encoded as one text (BOS first when asked), the answer as its own text and
appended: for the formats here (items after a space, the answer after ``:``) that is exactly how
the tokenizer splits prompt + answer as a whole. An item may take several tokens (SmolLM2 and
Qwen2 write ``" 7"`` as ``" "``, ``"7"``): exact match then needs every one of them, and
:func:`item_token_starts` says where each item begins, for reading attention at an item.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from .render import Prompt


@dataclass(frozen=True)
class EncodedPrompt:
    """Token ids of a prompt, its answer, and the tokens that may end the answer (empty: the
    answer needs no end marker). ``answer_item_starts[i]`` is the index in ``answer_ids`` of
    answer item ``i``'s first token."""

    prompt_ids: tuple[int, ...]
    answer_ids: tuple[int, ...]
    end_ids: frozenset[int]
    answer_item_starts: tuple[int, ...] = ()

    @property
    def ids(self) -> tuple[int, ...]:
        return self.prompt_ids + self.answer_ids

    @property
    def answer_start(self) -> int:
        return len(self.prompt_ids)


def text_ids(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    """The tokens of ``text`` as plain text: a special token's string in it stays text. The
    copying lines' ``<bos>`` / ``<eos>`` markers are literal, but Gemma's tokenizer would read
    them as its own BOS and EOS, and a BOS on every line stops Gemma-3-270M copying at all.

    >>> from interp.models import tiny_tokenizer
    >>> text_ids(tiny_tokenizer(), "a b") == tiny_tokenizer().encode("a b", add_special_tokens=False)
    True
    """
    return tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)


def first_tokens(tokenizer: PreTrainedTokenizerBase, texts: Sequence[str]) -> set[int]:
    return {text_ids(tokenizer, t)[0] for t in texts}


def end_token_ids(tokenizer: PreTrainedTokenizerBase, end_text: str, protocol: str = "interp",
                  family: str = "copying") -> frozenset[int]:
    """Tokens that may follow a correct answer.

    ``interp``: the first token of the line's end marker, a newline, or EOS: greedy generation
    stops on any of them, so requiring one makes teacher-forced exact match agree with generation
    (no extra items after a correct copy). ``paper``: retrieval answers need no end (the paper
    reads the first symbol of a 6-token generation); copying answers end at ``<eos>`` or a blank
    line only."""
    eos = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    if protocol == "paper":
        if family == "retrieval":
            return frozenset()
        return frozenset(first_tokens(tokenizer, [end_text, "\n\n"]) | eos)
    return frozenset(first_tokens(tokenizer, [end_text, "\n", "\n\n"]) | eos)


def bos_ids(tokenizer: PreTrainedTokenizerBase, prepend_bos: bool) -> list[int]:
    """``[BOS]`` when asked for and the tokenizer has one, else ``[]``."""
    return [tokenizer.bos_token_id] if prepend_bos and tokenizer.bos_token_id is not None else []


def token_index_of_chars(tokenizer: PreTrainedTokenizerBase, text: str, chars: Sequence[int]) -> list[int]:
    """For each character offset in ``text``, the index of the token that covers it (fast
    tokenizers report each token's character span)."""
    spans = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True,
                      split_special_tokens=True)["offset_mapping"]
    found = []
    for char in chars:
        index = next((i for i, (start, end) in enumerate(spans) if start <= char < end), None)
        if index is None:
            raise ValueError(f"no token covers character {char} of {text[max(0, char - 20):char + 20]!r}")
        found.append(index)
    return found


def answer_item_char_starts(prompt: Prompt) -> list[int]:
    """Where each answer item's own characters start in ``prompt.answer_text`` (``" a b c"``)."""
    starts, cursor = [], 1
    for item in prompt.example.target:
        starts.append(cursor)
        cursor += len(item) + 1
    return starts


def encode_prompt(tokenizer: PreTrainedTokenizerBase, prompt: Prompt, prepend_bos: bool = True) -> EncodedPrompt:
    """The prompt as ordinary text, the answer's own tokens appended (any number per item)."""
    from ..tasks import get_task

    prompt_ids = bos_ids(tokenizer, prepend_bos) + text_ids(tokenizer, prompt.text)
    answer_ids = text_ids(tokenizer, prompt.answer_text)
    if not answer_ids:
        raise ValueError(f"the answer {prompt.answer_text!r} encodes to no token")
    starts = token_index_of_chars(tokenizer, prompt.answer_text, answer_item_char_starts(prompt))
    family = get_task(prompt.example.task).family
    return EncodedPrompt(tuple(prompt_ids), tuple(answer_ids), end_token_ids(tokenizer, prompt.end_text, prompt.protocol, family),
                         tuple(starts))


def encode_prompts(tokenizer: PreTrainedTokenizerBase, prompts: Sequence[Prompt], prepend_bos: bool = True) -> list[EncodedPrompt]:
    return [encode_prompt(tokenizer, p, prepend_bos) for p in prompts]
