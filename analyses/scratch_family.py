"""What decides the route a copying model learns: train the from-scratch family (UF and UB x rotary, learned
absolute and no position encoding x seeds, each kept at every training length) and measure each model's
route table and the paper's edge patching.

    python analyses/scratch_family.py                                  # 3 encodings x 3 seeds x UF/UB, 800 and 1600 steps
    python analyses/scratch_family.py --executor ray --workers 2       # two runs at once
    python analyses/scratch_family.py --tasks UB --positionals absolute --seeds 1   # one run, two models

Models are saved in $INTERP_CACHE/scratch-family/ and load by name (`load_model("scratch-ub-absolute-s1-800")`);
they are regenerable, so never committed. Writes <out>/scratch_family.* (one row per model and route length:
in-distribution exact match, route shares with 95% bootstrap intervals, edge-patching accuracies with Wilson
intervals, the learned route), scratch_family_verdicts.* (the seeds' learned routes per encoding and length),
scratch_family_models.*, scratch_family_routes.*, scratch_family_edges.* and scratch_family_circuits.* (each
model's circuit at length 5, greedy pruning verified exactly: one row per edge). A killed run started again
with the same arguments trains and measures only what it had not finished.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, replace

from interp.cli import (Parser, add_output_args, fail, log_through_tqdm, name_list, positive_int, positive_int_list, run, seed,
                        seed_list)
from interp.cli.args import add_executor_args, executor_from_args
from interp.core.journal import RowJournal
from interp.core.naming import result_stem
from interp.core.tables import to_markdown, write_table
from interp.experiments.scratch_family import (CARRIES, FAMILY_ROW_SHAPE, LEARNED_AT, family_study, summary_rows,
                                               verdict_rows)
from interp.experiments.scratch_family_measure import MeasureConfig
from interp.experiments.scratch_family_train import FAMILY_SCRATCH, FamilyConfig
from interp.interventions.edges.data import check_length
from interp.models.trained import FAMILY_POSITIONALS

DEFAULTS = FamilyConfig()
MEASURE = MeasureConfig()


def build_parser() -> Parser:
    p = Parser(__doc__)
    add_output_args(p)
    add_executor_args(p)
    p.add_argument("--tasks", type=name_list(("UF", "UB"), "tasks"), default=list(DEFAULTS.tasks), help="UF, UB or all")
    p.add_argument("--positionals", type=name_list(FAMILY_POSITIONALS, "position encodings"),
                   default=list(DEFAULTS.positionals), help=f"{', '.join(FAMILY_POSITIONALS)} or all (default: all)")
    p.add_argument("--seeds", type=seed_list, default=list(DEFAULTS.seeds), help="training seeds (default: 1-3)")
    p.add_argument("--steps", type=positive_int_list, default=list(DEFAULTS.durations),
                   help="training lengths in steps, each a model of the same run (default: 800,1600)")
    p.add_argument("--route-lengths", type=positive_int_list, default=list(MEASURE.route_lengths),
                   help="copy lengths of the route tables, among --edge-lengths (default: 5,9)")
    p.add_argument("--route-n", type=positive_int, default=MEASURE.route_n, help="prompts per route table (default: 64)")
    p.add_argument("--edge-lengths", type=positive_int_list, default=list(MEASURE.edge_lengths),
                   help="copy lengths of the edge patching (default: 3,5,7,9)")
    p.add_argument("--edge-n", type=positive_int, default=MEASURE.edge_n, help="prompts per edge-patching cell (default: 100)")
    p.add_argument("--prompt-seed", type=seed, default=MEASURE.seed, help="seed of the measured prompts (default: 0)")
    p.add_argument("--threads", type=positive_int, default=FAMILY_SCRATCH.threads,
                   help="torch threads per run (default: 1, the fastest for models this small)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for flag, values in (("--route-lengths", args.route_lengths), ("--edge-lengths", args.edge_lengths)):
        for length in values:
            try:
                check_length(length)
            except ValueError as err:
                fail(parser, flag, str(err))
    longest = FAMILY_SCRATCH.train_range[1]
    if max(args.edge_lengths) > longest:
        fail(parser, "--edge-lengths", f"expected lengths the models were trained on (up to {longest}), got {args.edge_lengths}")
    if not set(args.route_lengths) <= set(args.edge_lengths):
        fail(parser, "--route-lengths", f"expected lengths among --edge-lengths {args.edge_lengths}, got {args.route_lengths}")
    if len(set(args.steps)) != len(args.steps):
        fail(parser, "--steps", f"expected distinct step counts, got {args.steps}")
    log_through_tqdm()
    family = FamilyConfig(tuple(args.tasks), tuple(args.positionals), tuple(args.seeds), tuple(args.steps),
                          replace(FAMILY_SCRATCH, threads=args.threads))
    measure = MeasureConfig(tuple(args.route_lengths), args.route_n, tuple(args.edge_lengths), args.edge_n,
                            args.prompt_seed)
    configuration = {"family": family.as_config(), "measure": asdict(measure)}  # what the journalled rows depend on
    stem = result_stem(args.out, "scratch_family")
    started = time.time()
    journal = RowJournal(stem, configuration, FAMILY_ROW_SHAPE)
    with executor_from_args(parser, args) as executor:
        tables = family_study(family, measure, journal=journal, executor=executor, progress=not args.quiet)
    summary = summary_rows(tables["models"], tables["routes"], tables["edges"])
    verdicts = verdict_rows(summary)
    metadata = configuration | {
        "rule": f"learned route: id exact match >= {LEARNED_AT}, then every route whose share's 95% interval starts "
                f"at >= {CARRIES}, largest share first; edges needed: Wilson interval wholly below the unpatched one's",
        "wall_seconds": round(time.time() - started, 1), "executor": args.executor}
    written = []
    for kind in ("models", "routes", "edges", "circuits"):
        if tables[kind]:
            written += write_table(tables[kind], result_stem(args.out, f"scratch_family_{kind}"), metadata=metadata)
    written += write_table(verdicts, result_stem(args.out, "scratch_family_verdicts"), metadata=metadata)
    written += journal.finish(summary, metadata=metadata)
    print(to_markdown(verdicts))
    print(f"\n{len(tables['models'])} models in {metadata['wall_seconds']} s; wrote {', '.join(str(p) for p in written)}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
