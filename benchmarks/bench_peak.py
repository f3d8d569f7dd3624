"""This machine's matrix-multiply peak: the best GFLOP/s torch reaches on square fp32 matmuls.

The other benchmarks divide their achieved GFLOP/s by this number (measured in-process, under
the same load), so "72% of peak" means the same thing on every machine."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _harness import machine_line  # noqa: E402


def matmul_gflops(size: int = 2048, repeats: int = 10, dtype: torch.dtype = torch.float32) -> list[float]:
    """GFLOP/s of ``repeats`` timed ``size x size`` matmuls after one warm-up (2 n^3 FLOPs each)."""
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
    (the median, not the best, so that one lucky run does not set the bar)."""
    return statistics.median(matmul_gflops(size, repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1024, 2048, 4096],
                        help="square sizes (default: 1024,2048,4096)")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    print(machine_line())
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for size in args.sizes:
        rates = matmul_gflops(size, args.repeats)
        print(f"  {size} x {size} fp32 matmul: median {statistics.median(rates):.1f} GFLOP/s "
              f"(min {min(rates):.1f}, max {max(rates):.1f}, {args.repeats} runs)", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"peak used by the other benchmarks (2048, median): {measure_peak():.1f} GFLOP/s")


if __name__ == "__main__":
    main()
