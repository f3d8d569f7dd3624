"""Git commit history: list a history's commits in the written order (revert, forward copy) or
reversed (cherry-pick, backward copy); exact-match accuracy per order and history length.

    python analyses/git_history.py                        # embedded SmolLM2-135M, N = 5, 10
    python analyses/git_history.py --commits 10,15,20,25,35 --shots 5 --examples 100   # paper-sized
    python analyses/git_history.py --generate             # also score free generations line by line

Writes ``<out>/git_history.{csv,json,md}``.
"""

from __future__ import annotations

import sys

from interp.cli import (Parser, add_model_args, add_output_args, load_model_from_args, name_list, non_negative_int,
                        positive_int, positive_int_list, run, seed)
from interp.core.naming import model_name
from interp.experiments.realistic.git_history import GIT_TASKS, GitConfig, describe, run_git, write_git_table


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
    model = load_model_from_args(args)
    rows = run_git(model, config, batch_size=args.batch_size, generate=args.generate, progress=not args.quiet,
                   model_name=model_name(model))
    paths = write_git_table(rows, args.out, metadata={"args": vars(args)})
    print(describe(rows))
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
