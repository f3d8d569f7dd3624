"""In-context accuracy of a model on the ten tasks at several lengths, with the directional
pairs (UR vs UL, UF vs UB, ...) side by side."""

from __future__ import annotations

import argparse
from pathlib import Path

from interp.cli import add_model_args, add_output_args, int_list, load_model_from_args
from interp.experiments import directional_bias, pair_table
from interp.prompts import PromptConfig
from interp.results import to_markdown, write_table
from interp.tasks import parse_tasks

COLUMNS = ["model", "task", "length", "n_examples", "accuracy", "stderr", "mean_logprob", "token_accuracy",
           "n_shots", "template", "seed", "note"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    add_model_args(parser)
    add_output_args(parser)
    parser.add_argument("--tasks", default="all", help="comma-separated tasks or 'all' (default)")
    parser.add_argument("--lengths", type=int_list, default=[10, 20, 50, 100], help="lengths (default: 10,20,50,100; unique copying past the vocabulary is reported as n/a)")
    # 20 examples keep the default run (40 task x length cells) near 10 CPU minutes
    parser.add_argument("--n", type=int, default=20, help="examples per task and length (default: 20)")
    parser.add_argument("--shots", type=int, default=5)
    parser.add_argument("--template", default="bare", choices=["bare", "obey"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    tasks = parse_tasks(args.tasks)
    model = load_model_from_args(args)
    stem = Path(args.out) / "directional_bias"
    config = PromptConfig(n_shots=args.shots, template=args.template)
    rows = directional_bias(model, tasks, args.lengths, args.n, args.seed, config, progress=not args.quiet, log=print,
                            on_row=lambda partial: write_table(partial, stem, COLUMNS))
    write_table(rows, stem, COLUMNS)
    pairs = pair_table(rows)
    write_table(pairs, Path(args.out) / "directional_pairs")
    print(to_markdown(rows, ["task", "length", "n_examples", "accuracy", "stderr", "note"]))
    print(to_markdown(pairs))


if __name__ == "__main__":
    main()
