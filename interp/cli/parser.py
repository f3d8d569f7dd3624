"""The parser every script builds ([`Parser`][interp.cli.parser.Parser]) and [`fail`][interp.cli.parser.fail], its way of refusing an argument
after parsing. The one module that imports ``argparse``: the rest of [`interp.cli`][interp.cli], and every
script, take ``ArgumentParser``, ``ArgumentTypeError`` and ``Namespace`` from here.
"""

from __future__ import annotations

import argparse
from argparse import ArgumentParser, ArgumentTypeError, Namespace

__all__ = ["ArgumentParser", "ArgumentTypeError", "Namespace", "Parser", "fail"]


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
