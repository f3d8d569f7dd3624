"""Git commit history: list a history's commits in the written order (revert, forward copy) or
reversed (cherry-pick, backward copy); exact-match accuracy per order and history length.

    python analyses/git_history.py                        # embedded SmolLM2-135M, N = 5, 10
    python analyses/git_history.py --commits 10,15,20,25,35 --shots 5 --examples 100   # paper-sized
    python analyses/git_history.py --generate             # also score free generations line by line

Writes ``<out>/git_history_<model>.{csv,json,md}``. A killed run started again with the same
settings (other lengths or tasks allowed) resumes from its finished (task, length) cells.
"""

from __future__ import annotations

import sys
from dataclasses import asdict

from interp.cli import (Parser, add_model_args, add_output_args, load_model_from_args, name_list, non_negative_int,
                        positive_int, positive_int_list, result_stem_from_args, run, seed)
from interp.core.journal import RowJournal
from interp.core.locking import TableLock
from interp.core.naming import model_name
from interp.experiments.realistic.git_history import (GIT_COLUMNS, GIT_ROW_SHAPE, GIT_SCORING, GIT_TASKS, GitConfig,
                                                      describe, run_git)


def main(argv: list[str] | None = None) -> int:
    defaults = GitConfig()
    parser = Parser(__doc__)
    add_model_args(parser)
    add_output_args(parser)
    parser.add_argument("--commits", type=positive_int_list, default=list(defaults.n_commits),
                        help="history lengths, comma-separated (default 5,10; the paper: 10,15,20,25,35)")
    parser.add_argument("--examples", type=positive_int, default=defaults.n_examples,
                        help=f"histories per task and length (default {defaults.n_examples})")
    parser.add_argument("--shots", type=non_negative_int, default=defaults.n_shots,
                        help=f"solved histories before the test one (default {defaults.n_shots}; the paper: 5)")
    parser.add_argument("--tasks", type=name_list(GIT_TASKS, "git tasks"), default=list(GIT_TASKS),
                        help="revert, cherry-pick or both (default both)")
    parser.add_argument("--no-instruction", action="store_true", help="leave out the task instruction")
    parser.add_argument("--seed", type=seed, default=defaults.seed, help=f"data seed (default {defaults.seed})")
    parser.add_argument("--batch-size", type=positive_int, default=4, help="prompts per forward pass (default 4)")
    parser.add_argument("--generate", action="store_true",
                        help="also generate freely and compare lines as the paper does; one pass per token")
    args = parser.parse_args(argv)
    config = GitConfig(n_commits=tuple(args.commits), n_examples=args.examples, n_shots=args.shots,
                       tasks=tuple(args.tasks), instruction=not args.no_instruction, seed=args.seed)
    stem = result_stem_from_args(args, "git_history")
    # lengths and tasks are left out: each (task, length) cell is seeded on its own, so a run asked for
    # more lengths or tasks than a killed one reuses the cells that one finished
    cell_config = {k: v for k, v in asdict(config).items() if k not in ("n_commits", "tasks")}
    run_config = {"model": args.model, "adapter": args.adapter, "dtype": args.dtype, "config": cell_config,
                  "generate": args.generate}
    with TableLock(stem) as lock:  # before the model loads: a second run on this table is refused at once
        model = load_model_from_args(args)
        journal = RowJournal(stem, run_config, GIT_ROW_SHAPE, lock=lock)
        rows = run_git(model, config, batch_size=args.batch_size, generate=args.generate, progress=not args.quiet,
                       model_name=model_name(model), journal=journal)
        paths = journal.finish(rows, GIT_COLUMNS, metadata={**journal.config, "scoring": GIT_SCORING})
    print(describe(rows))
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
