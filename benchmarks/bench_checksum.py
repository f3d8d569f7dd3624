"""What checking the processed-weight file's SHA-256 on every load costs: a warm load of a model
from the cache with the check (as the library does) vs without it (size and time only, as
before), A/B alternated; also the hash of the file alone. The check exists because flipped
bytes under a restored modification time otherwise load silently as wrong weights.

Prints the A/B table and a closing `RESULT` line: the processed file's size, the SHA-256 time alone
(median, min-max), the load times with and without the check, and their paired difference.

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
from _harness import add_timing_args, compare, print_header  # noqa: E402


def size_and_time_only(folder, names=None, full=False):
    """The cache's check as it was before the checksum: size and modification time only."""
    return verify(folder, names, full=False)


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
    hashes = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        verify(stored.parent, [stored.name], full=True)
        hashes.append(time.perf_counter() - started)

    def checked() -> None:  # the bridge is dropped at once: two 1.5B models do not fit beside a third
        load_model(args.model, device="cpu")
        gc.collect()

    def unchecked() -> None:
        with mock.patch.object(processed, "verify", size_and_time_only):
            load_model(args.model, device="cpu")
        gc.collect()

    result = compare("warm load, SHA-256 checked", checked, "warm load, size and time only", unchecked,
                     title="checksum on load", repeats=args.repeats, warmup=args.warmup, flops=False, peak=False)
    extra = [a - b for a, b in zip(result.a.times, result.b.times)]
    print(f"RESULT {stored.name}: {stored.stat().st_size / 1e9:.2f} GB; SHA-256 alone median "
          f"{statistics.median(hashes):.2f} s ({min(hashes):.2f}-{max(hashes):.2f}); load with / without the check: "
          f"{result.a.median:.2f} s / {result.b.median:.2f} s, paired difference median {statistics.median(extra):+.2f} s "
          f"({min(extra):+.2f} to {max(extra):+.2f}) over {len(extra)} rounds")


if __name__ == "__main__":
    sys.exit(run(main))
