"""The paper's in-context prompt formats, and their encoding into token ids.

Retrieval (base models): one example a line, ``" a b c | q: t"``, examples separated by a blank
line; the test line ends at ``":"``. Copying: ``"<bos> a b c : a b c <eos>"`` a line (literal
text, not special tokens), lines joined by a newline; the test line ends at ``":"``.
Demonstrations are drawn fresh for each test example from a seeded generator.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal, Sequence, get_args

from transformers import PreTrainedTokenizerBase

from .tasks import ALNUM, TaskExample, TaskSpec, generate_example, get_task
from .vocab import item_token_ids

Template = Literal["bare", "obey"]
TEMPLATES: tuple[str, ...] = get_args(Template)
DEFAULT_DEMO_LENGTH = {("retrieval", True): 6, ("retrieval", False): 7, ("copying", True): 5, ("copying", False): 5}
RULES = {
    "UL": "Each line lists tokens, then '|' and a query token that occurs once. Answer with the token right before the query.",
    "UR": "Each line lists tokens, then '|' and a query token that occurs once. Answer with the token right after the query.",
    "NLFirst": "Each line lists tokens, then '|' and a query token. Answer with the token right before its first occurrence.",
    "NRFirst": "Each line lists tokens, then '|' and a query token. Answer with the token right after its first occurrence.",
    "NLLast": "Each line lists tokens, then '|' and a query token. Answer with the token right before its last occurrence.",
    "NRLast": "Each line lists tokens, then '|' and a query token. Answer with the token right after its last occurrence.",
    "UF": "Copy the tokens of each line after ':' in the same order.",
    "UB": "Copy the tokens of each line after ':' in reverse order.",
    "NF": "Copy the tokens of each line after ':' in the same order.",
    "NB": "Copy the tokens of each line after ':' in reverse order.",
}


@dataclass(frozen=True)
class PromptConfig:
    """How a test example is wrapped: shots, wording and demonstration length."""

    n_shots: int = 5
    template: Template = "bare"
    demo_length: int | None = None  # None: the paper's (6 unique / 7 non-unique retrieval, 5 copying)
    prepend_bos: bool | None = None  # None: the model's default (does its tokenizer add a BOS?)

    def __post_init__(self) -> None:
        if self.n_shots < 0:
            raise ValueError(f"n_shots={self.n_shots} must be >= 0")
        if self.template not in TEMPLATES:
            raise ValueError(f"template={self.template!r} is not one of {TEMPLATES}")


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt: ``text`` ends where the answer starts."""

    example: TaskExample
    text: str
    answer_text: str
    end_text: str
    demos: tuple[TaskExample, ...] = field(default=(), compare=False)

    @property
    def answer_string(self) -> str:
        """The answer as the paper scores it: spaces and ``<eos>`` stripped."""
        return "".join(self.example.target)


def render_line(example: TaskExample, with_answer: bool) -> tuple[str, str, str]:
    """(line up to the answer, the answer, the end marker) for one example."""
    items = " " + " ".join(example.context)
    answer = " " + " ".join(example.target)
    if get_task(example.task).family == "retrieval":
        return f"{items} | {example.query}:", answer, "\n"
    return f"<bos>{items} :", answer, " <eos>"


def separator(spec: TaskSpec) -> str:
    return "\n\n" if spec.family == "retrieval" else "\n"


def build_prompt(example: TaskExample, demos: Sequence[TaskExample], template: Template = "bare") -> Prompt:
    spec = get_task(example.task)
    blocks = []
    if template == "obey":
        blocks.append(RULES[spec.name])
    for demo in demos:
        head, answer, end = render_line(demo, with_answer=True)
        blocks.append(head + answer + end.rstrip("\n"))
    head, answer, end = render_line(example, with_answer=False)
    blocks.append(head)
    return Prompt(example, separator(spec).join(blocks), answer, end, tuple(demos))


def build_prompts(examples: Sequence[TaskExample], config: PromptConfig = PromptConfig(), seed: int = 0,
                  vocabulary: Sequence[str] = ALNUM) -> list[Prompt]:
    """Wrap each example with ``config.n_shots`` fresh demonstrations (seeded)."""
    prompts = []
    for i, example in enumerate(examples):
        spec = get_task(example.task)
        rng = random.Random(f"demos:{spec.name}:{seed}:{i}")
        length = config.demo_length or DEFAULT_DEMO_LENGTH[(spec.family, spec.unique)]
        demos = [generate_example(spec, length, rng, vocabulary) for _ in range(config.n_shots)]
        prompts.append(build_prompt(example, demos, config.template))
    return prompts


@dataclass(frozen=True)
class EncodedPrompt:
    """Token ids of a prompt, its answer, and the tokens that may legally end the answer."""

    prompt_ids: tuple[int, ...]
    answer_ids: tuple[int, ...]
    end_ids: frozenset[int]

    @property
    def ids(self) -> tuple[int, ...]:
        return self.prompt_ids + self.answer_ids

    @property
    def answer_start(self) -> int:
        return len(self.prompt_ids)


def end_token_ids(tokenizer: PreTrainedTokenizerBase, end_text: str) -> frozenset[int]:
    """Tokens that end an answer: the first token of the end marker, a newline, or EOS.

    Greedy generation stops on any of them, so requiring one after the answer makes
    teacher-forced exact match agree with generation (no extra items after a correct copy)."""
    ids = {tokenizer.encode(end_text, add_special_tokens=False)[0]}
    ids |= {tokenizer.encode(t, add_special_tokens=False)[0] for t in ("\n", "\n\n")}
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return frozenset(ids)


def bos_ids(tokenizer: PreTrainedTokenizerBase, prepend_bos: bool) -> list[int]:
    """``[BOS]`` when asked for and the tokenizer has one, else ``[]``."""
    return [tokenizer.bos_token_id] if prepend_bos and tokenizer.bos_token_id is not None else []


def encode_prompt(tokenizer: PreTrainedTokenizerBase, prompt: Prompt, prepend_bos: bool = True,
                  item_ids: dict[str, int] | None = None) -> EncodedPrompt:
    """Answer items are encoded one token each (checked), the prompt as ordinary text."""
    item_ids = item_ids or item_token_ids(tokenizer, prompt.example.target)
    prompt_ids = bos_ids(tokenizer, prepend_bos) + tokenizer.encode(prompt.text, add_special_tokens=False)
    answer_ids = [item_ids[item] for item in prompt.example.target]
    return EncodedPrompt(tuple(prompt_ids), tuple(answer_ids), end_token_ids(tokenizer, prompt.end_text))


def encode_prompts(tokenizer: PreTrainedTokenizerBase, prompts: Sequence[Prompt], prepend_bos: bool = True) -> list[EncodedPrompt]:
    items = sorted({item for p in prompts for item in p.example.target})
    item_ids = item_token_ids(tokenizer, items)
    return [encode_prompt(tokenizer, p, prepend_bos, item_ids) for p in prompts]
