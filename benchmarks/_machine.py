"""The machine the benchmarks run on: what it is, how loaded it is, and its matrix-multiply peak.

Both the A/B harness (``_harness``) and ``bench_peak.py`` import from here, so the imports among
the benchmarks run one way: ``_machine`` <- ``_harness`` <- ``bench_*``. The peak is the median
GFLOP/s of square fp32 matmuls measured in-process, under the same load as the numbers it
divides, so "72% of peak" means the same thing on every machine.
"""

from __future__ import annotations

import functools
import os
import platform
import statistics
import time

import torch


def cpu_name() -> str:
    """The processor's model name (``/proc/cpuinfo``), else what ``platform`` knows.

    >>> isinstance(cpu_name(), str)
    True
    """
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_line() -> str:
    """One line saying what the numbers were measured on.

    >>> machine_line().startswith("machine: ")
    True
    """
    return (f"machine: {cpu_name()}, {os.cpu_count()} logical CPUs, torch {torch.__version__} "
            f"with {torch.get_num_threads()} threads")


def load_average() -> tuple[float, float, float]:
    """The 1, 5 and 15-minute load averages, quoted beside every timing."""
    return os.getloadavg()


def format_load(load: tuple[float, float, float]) -> str:
    """``1.00/0.50/0.25``: a load average as the tables print it.

    >>> format_load((1.0, 0.5, 0.25))
    '1.00/0.50/0.25'
    """
    return "/".join(f"{x:.2f}" for x in load)


def matmul_gflops(size: int = 2048, repeats: int = 10, dtype: torch.dtype = torch.float32) -> list[float]:
    """GFLOP/s of ``repeats`` timed ``size x size`` matmuls after one warm-up (2 n^3 FLOPs each).

    >>> len(matmul_gflops(size=64, repeats=3))
    3
    """
    if size < 1 or repeats < 1:
        raise ValueError(f"size={size} and repeats={repeats} must be >= 1")
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=generator, dtype=dtype)
    b = torch.randn(size, size, generator=generator, dtype=dtype)
    out = torch.empty(size, size, dtype=dtype)
    torch.mm(a, b, out=out)
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b, out=out)
        rates.append(2 * size**3 / (time.perf_counter() - start) / 1e9)
    return rates


def measure_peak(size: int = 2048, repeats: int = 10) -> float:
    """The peak the benchmarks compare against: the median rate of ``size``-square fp32 matmuls
    (the median, not the best, so that one lucky run does not set the bar).

    >>> measure_peak(size=64, repeats=3) > 0
    True
    """
    return statistics.median(matmul_gflops(size, repeats))


@functools.cache
def peak_gflops() -> float:
    """This machine's matmul peak, measured once per process (about two seconds)."""
    return measure_peak()
