"""Shared machinery of the realistic tasks: free-text prompts as ``EncodedPrompt``s, scored by
the toolkit's one teacher-forced pass ([`interp.measure.teacher_forcing.teacher_forced_scores`][interp.measure.teacher_forcing.teacher_forced_scores], which
also gives every next-token prediction), and (slow, optional) greedy generation for checks.

The synthetic tasks encode answers item by item; here answers are ordinary text, encoded on their
own and appended to the separately encoded prompt. That token split is what the model must
reproduce; [`split_is_natural`][interp.experiments.realistic.common.split_is_natural] says whether it is also how the tokenizer splits the whole
text (it is for the prompts of this package with byte-level BPE tokenizers, whose pre-tokenizer
never merges across the prompt/answer boundaries used here).
"""

from __future__ import annotations

from dataclasses import dataclass

from interp.prompts.tokens import text_ids
from interp.measure.generation import greedy_answers
from interp.prompts import AnswerEnd, EncodedPrompt, bos_ids, first_tokens
from interp.measure.teacher_forcing import check_context, teacher_forced_scores

__all__ = ["TextPrompt", "check_context", "encode_text_prompt", "first_tokens", "greedy_answers",
           "split_is_natural", "teacher_forced_scores"]


@dataclass(frozen=True)
class TextPrompt:
    """A prompt that ends where the answer starts, the answer, and the text that should follow it."""

    text: str
    answer_text: str
    end_text: str


def encode_text_prompt(tokenizer, prompt: TextPrompt, end: AnswerEnd, prepend_bos: bool) -> EncodedPrompt:
    """Prompt and answer encoded separately and concatenated (BOS first when asked).

    >>> from interp.models.tiny import tiny_tokenizer
    >>> tokenizer = tiny_tokenizer()
    >>> prompt = TextPrompt("Lorem ipsum:", " Dolor sit amet.", " <end>")
    >>> encoded = encode_text_prompt(tokenizer, prompt, AnswerEnd.not_required(), prepend_bos=False)
    >>> tokenizer.decode(encoded.prompt_ids), tokenizer.decode(encoded.answer_ids)
    ('Lorem ipsum:', ' Dolor sit amet.')
    """
    prompt_ids = bos_ids(tokenizer, prepend_bos) + text_ids(tokenizer, prompt.text)
    answer_ids = text_ids(tokenizer, prompt.answer_text)
    if not answer_ids:
        raise ValueError(f"prompt.answer_text={prompt.answer_text!r} encodes to no token")
    return EncodedPrompt(tuple(prompt_ids), tuple(answer_ids), end)


def split_is_natural(tokenizer, prompt: TextPrompt) -> bool:
    """Whether encoding prompt, answer and end marker apart gives the tokens of the whole text.

    >>> from interp.models.tiny import tiny_tokenizer
    >>> tokenizer = tiny_tokenizer()
    >>> split_is_natural(tokenizer, TextPrompt("Lorem ipsum:", " Dolor sit amet.", " <end>"))
    True
    >>> split_is_natural(tokenizer, TextPrompt("Lorem ", "ipsum", "."))  # the whole text merges " i"
    False
    """
    parts = [text_ids(tokenizer, t) for t in (prompt.text, prompt.answer_text, prompt.end_text)]
    whole = text_ids(tokenizer, prompt.text + prompt.answer_text + prompt.end_text)
    return sum(parts, []) == whole
