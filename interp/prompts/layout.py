"""Where things are in an encoded prompt: the test input's items, the query, the answer, and for
each answer item the position that predicts it and the position of the item it copies (the key an
induction or anti-induction head should attend to). Items of several tokens are located at their
first token of their own characters (``"7"`` of ``" ", "7"``)."""

from __future__ import annotations

from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from interp.prompts.encode import EncodedPrompt, encode_prompt, token_index_of_chars
from interp.prompts.render import Prompt
from interp.prompts.tokens import text_ids


@dataclass(frozen=True)
class PromptLayout:
    """Token positions of the interesting parts of one encoded prompt (+ appended answer)."""

    ids: tuple[int, ...]  # prompt ids, then the answer ids when appended
    n_prompt: int  # number of prompt tokens; the query position is n_prompt - 1
    context_positions: tuple[int, ...]  # first token of each item of the test input
    query_item_positions: tuple[int, ...]  # retrieval: the query item's occurrences (and the query after '|')
    answer_positions: tuple[int, ...]  # positions of the appended answer tokens (empty if not appended)
    source_positions: tuple[int, ...]  # for answer item i, the position of the context item it copies
    predicting_positions: tuple[int, ...]  # for answer item i, the position whose logits predict its first token

    @property
    def query_position(self) -> int:
        return self.n_prompt - 1

    def source_pairs(self) -> list[tuple[int, int]]:
        """(predicting position, source position) for every answer item."""
        return list(zip(self.predicting_positions, self.source_positions))


def prompt_layout(tokenizer: PreTrainedTokenizerBase, prompt: Prompt, prepend_bos: bool, append_answer: bool = True,
                  encoded: EncodedPrompt | None = None) -> PromptLayout:
    """Encode ``prompt`` as [`interp.prompts.encode_prompt`][interp.prompts.encode.encode_prompt] does and find its positions.

    >>> from interp.data.tasks import generate_example
    >>> from interp.models.tiny import tiny_tokenizer
    >>> from interp.prompts import PromptConfig, build_prompt
    >>> prompt = build_prompt(generate_example("UR", 5, seed=0), [], PromptConfig(n_shots=0))
    >>> layout = prompt_layout(tiny_tokenizer(), prompt, prepend_bos=False)
    >>> layout.query_position, layout.source_positions, layout.answer_positions
    (6, (2,), (7,))
    """
    encoded = encoded or encode_prompt(tokenizer, prompt, prepend_bos=prepend_bos)
    offset = len(encoded.prompt_ids) - len(text_ids(tokenizer, prompt.text))
    if offset not in (0, 1):
        raise ValueError("the encoded prompt is not the prompt text (with at most a BOS before it)")
    example = prompt.example
    chars = [start for start, _ in prompt.context_spans]
    if example.query is not None and prompt.query_span is not None:
        chars.append(prompt.query_span[0])
    positions = [offset + i for i in token_index_of_chars(tokenizer, prompt.text, chars)]
    context = tuple(positions[: len(prompt.context_spans)])
    query_items: tuple[int, ...] = ()
    if example.query is not None:
        query_items = tuple(context[p] for p in example.query_positions) + (positions[-1],)
    n_prompt = len(encoded.prompt_ids)
    answer = tuple(range(n_prompt, n_prompt + len(encoded.answer_ids))) if append_answer else ()
    sources = tuple(context[p] for p in example.answer_positions)
    predicting = tuple(n_prompt - 1 + start for start in encoded.answer_item_starts)
    if not append_answer:
        sources, predicting = sources[:1], predicting[:1]
    ids = encoded.ids if append_answer else encoded.prompt_ids
    return PromptLayout(tuple(ids), n_prompt, context, query_items, answer, sources, predicting)
