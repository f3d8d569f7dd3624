"""In-context accuracy of a model on the ten tasks at several lengths, with the directional
pairs (UR vs UL, UF vs UB, ...) side by side.

Writes results/directional_bias.* and results/directional_pairs.* (with `--adapter NAME` the
files end in `_NAME`). A killed run started again with the same arguments resumes from the
finished cells.
"""

from __future__ import annotations

import sys

from interp.cli import (Parser, add_model_args, add_output_args, add_prompt_args, fail, load_model_from_args, positive_int,
                        positive_int_list, results_suffix, run, task_list)
from interp.experiments import DIRECTIONAL_COLUMNS, check_directional_inputs, directional_bias, pair_table
from interp.prompts import PromptConfig
from interp.results import RowJournal, to_markdown, write_table
from interp.tasks import get_task


def main(argv: list[str] | None = None) -> int:
    parser = Parser(__doc__)
    add_model_args(parser)
    add_output_args(parser)
    add_prompt_args(parser)
    parser.add_argument("--tasks", type=task_list, default="all", help="comma-separated tasks or 'all' (default)")
    parser.add_argument("--lengths", type=positive_int_list, default=[10, 20, 50, 100],
                        help="lengths (default: 10,20,50,100; unique copying past the vocabulary is reported as n/a)")
    # 20 examples keep the default run (40 task x length cells) near 10 CPU minutes
    parser.add_argument("--n", type=positive_int, default=20, help="examples per task and length (default: 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=positive_int, default=8)
    args = parser.parse_args(argv)

    tasks = [get_task(t) for t in args.tasks]
    config = PromptConfig(n_shots=args.shots, template=args.template)
    model = load_model_from_args(args)
    try:
        check_directional_inputs(model, tasks, args.lengths, args.n, args.seed, config)
    except ValueError as err:
        fail(parser, "--lengths", str(err))
    suffix = results_suffix(args)
    stem = args.out / f"directional_bias{suffix}"
    run_config = {"model": args.model, "adapter": args.adapter, "dtype": args.dtype, "tasks": args.tasks,
                  "lengths": args.lengths, "n": args.n, "seed": args.seed, "prompt_config": config}
    journal = RowJournal(stem, run_config)
    rows = directional_bias(model, tasks, args.lengths, args.n, args.seed, config, batch_size=args.batch_size,
                            progress=not args.quiet, log=print, journal=journal)
    pairs = pair_table(rows)
    write_table(pairs, args.out / f"directional_pairs{suffix}", metadata=journal.config)
    journal.finish(rows, DIRECTIONAL_COLUMNS, metadata=journal.config)
    print(to_markdown(rows, ["task", "length", "n_examples", "accuracy", "stderr", "note"]))
    print(to_markdown(pairs))
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
