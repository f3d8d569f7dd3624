"""`make run`'s ablation study with each condition replayed from its lowest ablated layer and
logits computed at the answer positions only (the default) vs every condition as a full hooked
forward pass with logits at every position (what the study did before), on the embedded model:
identical tables (checked), and the time ratio (A/B alternated).

Both sides use the same head scores (computed once, untimed), so the ratio is that of the study
itself. The default `--n 10` keeps a pair of runs to about two minutes on an idle 2-core
machine; `--n 30` is `make run`'s own setting. The ratio grows with n: the mean-ablation
reference (20 prompts per task, whatever n) costs the same on both sides.

Prints the A/B table, whether the two accuracy tables are identical, the largest difference of
mean log-probability, and a closing `RESULT` line with the time ratio (median, min-max).

    python benchmarks/bench_ablation.py            # n = 10
    python benchmarks/bench_ablation.py --n 30     # make run's setting"""

from __future__ import annotations

import sys
from pathlib import Path

from interp.cli import Parser, positive_int, run
from interp.experiments import AblationConfig, ablation_study
from interp.measure.head_scores import score_heads
from interp.models import load_model

sys.path.insert(0, str(Path(__file__).parent))  # benchmarks/ is no package: its shared modules sit here
from _harness import add_timing_args, compare, print_header  # noqa: E402


def build_parser() -> Parser:
    """The command line, refused in one line (exit 2) before the model is loaded."""
    parser = Parser(__doc__)
    parser.add_argument("--n", type=positive_int, default=10, help="examples per task (default: 10; make run uses 30)")
    parser.add_argument("--score-sequences", type=positive_int, default=100,
                        help="sequences for the head scores (default: 100)")
    return add_timing_args(parser)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    config = AblationConfig(n_examples=args.n)
    print_header(f"bench_ablation: tasks {','.join(config.tasks)} at lengths {config.lengths}, n={args.n}, "
                 f"k={config.k}, kinds {','.join(config.kinds)}, random seeds {config.random_seeds}")
    model = load_model(device="cpu")
    scores = score_heads(model, n_sequences=args.score_sequences, seed=config.seed, progress=False)

    def study(replay_clean: bool) -> list:
        return ablation_study(model, scores, config, progress=False, replay_clean=replay_clean)

    result = compare("study, replayed from the lowest ablated layer", lambda: study(True),
                     "study, full forward pass (all logits) per condition", lambda: study(False),
                     repeats=args.repeats, warmup=args.warmup, title="ablation study: replay vs full passes")
    fast, slow = result.a.output, result.b.output
    columns = ("condition", "ablation", "seed", "task", "length", "heads", "n_examples", "accuracy", "delta_accuracy")
    same = [[getattr(r, c) for c in columns] for r in fast] == [[getattr(r, c) for c in columns] for r in slow]
    diff = max(abs(a.mean_logprob - b.mean_logprob) for a, b in zip(fast, slow))
    print(f"{len(fast)} rows; identical accuracy table: {same}; max |mean log-prob difference|: {diff:.1e}")
    print(f"RESULT full / replay: median {result.ratio:.2f}x ({min(result.ratios):.2f}-{max(result.ratios):.2f})")
    if not same:
        raise SystemExit("the two studies disagree: the replay is wrong")


if __name__ == "__main__":
    sys.exit(run(main))
