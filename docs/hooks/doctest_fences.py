"""Griffe extension for the API reference: a docstring's top-level `>>>` examples become fenced
`pycon` blocks.

Why: the package writes its examples as plain doctests (so `pytest --doctest-modules` runs them), but
outside a Google-style ``Examples:`` section Markdown reads them as prose, and an output line such as
``[0.0, 0.278]`` turns into a broken cross-reference. Examples indented under an ``Examples:`` section
are left to griffe, which already renders them as code.
"""

from __future__ import annotations

from typing import Any

import griffe


def fence_doctests(text: str) -> str:
    r"""Wrap each unindented run of doctest lines (from a `>>>` line to the next blank line) in a
    ```` ```pycon ```` fence.

    >>> fence_doctests("Adds.\n\n>>> 1 + 1\n2").splitlines()[2::3]
    ['```pycon', '```']
    """
    out: list[str] = []
    in_block = False
    for line in text.splitlines():
        if not in_block and line.startswith(">>>"):
            out.append("```pycon")
            in_block = True
        elif in_block and not line.strip():
            out.append("```")
            in_block = False
        out.append(line)
    if in_block:
        out.append("```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """Rewrites each docstring once, when griffe has built its object."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
