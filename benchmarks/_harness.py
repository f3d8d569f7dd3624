"""A/B timing shared by the benchmarks: honest numbers on a shared machine.

``compare(name_a, fn_a, name_b, fn_b)`` runs each side ``warmup`` times untimed, then alternates
A B A B ... ``repeats`` times, and reports per side the median and min-max time, the per-pair
ratio time(B) / time(A) (median and min-max; ``compare_many`` does the same for more sides,
against the last one), the torch thread count, the load average before
and after, and the achieved GFLOP/s as a share of this machine's matmul peak (measured in-process
by ``_machine.measure_peak``). FLOPs are counted by ``torch.utils.flop_counter.FlopCounterMode``
over the first warm-up run of each side: matmuls, convolutions and attention kernels only, so
elementwise work is not credited and the share is a lower bound.

Alternating and quoting medians matters: one other busy process turned a 1.7x speed-up into 0.5x
on this kind of machine, and a single A-then-B timing cannot tell that from a real change.
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch
from torch.utils.flop_counter import FlopCounterMode

from interp.cli import Parser, at_least, non_negative_int, positive_int, task_name

from _machine import format_load, load_average, machine_line, peak_gflops


def count_flops(fn: Callable[[], Any]) -> tuple[int, Any]:
    """(FLOPs counted, return value) of one call of ``fn``.

    >>> count_flops(lambda: torch.ones(2, 3) @ torch.ones(3, 4))[0]
    48
    """
    with FlopCounterMode(display=False) as counter:
        value = fn()
    return counter.get_total_flops(), value


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    """Median (min-max) of repeated measurements.

    >>> spread([3.0, 1.0, 2.0])
    '2.00 (1.00-3.00)'
    """
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


@dataclass
class Side:
    name: str
    times: list[float] = field(default_factory=list)
    flops: int | None = None
    output: Any = None  # what the last run returned, for the benchmark's own checks

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    def gflops(self) -> float | None:
        return None if not self.flops else self.flops / self.median / 1e9


@dataclass
class Comparison:
    """Timings of sides run round-robin (A B A B ..., or A B C A B C ...). ``ratios`` are
    time(B) / time(A), one per round: how many times faster A ran than B, here and now."""

    title: str
    sides: list[Side]
    threads: int
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    peak: float | None

    @property
    def a(self) -> Side:
        return self.sides[0]

    @property
    def b(self) -> Side:
        return self.sides[-1]

    def ratios_of(self, side: Side) -> list[float]:
        """time(baseline) / time(side), one per round; the baseline is the last side."""
        return [tb / ts for ts, tb in zip(side.times, self.b.times)]

    @property
    def ratios(self) -> list[float]:
        return self.ratios_of(self.a)

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    def table(self) -> str:
        lines = [f"== {self.title} ==",
                 f"threads {self.threads} | load average (1/5/15 min) before {format_load(self.load_before)}, "
                 f"after {format_load(self.load_after)}" + (f" | matmul peak {self.peak:.1f} GFLOP/s" if self.peak else "")]
        width = max(len(side.name) for side in self.sides) + 3
        lines.append(f"{'side':<{width}}  {'median s (min-max)':<24} {'GFLOP/run':>10} {'GFLOP/s':>8} {'of peak':>8}")
        for tag, side in zip("ABCDEFGH", self.sides):
            rate = side.gflops()
            share = f"{100 * rate / self.peak:.0f}%" if rate and self.peak else "-"
            flops = f"{side.flops / 1e9:>10.1f}" if side.flops else f"{'-':>10}"
            lines.append(f"{tag}: {side.name:<{width - 3}}  {spread(side.times):<24} {flops} "
                         f"{rate or 0:>8.1f} {share:>8}")
        baseline_tag = "ABCDEFGH"[len(self.sides) - 1]
        for tag, side in zip("ABCDEFGH", self.sides[:-1]):
            ratios = self.ratios_of(side)
            lines.append(f"time({baseline_tag}) / time({tag}): median {statistics.median(ratios):.2f}x "
                         f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x) over {len(ratios)} rounds")
        return "\n".join(lines)


def compare(name_a: str, fn_a: Callable[[], Any], name_b: str, fn_b: Callable[[], Any], *, repeats: int = 3,
            warmup: int = 1, flops: bool = True, peak: bool = True, title: str | None = None,
            quiet: bool = False) -> Comparison:
    """Time ``fn_a`` against ``fn_b``: warm-up, then A B A B ... ``repeats`` times; print the table.

    With ``flops`` the first warm-up call of each side runs under a FLOP counter (an extra
    untimed call when ``warmup`` is 0). ``result.a.output`` / ``result.b.output`` hold what the
    last call of each side returned, for the benchmark's own checks.

    >>> result = compare("a", lambda: 1, "b", lambda: 2, flops=False, peak=False, quiet=True)
    >>> len(result.ratios), result.b.output
    (3, 2)
    """
    return compare_many([(name_a, fn_a), (name_b, fn_b)], repeats=repeats, warmup=warmup, flops=flops, peak=peak,
                        title=title or f"{name_a} vs {name_b}", quiet=quiet)


def compare_many(sides: Sequence[tuple[str, Callable[[], Any]]], *, repeats: int = 3, warmup: int = 1,
                 flops: bool = True, peak: bool = True, title: str = "", quiet: bool = False) -> Comparison:
    """``compare`` for two or more sides, run round-robin; ratios are against the last side.

    >>> sides = [("a", lambda: 1), ("b", lambda: 2), ("c", lambda: 3)]
    >>> [s.name for s in compare_many(sides, flops=False, peak=False, quiet=True).sides]
    ['a', 'b', 'c']
    """
    if len(sides) < 2:
        raise ValueError(f"{len(sides)} side(s) given; a comparison needs at least 2")
    if len(sides) > 8:
        raise ValueError(f"{len(sides)} sides given; at most 8")
    if repeats < 3:
        raise ValueError(f"repeats={repeats}: alternate at least 3 times, a median of fewer says little")
    if warmup < 0:
        raise ValueError(f"warmup={warmup} must be >= 0")
    timed = [Side(name) for name, _ in sides]
    fns = [fn for _, fn in sides]
    peak_value = peak_gflops() if peak else None
    for side, fn in zip(timed, fns):
        for i in range(max(warmup, int(flops))):
            if flops and i == 0:
                side.flops, side.output = count_flops(fn)
            else:
                side.output = fn()
    load_before = load_average()
    for _ in range(repeats):
        for side, fn in zip(timed, fns):
            side.output = None  # let the previous result go before timing the next one
            gc.collect()
            start = time.perf_counter()
            side.output = fn()
            side.times.append(time.perf_counter() - start)
            if not quiet:
                print(f"  {side.name}: {side.times[-1]:.2f} s", flush=True)
    result = Comparison(title or " vs ".join(s.name for s in timed), timed, torch.get_num_threads(), load_before,
                        load_average(), peak_value)
    if not quiet:
        print(result.table(), flush=True)
    return result


def add_timing_args(parser: Parser, repeats: int = 3) -> Parser:
    """``--repeats`` (at least 3) and ``--warmup`` for a benchmark's command line, refused by the
    parser (one line, exit 2) before any model is loaded.

    >>> add_timing_args(Parser()).parse_args(["--repeats", "5"]).repeats
    5
    """
    parser.add_argument("--repeats", type=at_least(3), default=repeats,
                        help=f"alternating A/B rounds (default: {repeats}, at least 3)")
    parser.add_argument("--warmup", type=non_negative_int, default=1,
                        help="untimed runs of each side first (default: 1)")
    return parser


def add_task_args(parser: Parser, length: int, n: int) -> Parser:
    """``--task``, ``--length``, ``--n`` and ``--batch-size``: the prompts a benchmark times.

    >>> vars(add_task_args(Parser(), length=10, n=2).parse_args(["--task", "ub"]))
    {'task': 'UB', 'length': 10, 'n': 2, 'batch_size': 8}
    """
    parser.add_argument("--task", type=task_name, default="UF", help="task (default: UF)")
    parser.add_argument("--length", type=positive_int, default=length, help=f"task length (default: {length})")
    parser.add_argument("--n", type=positive_int, default=n, help=f"prompts (default: {n})")
    parser.add_argument("--batch-size", type=positive_int, default=8, help="prompts per pass (default: 8)")
    return parser


def print_header(title: str) -> None:
    """Print a benchmark's title, the machine line and the load average at its start."""
    print(f"# {title}\n{machine_line()}\nload average at start: {format_load(load_average())}", flush=True)
