"""Git commit history: list a history's commits in the written order (revert, forward copy) or
reversed (cherry-pick, backward copy); exact-match accuracy per order and history length.

    python analyses/git_history.py                        # embedded SmolLM2-135M, N = 5, 10
    python analyses/git_history.py --commits 10,15,20,25,35 --shots 5 --examples 100   # paper-sized
    python analyses/git_history.py --generate             # also score free generations line by line

Writes ``results/git_history.{csv,json,md}``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from interp.cli import add_model_args, add_output_args, int_list, load_model_from_args  # noqa: E402
from interp.realistic.git_history import GIT_TASKS, GitConfig, describe, run_git, write_git_table  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    defaults = GitConfig()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(parser)
    add_output_args(parser)
    parser.add_argument("--commits", type=int_list, default=list(defaults.n_commits),
                        help="history lengths, comma-separated (default 5,10; the paper: 10,15,20,25,35)")
    parser.add_argument("--examples", type=int, default=defaults.n_examples,
                        help=f"histories per task and length (default {defaults.n_examples})")
    parser.add_argument("--shots", type=int, default=defaults.n_shots,
                        help=f"solved histories before the test one (default {defaults.n_shots}; the paper: 5)")
    parser.add_argument("--tasks", default=",".join(GIT_TASKS), help="revert, cherry-pick or both (default both)")
    parser.add_argument("--no-instruction", action="store_true", help="leave out the task instruction")
    parser.add_argument("--seed", type=int, default=defaults.seed, help=f"data seed (default {defaults.seed})")
    parser.add_argument("--batch-size", type=int, default=4, help="prompts per forward pass (default 4)")
    parser.add_argument("--generate", action="store_true",
                        help="also generate freely and compare lines as the paper does; one pass per token")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = GitConfig(n_commits=tuple(args.commits), n_examples=args.examples, n_shots=args.shots,
                           tasks=tuple(t.strip() for t in args.tasks.split(",") if t.strip()),
                           instruction=not args.no_instruction, seed=args.seed)
    except ValueError as err:
        parser.error(str(err))
    model = load_model_from_args(args)
    rows = run_git(model, config, batch_size=args.batch_size, generate=args.generate, progress=not args.quiet,
                   model_name=args.model)
    paths = write_git_table(rows, args.out, metadata={"args": vars(args)})
    print(describe(rows))
    print("wrote " + ", ".join(str(p) for p in paths))


if __name__ == "__main__":
    main()
