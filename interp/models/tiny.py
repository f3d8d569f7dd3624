"""Small randomly initialised models (seeded) and their tokenizer, for tests and training from scratch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from transformers import AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from interp.core.naming import TINY_MODELS, ModelNotFoundError
from interp.models.store import cache_dir, publish_folder

TINY_TOKENIZER_VERSION = "tiny-bpe-v1"


@dataclass(frozen=True)
class TinyModelConfig:
    """Shape of the randomly initialised models used by tests and from-scratch training."""

    n_layers: int = 2
    n_heads: int = 4
    d_model: int = 64
    n_ctx: int = 512
    seed: int = 0
    positional: str = "absolute"  # "absolute" (GPT-2 style) or "rope" (Llama style)
    n_key_value_heads: int | None = None  # grouped-query attention (Llama style only); None: n_heads


def cached_tokenizer(version: str, build: Callable[[], PreTrainedTokenizerBase]) -> PreTrainedTokenizerBase:
    """The tokenizer ``version`` from the cache, built by ``build`` and published there when it is
    missing or unreadable (a damaged tokenizer is cheap to make again).

    >>> tokenizer = cached_tokenizer("tiny-v1", _train_tiny_tokenizer)  # doctest: +SKIP
    """
    path = cache_dir() / "tokenizers" / version
    if (path / "tokenizer.json").exists():
        try:
            return AutoTokenizer.from_pretrained(path)
        except Exception:  # noqa: BLE001 - any failure to read means: make it again
            pass
    publish_folder(path, build().save_pretrained)
    return AutoTokenizer.from_pretrained(path)


def tiny_tokenizer() -> PreTrainedTokenizerBase:
    """A byte-level BPE tokenizer trained (deterministically) on task-shaped text, so that every
    ``" x"`` for x in a-z A-Z 0-9 is one token and any other text still encodes.

    It is saved to the cache and loaded back from there because the bridge re-reads tokenizers
    from their ``name_or_path``; an in-memory tokenizer has none.

    >>> tokenizer = tiny_tokenizer()
    >>> len(tokenizer.encode(" a", add_special_tokens=False))
    1
    """
    return cached_tokenizer(TINY_TOKENIZER_VERSION, _train_tiny_tokenizer)


def _train_tiny_tokenizer() -> PreTrainedTokenizerBase:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    alnum = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    alnum += [str(d) for d in range(10)]
    corpus = [" ".join(alnum), " | q: t", "<eos> : | q: \n\n", "Paragraph:<start> Echo:<end>", "=== NEW HISTORY ==="]
    corpus += [" " + " ".join(alnum[i:] + alnum[:i]) for i in range(len(alnum))]
    special = ["<|endoftext|>", "<pad>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                   pad_token="<pad>", unk_token=None)


def tiny_hf_model(name: str, config: TinyModelConfig | None = None,
                  tokenizer: PreTrainedTokenizerBase | None = None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Randomly initialise ``tiny-llama`` (RoPE) or ``tiny-gpt2`` (absolute positions), seeded.

    >>> model, tokenizer = tiny_hf_model("tiny-gpt2")
    >>> model.config.n_layer
    2
    """
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    config = config or TinyModelConfig(positional="rope" if name == "tiny-llama" else "absolute")
    tokenizer = tokenizer or tiny_tokenizer()
    vocab = len(tokenizer)
    torch.manual_seed(config.seed)
    if name == "tiny-llama":
        hf_config = LlamaConfig(vocab_size=vocab, hidden_size=config.d_model, intermediate_size=4 * config.d_model,
                                num_hidden_layers=config.n_layers, num_attention_heads=config.n_heads,
                                num_key_value_heads=config.n_key_value_heads or config.n_heads,
                                max_position_embeddings=config.n_ctx,
                                bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False)
        model = LlamaForCausalLM(hf_config)
    elif name == "tiny-gpt2":
        if config.n_key_value_heads not in (None, config.n_heads):
            raise ValueError("n_key_value_heads: GPT-2 has no grouped-query attention; use tiny-llama")
        hf_config = GPT2Config(vocab_size=vocab, n_embd=config.d_model, n_layer=config.n_layers, n_head=config.n_heads,
                               n_positions=config.n_ctx, bos_token_id=tokenizer.bos_token_id,
                               eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
        model = GPT2LMHeadModel(hf_config)
    else:
        raise ModelNotFoundError(f"unknown tiny model {name!r}; expected one of {TINY_MODELS}")
    return model.eval(), tokenizer
