"""Single-head ablation sweep (cached residual, recompute only from the ablated layer on, logits
only at answer positions) vs a naive loop of full `run_with_hooks` passes, on the embedded model:
identical numbers, and the time ratio (A/B alternated).

The default sweeps every 5th layer (54 heads) on 4 UF prompts so that a run takes a few minutes;
`--every 1 --n 8` is the full 270-head sweep (about 8 minutes a pair on an idle 2-core machine).
Layers 0, 5, ..., 25 skip on average as many layers as all 30 do, so the ratio carries over.

Prints the A/B table, whether exact match and log-probabilities agree, and a closing `RESULT` line
with the time ratio (median, min-max).

    python benchmarks/bench_sweep.py
    python benchmarks/bench_sweep.py --every 1 --n 8      # all 270 heads"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from interp.cli import Parser, positive_int, run
from interp.interventions.sweep import head_sweep, naive_head_sweep
from interp.measure.encoding import encode_for
from interp.measure.evaluate import task_prompts
from interp.models import load_model
from interp.prompts import PromptConfig

sys.path.insert(0, str(Path(__file__).parent))  # benchmarks/ is no package: its shared modules sit here
from _harness import add_timing_args, compare, print_header  # noqa: E402


def build_parser() -> Parser:
    """The command line, refused in one line (exit 2) before the model is loaded."""
    parser = Parser(__doc__)
    parser.add_argument("--n", type=positive_int, default=4, help="UF prompts of length 10 (default: 4)")
    parser.add_argument("--every", type=positive_int, default=5,
                        help="sweep every k-th layer, all its heads (default: 5)")
    parser.add_argument("--heads-per-pass", type=positive_int, default=1,
                        help="heads of a layer stacked in one pass (default: 1)")
    return add_timing_args(parser)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    model = load_model(device="cpu")
    prompts = task_prompts(model, "UF", 10, args.n)
    encoded = encode_for(model, prompts, PromptConfig())
    heads = [(l, h) for l in range(0, model.cfg.n_layers, args.every) for h in range(model.cfg.n_heads)]
    print_header(f"bench_sweep: {len(heads)} heads (every {args.every}th layer), {args.n} UF prompts of "
                 f"{max(len(p.ids) for p in encoded)} tokens")
    result = compare(f"interp head_sweep ({len(heads)} heads)",
                     lambda: head_sweep(model, encoded, heads, progress=False, heads_per_pass=args.heads_per_pass),
                     "naive run_with_hooks loop",
                     lambda: naive_head_sweep(model, encoded, heads, progress=False),
                     repeats=args.repeats, warmup=args.warmup, title="head_sweep vs naive loop")
    fast, slow = result.a.output, result.b.output
    same_acc = all(torch.equal(a.correct, b.correct) for a, b in zip(fast.ablated, slow.ablated))
    diff = max((a.mean_logprob - b.mean_logprob).abs().max().item() for a, b in zip(fast.ablated, slow.ablated))
    print(f"identical exact-match per example: {same_acc}; max |log-prob difference|: {diff:.1e}")
    print(f"RESULT naive / head_sweep: median {result.ratio:.2f}x ({min(result.ratios):.2f}-{max(result.ratios):.2f})")


if __name__ == "__main__":
    sys.exit(run(main))
