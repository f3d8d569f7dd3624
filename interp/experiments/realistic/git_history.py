"""Git commit history: the same copy asked for in the order it is written, or reversed.

A history is ``N`` lines ``<7-hex hash> <Action> <topic>``, newest first as ``git log`` prints
them. *Revert* asks for the commits newest to oldest (a forward copy); *cherry-pick* oldest to
newest (a backward copy). Prompts are the paper's: the task instruction, ``n_shots`` solved
histories of the same length, then the test history, each block

    === NEW HISTORY ===
    <history>
    === ANSWER ===
    <start>
    <answer lines>
    <end>

An answer is exactly right when the model reproduces every line in the required order and then
ends (``<end>``); teacher forcing decides this in one pass (see ``interp.measure.evaluate``). Revert and
cherry-pick see the same histories and demonstrations, so their accuracies are paired.

Deviations from the paper's templates, on purpose: the instruction uses an ASCII hyphen where the
paper has U+2011 ("cherry‑pick"), drops markdown trailing double spaces, and separates the test
block from the demonstrations by a blank line as the demonstrations are separated from each other.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

from tqdm.auto import tqdm

from interp.measure.batching import Hook
from interp.measure.encoding import resolve_prepend_bos
from interp.prompts import AnswerEnd, PromptConfig
from interp.core.naming import result_stem
from interp.core.journal import NUMBER, OPTIONAL_NUMBER, RowJournal, RowShape
from interp.core.tables import row_from_mapping, write_table
from interp.measure.teacher_forcing import Accuracy
from interp.experiments.realistic.common import (TextPrompt, encode_text_prompt, first_tokens, greedy_answers, split_is_natural,
                     teacher_forced_scores)

if TYPE_CHECKING:
    from transformer_lens.model_bridge import TransformerBridge

GitTask = Literal["revert", "cherry-pick"]
GIT_TASKS: tuple[str, ...] = get_args(GitTask)
ORDER: dict[str, str] = {"revert": "forward", "cherry-pick": "reversed"}

GIT_ACTIONS = ("Add", "Remove", "Fix", "Refactor", "Update", "Improve", "Optimize", "Document", "Cleanup", "Merge",
               "Revert", "Bug fix")
GIT_TOPICS = ("authentication", "API", "search", "database", "UI", "CLI", "logging", "tests", "deployment", "config",
              "caching")
HEX_DIGITS = "0123456789abcdef"
HASH_LENGTH = 7

INSTRUCTIONS: dict[str, str] = {
    "revert": (
        "Below is part of a Git commit history (newest at the top, oldest at the bottom).\n\n"
        "Task\nList every commit line that must be reverted to roll the codebase back.\n"
        "1. Output the lines **from newest to oldest**.\n"
        "2. One complete commit line per output line.\n"
        "3. Do **not** output anything else."
    ),
    "cherry-pick": (
        "Below is a part of a Git commit history (newest at the top, oldest at the bottom).\n\n"
        "Task\nList every commit line that must be cherry-picked onto the release branch.\n"
        "1. Output them **from oldest to newest** (the order `git cherry-pick` expects).\n"
        "2. One complete commit line per output line.\n"
        "3. Do **not** output anything else."
    ),
}
START, END = "<start>", "<end>"


@dataclass(frozen=True)
class Commit:
    sha: str
    message: str

    @property
    def line(self) -> str:
        return f"{self.sha} {self.message}"


@dataclass(frozen=True)
class History:
    """Commits newest first, as ``git log --oneline`` lists them."""

    commits: tuple[Commit, ...]

    @property
    def lines(self) -> tuple[str, ...]:
        return tuple(c.line for c in self.commits)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @staticmethod
    def from_lines(lines: Sequence[str]) -> "History":
        """Parse ``"<hash> <message>"`` lines (newest first), e.g. for hand-made histories."""
        commits = []
        for line in lines:
            sha, _, message = line.strip().partition(" ")
            if not sha or not message:
                raise ValueError(f"lines contains {line!r}, which is not '<hash> <message>'")
            commits.append(Commit(sha, message))
        return History(tuple(commits))


def _check_task(task: str) -> GitTask:
    if task not in GIT_TASKS:
        raise ValueError(f"task={task!r} is not one of {GIT_TASKS}")
    return task  # type: ignore[return-value]


def expected_lines(history: History, task: str) -> tuple[str, ...]:
    """Revert lists commits as written (newest first); cherry-pick in reverse (oldest first).

    >>> history = History.from_lines(["a1b2c3d Fix API", "e4f5a6b Add tests"])
    >>> expected_lines(history, "cherry-pick")
    ('e4f5a6b Add tests', 'a1b2c3d Fix API')
    """
    lines = history.lines
    return lines if _check_task(task) == "revert" else lines[::-1]


def _random_commit(rng: random.Random) -> Commit:
    sha = "".join(rng.choice(HEX_DIGITS) for _ in range(HASH_LENGTH))
    return Commit(sha, f"{rng.choice(GIT_ACTIONS)} {rng.choice(GIT_TOPICS)}")


def random_history(rng: random.Random, n_commits: int) -> History:
    """``n_commits`` commits with distinct hashes (messages may repeat, as in real histories).

    >>> random_history(random.Random(0), 3).lines
    ('cd18fc9 Document CLI', '6494384 Update API', '2af3bda Merge caching')
    """
    if n_commits < 1:
        raise ValueError(f"n_commits={n_commits} must be >= 1")
    commits, seen = [], set()
    while len(commits) < n_commits:
        commit = _random_commit(rng)
        if commit.sha not in seen:
            seen.add(commit.sha)
            commits.append(commit)
    return History(tuple(commits))


# --------------------------------------------------------------------------- prompts


def _history_block(history: History) -> str:
    return f"=== NEW HISTORY ===\n{history.text}\n=== ANSWER ===\n{START}"


def answer_text(history: History, task: str) -> str:
    """What follows ``<start>`` up to ``<end>``: every line on its own line.

    >>> answer_text(History.from_lines(["a1b2c3d Fix API", "e4f5a6b Add tests"]), "revert")
    '\\na1b2c3d Fix API\\ne4f5a6b Add tests\\n'
    """
    return "\n" + "".join(line + "\n" for line in expected_lines(history, task))


def _solved_block(history: History, task: str) -> str:
    return _history_block(history) + answer_text(history, task) + END


def git_prompt(history: History, task: str, demos: Sequence[History] = (), instruction: bool = True) -> TextPrompt:
    """The prompt up to the test's ``<start>``, the expected answer, and the ``<end>`` after it.

    >>> prompt = git_prompt(History.from_lines(["a1b2c3d Fix API", "e4f5a6b Add tests"]), "cherry-pick", instruction=False)
    >>> print(prompt.text + prompt.answer_text + prompt.end_text)
    === NEW HISTORY ===
    a1b2c3d Fix API
    e4f5a6b Add tests
    === ANSWER ===
    <start>
    e4f5a6b Add tests
    a1b2c3d Fix API
    <end>
    """
    task = _check_task(task)
    blocks = ([INSTRUCTIONS[task]] if instruction else []) + [_solved_block(d, task) for d in demos]
    blocks.append(_history_block(history))
    return TextPrompt("\n\n".join(blocks), answer_text(history, task), END)


@dataclass(frozen=True)
class GitConfig:
    """Which histories are asked about. The paper: N = 10, 15, 20, 25, 35, 5 shots, 1500 per file."""

    n_commits: tuple[int, ...] = (5, 10)
    n_examples: int = 25
    n_shots: int = 3
    tasks: tuple[str, ...] = GIT_TASKS
    instruction: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.n_commits or min(self.n_commits) < 1:
            raise ValueError(f"n_commits={self.n_commits} must list history lengths >= 1")
        if self.n_examples < 1:
            raise ValueError(f"n_examples={self.n_examples} must be >= 1")
        if self.n_shots < 0:
            raise ValueError(f"n_shots={self.n_shots} must be >= 0")
        for task in self.tasks:
            _check_task(task)


@dataclass(frozen=True)
class GitExample:
    history: History
    demos: tuple[History, ...]


def git_examples(n_commits: int, n_examples: int, n_shots: int, seed: int = 0) -> list[GitExample]:
    """Seeded test histories with their demonstrations; example ``i`` has its own generator, so
    it is the same whatever ``n_examples`` is, and shared by both tasks.

    >>> examples = git_examples(n_commits=3, n_examples=2, n_shots=1)
    >>> len(examples), len(examples[0].demos), examples[0].history.lines[0]
    (2, 1, '221f592 Update logging')
    >>> git_examples(3, 1, 1)[0] == examples[0]  # example 0 does not depend on n_examples
    True
    """
    examples = []
    for i in range(n_examples):
        rng = random.Random(f"git:{seed}:{n_commits}:{i}")
        history = random_history(rng, n_commits)
        examples.append(GitExample(history, tuple(random_history(rng, n_commits) for _ in range(n_shots))))
    return examples


# --------------------------------------------------------------------------- scoring


def parse_answer_lines(text: str) -> list[str]:
    """Lines of a generated answer as the paper compares them: cut at ``<end>``, stripped, empty
    lines dropped.

    >>> parse_answer_lines("\\n a1b2c3d Fix API\\n\\ne4f5a6b Add tests\\n<end> more text")
    ['a1b2c3d Fix API', 'e4f5a6b Add tests']
    """
    return [line.strip() for line in text.split(END, 1)[0].splitlines() if line.strip()]


def lines_match(generated: str, expected: Sequence[str]) -> bool:
    """Whether a generated answer lists exactly the ``expected`` lines (see [`parse_answer_lines`][interp.experiments.realistic.git_history.parse_answer_lines]).

    >>> lines_match("\\na1b2c3d Fix API\\n<end>", ["a1b2c3d Fix API"]), lines_match("\\na1b2c3d Fix API", [])
    (True, False)
    """
    return parse_answer_lines(generated) == list(expected)


@dataclass(frozen=True)
class GitRow:
    """One task at one history length: exact match of the teacher-forced copy (with its binomial
    standard error) and, when free generations were run, the paper's string-level line match."""

    model: str
    task: str
    order: str  # forward (revert) or reversed (cherry-pick)
    n_commits: int
    n_examples: int
    accuracy: float
    stderr: float
    token_accuracy: float
    mean_logprob: float
    generate_accuracy: float | None
    natural_split: float  # share of prompts whose separate encoding is the joint one
    n_shots: int
    seed: int


GIT_COLUMNS = [f.name for f in fields(GitRow)]
GIT_SCORING = "teacher-forced exact match of every answer token, then <end>"
# What a journal line must hold to be reused as a finished cell.
GIT_ROW_SHAPE: RowShape = {"model": str, "task": str, "n_commits": int, "n_examples": int, "accuracy": NUMBER,
                           "stderr": NUMBER, "generate_accuracy": OPTIONAL_NUMBER}


def evaluate_git(model: TransformerBridge, task: str, n_commits: int, config: GitConfig = GitConfig(), *,
                 batch_size: int = 4, generate: bool = False, fwd_hooks: Sequence[Hook] = (), progress: bool = False,
                 model_name: str = "") -> GitRow:
    """A row of ``git_history.csv``: exact-match accuracy of ``model`` on ``config.n_examples``
    histories of ``n_commits`` (teacher-forced [`interp.measure.teacher_forcing.Accuracy`][interp.measure.teacher_forcing.Accuracy] columns),
    plus ``generate_accuracy``, the paper's string-level line match of free greedy generations
    when they were run.

    >>> row = evaluate_git(load_model("smollm2-135m"), "revert", 5, progress=False)  # doctest: +SKIP
    >>> row.accuracy  # doctest: +SKIP
    0.95
    """
    tokenizer = model.tokenizer
    examples = git_examples(n_commits, config.n_examples, config.n_shots, config.seed)
    prompts = [git_prompt(e.history, task, e.demos, config.instruction) for e in examples]
    eos = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    end = AnswerEnd(frozenset(first_tokens(tokenizer, (END,)) | eos))
    prepend_bos = resolve_prepend_bos(model, PromptConfig())
    encoded = [encode_text_prompt(tokenizer, p, end, prepend_bos) for p in prompts]
    label = f"git {task} N={n_commits}"
    accuracy = Accuracy.of(teacher_forced_scores(model, encoded, batch_size, fwd_hooks, progress and label))
    generate_accuracy = None
    if generate:
        outputs = greedy_answers(model, encoded, 8, fwd_hooks, progress and f"{label} generating")
        hits = [lines_match(tokenizer.decode(list(out)), expected_lines(e.history, task)) for out, e in zip(outputs, examples)]
        generate_accuracy = sum(hits) / len(hits)
    return GitRow(model=model_name, task=task, order=ORDER[task], n_commits=n_commits, n_examples=accuracy.n_examples,
                  accuracy=accuracy.accuracy, stderr=accuracy.stderr, token_accuracy=accuracy.token_accuracy,
                  mean_logprob=accuracy.mean_logprob, generate_accuracy=generate_accuracy,
                  natural_split=sum(split_is_natural(tokenizer, p) for p in prompts) / len(prompts),
                  n_shots=config.n_shots, seed=config.seed)


def run_git(model: TransformerBridge, config: GitConfig = GitConfig(), *, batch_size: int = 4, generate: bool = False,
            fwd_hooks: Sequence[Hook] = (), progress: bool = False, model_name: str = "",
            journal: RowJournal | None = None) -> list[GitRow]:
    """Every task of ``config`` at every history length, as rows (per length, forward order first). With a
    ``journal`` each finished cell is recorded, and cells an earlier run finished are reused.

    >>> rows = run_git(load_model("smollm2-135m"), GitConfig(n_commits=(5,)), progress=False)  # doctest: +SKIP
    >>> [(row.task, row.n_commits) for row in rows]  # doctest: +SKIP
    [('revert', 5), ('cherry-pick', 5)]
    """
    done = {(r.task, r.n_commits): r
            for r in (row_from_mapping(GitRow, values) for values in (journal.done() if journal else []))}
    rows = []
    # both orders of one length before the next length: a run cut short still leaves paired cells
    for n, task in tqdm([(n, task) for n in config.n_commits for task in config.tasks], desc="git history",
                        disable=not progress):
        row = done.get((task, n))
        if row is None:
            row = evaluate_git(model, task, n, config, batch_size=batch_size, generate=generate, fwd_hooks=fwd_hooks,
                               progress=progress, model_name=model_name)
            if journal is not None:
                journal.add(asdict(row))
        rows.append(row)
    return rows


def write_git_table(rows: Sequence[GitRow], out_dir: str | Path, metadata: Mapping | None = None) -> list[Path]:
    """``git_history_<model>.{csv,json,md}``.

    >>> row = GitRow(model="tiny", task="revert", order="forward", n_commits=5, n_examples=25, accuracy=0.96,
    ...              stderr=0.04, token_accuracy=0.99, mean_logprob=-0.05, generate_accuracy=None, natural_split=1.0,
    ...              n_shots=3, seed=0)
    >>> import tempfile
    >>> [path.name for path in write_git_table([row], tempfile.mkdtemp())]
    ['git_history_tiny.csv', 'git_history_tiny.json', 'git_history_tiny.md']
    """
    meta = {**(metadata or {}), "scoring": GIT_SCORING}
    model = rows[0].model if rows and rows[0].model else None
    return write_table(rows, result_stem(out_dir, "git_history", model), metadata=meta)


def describe(rows: Sequence[GitRow]) -> str:
    """One line per history length: forward (revert) vs reversed (cherry-pick) accuracy.

    >>> row = GitRow(model="tiny", task="revert", order="forward", n_commits=5, n_examples=25, accuracy=0.96,
    ...              stderr=0.04, token_accuracy=0.99, mean_logprob=-0.05, generate_accuracy=None, natural_split=1.0,
    ...              n_shots=3, seed=0)
    >>> print(describe([row]))
    N=5: forward (revert) 0.960 ± 0.040
    """
    by_cell = {(r.task, r.n_commits): r for r in rows}
    lines = []
    for n in sorted({r.n_commits for r in rows}):
        parts = [f"{ORDER[t]} ({t}) {by_cell[(t, n)].accuracy:.3f} ± {by_cell[(t, n)].stderr:.3f}"
                 for t in GIT_TASKS if (t, n) in by_cell]
        lines.append(f"N={n}: " + " vs ".join(parts))
    return "\n".join(lines)
