"""Where task examples come from: the seeded generator ([`Generated`][interp.data.paper_files.Generated], the default) or the
paper's own JSONL files ([`PaperData`][interp.data.paper_files.PaperData]), so that every analysis can evaluate exactly the
records the paper evaluated (``--data FILE``). Both are [`ExampleSource`][interp.data.paper_files.ExampleSource] objects.

Formats (``datasets/`` of ``lacoco-lab/always_a_transformer``):

* retrieval, unique: ``{"input_no_space": "QJE9lHaxyJ", "input_with_space": "QJE9lHaxy|J", "UL": "Q", "UR": "E"}``
  (the last symbol is the query; the length counts it);
* retrieval, non-unique: the same with ``NLFirst``, ``NRFirst``, ``NLLast``, ``NRLast``;
* copying: ``{"input": "CnSjrAHmQt", "UF": ..., "UB": ...}`` (non-unique files: ``NF``, ``NB``).

Every symbol is one item. A record's answer is checked against the task's rule; the record's own
answer is what is scored, and records whose answer disagrees with the rule are counted in
`PaperData.disagreements` (the paper's generator has a known edge case at position 0).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from interp.data.tasks import (REPEATS, TASK_NAMES, TaskExample, TaskSpec, check_items, copying_is_ambiguous,
                               generate_examples, get_task)
from interp.data.vocab import paper_vocabulary


@runtime_checkable
class ExampleSource(Protocol):
    """Test examples of a task at a length, and a JSON-ready description for result metadata."""

    def examples(self, task: str | TaskSpec, length: int, n: int, seed: int = 0) -> list[TaskExample]: ...

    def items(self, task: str | TaskSpec) -> tuple[str, ...]: ...

    def describe(self) -> dict: ...


@dataclass(frozen=True)
class Generated:
    """Examples from the seeded generator, over ``vocabulary`` (default: the paper's items for
    each task) with non-unique copying strings repeating items as ``repeats`` says."""

    vocabulary: tuple[str, ...] | None = None
    repeats: str = "pool"

    def __post_init__(self) -> None:
        if self.repeats not in REPEATS:
            raise ValueError(f"repeats={self.repeats!r} is not one of {REPEATS}")
        if self.vocabulary is not None:
            check_items(self.vocabulary)

    def items(self, task: str | TaskSpec) -> tuple[str, ...]:
        return tuple(self.vocabulary) if self.vocabulary else paper_vocabulary(task)

    def examples(self, task: str | TaskSpec, length: int, n: int, seed: int = 0) -> list[TaskExample]:
        return generate_examples(task, length, n, seed, self.items(task), self.repeats)

    def describe(self) -> dict:
        return {"source": "generator", "vocabulary": "paper" if self.vocabulary is None else list(self.vocabulary),
                "repeats": self.repeats}


RETRIEVAL_KEYS = ("UL", "UR", "NLFirst", "NRFirst", "NLLast", "NRLast")
COPYING_KEYS = {"UF": ("UF", "NF"), "UB": ("UB", "NB"), "NF": ("NF", "UF"), "NB": ("NB", "UB")}


def retrieval_example(record: dict, task: str) -> tuple[TaskExample, bool]:
    """One retrieval record as an example of ``task``, and whether its answer follows the rule.

    >>> example, follows_rule = retrieval_example({"input_no_space": "abcab", "UR": "c"}, "UR")
    >>> example.context, example.query, example.target, follows_rule
    (('a', 'b', 'c', 'a'), 'b', ('c',), True)
    """
    spec = get_task(task)
    text = record["input_no_space"]
    check_items(list(text), "input_no_space")
    if "|" in text or len(text) < 4:
        raise ValueError(f"input_no_space={text!r} is not a retrieval input (context then query, no '|')")
    context, query = tuple(text[:-1]), text[-1]
    positions = tuple(i for i, item in enumerate(context) if item == query)
    if not positions:
        raise ValueError(f"the query {query!r} does not occur in the context {text[:-1]!r}")
    chosen = positions[-1] if spec.occurrence == "last" else positions[0]
    source = chosen - 1 if spec.direction == "left" else chosen + 1
    target = record[spec.name]
    check_items([target], spec.name)
    follows_rule = 0 <= source < len(context) and context[source] == target
    neighbours = {context[p - 1 if spec.direction == "left" else p + 1] for p in positions
                  if 0 <= (p - 1 if spec.direction == "left" else p + 1) < len(context)}
    return TaskExample(spec.name, context, (target,), query, positions, (min(max(source, 0), len(context) - 1),),
                       ambiguous=len(neighbours) > 1, metadata={"follows_rule": follows_rule}), follows_rule


def copying_example(record: dict, task: str) -> tuple[TaskExample, bool]:
    """One copying record as an example of ``task``, and whether its recorded copy is right.

    >>> example, follows_rule = copying_example({"input": ["a", "b", "c"]}, "UB")
    >>> example.target, follows_rule
    (('c', 'b', 'a'), True)
    """
    spec = get_task(task)
    context = tuple(record["input"])
    check_items(context or [""], "input")
    order = list(range(len(context))) if spec.direction == "forward" else list(range(len(context) - 1, -1, -1))
    target = tuple(context[i] for i in order)
    recorded = next((record[k] for k in COPYING_KEYS[spec.name] if k in record), None)
    follows_rule = recorded is None or tuple(recorded) == target
    return TaskExample(spec.name, context, target, answer_positions=tuple(order),
                       ambiguous=copying_is_ambiguous(context, spec.direction),
                       metadata={"follows_rule": follows_rule}), follows_rule


def tasks_of_record(record: dict) -> list[str]:
    """The tasks a record can be read as (retrieval: the answers it holds; copying: its family).

    >>> tasks_of_record({"input_no_space": "abcab", "UR": "c"}), tasks_of_record({"input": ["a", "b", "a"]})
    (['UR'], ['NF', 'NB'])
    """
    if "input_no_space" in record:
        answers = [k for k in RETRIEVAL_KEYS if k in record]
        if not answers:
            raise ValueError(f"the record holds no answer (expected one of {', '.join(RETRIEVAL_KEYS)})")
        return answers
    if "input" in record:
        unique = len(set(record["input"])) == len(record["input"])
        return ["UF", "UB"] if unique and not ("NF" in record or "NB" in record) else ["NF", "NB"]
    raise ValueError(f"not a record of the paper's retrieval or copying files (keys {sorted(record)})")


@dataclass
class PaperData:
    """Examples read from the paper's files, by ``(task, length)``."""

    cells: dict[tuple[str, int], list[TaskExample]] = field(default_factory=dict)
    sources: dict[tuple[str, int], list[str]] = field(default_factory=lambda: defaultdict(list))
    disagreements: dict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))

    def tasks(self) -> list[str]:
        return [t for t in TASK_NAMES if any(task == t for task, _ in self.cells)]

    def lengths(self, task: str) -> list[int]:
        return sorted(n for t, n in self.cells if t == task)

    def items(self, task: str | TaskSpec) -> tuple[str, ...]:
        """The symbols the records use (for demonstrations drawn from the generator)."""
        name = get_task(task).name
        seen = dict.fromkeys(s for (t, _), records in self.cells.items() if t == name
                             for ex in records for s in ex.context)
        return tuple(seen) or paper_vocabulary(task)

    def describe(self) -> dict:
        return {"source": "paper files", "files": sorted({f for files in self.sources.values() for f in files}),
                "disagreements": {f"{t}@{n}": k for (t, n), k in self.disagreements.items() if k}}

    def examples(self, task: str | TaskSpec, length: int, n: int | None = None, seed: int = 0) -> list[TaskExample]:
        """The first ``n`` records of ``task`` at ``length`` (all with ``n=None``); the seed
        plays no part: the records are the paper's."""
        key = (get_task(task).name, length)
        if key not in self.cells:
            have = ", ".join(f"{t}@{m}" for t, m in sorted(self.cells)) or "nothing"
            raise ValueError(f"--data holds no {key[0]} records of length {length}; it holds {have}")
        records = self.cells[key]
        if n is not None and n > len(records):
            raise ValueError(f"--n {n}: the data holds only {len(records)} {key[0]} records of length {length}")
        return records[:n]


def read_paper_jsonl(paths: str | Path | Iterable[str | Path], tasks: Sequence[str] | None = None) -> PaperData:
    """Read the paper's JSONL files; every record becomes an example of each task it can serve
    (restricted to ``tasks`` when given). Errors name the file and line.

    >>> data = read_paper_jsonl("tests/fixtures/paper_data/copying_unique_L5.jsonl")  # run from the repository's root
    >>> data.tasks(), sorted(data.cells)
    (['UF', 'UB'], [('UB', 5), ('UF', 5)])
    """
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    wanted = None if tasks is None else {get_task(t).name for t in tasks}
    data = PaperData()
    seen: dict[Path, Path] = {}
    for path in map(Path, paths):
        if not path.is_file():
            raise FileNotFoundError(f"--data: {path} is not a file")
        if path.resolve() in seen:  # its records would count twice
            raise ValueError(f"--data: {path} is the file given before as {seen[path.resolve()]}; name each file once")
        seen[path.resolve()] = path
        try:
            _read_file(path, wanted, data)
        except UnicodeDecodeError as err:
            raise ValueError(f"--data: {path} is not a UTF-8 text file of JSON lines ({err.reason})") from None
    if not data.cells:
        raise ValueError(f"--data: {', '.join(map(str, paths))} hold no records"
                         + (f" for tasks {sorted(wanted)}" if wanted else ""))
    return data


def _read_file(path: Path, wanted: set[str] | None, data: PaperData) -> None:
    """Add the records of one file to ``data``; an error names the file and line."""
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                for task in tasks_of_record(record):
                    if wanted is not None and task not in wanted:
                        continue
                    read = retrieval_example if get_task(task).family == "retrieval" else copying_example
                    example, follows = read(record, task)
                    key = (task, example.length)
                    data.cells.setdefault(key, []).append(example)
                    if str(path) not in data.sources[key]:
                        data.sources[key].append(str(path))
                    data.disagreements[key] += not follows
            except (ValueError, KeyError, TypeError) as err:
                raise ValueError(f"{path}:{line_no}: not a record of the paper's files ({err})") from None
