"""Argument types: each turns one command-line string into a checked value (integers with a bound,
seeds, fractions, lists and ranges, task names, folders and files checked writable), or refuses it
with an ``ArgumentTypeError`` the parser turns into ``error: argument --x: ...`` and exit code 2.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from interp.cli.parser import ArgumentTypeError


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
    """[`int_list`][interp.cli.argtypes.int_list] with every integer >= 1 (``--lengths``).

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


def figure_formats(text: str) -> list[str]:
    """Comma-separated figure formats (``""``: none), checked before any work is done.

    >>> figure_formats("HTML, png"), figure_formats("")
    (['html', 'png'], [])
    """
    from interp.figures.export import HTML_FORMATS, STATIC_FORMATS  # plotly: only for scripts that draw

    formats = [f.strip().lower() for f in text.split(",") if f.strip()]
    unknown = [f for f in formats if f not in HTML_FORMATS + STATIC_FORMATS]
    if unknown:
        raise ArgumentTypeError(f"unknown {unknown}; choose from {', '.join(HTML_FORMATS + STATIC_FORMATS)}")
    return formats


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
