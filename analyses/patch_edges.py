"""Edge patching (the paper's section 4.4): at the last copy of 11-shot unique-copying prompts, remove the
induction edges (their keys) or the anti-induction edges (their values) in all layers and heads, replacing them
by a run without previous-token edges, and score the copy (teacher forced: all-correct accuracy, cross-entropy).

    python analyses/patch_edges.py                        # embedded SmolLM2-135M, UF and UB, L = 3, 5, 7, 9
    python analyses/patch_edges.py --adapter ub           # the same model with the LoRA adapter trained on UB
    python analyses/patch_edges.py --sweep-n 32 --sweep-lengths 5,9   # a larger per-layer sweep
    python analyses/patch_edges.py --layers 14-20 --heads 0,3   # patch only these layers / query heads

Defaults are the protocol's except --n: the paper uses 100 prompts per cell, about 3x the default's time (beyond
10 minutes for SmolLM2 on 2 CPU cores); pass --n 100 for the full protocol. The per-layer sweep (each layer's
edges patched alone, all heads) runs on the first --sweep-n prompts at the longest length. Prompts start with
BOS when the model's own tokenizer adds one (--bos overrides; the paper's code adds the tokenizer's BOS whenever
it has one). Writes results/edge_patching_<model>[_<adapter>].{csv,json,md} and the sweep's
edge_patching_layers_<model>[_<adapter>].*; rows of finished cells go to *_partial.csv while it runs, and the
final tables are replaced only when the run completes. Accuracy intervals are Wilson 95%; loss is mean ± s.e.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from interp.cli import add_model_args, add_output_args, int_list, load_model_from_args  # noqa: E402
from interp.edges.data import TASKS, check_length, check_task  # noqa: E402
from interp.edges.preflight import ModelShape, check_request, index_list, model_shape  # noqa: E402
from interp.edges.study import EdgeStudyConfig, claim_summary, edge_study, summary_table, sweep_summary  # noqa: E402
from interp.figures import slug  # noqa: E402
from interp.results import to_markdown, write_table  # noqa: E402
from interp.scoring import model_name  # noqa: E402

DEFAULT_N = 32
DEFAULT_SWEEP_N = 8


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):  # one line and exit code 2, like every other bad input
        self.exit(2, f"error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(parser)
    add_output_args(parser)
    parser.add_argument("--tasks", default=",".join(TASKS), help="comma-separated, from UF, UB (default: both)")
    parser.add_argument("--lengths", type=int_list, default=[3, 5, 7, 9], help="copy lengths, 2-26 (default: 3,5,7,9)")
    parser.add_argument("--n", type=int, default=DEFAULT_N,
                        help=f"prompts per task and length (default: {DEFAULT_N}; the paper: 100)")
    parser.add_argument("--shots", type=int, default=11, help="shots per prompt, the test included (default: 11)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=8, help="prompts per forward pass (default: 8)")
    parser.add_argument("--layers", type=index_list, default=None,
                        help="layers whose edges are patched: 'all' (default) or e.g. '0,5,14-20'")
    parser.add_argument("--heads", type=index_list, default=None,
                        help="query heads whose edges are patched: 'all' (default) or e.g. '0,3'")
    parser.add_argument("--sweep-n", type=int, default=None,
                        help="also patch each layer alone, on the first N prompts of each swept cell "
                             f"(default: {DEFAULT_SWEEP_N}, at most --n; 0: no sweep)")
    parser.add_argument("--sweep-lengths", type=int_list, default=None,
                        help="lengths of the sweep, a subset of --lengths (default: the longest)")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads for torch (default: torch's choice; on a busy machine 1 can be faster)")
    parser.add_argument("--bos", choices=("model", "yes", "no"), default="model",
                        help="start prompts with BOS: as the model's tokenizer does (default), always, never")
    return parser


def study_config(args: argparse.Namespace) -> EdgeStudyConfig:
    """The run's configuration; ``ValueError`` names the offending argument."""
    tasks = [t for t in args.tasks.replace(" ", ",").split(",") if t]
    if not tasks:
        raise ValueError("--tasks: expected some of UF, UB")
    for name, values in (("--lengths", args.lengths), ("--sweep-lengths", args.sweep_lengths or [])):
        if name == "--lengths" and not values:
            raise ValueError("--lengths: expected at least one copy length (2-26)")
        for value in values:
            try:
                check_length(value)
            except ValueError as err:
                raise ValueError(f"{name}: {err}") from None
    try:
        tasks = [check_task(t) for t in tasks]
    except ValueError as err:
        raise ValueError(f"--tasks: {err}") from None
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads: expected an integer >= 1, got {args.threads}")
    sweep_n = min(DEFAULT_SWEEP_N, args.n) if args.sweep_n is None else args.sweep_n
    for name, value, low in (("--n", args.n, 1), ("--shots", args.shots, 1), ("--batch-size", args.batch_size, 1),
                             ("--sweep-n", sweep_n, 0)):
        if value < low:
            raise ValueError(f"{name}: expected an integer >= {low}, got {value}")
    if sweep_n > args.n:
        raise ValueError(f"--sweep-n: expected at most --n ({args.n}) prompts, got {sweep_n}")
    if args.sweep_lengths is not None and not (args.sweep_lengths and set(args.sweep_lengths) <= set(args.lengths)):
        raise ValueError(f"--sweep-lengths: expected a subset of --lengths {args.lengths}, got {args.sweep_lengths}")
    sweep_lengths = args.sweep_lengths or [max(args.lengths)]
    return EdgeStudyConfig(tuple(tasks), tuple(args.lengths), args.n, args.shots, args.seed, args.batch_size,
                           None if args.layers is None else tuple(args.layers),
                           None if args.heads is None else tuple(args.heads), sweep_n, tuple(sweep_lengths))


def check_writable(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-test-"):
            pass
    except OSError as err:
        raise ValueError(f"--out: cannot write to {folder} ({err.strerror or err})") from None


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        config = study_config(args)
        out = Path(args.out)
        check_writable(out)
        bos = {"yes": True, "no": False}.get(args.bos)
        shape = model_shape(args.model)
        if shape is not None:
            check_request(shape, config.lengths, config.n_shots, bool(bos), config.layers, config.heads)
    except ValueError as err:
        return fail(str(err))

    started = time.perf_counter()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    model = load_model_from_args(args)
    try:
        loaded = ModelShape(model.cfg.n_layers, model.cfg.n_heads, model.cfg.n_ctx)
        check_request(loaded, config.lengths, config.n_shots, bool(bos), config.layers, config.heads)
    except ValueError as err:
        return fail(str(err))
    config = replace(config, prepend_bos=bos)

    label = model_name(model) or args.model
    adapter = Path(args.adapter).name if args.adapter else ""
    suffix = f"_{slug(label)}" + (f"_{slug(adapter)}" if adapter else "")
    stems = {"main": out / f"edge_patching{suffix}", "layers": out / f"edge_patching_layers{suffix}"}
    partial = {kind: stem.with_name(stem.name + "_partial") for kind, stem in stems.items()}

    def keep_partial(main_rows: list[dict], sweep_rows: list[dict]) -> None:
        write_table(main_rows, partial["main"], formats=("csv",))
        if sweep_rows:
            write_table(sweep_rows, partial["layers"], formats=("csv",))

    main_rows, sweep_rows = edge_study(model, config, model_label=label, adapter=adapter, progress=not args.quiet,
                                       on_cell=keep_partial)
    metadata = {"config": repr(config), "model": label, "adapter": adapter,
                "ci": "accuracy: Wilson 95%; loss: mean and standard error"}
    written = write_table(main_rows, stems["main"], metadata=metadata)
    if sweep_rows:
        written += write_table(sweep_rows, stems["layers"], metadata=metadata)
    for path in partial.values():
        path.with_suffix(".csv").unlink(missing_ok=True)
    elapsed = time.perf_counter() - started

    print(f"\nedge patching, {label}{' + ' + adapter if adapter else ''}: accuracy [Wilson 95%], loss ± s.e.\n")
    print(to_markdown(summary_table(main_rows)))
    if sweep_rows:
        print("per-layer sweep, layers whose edges alone raise the loss most:\n")
        print(to_markdown(sweep_summary(sweep_rows)))
    for line in claim_summary(main_rows):
        print(line)
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n{elapsed:.0f} s on {os.cpu_count()} CPU cores (load average {load}); wrote "
          + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
