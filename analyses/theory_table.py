"""Print and save the theory table: each task's C-RASP[pos] program, run on random instances.

    python analyses/theory_table.py --lengths 10,50,100,200,500 --n 100

Writes ``<out>/theory_table.{csv,json,md}``. See ``interp.theory`` for what each column means."""

from __future__ import annotations

import argparse
from pathlib import Path

from interp.cli import int_list
from interp.results import write_table
from interp.theory import (
    DEFAULT_LENGTHS, DEFINITION, TRAIN_LENGTH, disagreements, format_theory_table, legend, theory_rows,
)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int_list, default=list(DEFAULT_LENGTHS),
                        help="comma-separated task lengths (default: %(default)s)")
    parser.add_argument("--n", type=int, default=100, help="random instances per task and length (default: 100)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-length", type=int, default=TRAIN_LENGTH,
                        help="bounded programs of non-expressible tasks are sized to be exact up to this length "
                             "(default: %(default)s, the paper's from-scratch training range)")
    parser.add_argument("--mode", choices=("teacher-forced", "autoregressive"), default="teacher-forced",
                        help="copying: score all output steps in one pass (equivalent for causal programs) or "
                             "generate token by token (slow at long lengths)")
    parser.add_argument("--out", default="results", help="output folder (default: results)")
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    rows = theory_rows(args.lengths, args.n, args.seed, args.train_length, args.mode)
    print(format_theory_table(rows))
    print(legend(rows, args.train_length))
    notes = disagreements(rows)
    print("\nAgreement with the paper's theory table: " + ("all rows agree." if not notes else "; ".join(notes)))
    metadata = {k: v for k, v in vars(args).items() if k != "out"}
    metadata["definition"] = DEFINITION
    for path in write_table(rows, Path(args.out) / "theory_table", metadata=metadata):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
