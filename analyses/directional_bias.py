"""In-context accuracy of a model on the ten tasks at several lengths, with the directional
pairs (UR vs UL, UF vs UB, ...) side by side.

Writes <out>/directional_bias_<model>.* and <out>/directional_pairs_<model>.* (--out: build/results by default; with an adapter
the model reads `smollm2-135m+ub`). A killed run started again with the same arguments resumes from the
finished cells. `--executor ray --workers N` spreads the cells over N Ray actors (docs/guide/cluster.md).
"""

from __future__ import annotations

import sys

from interp.cli import (Parser, add_model_args, add_output_args, add_prompt_args, add_source_args, fail,
                        input_error_argument, load_model_from_args, positive_int, positive_int_list,
                        prompt_config_from_args, result_stem_from_args, run, say, seed, source_from_args, task_list)
from interp.cli.args import add_executor_args, executor_from_args, model_source_from_args
from interp.core.journal import RowJournal
from interp.core.locking import TableLock
from interp.core.tables import to_markdown, write_table
from interp.data.tasks import get_task
from interp.experiments import (DIRECTIONAL_COLUMNS, DIRECTIONAL_ROW_SHAPE, check_directional_inputs, directional_bias,
                                over_templates, pair_table)


def main(argv: list[str] | None = None) -> int:
    parser = Parser(__doc__)
    add_model_args(parser)
    add_output_args(parser)
    add_prompt_args(parser)
    add_source_args(parser)
    add_executor_args(parser)
    parser.add_argument("--tasks", type=task_list, default="all", help="comma-separated tasks or 'all' (default)")
    parser.add_argument("--lengths", type=positive_int_list, default=None,
                        help="lengths (default: 10,20,50,100; unique copying past the vocabulary is reported as n/a; "
                             "with --data: the files' lengths)")
    # 20 examples keep the default run (40 task x length cells) near 10 CPU minutes
    parser.add_argument("--n", type=positive_int, default=20, help="examples per task and length (default: 20)")
    parser.add_argument("--seed", type=seed, default=0)
    parser.add_argument("--batch-size", type=positive_int, default=8)
    parser.add_argument("--every-template", action="store_true",
                        help="evaluate each task under every template of the protocol and average (the paper's figures); "
                             "default with --protocol paper and no --template")
    args = parser.parse_args(argv)
    if args.data and args.lengths:
        fail(parser, "--lengths", "the lengths come from the --data files; leave --lengths out")

    tasks = [get_task(t) for t in args.tasks]
    config = prompt_config_from_args(parser, args, args.tasks)
    every_template = args.every_template or (args.protocol == "paper" and args.template is None)
    source = source_from_args(parser, args, args.tasks)
    lengths = args.lengths or [10, 20, 50, 100]
    stem = result_stem_from_args(args, "directional_bias")
    run_config = {"model": args.model, "adapter": args.adapter, "dtype": args.dtype, "tasks": args.tasks,
                  "lengths": lengths, "n": args.n, "seed": args.seed, "prompt_config": config,
                  "every_template": every_template, "source": source.describe()}
    with TableLock(stem) as lock, executor_from_args(parser, args) as executor:  # refused at once, before the model loads
        model = load_model_from_args(args)
        try:
            check_directional_inputs(model, tasks, lengths, args.n, args.seed, config, source=source,
                                     every_template=every_template)
        except ValueError as err:
            fail(parser, input_error_argument(str(err), args), str(err))
        journal = RowJournal(stem, run_config, DIRECTIONAL_ROW_SHAPE, lock=lock)
        rows = directional_bias(model, tasks, lengths, args.n, args.seed, config, batch_size=args.batch_size,
                                progress=not args.quiet, log=say, journal=journal, source=source,
                                every_template=every_template, executor=executor,
                                model_source=model_source_from_args(args))
        pairs = pair_table(rows)
        write_table(pairs, result_stem_from_args(args, "directional_pairs"), metadata=journal.config)
        if every_template:
            write_table(over_templates(rows), result_stem_from_args(args, "directional_templates"), metadata=journal.config)
        journal.finish(rows, DIRECTIONAL_COLUMNS, metadata=journal.config)
    print(to_markdown(rows, ["task", "length", "template", "n_examples", "accuracy", "stderr", "note"]))
    if every_template:
        print(to_markdown(over_templates(rows), ["task", "length", "n_templates", "accuracy", "template_sd",
                                                 "template_min", "template_max"]))
    print(to_markdown(pairs))
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
