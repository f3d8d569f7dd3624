"""What each position of a copying prompt is, so an edge reads ``a1.1.v @ s2 <- a0.0 @ s2``.

Absolute roles (one per position): ``bos``, ``prompt`` (template text and earlier shots), ``s0`` ..
``s{L-1}`` (the last shot's string), ``sep`` (between the string and its copy), ``c0`` .. ``c{L-1}``
(the copy), ``end``. Relative roles name a source position as seen from a copy position ``t`` whose
token occurred earlier at ``o``: ``o``, ``o-1``, ``o+1``, ``t``, ``t-1``, else its absolute role.
"""

from __future__ import annotations

from interp.interventions.edges.data import CopyingPrompts


def position_roles(prompts: CopyingPrompts, bos: bool) -> tuple[str, ...]:
    """One role per position of the (shared) prompt layout.

    >>> from interp.models import tiny_tokenizer
    >>> from interp.interventions.edges import copying_prompts
    >>> p = copying_prompts(tiny_tokenizer(), "UB", 3, 1, fmt="single-shot")
    >>> position_roles(p, bos=False)[p.string_start - 1:]
    ('prompt', 's0', 's1', 's2', 'sep', 'c0', 'c1', 'c2', 'end')
    """
    n_pos, L = prompts.tokens.shape[1], prompts.length
    roles = ["prompt"] * n_pos
    if bos:
        roles[0] = "bos"
    for k in range(L):
        roles[prompts.string_start + k] = f"s{k}"
        roles[prompts.copy_start + k] = f"c{k}"
    roles[prompts.string_start + L] = "sep"
    for i in range(prompts.copy_start + L, n_pos):
        roles[i] = "end"
    return tuple(roles)


def relative_role(prompts: CopyingPrompts, query: int, source: int, roles: tuple[str, ...]) -> str:
    """The role of ``source`` as seen from ``query`` (a copy position: relative to its token's
    earlier occurrence ``o``; elsewhere the absolute role).

    >>> from interp.models import tiny_tokenizer
    >>> from interp.interventions.edges import copying_prompts
    >>> p = copying_prompts(tiny_tokenizer(), "UB", 3, 1, fmt="single-shot")
    >>> roles = position_roles(p, bos=False)
    >>> t = p.copy_start                      # c0 copies s2 (UB): o = s2
    >>> [relative_role(p, t, s, roles) for s in (p.string_start + 1, p.string_start + 2, t - 1, t)]  # t - 1 is o + 1 here
    ['o-1', 'o', 'o+1', 't']
    """
    if source == query:
        return "t"
    copy = prompts.copy_positions().tolist()
    if query in copy:
        o = int(prompts.occurrences()[copy.index(query)])
        for offset, name in ((0, "o"), (-1, "o-1"), (1, "o+1")):
            if source == o + offset:
                return name
    if source == query - 1:
        return "t-1"
    return roles[source]
