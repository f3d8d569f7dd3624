"""Train small transformers from scratch on each task; compare length generalization with theory.

    python analyses/train_from_scratch.py                 # scaled default: 10 tasks, absolute positions, CPU
    python analyses/train_from_scratch.py --preset quick  # CI smoke run (a minute or two)
    python analyses/train_from_scratch.py --preset paper --positional absolute,rope   # the paper's setting, GPU

Writes <out>/from_scratch.{csv,json,md} (task, positional, split, lengths, accuracy, expressible)
and <out>/from_scratch_summary.{csv,md} (one line a task: ID and OOD accuracy beside the
C-RASP[pos] prediction). `--executor ray --workers 2` trains two tasks at once (docs/guide/cluster.md).
Non-default presets add their name to the file names. Checkpoints go to
<out>/runs/from_scratch_<preset>/; a killed run started again resumes each task.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict, replace

from interp.cli import (Parser, add_output_args, fraction, log_through_tqdm, name_list, positive_float, positive_int, run,
                        seed, task_list)
from interp.cli.args import add_executor_args, executor_from_args
from interp.core.naming import result_stem
from interp.core.tables import to_markdown, write_table
from interp.experiments.from_scratch import POSITIONALS, PRESETS, train_table, verdict
from interp.data.tasks import TASK_NAMES


def build_parser() -> Parser:
    p = Parser(__doc__)
    add_output_args(p)
    p.add_argument("--preset", default="default", choices=sorted(PRESETS))
    p.add_argument("--tasks", type=task_list, default="all", help=f"comma-separated, or 'all' ({', '.join(TASK_NAMES)})")
    p.add_argument("--positional", type=name_list((*POSITIONALS, "both"), "positional encodings", allow_all=False),
                   default=["absolute"], help="absolute, rope, or both")
    p.add_argument("--steps", type=positive_int, default=None, help="override the preset's maximum steps per task")
    p.add_argument("--d-model", type=positive_int, default=None)
    p.add_argument("--layers", type=positive_int, default=None)
    p.add_argument("--lr", type=positive_float, default=None)
    p.add_argument("--seed", type=seed, default=None)
    p.add_argument("--threads", type=positive_int, default=None, help="torch CPU threads per worker (default: the preset's)")
    add_executor_args(p)  # --executor ray --workers 2: two tasks at once, one single-threaded actor each
    p.add_argument("--threshold", type=fraction, default=0.9, help="OOD accuracy that counts as generalizing")
    p.add_argument("--no-resume", action="store_true", help="retrain tasks that have checkpoints")
    return p


def _cpu_seconds() -> float:
    """CPU time of this process and its finished workers: what the run would take on idle cores."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    log_through_tqdm()
    overrides = {k: v for k, v in (("steps", args.steps), ("d_model", args.d_model), ("n_layers", args.layers),
                                   ("lr", args.lr), ("seed", args.seed), ("threads", args.threads)) if v is not None}
    config = replace(PRESETS[args.preset], **overrides)
    positionals = list(POSITIONALS) if "both" in args.positional else args.positional
    tasks = args.tasks
    variant = "" if args.preset == "default" else args.preset
    out = args.out

    started, cpu = time.time(), _cpu_seconds()
    with executor_from_args(parser, args) as executor:
        rows = train_table(config, tasks, positionals, out / "runs" / f"from_scratch_{args.preset}",
                           progress=not args.quiet, resume=not args.no_resume, executor=executor)
    metadata = {"preset": args.preset, "config": asdict(config), "executor": args.executor, "workers": executor.workers,
                "wall_seconds": round(time.time() - started, 1), "cpu_seconds": round(_cpu_seconds() - cpu, 1),
                "scoring": "teacher-forced exact match, zero-shot '<bos> x : y <eos>' / ' x | q: a' lines"}
    write_table(rows, result_stem(out, "from_scratch", variant=variant), metadata=metadata)
    summary = verdict(rows, args.threshold)
    write_table(summary, result_stem(out, "from_scratch_summary", variant=variant), formats=("csv", "md"))
    print(to_markdown(summary))
    learned = [s for s in summary if s.agrees is not None]
    print(f"{sum(s.agrees for s in learned)}/{len(learned)} cells learned in distribution agree with the theory "
          f"(every OOD bin >= {args.threshold} iff expressible); {len(summary) - len(learned)} not learned "
          f"(inconclusive); wall {metadata['wall_seconds']} s, cpu {metadata['cpu_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
