"""The planted models' tokenizer and the residual-stream layout their weights are written in.

The tokenizer is a small byte-level BPE trained (deterministically) on task-shaped text, so that
every item ``" x"`` (a-z A-Z 0-9), the markers ``<bos>``, ``" :"``, ``" <eos>"``, ``" |"`` and
the edge-patching protocol's ``,`` and ``.``, and
every word of the copying rules (the ``obey`` template, whose ``same`` / ``reverse`` is the task
marker of ``planted-both``) are single tokens. Its vocabulary is small (about a hundred ids) so
that a one-hot block over the whole vocabulary fits the residual stream.
"""

from __future__ import annotations

from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from interp.prompts.templates import RULES
from interp.data.tasks import ALNUM
from interp.models.tiny import cached_tokenizer

PLANTED_TOKENIZER_VERSION = "planted-bpe-v2"
BOS_MARKER, SEPARATOR, END_MARKER = "<bos>", " :", " <eos>"
EDGE_SEPARATORS = (",", ".")  # the edge-patching protocol's string and shot separators (interp.interventions.edges)
COPY_RULE_WORDS = {"forward": " same", "backward": " reverse"}


def planted_tokenizer() -> PreTrainedTokenizerBase:
    """The planted models' tokenizer, saved to (and read back from) the cache like the tiny
    models' one: the bridge re-reads a tokenizer from its ``name_or_path``.

    >>> len(planted_tokenizer().encode(" a", add_special_tokens=False))
    1
    """
    return cached_tokenizer(PLANTED_TOKENIZER_VERSION, _train_planted_tokenizer)


def _train_planted_tokenizer() -> PreTrainedTokenizerBase:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    items = " " + " ".join(ALNUM)
    rules = [RULES[name] for name in ("UF", "UB")]
    corpus = [items] * 8 + [f"{BOS_MARKER}{items}{SEPARATOR}{items}{END_MARKER}\n"] * 8 + rules * 8
    corpus += [" x | q: t\n\n"] * 8 + [" a b c, c b a."] * 8
    special = ["<|endoftext|>", "<pad>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=special, show_progress=False)
    tok.train_from_iterator(corpus, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                   pad_token="<pad>", unk_token=None)


def single_id(tokenizer: PreTrainedTokenizerBase, text: str) -> int:
    """The one token of ``text``; an error when the planted tokenizer splits it.

    >>> single_id(planted_tokenizer(), " a")
    74
    """
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) != 1:
        raise ValueError(f"the planted tokenizer writes {text!r} as {len(ids)} tokens; the construction needs one")
    return ids[0]


@dataclass(frozen=True)
class ResidualLayout:
    """Where each feature block sits in the residual stream (offsets into ``d_model``).

    ``tok``: the current token (one-hot over the vocabulary); ``pos``: the position (one-hot
    over ``n_ctx``); ``prev``: the previous token, written by the previous-token head; ``out``:
    the token to predict, written by the layer-1 heads and read by the unembedding; ``flag``: two
    dimensions for the task marker (``+1, -1`` reverse, ``-1, +1`` same)."""

    d_vocab: int
    n_ctx: int

    @property
    def tok(self) -> int:
        return 0

    @property
    def pos(self) -> int:
        return self.d_vocab

    @property
    def prev(self) -> int:
        return self.pos + self.n_ctx

    @property
    def out(self) -> int:
        return self.prev + self.d_vocab

    @property
    def flag(self) -> int:
        return self.out + self.d_vocab

    @property
    def d_head(self) -> int:
        # the previous-token head maps positions one-to-one, the token heads map the vocabulary
        # plus two spare dimensions (the earliest-occurrence bias and the task gate)
        return max(self.n_ctx, self.d_vocab + 2)

    @property
    def d_model(self) -> int:
        used = self.flag + 2
        n_heads = -(-used // self.d_head)
        return max(4, n_heads) * self.d_head


def first_id(tokenizer: PreTrainedTokenizerBase, text: str) -> int:
    """The first token of ``text``.

    >>> first_id(planted_tokenizer(), " a b")
    74
    """
    return tokenizer.encode(text, add_special_tokens=False)[0]


def last_id(tokenizer: PreTrainedTokenizerBase, text: str) -> int:
    """The last token of ``text``.

    >>> last_id(planted_tokenizer(), " a b")
    77
    """
    return tokenizer.encode(text, add_special_tokens=False)[-1]
