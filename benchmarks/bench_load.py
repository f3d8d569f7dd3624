"""Warm load (raw and processed weights from the cache) vs cold load (dequantize the GGUF,
convert, process) of the embedded model, each cold load into a fresh cache folder, A/B alternated.
A second comparison shows what the processed-weight cache saves: warm vs a warm load that has to
process the weights again. All logits on a fixed input must be identical.

Prints the two A/B tables, whether the logits are identical, and a closing `RESULT` line with the
cold / warm and processing-again / warm time ratios (median, min-max). The caches are temporary
folders: the shared cache is not touched.

    python benchmarks/bench_load.py
    python benchmarks/bench_load.py --repeats 5"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch

from interp.cli import Parser, run
from interp.core.lm import LanguageModel
from interp.models import embedded_cache_path, load_model

sys.path.insert(0, str(Path(__file__).parent))  # benchmarks/ is no package: its shared modules sit here
from _harness import add_timing_args, compare, print_header  # noqa: E402


def load_into(cache: Path) -> LanguageModel:
    """The embedded model loaded through the cache folder ``cache`` (set as ``INTERP_CACHE``)."""
    os.environ["INTERP_CACHE"] = str(cache)
    return load_model(device="cpu")


def build_parser() -> Parser:
    """The command line (the timing arguments only), refused in one line (exit 2) before any load."""
    return add_timing_args(Parser(__doc__))


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    print_header("bench_load: embedded model")
    with tempfile.TemporaryDirectory() as root:
        warm_cache, fresh = Path(root) / "warm", Path(root) / "cold"

        def cold():
            shutil.rmtree(fresh, ignore_errors=True)
            return load_into(fresh)

        def reprocessed():
            os.environ["INTERP_CACHE"] = str(warm_cache)
            for processed in embedded_cache_path().glob("processed-*.safetensors"):
                processed.unlink()
            return load_into(warm_cache)  # writes the processed weights back for the next warm load

        reference_model = load_into(warm_cache)  # fills the warm cache
        ids = torch.tensor([reference_model.tokenizer.encode("The capital of France is")])
        with torch.no_grad():
            reference = reference_model(ids)
        del reference_model
        timing = dict(repeats=args.repeats, warmup=args.warmup, flops=False, peak=False)
        vs_cold = compare("warm (cache -> bridge)", lambda: load_into(warm_cache), "cold (GGUF -> cache -> bridge)", cold,
                          title="warm vs cold load", **timing)
        same_cold = all(torch.equal(side.output(ids), reference) for side in (vs_cold.a, vs_cold.b))
        vs_cold.a.output = vs_cold.b.output = None  # two models in memory are enough
        vs_raw = compare("warm (cache -> bridge)", lambda: load_into(warm_cache), "warm, processing again", reprocessed,
                         title="warm vs warm with the weights processed again", **timing)
        same_raw = torch.equal(vs_raw.b.output(ids), reference)
    print(f"identical logits: warm and cold {same_cold}, reprocessed {same_raw}")
    print(f"RESULT cold / warm: median {vs_cold.ratio:.1f}x ({min(vs_cold.ratios):.1f}-{max(vs_cold.ratios):.1f}, "
          f"target >= 10x); processing again / warm: median {vs_raw.ratio:.1f}x "
          f"({min(vs_raw.ratios):.1f}-{max(vs_raw.ratios):.1f})")


if __name__ == "__main__":
    sys.exit(run(main))
