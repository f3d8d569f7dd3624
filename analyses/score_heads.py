"""Per-head induction, anti-induction and previous-token scores (repeated random tokens), plus
attention to the answer's source on task prompts; writes the layer x head table."""

from __future__ import annotations

import argparse
from pathlib import Path

from interp.cli import add_model_args, add_output_args, int_list, load_model_from_args
from interp.experiments import AblationConfig, ablation_prompt_sets, add_task_attention
from interp.prompts import PromptConfig
from interp.results import to_markdown, write_table
from interp.scoring import score_heads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    add_model_args(parser)
    add_output_args(parser)
    parser.add_argument("--n", type=int, default=100, help="repeated random sequences (default: 100, as the paper)")
    parser.add_argument("--half-length", type=int, default=50, help="tokens per copy (default: 50)")
    parser.add_argument("--bos", action="store_true", help="prefix each probe with BOS (the paper does not)")
    parser.add_argument("--tasks", default="UF,UB,UR,UL", help="tasks for attention-to-answer scores ('' for none)")
    parser.add_argument("--lengths", type=int_list, default=[10])
    parser.add_argument("--task-n", type=int, default=20, help="task prompts per task and length")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    model = load_model_from_args(args)
    scores = score_heads(model, half_length=args.half_length, n_sequences=args.n, seed=args.seed,
                         prepend_bos=args.bos, progress=not args.quiet)
    tasks = tuple(t for t in args.tasks.split(",") if t)
    if tasks:
        config = AblationConfig(tasks=tasks, lengths=tuple(args.lengths), n_examples=args.task_n, seed=args.seed,
                                prompt_config=PromptConfig())
        add_task_attention(model, scores, ablation_prompt_sets(model, config), config.prompt_config,
                           progress=not args.quiet)
    suffix = f"_{args.adapter}" if args.adapter else ""
    rows = scores.rows()
    write_table(rows, Path(args.out) / f"head_scores{suffix}", metadata=scores.metadata)
    for name in scores.scores:
        top = sorted(rows, key=lambda r: r[f"{name}_rank"])[: args.top]
        print(f"\ntop {args.top} heads by {name}:")
        print(to_markdown(top, ["layer", "head", *scores.scores]))


if __name__ == "__main__":
    main()
