"""Lorem Ipsum paragraphs for the copying task, generated as the paper's generator does.

One ``lorem``-style text (3-6 paragraphs of 5-10 sentences of 4-8 words), then rounds of: shuffle
the sentences, shuffle the words of one sentence (keeping its capitalised first word), with
probability 0.3 append one sentence 4 times, with probability 0.5 append one of a sentence's words
4 times to it, until there are ``min_sentences`` sentences. The result is cut to a token budget
(the paper: 500 tokens). Two deliberate differences: there is always at least one round (the
paper's loop skips texts that start long enough, leaving them unshuffled), and the cut falls on a
word boundary, so the reference tokenizes the same inside the prompt and as the answer.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from interp.experiments.realistic.lorem_words import LOREM_WORDS

Sentence = tuple[str, ...]

ECHO_DEMOS = ("Once upon a time in a land far away.", "The quick brown fox jumps over the lazy dog.")


@dataclass(frozen=True)
class LoremConfig:
    """How paragraphs are generated and prompted. Defaults are sized for a quick CPU run; the
    paper used ``max_tokens=500`` and 1500 paragraphs per seed."""

    n_paragraphs: int = 20
    max_tokens: int = 200
    seed: int = 0
    min_sentences: int = 45
    text_paragraphs: tuple[int, int] = (3, 6)
    paragraph_sentences: tuple[int, int] = (5, 10)
    sentence_words: tuple[int, int] = (4, 8)
    shuffle_words_prob: float = 1.0
    duplicate_sentence_prob: float = 0.3
    duplicate_word_prob: float = 0.5
    duplicate_count: int = 4
    n_shots: int = 2
    rule: bool = True

    def __post_init__(self) -> None:
        if self.n_paragraphs < 1:
            raise ValueError(f"n_paragraphs={self.n_paragraphs} must be >= 1")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens={self.max_tokens} must be >= 1")
        for name in ("text_paragraphs", "paragraph_sentences", "sentence_words"):
            low, high = getattr(self, name)
            if not 1 <= low <= high:
                raise ValueError(f"{name}={(low, high)} must be a range (low, high) with 1 <= low <= high")
        for name in ("shuffle_words_prob", "duplicate_sentence_prob", "duplicate_word_prob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}={getattr(self, name)} must be a probability in [0, 1]")
        if self.duplicate_count < 0:
            raise ValueError(f"duplicate_count={self.duplicate_count} must be >= 0")
        fewest = self.text_paragraphs[0] * self.paragraph_sentences[0]
        if self.min_sentences > fewest and (self.duplicate_sentence_prob == 0 or self.duplicate_count == 0):
            # sentences are only ever added by duplication, so the loop could never reach the target
            raise ValueError(f"min_sentences={self.min_sentences} is unreachable with duplicate_sentence_prob="
                             f"{self.duplicate_sentence_prob} and duplicate_count={self.duplicate_count}")
        if not 0 <= self.n_shots <= len(ECHO_DEMOS):
            raise ValueError(f"n_shots={self.n_shots} must be between 0 and {len(ECHO_DEMOS)} (the paper's demonstrations)")


# --------------------------------------------------------------------------- paragraphs


def _lorem_sentence(rng: random.Random, words: tuple[int, int]) -> Sentence:
    chosen = [rng.choice(LOREM_WORDS) for _ in range(rng.randint(*words))]
    return (chosen[0].capitalize(), *chosen[1:])


def _lorem_text(rng: random.Random, config: LoremConfig) -> list[Sentence]:
    """The sentences of one ``lorem.text()``: several paragraphs, their breaks dropped."""
    return [_lorem_sentence(rng, config.sentence_words)
            for _ in range(rng.randint(*config.text_paragraphs))
            for _ in range(rng.randint(*config.paragraph_sentences))]


def scramble_round(sentences: Sequence[Sentence], rng: random.Random, config: LoremConfig) -> list[Sentence]:
    """One round of the paper's perturbations; repeats are what make copying ambiguous.

    >>> config = LoremConfig(shuffle_words_prob=0.0, duplicate_sentence_prob=1.0, duplicate_word_prob=0.0)
    >>> scramble_round([("Lorem", "ipsum"), ("Dolor", "sit")], random.Random(0), config)  # one sentence, 4 more times
    [('Lorem', 'ipsum'), ('Dolor', 'sit'), ('Dolor', 'sit'), ('Dolor', 'sit'), ('Dolor', 'sit'), ('Dolor', 'sit')]
    """
    out = list(sentences)
    rng.shuffle(out)
    if out and rng.random() < config.shuffle_words_prob:
        i = rng.randrange(len(out))
        rest = list(out[i][1:])
        rng.shuffle(rest)
        out[i] = (out[i][0], *rest)
    if out and rng.random() < config.duplicate_sentence_prob:
        out.extend([rng.choice(out)] * config.duplicate_count)
    if out and rng.random() < config.duplicate_word_prob:
        i = rng.randrange(len(out))
        out[i] = out[i] + (rng.choice(out[i]),) * config.duplicate_count
    return out


def _render(sentences: Sequence[Sentence]) -> str:
    return " ".join(" ".join(words) + "." for words in sentences)


def _word_counter(text: str) -> int:
    return len(text.split())


def truncate(text: str, count_tokens: Callable[[str], int], max_tokens: int) -> str:
    """Longest word prefix of ``text`` with at most ``max_tokens`` tokens (at least one word).

    Token counts grow with the number of words, so a binary search over prefixes suffices.

    >>> truncate("Lorem ipsum dolor sit amet", lambda text: len(text.split()), 3)
    'Lorem ipsum dolor'
    """
    words = text.split(" ")
    low, high = 1, len(words)
    while low < high:
        mid = (low + high + 1) // 2
        if count_tokens(" ".join(words[:mid])) <= max_tokens:
            low = mid
        else:
            high = mid - 1
    return " ".join(words[:low])


def lorem_paragraph(index: int, config: LoremConfig, count_tokens: Callable[[str], int] = _word_counter) -> str:
    """Paragraph ``index`` of the seeded set; each has its own generator, so paragraph ``i`` does
    not depend on how many are generated.

    >>> lorem_paragraph(0, LoremConfig(max_tokens=8))
    'Tempora neque neque magnam non magnam quaerat sit.'
    >>> lorem_paragraph(0, LoremConfig(max_tokens=8, n_paragraphs=1)) == lorem_paragraph(0, LoremConfig(max_tokens=8))
    True
    """
    rng = random.Random(f"lorem:{config.seed}:{index}")
    sentences = _lorem_text(rng, config)
    # at least one round: the paper's texts are always shuffled
    sentences = scramble_round(sentences, rng, config)
    while len(sentences) < config.min_sentences:
        sentences = scramble_round(sentences, rng, config)
    return truncate(_render(sentences), count_tokens, config.max_tokens)


def _answer_token_counter(tokenizer) -> Callable[[str], int]:
    """Counts tokens as the answer is encoded: with the space that follows ``<start>``."""
    return lambda text: len(tokenizer.encode(" " + text, add_special_tokens=False))


def lorem_paragraphs(config: LoremConfig, tokenizer=None) -> list[str]:
    """``config.n_paragraphs`` seeded paragraphs, cut to ``config.max_tokens`` tokens of
    ``tokenizer`` (to as many words when no tokenizer is given).

    >>> [len(p.split()) for p in lorem_paragraphs(LoremConfig(n_paragraphs=2, max_tokens=12))]
    [12, 12]
    """
    count = _answer_token_counter(tokenizer) if tokenizer is not None else _word_counter
    return [lorem_paragraph(i, config, count) for i in range(config.n_paragraphs)]
