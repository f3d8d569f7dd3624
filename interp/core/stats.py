"""Uncertainty of the numbers the tables report."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def binomial_stderr(p: float, n: int) -> float:
    """Standard error of a proportion ``p`` measured on ``n`` independent trials (NaN for n = 0).

    >>> binomial_stderr(0.5, 100)
    0.05
    """
    return math.sqrt(p * (1 - p) / n) if n else float("nan")


Z_95 = 1.959963984540054
# The smallest mean clean-vs-counterfactual metric gap (logits or nats per answer token) a share of the gap is
# reported on: shares of a gap near zero are noise (a random tiny model "recovers" 0.9 of a 0.02-logit gap with
# two edges). Circuits, routes and the claims read this one floor.
MIN_GAP = 0.5


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval of a proportion: unlike p ± 1.96 s.e. it stays inside [0, 1] and is
    not empty at 0 / n or n / n, where small evaluations often land.

    >>> [round(bound, 3) for bound in wilson_interval(0, 10)]
    [0.0, 0.278]
    """
    if n == 0:
        return math.nan, math.nan
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # at 0 and n the bounds are exactly 0 and 1; rounding would otherwise leave them a hair inside
    lower = 0.0 if successes == 0 else max(0.0, centre - half)
    upper = 1.0 if successes == n else min(1.0, centre + half)
    return lower, upper


def difference_interval(a: tuple[int, int], b: tuple[int, int], z: float = Z_95) -> tuple[float, float, float]:
    """``p_a - p_b`` of two proportions given as ``(successes, n)``, and its interval (Newcombe's
    hybrid score method, his method 10, from the two Wilson intervals).

    >>> d, lo, hi = difference_interval((30, 30), (0, 30))
    >>> round(d, 2), lo > 0.8
    (1.0, True)
    """
    (xa, na), (xb, nb) = a, b
    pa, pb = xa / na, xb / nb
    la, ua = wilson_interval(xa, na, z)
    lb, ub = wilson_interval(xb, nb, z)
    d = pa - pb
    return d, d - math.sqrt((pa - la) ** 2 + (ub - pb) ** 2), d + math.sqrt((ua - pa) ** 2 + (pb - lb) ** 2)


def mean_and_sem(values: Sequence[float]) -> tuple[float, float]:
    """Mean and its standard error (NaN when there are too few values to say).

    >>> mean_and_sem([1.0, 2.0, 3.0])
    (2.0, 0.5773502691896258)
    """
    if not values:
        return math.nan, math.nan
    mean = statistics.fmean(values)
    sem = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    return mean, sem
