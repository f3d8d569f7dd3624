"""What counts as a correct answer, per protocol and task family: one rule read two ways.

Teacher forcing reads the rule at the token level ([`AnswerEnd`][interp.prompts.answer_rule.AnswerEnd]: which tokens may follow
the answer's last token); free generation reads it at the string level ([`AnswerRule.read`][interp.prompts.answer_rule.AnswerRule.read]:
the answer a generated text gives). Keeping both readings in one object is what makes the two
scorings agree record by record.

=========  ==========  ===================================================================
protocol   family      the answer is ...
=========  ==========  ===================================================================
interp     any         the generation up to its line's end (a newline, ``<eos>`` or EOS);
                       a correct answer must be followed by one of them
paper      retrieval   the first symbol of the generation (greedy, stop at a newline, at
                       most 6 new tokens); nothing is required after it
paper      copying     the generation up to ``<eos>`` or a blank line; a copy followed by a
                       single newline and more text is wrong
=========  ==========  ===================================================================

Spaces are dropped everywhere before comparing, as the paper does.
"""

from __future__ import annotations

from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from interp.prompts.config import PROTOCOLS
from interp.prompts.tokens import text_ids

FAMILIES = ("retrieval", "copying")
PAPER_RETRIEVAL_MAX_NEW_TOKENS = 6  # the paper's sampling budget for retrieval answers


@dataclass(frozen=True)
class AnswerEnd:
    """The tokens allowed right after a correct answer under teacher forcing; with
    ``required=False`` any token may follow (the answer needs no end).

    >>> AnswerEnd(frozenset({198})).accepts(13)
    False
    >>> AnswerEnd.not_required().accepts(13)
    True
    """

    tokens: frozenset[int] = frozenset()
    required: bool = True

    def __post_init__(self) -> None:
        if self.required and not self.tokens:
            raise ValueError("AnswerEnd(required=True) needs at least one end token; use AnswerEnd.not_required()")

    @classmethod
    def not_required(cls) -> "AnswerEnd":
        return cls(frozenset(), required=False)

    def accepts(self, token_id: int) -> bool:
        return not self.required or token_id in self.tokens


def first_tokens(tokenizer: PreTrainedTokenizerBase, texts: tuple[str, ...]) -> set[int]:
    """The first token of each text: what a generation must emit to start that text.

    >>> from interp.models.tiny import tiny_tokenizer
    >>> sorted(first_tokens(tiny_tokenizer(), (" x", "\\n")))
    [200, 316]
    """
    ids = set()
    for text in texts:
        encoded = text_ids(tokenizer, text)
        if not encoded:
            raise ValueError(f"the end text {text!r} encodes to no token")
        ids.add(encoded[0])
    return ids


@dataclass(frozen=True)
class AnswerRule:
    """How ``protocol`` reads an answer of a ``family`` task.

    >>> rule = AnswerRule("paper", "retrieval")
    >>> rule.read(" t x\\n")
    't'
    >>> AnswerRule("paper", "copying").read(" a b c\\nd <eos>")
    'abc\\nd'
    >>> AnswerRule("interp", "copying").read(" a b c <eos>\\n<bos>")
    'abc'
    """

    protocol: str = "interp"
    family: str = "copying"

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol={self.protocol!r} is not one of {PROTOCOLS}")
        if self.family not in FAMILIES:
            raise ValueError(f"family={self.family!r} is not one of {FAMILIES}")

    @property
    def needs_end(self) -> bool:
        """Whether a correct answer must be followed by an end marker."""
        return not (self.protocol == "paper" and self.family == "retrieval")

    def end_texts(self, end_text: str) -> tuple[str, ...]:
        """The texts that end an answer (``end_text``: the prompt format's own end marker)."""
        if not self.needs_end:
            return ()
        if self.protocol == "paper":
            return end_text, "\n\n"
        return tuple(dict.fromkeys((end_text, "\n", "\n\n")))

    def end(self, tokenizer: PreTrainedTokenizerBase, end_text: str) -> AnswerEnd:
        """The token-level end rule for teacher forcing: the first token of each end text, or EOS."""
        if not self.needs_end:
            return AnswerEnd.not_required()
        eos = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
        return AnswerEnd(frozenset(first_tokens(tokenizer, self.end_texts(end_text)) | eos))

    def stop_texts(self, end_text: str) -> tuple[str, ...]:
        """Texts at which free generation stops (the end markers; the paper's retrieval runs stop at a newline)."""
        return ("\n",) if not self.needs_end else self._markers(end_text)

    def max_new_tokens(self, answer_tokens: int, end_tokens: int) -> int:
        """Generation budget: the paper's 6 tokens for its retrieval answers, else enough to see
        the whole answer and its end marker."""
        if not self.needs_end:
            return PAPER_RETRIEVAL_MAX_NEW_TOKENS
        return answer_tokens + end_tokens + 1

    def read(self, generated: str, end_text: str = " <eos>") -> str:
        """The answer a generated text gives, spaces dropped."""
        if not self.needs_end:
            stripped = generated.split("\n", 1)[0].strip()
            return stripped[:1]
        cut = min((i for i in (generated.find(m) for m in self._markers(end_text)) if i >= 0), default=len(generated))
        return generated[:cut].replace(" ", "")

    def settled(self, generated: str, target: str, end_text: str = " <eos>") -> bool:
        """Whether every continuation of ``generated`` reads the same against ``target`` (so
        generating that row further cannot change its score).

        >>> AnswerRule("interp", "copying").settled(" a b x", "abc")
        True
        >>> AnswerRule("interp", "copying").settled(" a b c <e", "abc")
        False
        """
        if not self.needs_end:
            return bool(generated.strip())
        markers = self._markers(end_text)
        if any(m in generated for m in markers):
            return True
        # The first end marker may already have begun at the end of the text: the answer is then
        # the text before that partial marker, the shortest candidate.
        tail = max((j for m in markers for j in range(1, len(m)) if generated.endswith(m[:j])), default=0)
        return not target.startswith(generated[: len(generated) - tail].replace(" ", ""))

    def _markers(self, end_text: str) -> tuple[str, ...]:
        texts = self.end_texts(end_text)
        # " <eos>" and "<eos>" end an answer alike once spaces are dropped.
        return tuple(dict.fromkeys(t.strip(" ") or t for t in texts))


def answer_rule(protocol: str, family: str) -> AnswerRule:
    """The rule of ``protocol`` for a ``family`` task (``"retrieval"`` or ``"copying"``).

    >>> answer_rule("paper", "retrieval").needs_end
    False
    """
    return AnswerRule(protocol, family)
