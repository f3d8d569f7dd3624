"""The items and the word-level tokenizer of the models trained from scratch
([`interp.experiments.from_scratch`][interp.experiments.from_scratch]): every item and every piece of the prompt formats is one token."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from interp.data.tasks import ALNUM, LETTERS

STRUCTURE_TOKENS = ("<bos>", " <eos>", " :", ":", " |", "\n", "\n\n")
SPECIAL_TOKENS = {"bos": "<s>", "eos": "</s>", "pad": "<pad>", "unk": "<unk>"}


def scratch_items(n_items: int) -> tuple[str, ...]:
    """``n_items`` distinct items: a-z A-Z 0-9, then two-letter items.

    >>> scratch_items(64)[-4:]
    ('8', '9', 'aa', 'ab')
    """
    if n_items < 3:
        raise ValueError(f"n_items={n_items} must be >= 3")
    pairs = ("".join(p) for p in itertools.product(LETTERS, repeat=2))
    items = tuple(itertools.islice(itertools.chain(ALNUM, pairs), n_items))
    if len(items) < n_items:
        raise ValueError(f"at most {len(items)} items are available, asked for {n_items}")
    return items


def scratch_tokenizer(items: Sequence[str], drop_query_colon: bool = True):
    """A word-level tokenizer in which every ``" " + item`` and every piece of the prompt
    formats (``<bos>``, ``" :"``, ``" |"``, ``" <eos>"``, newlines) is one token.

    A byte-level BPE would spend most of a small model's vocabulary and capacity on text that never
    occurs; here the vocabulary is exactly what the tasks use, plus ``<unk>`` for anything else.

    ``drop_query_colon``: the ``":"`` glued to a retrieval query (``" x y | q:"``) is dropped, so
    the answer is predicted at the query token itself, as in the paper's from-scratch format
    (``[bos] context [sep] query answer``). With the colon the model needs one more hop (from ``:``
    back to the query) before it can search, which slows learning from scratch a lot.

    >>> tokenizer = scratch_tokenizer(scratch_items(5))
    >>> tokenizer.convert_ids_to_tokens(tokenizer.encode("<bos> a b : a b <eos>"))
    ['<bos>', ' a', ' b', ' :', ' a', ' b', ' <eos>']
    >>> tokenizer.tokenize(" a b | a:")
    [' a', ' b', ' |', ' a']
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = [SPECIAL_TOKENS[k] for k in ("pad", "bos", "eos", "unk")]
    pieces = specials + list(STRUCTURE_TOKENS) + [" " + item for item in items]
    vocab = {piece: i for i, piece in enumerate(dict.fromkeys(pieces))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIAL_TOKENS["unk"]))
    # Pieces: newline runs, <tags> with an optional leading space, alphanumeric words with an
    # optional leading space, and single punctuation marks with an optional leading space.
    if drop_query_colon:
        tok.normalizer = normalizers.Replace(Regex(r"(?<=[A-Za-z0-9]):"), "")
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"\n+| ?<[a-z/]+>| ?[A-Za-z0-9]+| ?[^\sA-Za-z0-9]|\s"),
                                             behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=SPECIAL_TOKENS["bos"],
                                   eos_token=SPECIAL_TOKENS["eos"], pad_token=SPECIAL_TOKENS["pad"],
                                   unk_token=SPECIAL_TOKENS["unk"])
