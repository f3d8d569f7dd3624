"""Teacher-forced evaluation of the embedded model, batched vs one prompt at a time (A/B
alternated), with the achieved GFLOP/s as a share of this machine's matmul peak; and a bare
forward pass of a batch of 8 x 100 tokens, the unit every other measurement is built from.

Both evaluations return the same per-example scores (checked), so the ratio is the gain of
batching alone; the share of peak says how much of the machine is left on the table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _harness import add_timing_args, compare, print_header  # noqa: E402

import torch  # noqa: E402

from interp.measure.evaluate import evaluate_prompts, task_prompts  # noqa: E402
from interp.models import load_model  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--task", default="UF")
    parser.add_argument("--length", type=int, default=20)
    parser.add_argument("--n", type=int, default=16, help="prompts (default: 16)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--forward-shape", default="8x100", help="BATCHxTOKENS of the bare forward pass (default: 8x100)")
    add_timing_args(parser)
    args = parser.parse_args()
    print_header(f"bench_evaluate: {args.task} at length {args.length}, {args.n} prompts")
    model = load_model(device="cpu")
    prompts = task_prompts(model, args.task, args.length, args.n, seed=0)
    result = compare(f"evaluate, batch size {args.batch_size}",
                     lambda: evaluate_prompts(model, prompts, batch_size=args.batch_size, progress=False),
                     "evaluate, batch size 1", lambda: evaluate_prompts(model, prompts, batch_size=1, progress=False),
                     repeats=args.repeats, warmup=args.warmup, title="batched vs one-at-a-time teacher forcing")
    batched, single = result.a.output, result.b.output
    same = torch.equal(batched.correct, single.correct)
    diff = (batched.mean_logprob - single.mean_logprob).abs().max().item()
    print(f"accuracy {batched.accuracy:.3f}; identical exact match per example: {same}; max |log-prob difference|: {diff:.1e}")

    batch, width = (int(x) for x in args.forward_shape.lower().split("x"))
    tokens = torch.randint(0, len(model.tokenizer), (batch, width), generator=torch.Generator().manual_seed(0))

    def forward_batch():
        with torch.no_grad():
            return model(tokens)

    def forward_rows():
        with torch.no_grad():
            return torch.cat([model(row[None]) for row in tokens])

    bare = compare(f"forward {batch}x{width} as one batch", forward_batch, f"forward {batch} x (1x{width})", forward_rows,
                   repeats=args.repeats, warmup=args.warmup, title="bare forward pass")
    print(f"RESULT batch {args.batch_size} / batch 1 evaluation: median {result.ratio:.2f}x "
          f"({min(result.ratios):.2f}-{max(result.ratios):.2f}); bare forward {batch}x{width}: "
          f"{bare.a.gflops():.0f} GFLOP/s = {100 * bare.a.gflops() / bare.peak:.0f}% of the matmul peak")


if __name__ == "__main__":
    main()
