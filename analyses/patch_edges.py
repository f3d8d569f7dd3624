"""Edge patching (the paper's section 4.4): at the last copy of 11-shot unique-copying prompts, remove the
induction edges (their keys) or the anti-induction edges (their values) in all layers and heads, replacing them
by a run without previous-token edges, and score the copy (teacher forced: all-correct accuracy, mean log-prob).

    python analyses/patch_edges.py                        # embedded SmolLM2-135M, UF and UB, L = 3, 5, 7, 9
    python analyses/patch_edges.py --adapter ub           # the same model with the LoRA adapter trained on UB
    python analyses/patch_edges.py --sweep-n 32 --sweep-lengths 5,9   # a larger per-layer sweep
    python analyses/patch_edges.py --layers 14-20 --heads 0,3   # patch only these layers / query heads
    python analyses/patch_edges.py --model smollm2-135m-ft-ub --format single-shot   # a model trained on UB

Defaults are the protocol's except --n: the paper uses 100 prompts per cell, about 3x the default's time (beyond
10 minutes for SmolLM2 on 2 CPU cores); pass --n 100 for the full protocol. The per-layer sweep (each layer's
edges patched alone, all heads) runs on the first --sweep-n prompts at the longest length. Prompts start with
BOS when the model's own tokenizer adds one (--bos overrides; the paper's code adds the tokenizer's BOS whenever
it has one). Writes <out>/edge_patching_<model>.{csv,json,md} and the sweep's edge_patching_layers_<model>.*
(the model's name carries its adapter, e.g. smollm2-135m+ub; single-shot runs end in _single-shot). A killed run started again with the same arguments
resumes from its finished cells; `--executor ray --workers N` spreads the cells over N Ray actors. Accuracy carries its binomial s.e. and Wilson 95% interval; the copy's mean
log-prob (the negative of the paper's loss) its mean ± s.e. Tables written with the earlier columns (n, loss,
accuracy_lo/hi) are rewritten by ``python -m interp.experiments.edge_tables upgrade FILE.csv``.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict, replace

import torch

from interp.cli import (Parser, add_model_args, add_output_args, fail, index_list, load_model_from_args, name_list,
                        non_negative_int, positive_int, positive_int_list, run, seed)
from interp.cli.args import add_executor_args, executor_from_args, model_source_from_args
from interp.core.journal import RowJournal
from interp.core.naming import model_name, result_stem
from interp.core.tables import to_markdown, write_table
from interp.experiments.edge_tables import CI_NOTE
from interp.experiments.edge_study import (EDGE_COLUMNS, EDGE_ROW_SHAPE, EDGE_SWEEP_COLUMNS, EdgeStudyConfig, claim_summary, edge_study,
                                           summary_table, sweep_summary)
from interp.interventions.edges.data import FORMATS, TASKS, check_length
from interp.interventions.edges.preflight import check_request, model_shape
from interp.models.shape import ModelShape

DEFAULT_N = 32
DEFAULT_SWEEP_N = 8


def build_parser() -> Parser:
    parser = Parser(__doc__)
    add_model_args(parser)
    add_executor_args(parser)
    add_output_args(parser)
    parser.add_argument("--tasks", type=name_list(TASKS, "tasks", allow_all=False), default=list(TASKS),
                        help="UF, UB or both (default: both)")
    parser.add_argument("--lengths", type=positive_int_list, default=[3, 5, 7, 9], help="copy lengths, 2-26 (default: 3,5,7,9)")
    parser.add_argument("--n", type=positive_int, default=DEFAULT_N,
                        help=f"prompts per task and length (default: {DEFAULT_N}; the paper: 100)")
    parser.add_argument("--shots", type=positive_int, default=None,
                        help="shots per prompt, the test included (default: 11; single-shot: 1)")
    parser.add_argument("--format", choices=FORMATS, default="few-shot",
                        help="few-shot (the paper's ' s , c .' shots, default) or single-shot (one '<bos> s : c' line, the "
                             "format the toolkit's trained UF / UB models learned; the string and its copy are the two "
                             "occurrences)")
    parser.add_argument("--seed", type=seed, default=0)
    parser.add_argument("--batch-size", type=positive_int, default=8, help="prompts per forward pass (default: 8)")
    parser.add_argument("--layers", type=index_list, default=None,
                        help="layers whose edges are patched: 'all' (default) or e.g. '0,5,14-20'")
    parser.add_argument("--heads", type=index_list, default=None,
                        help="query heads whose edges are patched: 'all' (default) or e.g. '0,3'")
    parser.add_argument("--sweep-n", type=non_negative_int, default=None,
                        help="also patch each layer alone, on the first N prompts of each swept cell "
                             f"(default: {DEFAULT_SWEEP_N}, at most --n; 0: no sweep)")
    parser.add_argument("--sweep-lengths", type=positive_int_list, default=None,
                        help="lengths of the sweep, a subset of --lengths (default: the longest)")
    parser.add_argument("--threads", type=positive_int, default=None,
                        help="CPU threads for torch (default: torch's choice; on a busy machine 1 can be faster)")
    parser.add_argument("--bos", choices=("model", "yes", "no"), default="model",
                        help="start prompts with BOS: as the model's tokenizer does (default), always, never")
    return parser


def study_config(parser: Parser, args) -> EdgeStudyConfig:
    for name, values in (("--lengths", args.lengths), ("--sweep-lengths", args.sweep_lengths or [])):
        for value in values:
            try:
                check_length(value)
            except ValueError as err:
                fail(parser, name, str(err))
    if args.format == "single-shot" and args.shots not in (None, 1):
        fail(parser, "--shots", f"expected 1 (or none) with --format single-shot, got {args.shots}")
    shots = args.shots or (1 if args.format == "single-shot" else 11)
    sweep_n = min(DEFAULT_SWEEP_N, args.n) if args.sweep_n is None else args.sweep_n
    if sweep_n > args.n:
        fail(parser, "--sweep-n", f"expected at most --n ({args.n}) prompts, got {sweep_n}")
    if args.sweep_lengths is not None and not set(args.sweep_lengths) <= set(args.lengths):
        fail(parser, "--sweep-lengths", f"expected a subset of --lengths {args.lengths}, got {args.sweep_lengths}")
    return EdgeStudyConfig(tuple(args.tasks), tuple(args.lengths), args.n, shots, args.seed, args.batch_size,
                           None if args.layers is None else tuple(args.layers),
                           None if args.heads is None else tuple(args.heads), sweep_n,
                           tuple(args.sweep_lengths or [max(args.lengths)]), prompt_format=args.format)


def check_shape(parser: Parser, shape: ModelShape, config: EdgeStudyConfig, bos: bool) -> None:
    try:
        check_request(shape, config.lengths, config.n_shots, bos, config.layers, config.heads, config.prompt_format)
    except ValueError as err:
        flag, _, message = str(err).partition(": ")
        fail(parser, flag, message)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    config = study_config(parser, args)
    bos = {"yes": True, "no": False}.get(args.bos)
    shape = model_shape(args.model)  # from the config file alone: refuse impossible requests before loading
    if shape is not None:
        check_shape(parser, shape, config, bool(bos))

    started = time.perf_counter()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    model = load_model_from_args(args)
    check_shape(parser, ModelShape(model.cfg.n_layers, model.cfg.n_heads, model.cfg.n_ctx), config, bool(bos))
    config = replace(config, prepend_bos=bos)

    label = model_name(model) or args.model
    variant = "single-shot" if config.prompt_format == "single-shot" else ""
    stems = {"main": result_stem(args.out, "edge_patching", label, variant=variant),
             "layers": result_stem(args.out, "edge_patching_layers", label, variant=variant)}
    metadata = {"config": asdict(config), "model": label, "ci": CI_NOTE}
    journal = RowJournal(stems["main"], metadata, EDGE_ROW_SHAPE)
    with executor_from_args(parser, args) as executor:
        main_rows, sweep_rows = edge_study(model, config, model_label=label, adapter=args.adapter,
                                           progress=not args.quiet, journal=journal, executor=executor,
                                           model_source=model_source_from_args(args))
    written = write_table(sweep_rows, stems["layers"], EDGE_SWEEP_COLUMNS, metadata=metadata) if sweep_rows else []
    written += journal.finish(main_rows, EDGE_COLUMNS, metadata=metadata)
    elapsed = time.perf_counter() - started

    print(f"\nedge patching, {label}: accuracy [Wilson 95%], mean log-prob ± s.e.\n")
    print(to_markdown(summary_table(main_rows)))
    if sweep_rows:
        print("per-layer sweep, layers whose edges alone lower the mean log-prob most:\n")
        print(to_markdown(sweep_summary(sweep_rows)))
    for line in claim_summary(main_rows):
        print(line)
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n{elapsed:.0f} s on {os.cpu_count()} CPU cores (load average {load}); wrote "
          + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
