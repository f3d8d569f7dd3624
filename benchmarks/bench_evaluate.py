"""Teacher-forced evaluation of the embedded model, batched vs one prompt at a time (A/B
alternated), with the achieved GFLOP/s as a share of this machine's matmul peak; and a bare
forward pass of a batch of 8 x 100 tokens, the unit every other measurement is built from.

Both evaluations return the same per-example scores (checked), so the ratio is the gain of
batching alone; the share of peak says how much of the machine is left on the table.

Prints the two A/B tables, the accuracy and whether the per-example scores agree, and a closing
`RESULT` line: the batching ratio (median, min-max) and the bare forward pass's GFLOP/s and share
of the matmul peak.

    python benchmarks/bench_evaluate.py
    python benchmarks/bench_evaluate.py --task NF --length 50 --n 8 --forward-shape 4x200"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from interp.cli import ArgumentTypeError, Parser, run
from interp.measure.evaluate import evaluate_prompts, task_prompts
from interp.models import load_model

sys.path.insert(0, str(Path(__file__).parent))  # benchmarks/ is no package: its shared modules sit here
from _harness import add_task_args, add_timing_args, compare, print_header  # noqa: E402


def forward_shape(text: str) -> tuple[int, int]:
    """``"8x100"`` -> (batch, tokens) of the bare forward pass, both >= 1.

    >>> forward_shape("8x100")
    (8, 100)
    """
    try:
        batch, width = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise ArgumentTypeError(f"expected BATCHxTOKENS like '8x100', got {text!r}") from None
    if batch < 1 or width < 1:
        raise ArgumentTypeError(f"expected a batch and a token count >= 1, got {text!r}")
    return batch, width


def build_parser() -> Parser:
    """The command line, refused in one line (exit 2) before the model is loaded."""
    parser = add_task_args(Parser(__doc__), length=20, n=16)
    parser.add_argument("--forward-shape", type=forward_shape, default="8x100",
                        help="BATCHxTOKENS of the bare forward pass (default: 8x100)")
    return add_timing_args(parser)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
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

    batch, width = args.forward_shape
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
    sys.exit(run(main))
