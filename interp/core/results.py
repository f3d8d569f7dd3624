"""What every result type shares: ``rows()`` (one dict a row: a head, a prompt, a cell), a
``to_pandas()`` of those rows, heads ranked by a layer x head matrix, and the short summary of the
top heads a ``repr`` shows.

``rows()`` takes no required argument on any result type; a result that does not know a column
(the task of a sweep over encoded prompts) takes it as an optional keyword.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from jaxtyping import Float
from torch import Tensor

from interp.core.heads import Head


class Tabular:
    """A result whose ``rows`` are its table: ``to_pandas`` is the same table as a
    ``pandas.DataFrame``.

    >>> class Two(Tabular):
    ...     def rows(self):
    ...         return [{"head": "0.1", "score": 0.5}, {"head": "1.0", "score": 0.2}]
    >>> Two().to_pandas().shape
    (2, 2)
    """

    def rows(self) -> list[dict]:
        raise NotImplementedError

    def to_pandas(self):
        """``rows`` as a ``pandas.DataFrame`` (one column per key)."""
        import pandas  # only here: tables and figures do not need it

        return pandas.DataFrame(self.rows())


def ranked_heads(values: Float[Tensor, "layer head_index"], k: int, descending: bool = True) -> list[Head]:
    """The ``k`` heads with the highest (``descending``) or lowest values, best first; ties keep
    layer-major order.

    >>> ranked_heads(torch.tensor([[0.1, 0.9], [0.5, 0.2]]), 2)
    [Head(0, 1), Head(1, 0)]
    """
    flat = values.flatten()
    if not 0 <= k <= flat.numel():
        raise ValueError(f"k={k} must be between 0 and the number of heads ({flat.numel()})")
    n_heads = values.shape[1]
    order = torch.argsort(flat, descending=descending, stable=True)[:k]
    return [Head(int(i) // n_heads, int(i) % n_heads) for i in order]


def score_and_k(score: str | int, k: int | None, only: str) -> tuple[str, int]:
    """``top_heads(score, k)`` or, where a result holds the single score ``only``, ``top_heads(k)``.

    >>> score_and_k("delta_logprob", 3, "delta_logprob"), score_and_k(3, None, "delta_logprob")
    (('delta_logprob', 3), ('delta_logprob', 3))
    """
    if isinstance(score, int) and k is None:
        return only, score
    if not isinstance(score, str) or not isinstance(k, int):
        raise TypeError(f"expected top_heads(score, k) or top_heads(k); got top_heads({score!r}, {k!r})")
    if score != only:
        raise KeyError(f"no score {score!r}; this result ranks heads by {only!r}")
    return score, k


def heads_summary(values: Float[Tensor, "layer head_index"], heads: Sequence[Head], digits: int = 3) -> str:
    """``"18.6 0.926, 17.3 0.513"``: heads with their values, as a ``repr`` shows the top ones.

    >>> heads_summary(torch.tensor([[0.1, 0.9], [0.5, 0.2]]), [Head(0, 1), Head(1, 0)])
    '0.1 0.900, 1.0 0.500'
    """
    return ", ".join(f"{h} {float(values[h]):.{digits}f}" for h in heads)
