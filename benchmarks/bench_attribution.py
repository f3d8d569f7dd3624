"""Attribution screens (one forward + one backward pass per batch) vs the exact single-head sweep
over all 270 heads of the embedded model on UF: the time ratio (alternated runs), and how well
each screen ranks heads like the exact sweep (Spearman over all heads of the change in answer
log-probability, overlap of the 10 heads whose ablation lowers it most), for zero and mean
ablation. The screens: AtP* (the default: QK fix, `--qk-rows` pattern rows per prompt) and plain
first-order attribution patching. Targets: Spearman >= 0.8 and >= 8 of the exact top 10 at >= 20x.

`--variants` adds other estimators as further sides of the same timed comparison:
`igK` integrated gradients with K points on the path where every head moves towards its ablation
at once; `recheckK` the AtP* screen followed by the exact sweep of its K flagged heads (largest
estimated change), whose exact values replace their estimates.

The exact sweep dominates the run time (about 30 s per prompt and run on an idle 2-core
machine); the default (2 prompts, A/B timing on zero ablation only, mean ablation validated from
one run of each) takes about 5 minutes. `--n 8 --time-kinds zero,mean --variants ig2,recheck10`
is the full comparison (about 40 minutes)."""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _harness import add_timing_args, compare_many, format_load, load_average, print_header  # noqa: E402

from interp.interventions.ablation import compute_head_means  # noqa: E402
from interp.interventions.attribution import DEFAULT_QK_ROWS, agreement, attribution_sweep, recheck  # noqa: E402
from interp.measure.encoding import encode_for  # noqa: E402
from interp.measure.evaluate import task_prompts  # noqa: E402
from interp.models import load_model  # noqa: E402
from interp.prompts import PromptConfig  # noqa: E402
from interp.interventions.sweep import head_sweep  # noqa: E402

EXACT = "exact head_sweep"


def parse_variants(text: str) -> list[str]:
    variants = [v for v in text.split(",") if v]
    for v in variants:
        if not re.fullmatch(r"ig[1-9]\d*|recheck\d+", v):
            raise argparse.ArgumentTypeError(f"variant {v!r}: expected igK (e.g. ig2) or recheckK (e.g. recheck10)")
    return variants


def estimators(model, encoded, kind, means, batch_size, variants, qk_rows):
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
            k = int(variant[len("recheck"):])
            table[f"AtP* + exact recheck of {k} heads"] = lambda k=k: recheck(model, encoded, screen(), k, means,
                                                                               batch_size, progress=False)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="UF")
    parser.add_argument("--length", type=int, default=10)
    parser.add_argument("--n", type=int, default=2, help="prompts (default: 2)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--kinds", default="zero,mean", help="ablations to validate (default: zero,mean)")
    parser.add_argument("--time-kinds", default="zero", help="ablations to time in alternated runs (default: zero)")
    parser.add_argument("--variants", type=parse_variants, default=[], help="extra estimators, e.g. ig2,recheck10")
    parser.add_argument("--k", type=int, default=10, help="top-k overlap (default: 10)")
    parser.add_argument("--qk-rows", type=int, default=DEFAULT_QK_ROWS,
                        help=f"AtP*: pattern rows per prompt through the softmax (default: {DEFAULT_QK_ROWS})")
    add_timing_args(parser)
    args = parser.parse_args()
    kinds, time_kinds = args.kinds.split(","), set(args.time_kinds.split(","))
    model = load_model(device="cpu")
    config = PromptConfig()
    encoded = encode_for(model, task_prompts(model, args.task, args.length, args.n, 0, config), config)
    reference = encode_for(model, task_prompts(model, args.task, args.length, args.n, 10_000, config), config)
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    print_header(f"bench_attribution: {args.task} at length {args.length}, {args.n} prompts of "
                 f"{max(len(p.ids) for p in encoded)} tokens, all {n_layers * n_heads} heads")
    means = compute_head_means(model, reference, progress=False) if "mean" in kinds else None
    summary = []
    for kind in kinds:
        sides = estimators(model, encoded, kind, means, args.batch_size, args.variants, args.qk_rows)

        def exact():
            return head_sweep(model, encoded, kind=kind, means=means, batch_size=args.batch_size, progress=False)

        if kind in time_kinds:
            result = compare_many([*sides.items(), (EXACT, exact)], repeats=args.repeats, warmup=args.warmup,
                                  title=f"estimators vs the exact sweep, {kind} ablation")
            outputs = {side.name: side.output for side in result.sides}
            ratios = {side.name: f"{result.b.median / side.median:.1f}x "
                                 f"({min(result.ratios_of(side)):.1f}-{max(result.ratios_of(side)):.1f})"
                      for side in result.sides[:-1]}
        else:  # one untimed-warm-up run each: indicative only
            load, outputs, seconds = load_average(), {}, {}
            for name, fn in [*sides.items(), (EXACT, exact)]:
                start = time.perf_counter()
                outputs[name] = fn()
                seconds[name] = time.perf_counter() - start
            ratios = {name: f"{seconds[EXACT] / seconds[name]:.1f}x (single runs, load {format_load(load)})"
                      for name in sides}
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
    main()
