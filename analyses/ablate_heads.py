"""Score every head, then ablate the top-k induction, top-k anti-induction and k random heads
(zero and mean ablation) and recompute accuracy on UF, UB, UR, UL. The `make run` job."""

from __future__ import annotations

import argparse
from pathlib import Path

from interp.cli import add_model_args, add_output_args, int_list, load_model_from_args
from interp.experiments import AblationConfig, ablation_prompt_sets, ablation_study, ablation_summary, add_task_attention
from interp.prompts import PromptConfig
from interp.results import to_markdown, write_table
from interp.scoring import score_heads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    add_model_args(parser)
    add_output_args(parser)
    parser.add_argument("--tasks", default="UF,UB,UR,UL", help="comma-separated tasks (default: UF,UB,UR,UL)")
    parser.add_argument("--lengths", type=int_list, default=[10], help="task lengths (default: 10)")
    parser.add_argument("--k", type=int, default=10, help="heads per ablated set (default: 10, as the paper)")
    parser.add_argument("--n", type=int, default=30, help="examples per task and length (default: 30)")
    parser.add_argument("--kinds", default="zero,mean", help="ablation kinds: zero, mean (default: both)")
    parser.add_argument("--random-seeds", type=int_list, default=[0, 1, 2], help="seeds of the random-head control")
    parser.add_argument("--shots", type=int, default=5, help="in-context demonstrations (default: 5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--score-sequences", type=int, default=100, help="repeated random sequences for head scores")
    args = parser.parse_args()

    config = AblationConfig(tasks=tuple(t.strip() for t in args.tasks.split(",") if t.strip()),
                            lengths=tuple(args.lengths), k=args.k, n_examples=args.n,
                            kinds=tuple(k.strip() for k in args.kinds.split(",") if k.strip()),
                            random_seeds=tuple(args.random_seeds), seed=args.seed,
                            prompt_config=PromptConfig(n_shots=args.shots))
    model = load_model_from_args(args)
    out = Path(args.out)
    suffix = f"_{args.adapter}" if args.adapter else ""
    progress = not args.quiet

    scores = score_heads(model, n_sequences=args.score_sequences, seed=args.seed, progress=progress)
    add_task_attention(model, scores, ablation_prompt_sets(model, config), config.prompt_config, progress=progress)
    write_table(scores.rows(), out / f"head_scores{suffix}", metadata=scores.metadata | {"adapter": args.adapter})
    for name in ("induction", "anti_induction"):
        top = scores.top_heads(name, args.k)
        print(f"top {args.k} {name} heads: " + ", ".join(f"{h} ({float(scores[name][h]):.3f})" for h in top))

    stem = out / f"ablation{suffix}"
    meta = {"config": repr(config), "adapter": args.adapter}
    rows = ablation_study(model, scores, config, progress=progress, log=print,
                          on_row=lambda partial: write_table(partial, stem, metadata=meta))
    summary = ablation_summary(rows)
    write_table(summary, out / f"ablation_summary{suffix}")
    print("\naccuracy (change from baseline) [random-head spread]:\n")
    print(to_markdown(summary))
    print(f"wrote {stem}.csv/.json/.md and {out / f'head_scores{suffix}'}.csv")


if __name__ == "__main__":
    main()
