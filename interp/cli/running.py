"""Running a script's ``main``: mistakes the library reports become one ``error:`` line and exit code 2."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from interp.core.locking import TableInUseError

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
