"""What a script prints while it works: :func:`say` writes a line above any progress bar (bars go
to stderr, lines to stdout; a plain ``print`` would land in the middle of a bar's line).

Library functions draw no bar unless given ``progress=True``; scripts ask for bars unless given
``--quiet``, and report through :func:`say` (it is what they pass as a library call's ``log``).
"""

from __future__ import annotations

from tqdm.auto import tqdm


def say(message: str) -> None:
    """Print ``message`` on a line of its own, above any progress bar being drawn.

    >>> say("ablating induction heads")
    ablating induction heads
    """
    tqdm.write(str(message))
