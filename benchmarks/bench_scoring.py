"""Scoring every head (batched, pattern hooks only) vs TransformerLens `detect_head`, on the same
repeated sequences of the embedded model: the same scores, and the time ratio (A/B alternated).

Two comparisons: `score_heads` (all three scores) and `detect_induction_batched` (detect_head's
own measure, batched) each against `detect_head` (induction only, one sequence at a time).

Prints the two A/B tables, the largest difference between the batched measure and detect_head,
the rank correlation of the induction scores, the top induction heads, and a closing `RESULT` line
with both time ratios (median, min-max).

    python benchmarks/bench_scoring.py
    python benchmarks/bench_scoring.py --n 40 --half-length 25"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformer_lens.head_detector import detect_head

from interp.cli import Parser, positive_int, run
from interp.data.vocab import word_vocabulary
from interp.measure.head_scores import detect_induction_batched, repeated_random_tokens, score_heads, spearman
from interp.models import load_model

sys.path.insert(0, str(Path(__file__).parent))  # benchmarks/ is no package: its shared modules sit here
from _harness import add_timing_args, compare, print_header  # noqa: E402


def build_parser() -> Parser:
    """The command line, refused in one line (exit 2) before the model is loaded."""
    parser = Parser(__doc__)
    parser.add_argument("--n", type=positive_int, default=20, help="sequences (default: 20)")
    parser.add_argument("--half-length", type=positive_int, default=50,
                        help="tokens of each sequence's first half (default: 50)")
    parser.add_argument("--batch-size", type=positive_int, default=20, help="score_heads batch size (default: 20)")
    return add_timing_args(parser)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    print_header(f"bench_scoring: {args.n} sequences of 2 x {args.half_length} tokens")
    model = load_model(device="cpu")
    tokenizer = model.tokenizer
    # words that re-tokenize exactly, so detect_head (which takes strings) sees the same token ids
    pool = torch.tensor([tokenizer.encode(" " + w, add_special_tokens=False)[0] for w in word_vocabulary(tokenizer, 300)])
    tokens = repeated_random_tokens(pool, args.n, args.half_length, seed=0)
    texts = [tokenizer.decode(row) for row in tokens]
    assert all(tokenizer.encode(t, add_special_tokens=False) == row.tolist() for t, row in zip(texts, tokens))

    def ours():
        return score_heads(model, tokens, half_length=args.half_length, batch_size=args.batch_size, progress=False)

    def batched():
        return detect_induction_batched(model, tokens, batch_size=args.batch_size)

    def theirs():
        return detect_head(model, texts, "induction_head").float()

    timing = dict(repeats=args.repeats, warmup=args.warmup)
    main_cmp = compare("interp score_heads (3 scores)", ours, "TL detect_head (induction)", theirs,
                       title="score_heads vs detect_head", **timing)
    batched_cmp = compare("interp detect_induction_batched", batched, "TL detect_head (induction)", theirs,
                          title="detect_head's measure, batched vs detect_head", **timing)
    scores, detected = main_cmp.a.output, main_cmp.b.output
    print(f"max |detect_induction_batched - detect_head| = {(batched_cmp.a.output - detected).abs().max():.2e}; "
          f"rank correlation of the interp induction score with detect_head: {spearman(scores['induction'], detected):.3f}")
    print(f"top induction heads: interp {[str(h) for h in scores.top_heads('induction', 5)]}")
    print(f"RESULT detect_head / score_heads: median {main_cmp.ratio:.2f}x "
          f"({min(main_cmp.ratios):.2f}-{max(main_cmp.ratios):.2f}); "
          f"detect_head / batched detect: median {batched_cmp.ratio:.2f}x "
          f"({min(batched_cmp.ratios):.2f}-{max(batched_cmp.ratios):.2f})")


if __name__ == "__main__":
    sys.exit(run(main))
