"""Lorem Ipsum copying: does a pretrained model's copy go wrong where the source is ambiguous?

The paragraphs follow the paper's generator ([`interp.experiments.realistic.lorem_text`][interp.experiments.realistic.lorem_text]); the
paper's splitting quirks (double spaces, stray "..") are not kept.

The prompt is the paper's 2-shot echo prompt; the model copies greedily. Where the greedy copy
first departs, and every position where it would depart given the correct prefix, both come from
one teacher-forced pass (see ``alignment``); the paper's free generation + Needleman-Wunsch
alignment is available with ``generate=True`` (one forward pass per token, slow).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from interp.measure.batching import Hook
from interp.measure.encoding import resolve_prepend_bos
from interp.prompts import AnswerEnd, AnswerRule, PromptConfig
from interp.core.naming import result_stem
from interp.core.journal import NUMBER, RowJournal, RowShape
from interp.core.tables import row_from_mapping, write_table
from interp.core.stats import binomial_stderr
from interp.experiments.realistic.alignment import ambiguous_positions, departure_from_predictions, edit_transitions, transition_index
from interp.experiments.realistic.common import (TextPrompt, check_context, encode_text_prompt, greedy_answers,
                                                split_is_natural, teacher_forced_scores)
from interp.experiments.realistic.lorem_text import ECHO_DEMOS, LoremConfig, lorem_paragraphs

if TYPE_CHECKING:
    from transformer_lens.model_bridge import TransformerBridge

ECHO_RULE = "# RULE : Paragraphs are repeated **exactly** as is, whenever an Echo is seen."
END_TEXT = " <end>"


# --------------------------------------------------------------------------- prompt


def _echo_block(paragraph: str) -> str:
    return f"Paragraph:\n<start> {paragraph} <end>\nEcho:\n<start> {paragraph} <end>"


def echo_prompt(paragraph: str, n_shots: int = 2, rule: bool = True) -> TextPrompt:
    """The paper's echo prompt. The space after the final ``<start>`` belongs to the answer, so the
    answer's words are the same ``" word"`` tokens as in the paragraph above it.

    >>> prompt = echo_prompt("Lorem ipsum dolor.", n_shots=0, rule=False)
    >>> print(prompt.text)
    Paragraph:
    <start> Lorem ipsum dolor. <end>
    Echo:
    <start>
    >>> prompt.answer_text, prompt.end_text
    (' Lorem ipsum dolor.', ' <end>')
    """
    if not 0 <= n_shots <= len(ECHO_DEMOS):
        raise ValueError(f"n_shots={n_shots} must be between 0 and {len(ECHO_DEMOS)}")
    blocks = ([ECHO_RULE] if rule else []) + [_echo_block(demo) for demo in ECHO_DEMOS[:n_shots]]
    blocks.append(f"Paragraph:\n<start> {paragraph} <end>\nEcho:\n<start>")
    return TextPrompt("\n\n".join(blocks), " " + paragraph, END_TEXT)


# --------------------------------------------------------------------------- analysis


@dataclass(frozen=True)
class CopyResult:
    """One paragraph's copy. Positions run over the answer tokens plus the end (``n_tokens``).

    Three views of where a copy goes wrong, each classified ambiguous or not:

    * ``transition_index``: the first position where the greedy copy departs (``None`` for an
      exact copy, ``n_tokens`` when it does not stop); ``last_copied`` is the token before it (the
      paper's transition token), ``expected`` / ``produced`` the reference and model tokens there.
    * ``primed_transition_index``: the same with the copy's first token given, i.e. the first
      departure at a position >= 1. A model that starts by echoing a demonstration departs at 0
      every time; this shows where it would go wrong inside the paragraph.
    * ``n_tf_departures``: every position where the model, given the correct prefix, would depart
      (the teacher-forced counterpart of the paper's count of all match-to-edit transitions).
    """

    paragraph: int
    n_tokens: int
    exact: bool
    transition_index: int | None
    at_ambiguous: bool | None
    last_copied: str | None
    expected: str | None
    produced: str | None
    context: str | None
    primed_transition_index: int | None
    primed_at_ambiguous: bool | None
    n_ambiguous_positions: int
    base_rate: float
    n_tf_departures: int
    n_tf_departures_ambiguous: int
    tf_accuracy_ambiguous: float
    tf_accuracy_unambiguous: float
    mean_logprob: float
    generated_transition_index: int | None = None
    n_edits: int | None = None
    n_edits_ambiguous: int | None = None

    def as_row(self) -> dict:
        return asdict(self)


def _share(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags) if flags else float("nan")


def _first_miss(hits: Sequence[bool], start: int = 0) -> int | None:
    return next((t for t in range(start, len(hits)) if not hits[t]), None)


def analyse_copy(paragraph: int, reference: Sequence[int], predictions: Sequence[int], end: AnswerEnd,
                 decode: Callable[[Sequence[int]], str], mean_logprob: float = float("nan"),
                 generated: Sequence[int] | None = None) -> CopyResult:
    """Departures and their ambiguity for one copy, from its teacher-forced argmaxes
    ``predictions[0..n]`` (and, when given, the paper's alignment analysis of a free greedy
    generation ``generated``).

    >>> from interp.prompts import AnswerEnd
    >>> decode = lambda ids: " ".join(map(str, ids))
    >>> result = analyse_copy(0, [5, 6, 5, 7], [5, 6, 5, 8, 0], AnswerEnd(frozenset({0})), decode)
    >>> result.transition_index, result.at_ambiguous  # 5 is followed by 6 and by 7
    (3, True)
    >>> result.last_copied, result.expected, result.produced
    ("'5'", "'7'", "'8'")
    """
    n = len(reference)
    ambiguous = ambiguous_positions(reference)
    hits = [predictions[t] == reference[t] for t in range(n)] + [end.accepts(predictions[n])]
    t = departure_from_predictions(reference, predictions, end)
    primed = _first_miss(hits, start=1)
    token = lambda i: repr(decode([i]))  # repr keeps leading spaces and newlines visible
    misses = [a for h, a in zip(hits, ambiguous) if not h]
    extra = {}
    if generated is not None:
        edits = edit_transitions(reference, generated)
        extra = dict(generated_transition_index=transition_index(reference, generated), n_edits=len(edits),
                     n_edits_ambiguous=sum(ambiguous[e] for e in edits))
    departed = t is not None
    return CopyResult(
        paragraph=paragraph, n_tokens=n, exact=not departed, transition_index=t,
        at_ambiguous=ambiguous[t] if departed else None,
        last_copied=(token(reference[t - 1]) if t > 0 else "'<start>'") if departed else None,
        expected=(token(reference[t]) if t < n else "'<end>'") if departed else None,
        produced=token(predictions[t]) if departed else None,
        context=decode(reference[max(0, t - 8) : t]) if departed else None,
        primed_transition_index=primed, primed_at_ambiguous=ambiguous[primed] if primed is not None else None,
        n_ambiguous_positions=sum(ambiguous), base_rate=sum(ambiguous) / len(ambiguous),
        n_tf_departures=len(misses), n_tf_departures_ambiguous=sum(misses),
        tf_accuracy_ambiguous=_share([h for h, a in zip(hits, ambiguous) if a]),
        tf_accuracy_unambiguous=_share([h for h, a in zip(hits, ambiguous) if not a]),
        mean_logprob=mean_logprob, **extra)


# What a journal line must hold to be reused as a finished paragraph.
COPY_ROW_SHAPE: RowShape = {"paragraph": int, "n_tokens": int, "exact": bool, "n_ambiguous_positions": int,
                            "n_tf_departures": int, "n_tf_departures_ambiguous": int, "base_rate": NUMBER}


@dataclass(frozen=True)
class LoremSummary:
    """Aggregate over paragraphs. The paper's question: do departures fall on ambiguous positions
    more often than positions are ambiguous (``base_rate``, pooled over all positions)? Each
    ``*p_value`` is a one-sided binomial test of that (for teacher-forced departures the positions
    of one paragraph are not independent, so read it as descriptive). ``tf_accuracy_*`` are the
    pooled teacher-forced accuracies at ambiguous / unambiguous positions (the paper's "score
    ambiguous / unambiguous" counterpart), over ``n_*ambiguous_positions`` positions each."""

    model: str
    n_paragraphs: int
    max_tokens: int
    mean_tokens: float
    accuracy: float
    stderr: float
    base_rate: float
    n_departures: int
    share_departures_ambiguous: float
    share_stderr: float
    p_value: float
    mean_transition_index: float
    n_primed_departures: int
    share_primed_departures_ambiguous: float
    primed_p_value: float
    n_tf_departures: int
    share_tf_departures_ambiguous: float
    tf_p_value: float
    tf_accuracy_ambiguous: float
    tf_accuracy_unambiguous: float
    n_edits: int | None
    share_edits_ambiguous: float | None
    n_shots: int
    seed: int
    n_ambiguous_positions: int = 0  # the trials behind tf_accuracy_ambiguous
    n_unambiguous_positions: int = 0  # and behind tf_accuracy_unambiguous

    def as_row(self) -> dict:
        return asdict(self)


def _binomial_p_value(successes: int, trials: int, rate: float) -> float:
    """P(X >= successes) for X ~ Binomial(trials, rate)."""
    if trials == 0:
        return float("nan")
    from scipy.stats import binomtest

    return float(binomtest(successes, trials, rate, alternative="greater").pvalue)


def summarize_copies(results: Sequence[CopyResult], config: LoremConfig, model_name: str = "") -> LoremSummary:
    """The copies of one run pooled into a [`LoremSummary`][interp.experiments.realistic.lorem.LoremSummary] (the row of ``lorem_ipsum_summary_<model>.*``).

    >>> from interp.prompts import AnswerEnd
    >>> decode = lambda ids: " ".join(map(str, ids))
    >>> result = analyse_copy(0, [5, 6, 5, 7], [5, 6, 5, 8, 0], AnswerEnd(frozenset({0})), decode)
    >>> exact = analyse_copy(1, [5, 6], [5, 6, 0], AnswerEnd(frozenset({0})), decode)
    >>> summary = summarize_copies([result, exact], LoremConfig(), model_name="tiny")
    >>> summary.accuracy, summary.n_departures, summary.share_departures_ambiguous, summary.base_rate
    (0.5, 1, 1.0, 0.25)
    """
    if not results:
        raise ValueError("results is empty: nothing to summarize")
    departed = [r for r in results if r.transition_index is not None]
    primed = [r for r in results if r.primed_transition_index is not None]
    n_ambiguous = sum(r.n_ambiguous_positions for r in results)
    rate = n_ambiguous / sum(r.n_tokens + 1 for r in results)
    # a primed departure cannot fall on position 0, which is never ambiguous
    primed_rate = n_ambiguous / sum(r.n_tokens for r in results)
    k = sum(bool(r.at_ambiguous) for r in departed)
    k_primed = sum(bool(r.primed_at_ambiguous) for r in primed)
    n_tf = sum(r.n_tf_departures for r in results)
    k_tf = sum(r.n_tf_departures_ambiguous for r in results)
    share = _share([bool(r.at_ambiguous) for r in departed])
    n_unambiguous = sum(r.n_tokens + 1 - r.n_ambiguous_positions for r in results)
    tf_hits_ambiguous = n_ambiguous - k_tf
    tf_hits_unambiguous = n_unambiguous - (n_tf - k_tf)
    generated = [r for r in results if r.n_edits is not None]
    n_edits = sum(r.n_edits for r in generated) if generated else None
    accuracy = 1 - len(departed) / len(results)
    return LoremSummary(
        model=model_name, n_paragraphs=len(results), max_tokens=config.max_tokens,
        mean_tokens=sum(r.n_tokens for r in results) / len(results),
        accuracy=accuracy, stderr=binomial_stderr(accuracy, len(results)), base_rate=rate,
        n_departures=len(departed), share_departures_ambiguous=share,
        share_stderr=binomial_stderr(share, len(departed)) if departed else float("nan"),
        p_value=_binomial_p_value(k, len(departed), rate),
        mean_transition_index=(sum(r.transition_index for r in departed) / len(departed)) if departed else float("nan"),
        n_primed_departures=len(primed), share_primed_departures_ambiguous=k_primed / len(primed) if primed else float("nan"),
        primed_p_value=_binomial_p_value(k_primed, len(primed), primed_rate),
        n_tf_departures=n_tf, share_tf_departures_ambiguous=k_tf / n_tf if n_tf else float("nan"),
        tf_p_value=_binomial_p_value(k_tf, n_tf, rate),
        tf_accuracy_ambiguous=tf_hits_ambiguous / n_ambiguous if n_ambiguous else float("nan"),
        tf_accuracy_unambiguous=tf_hits_unambiguous / n_unambiguous if n_unambiguous else float("nan"),
        n_edits=n_edits,
        share_edits_ambiguous=(sum(r.n_edits_ambiguous for r in generated) / n_edits) if n_edits else None,
        n_shots=config.n_shots, seed=config.seed, n_ambiguous_positions=n_ambiguous,
        n_unambiguous_positions=n_unambiguous)


@dataclass(frozen=True)
class LoremRun:
    paragraphs: list[str]
    results: list[CopyResult]
    summary: LoremSummary
    natural_split: float = field(default=float("nan"))  # share of prompts whose separate encoding is the joint one


def run_lorem(model: TransformerBridge, config: LoremConfig = LoremConfig(), *, batch_size: int = 4,
              generate: bool = False, fwd_hooks: Sequence[Hook] = (), progress: bool = False,
              model_name: str = "", journal: RowJournal | None = None) -> LoremRun:
    """Generate the paragraphs, copy them with ``model`` and analyse every copy.

    ``generate=True`` adds free greedy generation (one forward pass per token) and the paper's
    alignment-based edit counts; teacher forcing alone gives the first departure exactly. With a
    ``journal`` each finished batch of paragraphs is recorded, and paragraphs an earlier run
    finished are reused.

    >>> run = run_lorem(load_model("smollm2-135m"), LoremConfig(n_paragraphs=4), progress=False)  # doctest: +SKIP
    >>> run.summary.accuracy  # doctest: +SKIP
    0.25
    """
    tokenizer = model.tokenizer
    paragraphs = lorem_paragraphs(config, tokenizer)
    prompts = [echo_prompt(p, config.n_shots, config.rule) for p in paragraphs]
    end = AnswerRule("interp", "copying").end(tokenizer, END_TEXT)
    prepend_bos = resolve_prepend_bos(model, PromptConfig())
    encoded = [encode_text_prompt(tokenizer, p, end, prepend_bos) for p in prompts]
    check_context(model, encoded)  # before any work: the longest prompt decides
    done = {r.paragraph: r for r in (row_from_mapping(CopyResult, values) for values in (journal.done() if journal else []))}
    todo = [i for i in range(len(encoded)) if i not in done]
    chunks = [todo[k : k + batch_size] for k in range(0, len(todo), batch_size)]
    for chunk in tqdm(chunks, desc="lorem ipsum", disable=not progress or not chunks):
        batch = [encoded[i] for i in chunk]
        forced = teacher_forced_scores(model, batch, batch_size, fwd_hooks, False, keep_predictions=True)
        generated = greedy_answers(model, batch, 1, fwd_hooks, False) if generate else None
        for j, i in enumerate(chunk):
            done[i] = analyse_copy(i, encoded[i].answer_ids, forced.predictions[j], end, tokenizer.decode,
                                   forced.mean_logprob[j].item(), generated[j] if generated is not None else None)
            if journal is not None:
                journal.add(done[i].as_row())
    results = [done[i] for i in range(len(encoded))]
    natural = sum(split_is_natural(tokenizer, p) for p in prompts) / len(prompts)
    return LoremRun(paragraphs, results, summarize_copies(results, config, model_name), natural)


def write_lorem_tables(run: LoremRun, out_dir: str | Path, metadata: Mapping | None = None) -> list[Path]:
    """``lorem_ipsum_<model>.{csv,json,md}`` (one row per paragraph) and ``lorem_ipsum_summary_<model>.*``.

    >>> from interp.prompts import AnswerEnd
    >>> decode = lambda ids: " ".join(map(str, ids))
    >>> result = analyse_copy(0, [5, 6, 5, 7], [5, 6, 5, 8, 0], AnswerEnd(frozenset({0})), decode)
    >>> run = LoremRun(["5 6 5 7"], [result], summarize_copies([result], LoremConfig(), model_name="tiny"))
    >>> import tempfile
    >>> [path.name for path in write_lorem_tables(run, tempfile.mkdtemp())]
    ['lorem_ipsum_tiny.csv', 'lorem_ipsum_tiny.json', 'lorem_ipsum_tiny.md',
     'lorem_ipsum_summary_tiny.csv', 'lorem_ipsum_summary_tiny.json', 'lorem_ipsum_summary_tiny.md']
    """
    model = run.summary.model or None
    meta = {**(metadata or {}), "natural_split": run.natural_split,
            "scoring": "teacher-forced argmax at every answer position (equals greedy generation up to its first departure)"}
    rows = [{"model": run.summary.model, **r.as_row()} for r in run.results]
    return (write_table(rows, result_stem(out_dir, "lorem_ipsum", model), metadata=meta)
            + write_table([run.summary.as_row()], result_stem(out_dir, "lorem_ipsum_summary", model), metadata=meta))


def describe(summary: LoremSummary) -> str:
    """The headline of a run: each kind of departure's share at ambiguous positions vs the base rate.

    >>> from interp.prompts import AnswerEnd
    >>> decode = lambda ids: " ".join(map(str, ids))
    >>> result = analyse_copy(0, [5, 6, 5, 7], [5, 6, 5, 8, 0], AnswerEnd(frozenset({0})), decode)
    >>> print(describe(summarize_copies([result], LoremConfig(), model_name="tiny")))
    tiny: 1 paragraphs of ~4 tokens, exact copies 0.000; base rate of ambiguous positions 0.400
      greedy first departures: 1, 1.000 at ambiguous tokens (p = 0.4), mean position 3.0
      ...
    """
    s = summary
    lines = [
        f"{s.model or 'model'}: {s.n_paragraphs} paragraphs of ~{s.mean_tokens:.0f} tokens, exact copies "
        f"{s.accuracy:.3f}; base rate of ambiguous positions {s.base_rate:.3f}",
        f"  greedy first departures: {s.n_departures}, {s.share_departures_ambiguous:.3f} at ambiguous tokens "
        f"(p = {s.p_value:.3g}), mean position {s.mean_transition_index:.1f}",
        f"  first departures after the first token: {s.n_primed_departures}, "
        f"{s.share_primed_departures_ambiguous:.3f} at ambiguous tokens (p = {s.primed_p_value:.3g})",
        f"  teacher-forced departures (all positions): {s.n_tf_departures}, "
        f"{s.share_tf_departures_ambiguous:.3f} at ambiguous tokens (p = {s.tf_p_value:.3g}); token accuracy "
        f"ambiguous {s.tf_accuracy_ambiguous:.3f} / unambiguous {s.tf_accuracy_unambiguous:.3f}",
    ]
    if s.n_edits is not None:
        lines.append(f"  aligned edits of free generations: {s.n_edits}, {s.share_edits_ambiguous:.3f} at ambiguous tokens")
    return "\n".join(lines)
