"""Timing helpers shared by the benchmarks (each prints its ratios from one run)."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def timed(label: str, into: dict) -> Iterator[None]:
    start = time.perf_counter()
    yield
    into[label] = time.perf_counter() - start
    print(f"  {label}: {into[label]:.2f} s", flush=True)
