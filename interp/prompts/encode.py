"""Prompts as token ids, with items of any number of tokens.

The prompt is encoded as one text (BOS first when asked), the answer as its own text and
appended: for the formats here (items after a space, the answer after ``:``) that is exactly how
the tokenizer splits prompt + answer as a whole. An item may take several tokens (SmolLM2 and
Qwen2 write ``" 7"`` as ``" "``, ``"7"``): exact match then needs every one of them, and
`item_token_starts` says where each item begins, for reading attention at an item.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from interp.data.tasks import get_task
from interp.prompts.answer_rule import AnswerEnd, AnswerRule, answer_rule
from interp.prompts.render import Prompt
from interp.prompts.tokens import text_ids


@dataclass(frozen=True)
class EncodedPrompt:
    """Token ids of a prompt and its answer, and what may follow a correct answer (``end``, from
    the protocol's [`AnswerRule`][interp.prompts.answer_rule.AnswerRule]). ``answer_item_starts[i]`` is
    the index in ``answer_ids`` of answer item ``i``'s first token."""

    prompt_ids: tuple[int, ...]
    answer_ids: tuple[int, ...]
    end: AnswerEnd
    answer_item_starts: tuple[int, ...] = ()

    @property
    def ids(self) -> tuple[int, ...]:
        return self.prompt_ids + self.answer_ids

    @property
    def answer_start(self) -> int:
        return len(self.prompt_ids)


def bos_ids(tokenizer: PreTrainedTokenizerBase, prepend_bos: bool) -> list[int]:
    """``[BOS]`` when asked for and the tokenizer has one, else ``[]``.

    >>> from interp.models.tiny import tiny_tokenizer
    >>> bos_ids(tiny_tokenizer(), True), bos_ids(tiny_tokenizer(), False)
    ([0], [])
    """
    return [tokenizer.bos_token_id] if prepend_bos and tokenizer.bos_token_id is not None else []


def token_index_of_chars(tokenizer: PreTrainedTokenizerBase, text: str, chars: Sequence[int]) -> list[int]:
    """For each character offset in ``text``, the index of the token that covers it (fast
    tokenizers report each token's character span).

    >>> from interp.models.tiny import tiny_tokenizer
    >>> token_index_of_chars(tiny_tokenizer(), " a b c", [1, 3, 5])
    [0, 1, 2]
    """
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
    """Where each answer item's own characters start in ``prompt.answer_text`` (``" a b c"``).

    >>> from interp.data.tasks import generate_example
    >>> from interp.prompts import PromptConfig, build_prompt
    >>> prompt = build_prompt(generate_example("UF", 3, seed=0), [], PromptConfig(n_shots=0))
    >>> prompt.answer_text, answer_item_char_starts(prompt)
    (' 2 y W', [1, 3, 5])
    """
    starts, cursor = [], 1
    for item in prompt.example.target:
        starts.append(cursor)
        cursor += len(item) + 1
    return starts


def encode_prompt(tokenizer: PreTrainedTokenizerBase, prompt: Prompt, prepend_bos: bool = True) -> EncodedPrompt:
    """The prompt as ordinary text, the answer's own tokens appended (any number per item).

    >>> from interp.data.tasks import generate_example
    >>> from interp.models.tiny import tiny_tokenizer
    >>> from interp.prompts import PromptConfig, build_prompt
    >>> prompt = build_prompt(generate_example("UR", 5, seed=0), [], PromptConfig(n_shots=0))
    >>> encoded = encode_prompt(tiny_tokenizer(), prompt, prepend_bos=False)
    >>> len(encoded.prompt_ids), encoded.answer_ids
    (7, (268,))
    """
    prompt_ids = bos_ids(tokenizer, prepend_bos) + text_ids(tokenizer, prompt.text)
    answer_ids = text_ids(tokenizer, prompt.answer_text)
    if not answer_ids:
        raise ValueError(f"the answer {prompt.answer_text!r} encodes to no token")
    starts = token_index_of_chars(tokenizer, prompt.answer_text, answer_item_char_starts(prompt))
    end = prompt_rule(prompt).end(tokenizer, prompt.end_text)
    return EncodedPrompt(tuple(prompt_ids), tuple(answer_ids), end, tuple(starts))


def prompt_rule(prompt: Prompt) -> AnswerRule:
    """The answer rule of a rendered prompt: its protocol, its task's family.

    >>> from interp.data.tasks import generate_example
    >>> from interp.prompts import PromptConfig, build_prompt
    >>> prompt_rule(build_prompt(generate_example("UR", 5, seed=0), [], PromptConfig(n_shots=0)))
    AnswerRule(protocol='interp', family='retrieval')
    """
    return answer_rule(prompt.protocol, get_task(prompt.example.task).family)


def encode_prompts(tokenizer: PreTrainedTokenizerBase, prompts: Sequence[Prompt], prepend_bos: bool = True) -> list[EncodedPrompt]:
    """[`encode_prompt`][interp.prompts.encode.encode_prompt] of each prompt.

    >>> from interp.data.tasks import generate_examples
    >>> from interp.models.tiny import tiny_tokenizer
    >>> from interp.prompts import build_prompts
    >>> len(encode_prompts(tiny_tokenizer(), build_prompts(generate_examples("UF", 4, n=3))))
    3
    """
    return [encode_prompt(tokenizer, p, prepend_bos) for p in prompts]
