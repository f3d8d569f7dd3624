"""The paper's edge-patching prompts: few-shot unique copying (UF / UB) and the edges they define.

A prompt is ``n_shots`` shots of one length ``L`` (the last one is the test)::

    [BOS]  s1 , c1 .  s2 , c2 .  ...  sn , cn  EOS

where ``s`` is ``L`` letters a-z drawn without replacement, each its own leading-space token (`` a``), and ``c``
is ``s`` (UF) or ``s`` reversed (UB); ``,`` and ``.`` are single tokens. All prompts of one (task, length) share
every position, so they batch without padding. Letters depend on (length, seed, instance) only, so UF and UB
see the same strings, as in the paper's data (one seed for both datasets).

The *single-shot* format is the zero-shot line of [`interp.prompts`][interp.prompts], the format the toolkit's fine-tuned and
from-scratch UF / UB models were trained on (``interp.models.trained``)::

    [BOS]  < bos >  s  :  c  <end>

(``<bos>`` literal text, however many tokens the tokenizer makes of it; `` :`` one token; the end marker's first
token last.) The string and its copy are then the two occurrences the edges refer to.

Edges, for the copy position ``t = copy_start + k`` whose token occurred earlier at ``o(t)`` (``string_start + k``
for UF, ``string_start + L - 1 - k`` for UB): the *induction* edge reads ``o(t) + 1`` (the token after the earlier
occurrence), the *anti-induction* edge reads ``o(t)`` itself; the *previous-token* edges ``i - 1 -> i`` cover the
prompt before the last copy. These are the repo's index formulas (UB's "mirrored" sources included).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from jaxtyping import Int
from torch import Tensor
from transformers import PreTrainedTokenizerBase

from interp.prompts.tokens import text_ids
from interp.data.vocab import item_token_ids
from interp.interventions.edges.patching import Edges

TASKS: tuple[str, ...] = ("UF", "UB")
LETTERS: tuple[str, ...] = tuple("abcdefghijklmnopqrstuvwxyz")
STRING_SEPARATOR, SHOT_SEPARATOR = ",", "."
DEFAULT_SHOTS = 11
FORMATS: tuple[str, ...] = ("few-shot", "single-shot")
SINGLE_SHOT_OVERHEAD = 8  # tokens of a single-shot prompt besides the string and its copy (BOS, "<bos>", " :", end)
MIN_LENGTH, MAX_LENGTH = 2, len(LETTERS)


def check_task(task: str) -> str:
    """``task`` as one of `TASKS` (case and surrounding spaces ignored); any other name is refused.

    >>> check_task(" ub")
    'UB'
    """
    upper = str(task).strip().upper()
    if upper not in TASKS:
        raise ValueError(f"task {task!r} is not an edge-patching task; expected one of {', '.join(TASKS)}")
    return upper


def check_length(length: int) -> int:
    """``length`` as an int, refused outside ``MIN_LENGTH``-``MAX_LENGTH`` (2-26 distinct letters).

    >>> check_length(5), MIN_LENGTH, MAX_LENGTH
    (5, 2, 26)
    """
    if not MIN_LENGTH <= int(length) <= MAX_LENGTH:
        raise ValueError(f"length {length} is out of range: unique copying over a-z needs {MIN_LENGTH}-{MAX_LENGTH} "
                         f"letters (at least 2, so that a patched query predicts a scored token)")
    return int(length)


def check_format(fmt: str) -> str:
    """``fmt`` if it is one of `FORMATS`, else a ``ValueError``.

    >>> check_format("single-shot")
    'single-shot'
    """
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r} is not an edge-patching prompt format; expected one of {', '.join(FORMATS)}")
    return fmt


def prompt_length(length: int, n_shots: int = DEFAULT_SHOTS, bos: bool = False, eos: bool = True,
                  fmt: str = "few-shot") -> int:
    """Tokens in one prompt: ``n_shots`` shots of ``2 L + 2`` tokens, less the last ``.`` (single-shot: at most).

    >>> prompt_length(3, n_shots=2), prompt_length(3, fmt="single-shot")
    (16, 14)
    """
    if check_format(fmt) == "single-shot":
        return 2 * length + SINGLE_SHOT_OVERHEAD
    return int(bos) + n_shots * (2 * length + 2) - 1 + int(eos)


@dataclass(frozen=True)
class CopyingPrompts:
    """``n`` prompts of one task and length, token ids and the positions the protocol refers to."""

    task: str
    length: int
    n_shots: int
    seed: int
    tokens: Int[Tensor, "batch pos"]
    string_start: int  # first position of the last shot's string
    strings: tuple[str, ...]  # the last shot's letters, per row

    @property
    def n(self) -> int:
        return self.tokens.shape[0]

    @property
    def copy_start(self) -> int:
        """First position of the last copy (the scored answer)."""
        return self.string_start + self.length + 1

    def copy_positions(self) -> Int[Tensor, " copy"]:
        return torch.arange(self.copy_start, self.copy_start + self.length)

    def scored_positions(self) -> Int[Tensor, " copy"]:
        """Positions whose next-token logits are scored: each predicts one token of the last copy."""
        return self.copy_positions() - 1

    def targets(self) -> Int[Tensor, "batch copy"]:
        return self.tokens[:, self.copy_start : self.copy_start + self.length]

    def occurrences(self) -> Int[Tensor, " copy"]:
        """Earlier position of each copy position's token, in the last shot's string."""
        k = torch.arange(self.length)
        return self.string_start + (k if self.task == "UF" else self.length - 1 - k)

    def induction_edges(self, rows: slice = slice(None)) -> Edges:
        """Copy position -> the token after the earlier occurrence of its token."""
        return Edges.shared(self.copy_positions(), self.occurrences() + 1, len(range(self.n)[rows]))

    def anti_induction_edges(self, rows: slice = slice(None)) -> Edges:
        """Copy position -> the earlier occurrence of its token."""
        return Edges.shared(self.copy_positions(), self.occurrences(), len(range(self.n)[rows]))

    def previous_token_edges(self, rows: slice = slice(None)) -> Edges:
        """``i - 1 -> i`` for every ``i`` from 1 to the position before the last copy."""
        queries = torch.arange(1, self.copy_start)
        return Edges.shared(queries, queries - 1, len(range(self.n)[rows]))

    def edges(self, name: str, rows: slice = slice(None)) -> Edges:
        builders = {"induction": self.induction_edges, "anti_induction": self.anti_induction_edges,
                    "previous_token": self.previous_token_edges}
        if name not in builders:
            raise ValueError(f"unknown edge set {name!r}; expected one of {sorted(builders)}")
        return builders[name](rows)


def _separator_id(tokenizer: PreTrainedTokenizerBase, text: str) -> int:
    ids = text_ids(tokenizer, text)
    if len(ids) != 1:
        raise ValueError(f"separator {text!r} is {len(ids)} tokens for this tokenizer; the protocol needs one token")
    return ids[0]


def _draw_strings(length: int, n: int, n_shots: int, seed: int) -> list[list[tuple[str, ...]]]:
    """``n`` instances of ``n_shots`` strings of ``length`` distinct letters, seeded per instance."""
    strings = []
    for i in range(n):
        rng = random.Random(f"edge-patching:{length}:{seed}:{i}")
        strings.append([tuple(rng.sample(LETTERS, length)) for _ in range(n_shots)])
    return strings


def copying_prompts(tokenizer: PreTrainedTokenizerBase, task: str, length: int, n: int, *, n_shots: int = DEFAULT_SHOTS,
                    seed: int = 0, prepend_bos: bool = False, append_eos: bool = True,
                    fmt: str = "few-shot") -> CopyingPrompts:
    """The protocol's prompts as token ids (letters map to their single `` x`` tokens; checked).

    >>> from interp.models import tiny_tokenizer
    >>> p = copying_prompts(tiny_tokenizer(), "UB", 3, 2, fmt="single-shot")
    >>> p.n_shots, p.copy_start - p.string_start
    (1, 4)
    """
    task, length = check_task(task), check_length(length)
    if n < 1:
        raise ValueError(f"n={n}: at least one prompt is needed")
    if check_format(fmt) == "single-shot":
        return _single_shot_prompts(tokenizer, task, length, n, seed=seed, prepend_bos=prepend_bos)
    if n_shots < 1:
        raise ValueError(f"n_shots={n_shots}: at least one shot (the test) is needed")
    letter_ids = item_token_ids(tokenizer, LETTERS)
    comma, period = _separator_id(tokenizer, STRING_SEPARATOR), _separator_id(tokenizer, SHOT_SEPARATOR)
    bos = [tokenizer.bos_token_id] if prepend_bos and tokenizer.bos_token_id is not None else []
    eos = [tokenizer.eos_token_id] if append_eos and tokenizer.eos_token_id is not None else []
    rows, tests = [], []
    for shots in _draw_strings(length, n, n_shots, seed):
        ids = list(bos)
        for i, string in enumerate(shots):
            copy = string if task == "UF" else string[::-1]
            ids += [letter_ids[c] for c in string] + [comma] + [letter_ids[c] for c in copy]
            ids += [period] if i < n_shots - 1 else eos
        rows.append(ids)
        tests.append("".join(shots[-1]))
    string_start = len(bos) + (n_shots - 1) * (2 * length + 2)
    return CopyingPrompts(task, length, n_shots, seed, torch.tensor(rows), string_start, tuple(tests))


def _single_shot_prompts(tokenizer: PreTrainedTokenizerBase, task: str, length: int, n: int, *, seed: int = 0,
                         prepend_bos: bool = False) -> CopyingPrompts:
    """One string and its copy in the zero-shot line of [`interp.prompts`][interp.prompts], encoded as
    [`interp.prompts.encode_prompt`][interp.prompts.encode.encode_prompt] encodes it for training and evaluation, the end marker's first
    token appended. Letters are drawn as in the few-shot format (the same strings for UF and UB)."""
    from interp.prompts import PromptConfig, build_prompt, encode_prompt
    from interp.data.tasks import TaskExample

    letter_ids = item_token_ids(tokenizer, LETTERS)
    rows, tests = [], []
    for (string,) in _draw_strings(length, n, 1, seed):
        copy = string if task == "UF" else string[::-1]
        prompt = build_prompt(TaskExample(task, string, copy), [], PromptConfig(n_shots=0))
        encoded = encode_prompt(tokenizer, prompt, prepend_bos=prepend_bos)
        rows.append(list(encoded.ids) + [text_ids(tokenizer, prompt.end_text)[0]])
        tests.append("".join(string))
        string_start = len(encoded.prompt_ids) - length - 1
        expected = [letter_ids[c] for c in string] + rows[-1][string_start + length : string_start + length + 1] \
            + [letter_ids[c] for c in copy]
        if rows[-1][string_start : string_start + 2 * length + 1] != expected or len(rows[-1]) != len(rows[0]):
            raise ValueError(f"the single-shot line {prompt.text + prompt.answer_text!r} does not encode as one token "
                             f"per letter with one separator token between the string and its copy for this tokenizer")
    return CopyingPrompts(task, length, 1, seed, torch.tensor(rows), string_start, tuple(tests))
