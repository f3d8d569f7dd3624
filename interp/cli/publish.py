"""``python -m interp.cli.publish [--build build/results] [--results results]``: the command behind
``make publish``. Publishes each finished table of a run into the published results folder, all its
files or none even if killed (`interp.core.publish.publish_tables`), its Markdown written anew from
the validated CSV; a table it refuses is named with why, and the exit code is 2 when any was refused.
A publish that was interrupted is finished (or, not yet committed, dropped) first, and said so.
"""

from __future__ import annotations

import sys

from interp.cli.argtypes import existing_dir, writable_dir
from interp.cli.parser import Parser
from interp.cli.running import run
from interp.core.publish import publish_tables


def main(argv: list[str] | None = None) -> int:
    parser = Parser(__doc__, prog="python -m interp.cli.publish")
    parser.add_argument("--build", type=existing_dir, default="build/results", help="the run's tables (default build/results)")
    parser.add_argument("--results", type=writable_dir, default="results", help="the published tables (default results)")
    args = parser.parse_args(argv)
    report = publish_tables(args.build, args.results)
    for stem in report.finished:
        print(f"note: finished the interrupted publish of {stem}")
    for stem in report.dropped:
        print(f"note: dropped the unfinished publish of {stem} (the published table was left as it was)")
    for stem in report.published:
        print(f"published {stem}")
    for stem, why in report.refused.items():
        print(f"error: not published {stem}: {why}", file=sys.stderr)
    if not report.published and not report.refused:
        print(f"note: {args.build} holds no table")
    return 2 if report.refused else 0


if __name__ == "__main__":
    sys.exit(run(main))
