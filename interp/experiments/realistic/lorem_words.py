"""The Lorem Ipsum vocabulary, shipped so that paragraphs generate offline and identically everywhere.

This is the word list of the ``lorem`` package (0.1.1, MIT licence, S. Fischer) that the paper's
data generator draws from, *as that package actually produces it*: its source concatenates string
literals without a separating space, so ``"et" "incidunt"`` and ``"qui" "quia"`` reach the
generator as the single words ``etincidunt`` and ``quiquia`` (visible in the paper's own token
examples: ``' et', 'inc', 'idunt'``). Keeping the quirk keeps the token statistics of the paper's
paragraphs.
"""

from __future__ import annotations

LOREM_WORDS: tuple[str, ...] = (
    "adipisci", "aliquam", "amet", "consectetur", "dolor", "dolore", "dolorem", "eius", "est",
    "etincidunt", "ipsum", "labore", "magnam", "modi", "neque", "non", "numquam", "porro",
    "quaerat", "quiquia", "quisquam", "sed", "sit", "tempora", "ut", "velit", "voluptatem",
)
