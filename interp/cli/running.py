"""Running a script's ``main``: mistakes the library reports become one ``error:`` line and exit
code 2; an interrupted run and a full disk get one line each, saying what to do."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable

from interp.core.locking import TableInUseError

USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError, PermissionError, TableInUseError)
# A disk that cannot take the results: not the script's fault, nothing a traceback would explain.
DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
INTERRUPTED = 130  # what a shell reports for a process ended by SIGINT


def run(main: Callable[[list[str] | None], int | None], argv: list[str] | None = None) -> int:
    """Run a script's ``main``; a mistake the library reports (a ``ValueError`` naming the
    argument) becomes one ``error:`` line and exit code 2 instead of a traceback; Ctrl-C one
    line saying how to resume (exit code 130); a full or read-only disk one line naming the
    file (exit code 1). ``INTERP_DEBUG=1`` shows the traceback.

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
    except KeyboardInterrupt:
        if os.environ.get("INTERP_DEBUG"):
            raise
        print("interrupted: the rows finished so far are kept; run the same command again to resume "
              "(a table that keeps no journal starts over)", file=sys.stderr)
        return INTERRUPTED
    except OSError as err:
        if err.errno not in DISK_ERRNOS or os.environ.get("INTERP_DEBUG"):
            raise
        where = f" {err.filename}" if err.filename else ""
        print(f"error: cannot write{where}: {err.strerror or os.strerror(err.errno)}; free some space or write "
              f"elsewhere (--out)", file=sys.stderr)
        return 1
