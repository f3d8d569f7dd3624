"""Uncertainty of the numbers the tables report."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def binomial_stderr(p: float, n: int) -> float:
    """Standard error of a proportion ``p`` measured on ``n`` independent trials (NaN for n = 0)."""
    return math.sqrt(p * (1 - p) / n) if n else float("nan")


Z_95 = 1.959963984540054


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval of a proportion: unlike p ± 1.96 s.e. it stays inside [0, 1] and is
    not empty at 0 / n or n / n, where small evaluations often land."""
    if n == 0:
        return math.nan, math.nan
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # at 0 and n the bounds are exactly 0 and 1; rounding would otherwise leave them a hair inside
    lower = 0.0 if successes == 0 else max(0.0, centre - half)
    upper = 1.0 if successes == n else min(1.0, centre + half)
    return lower, upper


def mean_and_sem(values: Sequence[float]) -> tuple[float, float]:
    """Mean and its standard error (NaN when there are too few values to say)."""
    if not values:
        return math.nan, math.nan
    mean = statistics.fmean(values)
    sem = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    return mean, sem
