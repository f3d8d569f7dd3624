"""Rendering task examples as prompt text.

Retrieval: one example a line, ``" a b c | q: t"``, examples separated by a blank line; the test
line ends at ``":"``. Copying: ``"<bos> a b c : a b c <eos>"`` a line (literal text, not special
tokens), lines joined by a newline; the test line ends at ``":"``. Items are separated by spaces
and may be any string (a letter, a digit, a word); how many tokens each takes is the encoder's
business ([`interp.prompts.encode`][interp.prompts.encode]).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from interp.data.tasks import ALNUM, TaskExample, generate_example, get_task
from interp.prompts.config import DEFAULT_DEMO_LENGTH, PromptConfig
from interp.prompts.templates import (PAPER_COPYING_RULES, PAPER_COPYING_TEMPLATES, PAPER_EXPLANATION, PAPER_RETRIEVAL_RULES,
                        PAPER_RETRIEVAL_TEMPLATES, RULES)


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt: ``text`` ends where the answer starts. ``context_spans`` are the
    character spans (in ``text``) of the test example's context items, ``query_span`` the span of
    the query after ``|`` (retrieval)."""

    example: TaskExample
    text: str
    answer_text: str
    end_text: str
    demos: tuple[TaskExample, ...] = field(default=(), compare=False)
    context_spans: tuple[tuple[int, int], ...] = field(default=(), compare=False)
    query_span: tuple[int, int] | None = field(default=None, compare=False)
    protocol: str = "interp"

    @property
    def answer_string(self) -> str:
        """The answer as the paper scores it: spaces and ``<eos>`` stripped."""
        return "".join(self.example.target)


def render_line(example: TaskExample) -> tuple[str, str, str, list[tuple[int, int]], tuple[int, int] | None]:
    """(line up to the answer, the answer, the end marker, item spans in the line, query span).

    >>> from interp.data.tasks import generate_example
    >>> line, answer, end, item_spans, query_span = render_line(generate_example("UR", 5, seed=0))
    >>> line, answer, query_span
    (' y 2 5 A | 2:', ' 5', (11, 12))
    """
    retrieval = get_task(example.task).family == "retrieval"
    head = "" if retrieval else "<bos>"
    spans = []
    for item in example.context:
        head += " "
        spans.append((len(head), len(head) + len(item)))
        head += item
    answer = " " + " ".join(example.target)
    if not retrieval:
        return head + " :", answer, " <eos>", spans, None
    head += " | "
    query_span = (len(head), len(head) + len(example.query))
    return head + example.query + ":", answer, "\n", spans, query_span


def _solved(example: TaskExample) -> str:
    head, answer, end, _, _ = render_line(example)
    return head + answer + end.rstrip("\n")


def _paper_explanation(example: TaskExample) -> str:
    # The paper counts with context.split() on a context written without spaces (see templates.py).
    occurrences = "".join(example.context).split().count(example.query)
    return PAPER_EXPLANATION.format(solved_line=_solved(example), query=example.query, occurrences=occurrences,
                                    target="".join(example.target))


def _frame(example: TaskExample, demos: Sequence[TaskExample], config: PromptConfig) -> tuple[str, list[str]]:
    """The text around the examples (with ``{examples}`` in it) and the demonstration lines."""
    spec = get_task(example.task)
    template = config.template_for(spec.family)
    if config.protocol == "interp":
        return ((RULES[spec.name] + "\n\n" if spec.family == "retrieval" else RULES[spec.name] + "\n")
                if template == "obey" else "") + "{examples}", [_solved(d) for d in demos]
    if spec.family == "copying":
        rule_simple, rule_hint = PAPER_COPYING_RULES[spec.direction]
        frame = PAPER_COPYING_TEMPLATES[template].replace("{rule_simple}", rule_simple).replace("{rule_hint}", rule_hint)
        return frame, [_solved(d) for d in demos]
    explained, shown = demos[0], demos[1:]
    rule_simple, rule_math = PAPER_RETRIEVAL_RULES[spec.name]
    text = PAPER_RETRIEVAL_TEMPLATES[template]
    # str.format would also turn the template's {{n-1}} into {n-1}; placeholders are filled one by
    # one so that braces inside the filled-in values stay as they are.
    text = text.replace("{{", "{").replace("}}", "}")
    for name, value in (("rule_simple", rule_simple), ("rule_math", rule_math),
                        ("explanation", _paper_explanation(explained))):
        text = text.replace("{" + name + "}", value)
    return text, [_solved(d) for d in shown]


def build_prompt(example: TaskExample, demos: Sequence[TaskExample], config: PromptConfig = PromptConfig()) -> Prompt:
    """``example`` as a prompt: the frame of ``config`` (protocol, instructions), the ``demos``
    as solved lines, then the example's line up to its answer.

    >>> from interp.data.tasks import generate_example
    >>> prompt = build_prompt(generate_example("UR", 5, seed=0), [], PromptConfig(n_shots=0))
    >>> prompt.text, prompt.answer_text
    (' y 2 5 A | 2:', ' 5')
    """
    spec = get_task(example.task)
    frame, lines = _frame(example, demos, config)
    head, answer, end, spans, query_span = render_line(example)
    separator = "\n\n" if spec.family == "retrieval" else "\n"
    examples = separator.join([*lines, head])
    before, after = frame.split("{examples}")
    if after:
        raise ValueError("a template must end with its examples")
    offset = len(before) + len(examples) - len(head)
    shift = lambda s: (s[0] + offset, s[1] + offset)  # noqa: E731
    return Prompt(example, before + examples, answer, end, tuple(demos), tuple(map(shift, spans)),
                  shift(query_span) if query_span else None, config.protocol)


def build_prompts(examples: Sequence[TaskExample], config: PromptConfig = PromptConfig(), seed: int = 0,
                  vocabulary: Sequence[str] = ALNUM, demo_pool: Sequence[TaskExample] | None = None) -> list[Prompt]:
    """Wrap each example with ``config.n_shots`` demonstrations, seeded by ``(task, seed, index)``:
    drawn fresh from the generator, or sampled from ``demo_pool`` (the paper's demonstration
    files) without the test example itself.

    >>> from interp.data.tasks import generate_examples
    >>> prompts = build_prompts(generate_examples("UF", 4, n=3), PromptConfig(n_shots=1))
    >>> len(prompts), prompts[0].text.count(":")  # one demonstration, then the test input
    (3, 2)
    """
    prompts = []
    for i, example in enumerate(examples):
        spec = get_task(example.task)
        rng = random.Random(f"demos:{spec.name}:{seed}:{i}")
        if demo_pool is not None:
            pool = [d for d in demo_pool if d.context != example.context or d.query != example.query]
            if len(pool) < config.n_shots:
                raise ValueError(f"demo_pool has {len(pool)} usable demonstrations; n_shots={config.n_shots} needs more")
            demos = rng.sample(pool, config.n_shots)
        else:
            length = config.demo_length or DEFAULT_DEMO_LENGTH[(spec.family, spec.unique)]
            demos = [generate_example(spec, length, rng, vocabulary) for _ in range(config.n_shots)]
        prompts.append(build_prompt(example, demos, config))
    return prompts
