"""Attribution screens (one forward + one backward pass per batch) vs the exact single-head sweep
over all 270 heads of the embedded model on UF: the time ratio (alternated runs), and how well
each screen ranks heads like the exact sweep (Spearman over all heads of the change in answer
log-probability, overlap of the 10 heads whose ablation lowers it most), for zero and mean
ablation. The screens: AtP* (the default: QK fix, `--qk-rows` pattern rows per prompt) and plain
first-order attribution patching. Targets: Spearman >= 0.8 and >= 8 of the exact top 10 at >= 20x.

`--variants` adds other estimators as further sides of the same timed comparison:
`igK` integrated gradients with K points on the path where every head moves towards its ablation
at once; `recheckK` the AtP* screen followed by the exact sweep of its K flagged heads (largest
estimated change), whose exact values replace their estimates; `fo-recheckK` the same after the
first-order screen.

The exact sweep dominates the run time (about 30 s per prompt and run on an idle 2-core
machine); the default (2 prompts, A/B timing on zero ablation only, mean ablation validated from
one run of each) takes about 5 minutes. `--n 8 --time-kinds zero,mean --variants ig2,recheck10`
is the full comparison (about 40 minutes).

Prints, per ablation kind, the A/B table (or single-run times for kinds not in `--time-kinds`), the
exact top-k heads, each estimator's time ratio, Spearman and top-k overlap, and a closing `RESULT` line.

    python benchmarks/bench_attribution.py
    python benchmarks/bench_attribution.py --n 8 --time-kinds zero,mean --variants ig2,recheck10"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

from interp.cli import ArgumentTypeError, Namespace, Parser, fail, name_list, positive_int, run
from interp.core.lm import LanguageModel
from interp.interventions.ablation import ABLATION_KINDS, compute_head_means
from interp.interventions.attribution import DEFAULT_QK_ROWS, agreement, attribution_sweep
from interp.interventions.sweep import head_sweep
from interp.interventions.verify import verify_screen
from interp.measure.encoding import encode_for
from interp.measure.evaluate import task_prompts
from interp.models import load_model
from interp.prompts import PromptConfig

sys.path.insert(0, str(Path(__file__).parent))  # benchmarks/ is no package: its shared modules sit here
from _harness import add_task_args, add_timing_args, compare_many, print_header  # noqa: E402
from _machine import format_load, load_average  # noqa: E402

EXACT = "exact head_sweep"
ablation_kinds = name_list(ABLATION_KINDS, "ablation kinds", allow_all=False)


def parse_variants(text: str) -> list[str]:
    """``"ig2,recheck10"`` -> the extra estimators' names; ``""`` for none.

    >>> parse_variants("ig2,recheck10,fo-recheck8")
    ['ig2', 'recheck10', 'fo-recheck8']
    """
    variants = [v for v in text.replace(" ", ",").split(",") if v]
    for v in variants:
        if not re.fullmatch(r"ig[1-9]\d*|(fo-)?recheck[1-9]\d*", v):
            raise ArgumentTypeError(f"variant {v!r}: expected igK (e.g. ig2), recheckK (e.g. recheck10) or "
                                    f"fo-recheckK (e.g. fo-recheck8), K >= 1")
    return variants


def parse_time_kinds(text: str) -> list[str]:
    """Ablation kinds to time, or none (``""``: every kind is run once, untimed).

    >>> parse_time_kinds(""), parse_time_kinds("zero")
    ([], ['zero'])
    """
    return ablation_kinds(text) if text.strip() else []


def build_parser() -> Parser:
    """The command line, refused in one line (exit 2) before the model is loaded."""
    parser = add_task_args(Parser(__doc__), length=10, n=2)
    parser.add_argument("--kinds", type=ablation_kinds, default="zero,mean",
                        help="ablations to validate (default: zero,mean)")
    parser.add_argument("--time-kinds", type=parse_time_kinds, default=None,
                        help="ablations among --kinds to time in alternated runs; '' for none "
                             "(default: the first of --kinds)")
    parser.add_argument("--variants", type=parse_variants, default=[], help="extra estimators, e.g. ig2,recheck10")
    parser.add_argument("--k", type=positive_int, default=10, help="top-k overlap (default: 10)")
    parser.add_argument("--qk-rows", type=positive_int, default=DEFAULT_QK_ROWS,
                        help=f"AtP*: pattern rows per prompt through the softmax (default: {DEFAULT_QK_ROWS})")
    return add_timing_args(parser)


def parse_args(argv: list[str] | None = None) -> Namespace:
    """The arguments, with ``--time-kinds`` checked against ``--kinds``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.time_kinds is None:
        args.time_kinds = args.kinds[:1]
    untested = [kind for kind in args.time_kinds if kind not in args.kinds]
    if untested:
        fail(parser, "--time-kinds", f"{untested} not among --kinds {args.kinds}")
    return args


def estimators(model: LanguageModel, encoded, kind: str, means, batch_size: int, variants: list[str],
               qk_rows: int) -> dict[str, Callable]:
    """name -> function returning a layer x head table of estimated changes in answer log-prob."""

    def screen(steps=1, method="atp*"):
        return attribution_sweep(model, encoded, kind, means, batch_size=batch_size, steps=steps, progress=False,
                                 screen=method, qk_rows=qk_rows)

    table = {f"AtP* ({qk_rows} QK rows)": lambda: screen().delta_logprob(),
             "first-order": lambda: screen(method="first-order").delta_logprob()}
    for variant in variants:
        if variant.startswith("ig"):
            table[f"integrated gradients, {variant[2:]} points"] = lambda k=int(variant[2:]): screen(
                k, "first-order").delta_logprob()
        else:
            method = "first-order" if variant.startswith("fo-") else "atp*"
            k = int(variant.split("recheck")[1])
            label = "first-order" if method == "first-order" else "AtP*"
            table[f"{label} + exact recheck of {k} heads"] = lambda k=k, method=method: verify_screen(
                model, encoded, screen(method=method), k, means, batch_size).delta_logprob()
    return table


def timed_outputs(sides: dict[str, Callable], exact: Callable, timed: bool, args: Namespace,
                  kind: str) -> tuple[dict, dict[str, str]]:
    """(name -> output, name -> time ratio against the exact sweep): alternated A/B rounds when
    ``timed``, else one run of each (indicative only)."""
    if timed:
        result = compare_many([*sides.items(), (EXACT, exact)], repeats=args.repeats, warmup=args.warmup,
                              title=f"estimators vs the exact sweep, {kind} ablation")
        ratios = {side.name: f"{result.b.median / side.median:.1f}x "
                             f"({min(result.ratios_of(side)):.1f}-{max(result.ratios_of(side)):.1f})"
                  for side in result.sides[:-1]}
        return {side.name: side.output for side in result.sides}, ratios
    load, outputs, seconds = load_average(), {}, {}
    for name, fn in [*sides.items(), (EXACT, exact)]:
        start = time.perf_counter()
        outputs[name] = fn()
        seconds[name] = time.perf_counter() - start
    return outputs, {name: f"{seconds[EXACT] / seconds[name]:.1f}x (single runs, load {format_load(load)})"
                     for name in sides}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    model = load_model(device="cpu")
    config = PromptConfig()
    encoded = encode_for(model, task_prompts(model, args.task, args.length, args.n, 0, config), config)
    reference = encode_for(model, task_prompts(model, args.task, args.length, args.n, 10_000, config), config)
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    print_header(f"bench_attribution: {args.task} at length {args.length}, {args.n} prompts of "
                 f"{max(len(p.ids) for p in encoded)} tokens, all {n_layers * n_heads} heads")
    means = compute_head_means(model, reference, progress=False) if "mean" in args.kinds else None
    summary = []
    for kind in args.kinds:
        sides = estimators(model, encoded, kind, means, args.batch_size, args.variants, args.qk_rows)

        def exact():
            return head_sweep(model, encoded, kind=kind, means=means, batch_size=args.batch_size, progress=False)

        outputs, ratios = timed_outputs(sides, exact, kind in args.time_kinds, args, kind)
        truth = outputs[EXACT].delta_logprob_table(n_layers, n_heads)
        print(f"exact top {args.k} ({kind}): {' '.join(map(str, agreement(truth, truth, args.k).top_exact))}")
        for name in sides:
            match = agreement(outputs[name], truth, args.k)
            print(f"{kind} | {name}: time ratio {ratios[name]}; {match.summary()}")
            print(f"    its top {args.k}: {' '.join(map(str, match.top_estimate))}")
            summary.append(f"{kind} {name}: {ratios[name]}, Spearman {match.spearman:.2f}, "
                           f"top-{args.k} {match.overlap}/{args.k}")
    print("RESULT " + "; ".join(summary))


if __name__ == "__main__":
    sys.exit(run(main))
