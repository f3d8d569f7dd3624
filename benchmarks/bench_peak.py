"""This machine's matrix-multiply peak: the best GFLOP/s torch reaches on square fp32 matmuls.

Prints the machine line, then per size the median and min-max GFLOP/s of ``--repeats`` timed
matmuls, the load average before and after, and the peak the other benchmarks divide by (their
"% of peak": 2048 x 2048, median of 10, measured in-process under the same load).

    python benchmarks/bench_peak.py                          # sizes 1024, 2048, 4096
    python benchmarks/bench_peak.py --sizes 512,1024 --repeats 20
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from interp.cli import Parser, positive_int, positive_int_list, run

sys.path.insert(0, str(Path(__file__).parent))  # benchmarks/ is no package: its shared modules sit here
from _machine import format_load, load_average, machine_line, matmul_gflops, measure_peak  # noqa: E402


def build_parser() -> Parser:
    """The command line: ``--sizes`` and ``--repeats``, refused in one line before any timing."""
    parser = Parser(__doc__)
    parser.add_argument("--sizes", type=positive_int_list, default=[1024, 2048, 4096],
                        help="square sizes, e.g. '1024,2048' (default: 1024,2048,4096)")
    parser.add_argument("--repeats", type=positive_int, default=10, help="timed matmuls per size (default: 10)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    print(machine_line())
    print(f"load average before: {format_load(load_average())}")
    for size in args.sizes:
        rates = matmul_gflops(size, args.repeats)
        print(f"  {size} x {size} fp32 matmul: median {statistics.median(rates):.1f} GFLOP/s "
              f"(min {min(rates):.1f}, max {max(rates):.1f}, {args.repeats} runs)", flush=True)
    print(f"load average after: {format_load(load_average())}")
    print(f"peak used by the other benchmarks (2048, median): {measure_peak():.1f} GFLOP/s")


if __name__ == "__main__":
    sys.exit(run(main))
