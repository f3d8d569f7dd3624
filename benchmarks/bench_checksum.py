"""What checking the processed-weight file costs on a warm load, three ways side by side in one
run (round-robin A B C, so the machine's load falls on all three alike):

A. the library's check: the file's stat (size, mtime, ctime, inode) compared with the record,
   its SHA-256 only when the stat changed (a flipped byte under a restored mtime changes ctime);
B. the check it replaced: the file's SHA-256 on every load;
C. no check of the processed file at all.

Also the SHA-256 of the file alone. Prints the table and a closing `RESULT` line: the overhead of
A and B over C (median, min-max of the per-round ratios).

    python benchmarks/bench_checksum.py                       # the embedded SmolLM2-135M
    python benchmarks/bench_checksum.py --model qwen2.5-1.5b  # after make paper-model
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

import torch

import interp.models.processed as processed
from interp.cli import Parser, run
from interp.core.naming import EMBEDDED_MODEL, canonical_name
from interp.models import load_model, processed_weights_file
from interp.models.loading import own_model
from interp.models.paper.installer import OFFLINE_MODELS
from interp.models.store import verify

sys.path.insert(0, str(Path(__file__).parent))  # benchmarks/ is no package: its shared modules sit here
from _harness import add_timing_args, compare_many, print_header  # noqa: E402


def hash_every_time(folder, names=None, full=False):
    """The check as it was: the processed file's SHA-256 on every load."""
    return verify(folder, names, full=True)


def no_check(folder, names=None, full=False):
    """No check of the processed file."""


def build_parser() -> Parser:
    """The command line, refused in one line (exit 2) before the model is loaded."""
    parser = Parser(__doc__)
    cached = (EMBEDDED_MODEL, *OFFLINE_MODELS)
    parser.add_argument("--model", type=canonical_name, choices=cached, default=EMBEDDED_MODEL, metavar="MODEL",
                        help=f"a model of the cache: {', '.join(cached)} (default: {EMBEDDED_MODEL})")
    return add_timing_args(parser, repeats=5)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    print_header(f"bench_checksum: {args.model}")
    folder = own_model(args.model)[0]
    load_model(args.model, device="cpu")  # the processed file exists from here on (the bridge is dropped)
    stored = processed_weights_file(folder.resolve(), torch.float32, torch.device("cpu"))
    hashes, stats = [], []  # each check alone, on the file the loads use
    for _ in range(args.repeats):
        started = time.perf_counter()
        verify(stored.parent, [stored.name], full=True)
        hashes.append(time.perf_counter() - started)
        started = time.perf_counter()
        verify(stored.parent, [stored.name])
        stats.append(time.perf_counter() - started)

    def loading(check):  # the bridge is dropped at once: two 1.5B models do not fit beside a third
        def load() -> None:
            if check is None:
                load_model(args.model, device="cpu")
            else:
                with mock.patch.object(processed, "verify", check):
                    load_model(args.model, device="cpu")
            gc.collect()
        return load

    result = compare_many([("stat record, hash when changed", loading(None)),
                           ("SHA-256 on every load", loading(hash_every_time)),
                           ("no check", loading(no_check))],
                          title="checksum on load", repeats=args.repeats, warmup=args.warmup, flops=False, peak=False)
    stat_side, hash_side, _ = result.sides

    def overhead(side) -> str:
        ratios = [1 / r - 1 for r in result.ratios_of(side)]  # time(side) / time(no check) - 1, per round
        return f"{100 * statistics.median(ratios):+.1f}% ({100 * min(ratios):+.1f}% to {100 * max(ratios):+.1f}%)"

    print(f"RESULT {stored.name}: {stored.stat().st_size / 1e9:.2f} GB; alone: SHA-256 median "
          f"{statistics.median(hashes):.2f} s ({min(hashes):.2f}-{max(hashes):.2f}), stat record median "
          f"{1e3 * statistics.median(stats):.2f} ms ({1e3 * min(stats):.2f}-{1e3 * max(stats):.2f}); warm load medians: stat record "
          f"{stat_side.median:.2f} s, SHA-256 {hash_side.median:.2f} s, no check {result.b.median:.2f} s; "
          f"overhead over no check, median (min to max) of {args.repeats} rounds: stat record {overhead(stat_side)}, "
          f"SHA-256 {overhead(hash_side)}")


if __name__ == "__main__":
    sys.exit(run(main))
