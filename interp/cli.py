"""The command-line vocabulary every script shares: ``analyses/``, ``benchmarks/`` and the model
installer (``python -m interp.models.paper``). Parsing only; no experiment logic. The one module that
imports ``argparse``: scripts take :class:`Parser`, its argument types, ``ArgumentTypeError`` (for a
type of their own) and ``Namespace`` from here.

One style for mistakes: a bad argument is refused by the parser, before any model is loaded,
with ``error: argument --n: expected an integer >= 1, got '0'`` and exit code 2. Problems only
visible once the model is loaded (a length past its context, ``--k`` larger than its number of
heads) are reported the same way through :func:`fail`, still before any scoring.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from argparse import ArgumentTypeError, Namespace
from collections.abc import Callable, Sequence
from pathlib import Path

from interp.core.locking import TableInUseError
from interp.core.naming import EMBEDDED_MODEL, result_stem


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` with the scripts' docstring layout.

    >>> Parser("Say hello.").parse_args([])
    Namespace()
    """

    def __init__(self, description: str | None = None, **kwargs):
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(description=description, **kwargs)


def fail(parser: argparse.ArgumentParser, argument: str, message: str) -> None:
    """Refuse an argument after parsing, in the parser's own style (exit code 2).

    >>> fail(Parser(prog="demo"), "--k", "expected at most 9 heads, got 12")
    Traceback (most recent call last):
    SystemExit: 2
    """
    parser.error(f"argument {argument}: {message}")


# --------------------------------------------------------------------------- argument types


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ArgumentTypeError(f"expected an integer, got {text!r}") from None


def at_least(minimum: int) -> Callable[[str], int]:
    """An integer argument with a lower bound (``--n``, ``--k``, ``--batch-size``).

    >>> at_least(2)("3")
    3
    >>> at_least(2)("1")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected an integer >= 2, got '1'
    """

    def parse(text: str) -> int:
        value = _int(text)
        if value < minimum:
            raise ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


positive_int = at_least(1)
non_negative_int = at_least(0)
MAX_SEED = 2**31 - 1  # every generator the toolkit seeds (random, torch, numpy) takes these, offsets included


def seed(text: str) -> int:
    """A random seed: an integer from 0 to ``MAX_SEED``.

    >>> seed("7")
    7
    """
    value = _int(text)
    if not 0 <= value <= MAX_SEED:
        raise ArgumentTypeError(f"expected a seed from 0 to {MAX_SEED}, got {text!r}")
    return value


def seed_list(text: str) -> list[int]:
    """Distinct seeds (``"0,1,2"`` or ``"0-2"``): a repeated seed would count one draw twice.

    >>> seed_list("0-2")
    [0, 1, 2]
    """
    values = int_list(text)
    for value in values:
        seed(str(value))
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        raise ArgumentTypeError(f"seed(s) {repeated} given twice in {text!r}; expected distinct seeds")
    return values


def fraction(text: str) -> float:
    """A number between 0 and 1, both included (``--warmup``, ``--threshold``).

    >>> fraction("0.25")
    0.25
    """
    try:
        value = float(text)
    except ValueError:
        raise ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}")
    return value


def fraction_list(text: str) -> list[float]:
    """``"0,0.5,1"`` -> numbers between 0 and 1, at least one.

    >>> fraction_list("0,0.5,1")
    [0.0, 0.5, 1.0]
    """
    try:
        values = [fraction(v) for v in text.replace(" ", ",").split(",") if v]
    except ArgumentTypeError:
        values = []
    if not values:
        raise ArgumentTypeError(f"expected comma-separated numbers between 0 and 1, got {text!r}")
    return values


def _finite_float(text: str, expected: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if not math.isfinite(value):
        raise ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def _signed_float(text: str, zero_allowed: bool) -> float:
    expected = "a finite number >= 0" if zero_allowed else "a finite number > 0"
    value = _finite_float(text, expected)
    if value < 0 or (value == 0 and not zero_allowed):
        raise ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (``--lr``): NaN and infinity are refused, not trained on.

    >>> positive_float("3e-4")
    0.0003
    """
    return _signed_float(text, zero_allowed=False)


def non_negative_float(text: str) -> float:
    """A finite number >= 0 (``--weight-decay``, ``--max-grad-norm`` where 0 turns clipping off).

    >>> non_negative_float("0")
    0.0
    """
    return _signed_float(text, zero_allowed=True)


def int_list(text: str) -> list[int]:
    """``"10,20"``, ``"5-20"`` or ``"5-10,20"`` -> integers (ranges inclusive), at least one.

    >>> int_list("5-8,20")
    [5, 6, 7, 8, 20]
    """
    values: list[int] = []
    for part in (p for p in text.replace(" ", ",").split(",") if p):
        if "-" in part.lstrip("-"):
            lo_text, hi_text = part.split("-", 1)
            lo, hi = _int(lo_text), _int(hi_text)
            if lo > hi:
                raise ArgumentTypeError(f"range {part!r} is empty (write the smaller number first, e.g. '5-20')")
            values.extend(range(lo, hi + 1))
        else:
            values.append(_int(part))
    if not values:
        raise ArgumentTypeError(f"expected integers like '10,20' or ranges like '5-20', got {text!r}")
    return values


def positive_int_list(text: str) -> list[int]:
    """:func:`int_list` with every integer >= 1 (``--lengths``).

    >>> positive_int_list("10,20")
    [10, 20]
    """
    values = int_list(text)
    if min(values) < 1:
        raise ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def name_list(choices: Sequence[str], what: str, allow_all: bool = True) -> Callable[[str], list[str]]:
    """Comma-separated names from ``choices`` (case-insensitive), ``"all"`` for every one; never empty.

    >>> models = name_list(["smollm2", "qwen"], "models")
    >>> models("QWEN"), models("all")
    (['qwen'], ['smollm2', 'qwen'])
    """

    def parse(text: str) -> list[str]:
        names = [n for n in text.replace(" ", ",").split(",") if n]
        if allow_all and [n.lower() for n in names] == ["all"]:
            return list(choices)
        lookup = {c.lower(): c for c in choices}
        unknown = [n for n in names if n.lower() not in lookup]
        if unknown or not names:
            wanted = ", ".join(choices) + (" or 'all'" if allow_all else "")
            got = f"unknown {unknown}" if unknown else f"no {what}"
            raise ArgumentTypeError(f"{got}; expected comma-separated {what} from {wanted}")
        return list(dict.fromkeys(lookup[n.lower()] for n in names))

    parse.__name__ = what
    return parse


def task_list(text: str) -> list[str]:
    """Task names (case-insensitive, ``"all"`` for every task) -> their canonical spellings.

    >>> task_list("uf,ub")
    ['UF', 'UB']
    """
    from interp.data.tasks import TASK_NAMES

    return name_list(TASK_NAMES, "tasks")(text)


def index_list(text: str) -> list[int] | None:
    """Layer or head indices: ``"all"`` (None) or integers and ranges like ``"0,5,14-20"``.

    >>> index_list("0,5,14-16"), index_list("all")
    ([0, 5, 14, 15, 16], None)
    """
    if text.strip().lower() == "all":
        return None
    try:
        values = int_list(text)
    except ArgumentTypeError:
        values = []
    if not values or min(values) < 0:
        raise ArgumentTypeError(f"expected 'all' or indices and ranges like '0,5,14-20', got {text!r}")
    return values


def task_name(text: str) -> str:
    """One task name (case-insensitive) -> its canonical spelling.

    >>> task_name("nrfirst")
    'NRFirst'
    """
    from interp.data.tasks import get_task

    try:
        return get_task(text).name
    except ValueError as err:
        raise ArgumentTypeError(str(err)) from None


def writable_dir(text: str) -> Path:
    """A folder the script can write into (created if needed), checked before any work.

    >>> import os, tempfile
    >>> writable_dir(os.path.join(tempfile.mkdtemp(), "figures")).is_dir()
    True
    """
    path = Path(text).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-test-"):
            pass
    except OSError as err:
        raise ArgumentTypeError(f"cannot write into {str(path)!r} ({err.strerror or err})") from None
    return path


def writable_file(text: str) -> Path:
    """A file the script can write (its folder created if needed), checked before any work.

    >>> import os, tempfile
    >>> path = writable_file(os.path.join(tempfile.mkdtemp(), "plots", "heads.png"))
    >>> path.name, path.parent.is_dir()
    ('heads.png', True)
    """
    path = Path(text).expanduser()
    if path.is_dir():
        raise ArgumentTypeError(f"{str(path)!r} is a folder; expected a file name")
    writable_dir(str(path.parent))
    return path


def new_or_existing_dir(text: str) -> Path:
    """A folder that exists or can be created, not a file (``--run-dir``, ``--adapter-out``);
    checked before any work, created by whoever writes into it.

    >>> new_or_existing_dir("results/runs/finetune_x").name
    'finetune_x'
    """
    path = Path(text).expanduser()
    for folder in (path, *path.parents):
        if folder.exists():
            if not folder.is_dir():
                raise ArgumentTypeError(f"{str(path)!r} cannot be a folder: {str(folder)!r} is a file")
            if not os.access(folder, os.W_OK | os.X_OK):
                raise ArgumentTypeError(f"cannot write into {str(folder)!r}")
            break
    return path


def existing_dir(text: str) -> Path:
    """A folder that already exists (``--results``, the tables to read).

    >>> existing_dir("docs").name
    'docs'
    """
    path = Path(text).expanduser()
    if not path.is_dir():
        raise ArgumentTypeError(f"{str(path)!r} is not a folder")
    return path


# --------------------------------------------------------------------------- shared arguments


def add_model_args(parser: argparse.ArgumentParser) -> None:
    """``--model``, ``--device``, ``--dtype``, ``--device-map`` and ``--adapter``.

    >>> parser = Parser()
    >>> add_model_args(parser)
    >>> parser.parse_args(["--model", "tiny-gpt2", "--device", "cpu"])
    Namespace(model='tiny-gpt2', device='cpu', dtype=None, device_map=None, adapter=None)
    """
    parser.add_argument("--model", default=EMBEDDED_MODEL,
                        help="model name or local checkpoint folder (default: the embedded SmolLM2-135M)")
    parser.add_argument("--device", default="auto", help="'auto' (CUDA when present), 'cpu', 'cuda', 'cuda:1'")
    parser.add_argument("--dtype", default=None, choices=("float32", "bfloat16", "float16"),
                        help="weights dtype (default float32)")
    parser.add_argument("--device-map", default=None, help="accelerate device_map, e.g. 'auto', to split a large model")
    parser.add_argument("--adapter", default=None,
                        help="LoRA adapter: a name under adapters/ (e.g. 'ub') or a folder")


def add_output_args(parser: argparse.ArgumentParser, default_dir: str = "results") -> None:
    """``--out`` (a folder checked writable while parsing) and ``--quiet``.

    >>> import tempfile
    >>> parser = Parser()
    >>> add_output_args(parser)
    >>> args = parser.parse_args(["--out", tempfile.mkdtemp(), "--quiet"])
    >>> args.out.is_dir(), args.quiet
    (True, True)
    """
    parser.add_argument("--out", type=writable_dir, default=default_dir, help=f"output folder (default: {default_dir})")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def add_prompt_args(parser: argparse.ArgumentParser, shots: int = 5) -> None:
    """``--shots``, ``--protocol`` and ``--template``; read them with :func:`prompt_config_from_args`.

    >>> parser = Parser()
    >>> add_prompt_args(parser)
    >>> parser.parse_args([])
    Namespace(shots=5, protocol='interp', template=None)
    """
    from interp.prompts import ALL_TEMPLATES, PROTOCOLS

    parser.add_argument("--shots", type=non_negative_int, default=shots,
                        help=f"in-context demonstrations per prompt (default: {shots})")
    parser.add_argument("--protocol", default="interp", choices=PROTOCOLS,
                        help="'interp' (default: fresh demonstrations, BOS as the tokenizer does, the answer must end its "
                             "line) or 'paper' (the paper's templates, 4 shown demonstrations after an explanation block "
                             "for retrieval, answers ending at <eos> for copying, no BOS)")
    parser.add_argument("--template", default=None, choices=ALL_TEMPLATES,
                        help="prompt wording (default: bare; under --protocol paper the first of the family's templates)")


def prompt_config_from_args(parser: argparse.ArgumentParser, args: Namespace, tasks: Sequence[str] = ()):
    """The :class:`interp.prompts.PromptConfig` of ``--shots`` / ``--protocol`` / ``--template``;
    with ``tasks``, a template that does not apply to one of them is refused here, by name.

    >>> parser = Parser()
    >>> add_prompt_args(parser)
    >>> prompt_config_from_args(parser, parser.parse_args(["--shots", "3"]), tasks=["UF"])
    PromptConfig(n_shots=3, template=None, demo_length=None, prepend_bos=None, protocol='interp')
    """
    from interp.data.tasks import get_task
    from interp.prompts import PromptConfig

    try:
        if args.protocol == "paper":
            config = PromptConfig.paper(args.template, args.shots)
        else:
            config = PromptConfig(n_shots=args.shots, template=args.template)
    except ValueError as err:
        fail(parser, "--template" if "template" in str(err) else "--shots", str(err))
    for task in tasks:
        try:
            config.template_for(get_task(task).family)
        except ValueError as err:
            fail(parser, "--template", f"{err} (task {get_task(task).name})")
    return config


def add_source_args(parser: argparse.ArgumentParser) -> None:
    """``--data`` (the paper's JSONL files) and ``--repeats``; read them with :func:`source_from_args`.

    >>> parser = Parser()
    >>> add_source_args(parser)
    >>> parser.parse_args(["--repeats", "sparse"])
    Namespace(data=None, repeats='sparse')
    """
    from interp.data.tasks import REPEATS

    parser.add_argument("--data", action="append", default=None, metavar="FILE",
                        help="evaluate the records of the paper's JSONL file(s) instead of generated examples "
                             "(repeatable; lengths then come from the files)")
    parser.add_argument("--repeats", default="pool", choices=REPEATS,
                        help="non-unique copying strings: 'pool' (length//3 items, each at least twice; the paper's "
                             "generator) or 'sparse' (draws with replacement, one repeat forced; like the paper's "
                             "files at lengths 10 and 20)")


def source_from_args(parser: argparse.ArgumentParser, args: Namespace, tasks):
    """The examples' source: the paper's files of ``--data`` (records of ``tasks``), else the generator.

    >>> parser = Parser()
    >>> add_source_args(parser)
    >>> source_from_args(parser, parser.parse_args([]), ["UF"])
    Generated(vocabulary=None, repeats='pool')
    """
    from interp.data.paper_files import Generated, read_paper_jsonl

    if not args.data:
        return Generated(repeats=args.repeats)
    try:
        return read_paper_jsonl(args.data, tasks)
    except (ValueError, FileNotFoundError) as err:
        fail(parser, "--data", str(err).removeprefix("--data: "))


def input_error_argument(message: str, args: Namespace) -> str:
    """The argument a failed input check (context, vocabulary, data, ``k``) is about: what the user
    chose, not always ``--lengths`` (with ``--data`` the lengths come from the files).

    >>> input_error_argument("length 9000 is past the model's context", Namespace(data=["uf.jsonl"]))
    '--data'
    >>> input_error_argument("k=12 is more than the model's 9 heads", Namespace(data=None))
    '--k'
    """
    if message.startswith("k="):
        return "--k"
    if message.startswith("--n ") or "--n " in message.partition(":")[0]:
        return "--n"
    if getattr(args, "data", None):
        return "--data"
    if "template" in message:
        return "--template"
    return "--lengths"


def load_model_from_args(args: Namespace):
    """The model the common arguments describe (with its adapter, when one is named).

    >>> args = Namespace(model="tiny-gpt2", device="cpu", dtype=None, device_map=None, adapter=None)
    >>> load_model_from_args(args).cfg.n_layers
    2
    """
    from interp.models import load_model

    kwargs = dict(device=None if args.device_map else args.device, dtype=args.dtype, device_map=args.device_map)
    if getattr(args, "adapter", None):
        kwargs["adapter"] = args.adapter
    return load_model(args.model, **kwargs)


def result_stem_from_args(args: Namespace, kind: str, variant: str | Sequence[str] = ()) -> Path:
    """Where a script writes its ``kind`` of table: :func:`interp.core.naming.result_stem` under
    ``args.out`` for the run's model, adapter and dtype.

    >>> result_stem_from_args(Namespace(out=Path("results"), model="smollm2", adapter="ub", dtype="bfloat16"),
    ...                       "ablation").as_posix()
    'results/ablation_smollm2-135m+ub_bfloat16'
    """
    return result_stem(args.out, kind, args.model, adapter=getattr(args, "adapter", None),
                       dtype=getattr(args, "dtype", None), variant=variant)


# --------------------------------------------------------------------------- running a script


USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError, PermissionError, TableInUseError)


def run(main: Callable[[list[str] | None], int | None], argv: list[str] | None = None) -> int:
    """Run a script's ``main``; a mistake the library reports (a ``ValueError`` naming the
    argument) becomes one ``error:`` line and exit code 2 instead of a traceback.
    ``INTERP_DEBUG=1`` shows the traceback.

    >>> def main(argv):
    ...     raise ValueError("--n: expected an integer >= 1")
    >>> run(main)  # the error line goes to stderr
    2
    >>> run(lambda argv: None)
    0
    """
    try:
        return int(main(argv) or 0)
    except USER_ERRORS as err:
        if os.environ.get("INTERP_DEBUG"):
            raise
        print(f"error: {err}", file=sys.stderr)
        return 2
