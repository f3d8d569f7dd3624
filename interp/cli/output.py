"""What a script prints while it works: ``say`` writes a line above any progress bar (bars go
to stderr, lines to stdout; a plain ``print`` would land in the middle of a bar's line).

Library functions draw no bar unless given ``progress=True``; scripts ask for bars unless given
``--quiet``, and report through ``say`` (it is what they pass as a library call's ``log``);
scripts that log (training) send their records through ``log_through_tqdm`` the same way.
"""

from __future__ import annotations

import logging
import sys

from tqdm.auto import tqdm


def say(message: str) -> None:
    """Print ``message`` on a line of its own, above any progress bar being drawn.

    >>> say("ablating induction heads")
    ablating induction heads
    """
    tqdm.write(str(message))


# Loggers whose progress records a script shows; other libraries' info records (the headless browser's
# temporary files, download chatter) are dropped, their warnings and errors kept.
OWN_LOGGERS = ("interp", "__main__")


def _own_or_warning(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING or record.name.split(".")[0] in OWN_LOGGERS


class _TqdmHandler(logging.Handler):
    # Progress records go where ``say`` writes (stdout); warnings and errors to stderr, so that a
    # refused run's stderr is its one error line.
    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=sys.stderr if record.levelno >= logging.WARNING else sys.stdout)
        except Exception:  # a broken stream must not end the run (logging's own convention)
            self.handleError(record)


def log_through_tqdm(level: int = logging.INFO, logger: logging.Logger | None = None) -> None:
    """A script's logging (``logger``: the root one by default): records at ``level`` and above, as
    ``INFO name: message`` lines written above any progress bar (a plain handler would append them
    to the bar's line). Below warnings, only the toolkit's own records (``OWN_LOGGERS``) are shown.

    >>> demo = logging.getLogger("interp.demo")
    >>> log_through_tqdm(logger=demo)
    >>> demo.info("trained 10 steps")
    INFO interp.demo: trained 10 steps
    >>> [type(h).__name__ for h in demo.handlers]
    ['_TqdmHandler']
    """
    logger = logger or logging.getLogger()
    handler = _TqdmHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_own_or_warning)
    for old in list(logger.handlers):
        logger.removeHandler(old)
    logger.addHandler(handler)
    logger.setLevel(level)
