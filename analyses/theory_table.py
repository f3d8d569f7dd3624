"""Print and save the theory table: each task's C-RASP[pos] program, run on random instances.

    python analyses/theory_table.py --lengths 10,50,100,200,500 --n 100

Writes ``<out>/theory_table.{csv,json,md}``. See ``interp.experiments.theory_table`` for what each column means."""

from __future__ import annotations

import sys

from interp.cli import Parser, add_output_args, positive_int, positive_int_list, run, seed
from interp.core.naming import result_stem
from interp.core.tables import write_table
from interp.experiments.theory_table import (DEFAULT_LENGTHS, DEFINITION, TRAIN_LENGTH, disagreements, format_theory_table, legend,
                           theory_rows)


def main(argv: list[str] | None = None) -> int:
    parser = Parser(__doc__)
    add_output_args(parser)
    parser.add_argument("--lengths", type=positive_int_list, default=list(DEFAULT_LENGTHS),
                        help="comma-separated task lengths (default: %(default)s)")
    parser.add_argument("--n", type=positive_int, default=100, help="random instances per task and length (default: 100)")
    parser.add_argument("--seed", type=seed, default=0)
    parser.add_argument("--train-length", type=positive_int, default=TRAIN_LENGTH,
                        help="bounded programs of non-expressible tasks are sized to be exact up to this length "
                             "(default: %(default)s, the paper's from-scratch training range)")
    parser.add_argument("--mode", choices=("teacher-forced", "autoregressive"), default="teacher-forced",
                        help="copying: score all output steps in one pass (equivalent for causal programs) or "
                             "generate token by token (slow at long lengths)")
    args = parser.parse_args(argv)
    rows = theory_rows(args.lengths, args.n, args.seed, args.train_length, args.mode)
    print(format_theory_table(rows))
    print(legend(rows, args.train_length))
    notes = disagreements(rows)
    print("\nAgreement with the paper's theory table: " + ("all rows agree." if not notes else "; ".join(notes)))
    metadata = {k: v for k, v in vars(args).items() if k not in ("out", "quiet")}
    metadata["definition"] = DEFINITION
    for path in write_table(rows, result_stem(args.out, "theory_table"), metadata=metadata):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
