"""The cost of verified recall on the embedded model: rank all 270 heads by the AtP* screen, then
count how many exact single-head evaluations, taken in the screen's order (largest estimated
change either way first), are spent before 9 and 10 of the exact sweep's top 10 are found.

Per setting (task x ablation kind), the two sides are timed in alternated rounds (``--repeats``):
the verified screen (the screen, then `verify_screen` with the budget that finds 9 of 10) and the
exact sweep (every head). Reported: median (min-max) of each side, the per-round ratio exact /
verified, the ratio estimated from the sweep's mean per-head cost (for 9 and 10 of 10), and the load
average before and after. Target: >= 5x less time than the exact sweep, for UF and UB, zero and mean
ablation. The whole curve (exact evaluations spent -> found) is written per setting to
`<out>/curve_<task>_<kind>.*` and the summary to `<out>/summary.*`; a setting already in
`<out>/summary.jsonl` is read back, not rerun.

Prints, per setting, the times, the exact evaluations needed for 9 and 10 of 10, the ratios to
the exact sweep and the load, and a closing `RESULT` line.

    python benchmarks/bench_verify.py
    python benchmarks/bench_verify.py --tasks UF --kinds zero --n 2 --repeats 2"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from interp.cli import Namespace, Parser, name_list, positive_int, run
from interp.core.tables import write_table
from interp.data.tasks import TASK_NAMES
from interp.interventions.ablation import ABLATION_KINDS, compute_head_means
from interp.interventions.attribution import DEFAULT_QK_ROWS, attribution_sweep
from interp.interventions.sweep import head_sweep
from interp.interventions.verify import verified_recall, verify_screen
from interp.measure.encoding import encode_for
from interp.measure.evaluate import task_prompts
from interp.models import load_model
from interp.prompts import PromptConfig

sys.path.insert(0, str(Path(__file__).parent))  # benchmarks/ is no package: its shared modules sit here
from _harness import spread, print_header  # noqa: E402
from _machine import format_load, load_average, machine_line  # noqa: E402


def build_parser() -> Parser:
    """The command line, refused in one line (exit 2) before the model is loaded."""
    parser = Parser(__doc__)
    parser.add_argument("--tasks", type=name_list(TASK_NAMES, "tasks", allow_all=False), default="UF,UB",
                        help="tasks (default: UF,UB)")
    parser.add_argument("--kinds", type=name_list(ABLATION_KINDS, "ablation kinds", allow_all=False),
                        default="zero,mean", help="ablations (default: zero,mean)")
    parser.add_argument("--length", type=positive_int, default=10, help="task length (default: 10)")
    parser.add_argument("--n", type=positive_int, default=4, help="prompts (default: 4)")
    parser.add_argument("--batch-size", type=positive_int, default=8, help="prompts per pass (default: 8)")
    parser.add_argument("--k", type=positive_int, default=10, help="the exact top k to find (default: 10)")
    parser.add_argument("--qk-rows", type=positive_int, default=DEFAULT_QK_ROWS,
                        help=f"AtP*: pattern rows per prompt through the softmax (default: {DEFAULT_QK_ROWS})")
    parser.add_argument("--repeats", type=positive_int, default=3,
                        help="alternated rounds of verified screen vs exact sweep per setting (default: 3)")
    parser.add_argument("--out", type=Path, default=Path("build/bench_verify"), help="tables (default: build/bench_verify)")
    return parser


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def one_setting(model, task: str, kind: str, args: Namespace) -> dict:
    """The curve of one setting, then the verified screen against the exact sweep, alternated.

    Round 1 is the screen, the exact sweep (whose table gives the curve and so the budget for 9 of
    10), then ``verify_screen`` with that budget: the verified side brackets the sweep. Rounds 2 ..
    ``repeats`` alternate verified side, exact sweep."""
    config = PromptConfig()
    encoded = encode_for(model, task_prompts(model, task, args.length, args.n, 0, config), config)
    means = None
    if kind == "mean":
        reference = encode_for(model, task_prompts(model, task, args.length, args.n, 10_000, config), config)
        means = compute_head_means(model, reference, progress=False)
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    n_all = n_layers * n_heads

    def screen():
        return attribution_sweep(model, encoded, kind, means, args.batch_size, progress=False, qk_rows=args.qk_rows)

    def sweep():
        return head_sweep(model, encoded, kind=kind, means=means, batch_size=args.batch_size, progress=False)

    load_before = load_average()
    screened, screen_s = timed(screen)
    exact, exact_s = timed(sweep)
    exact_table = exact.delta_logprob_table(n_layers, n_heads)
    curve = verified_recall(screened.flagged_heads(n_all), exact_table, args.k)
    need = {m: curve.needed(m) for m in (args.k - 1, args.k)}
    verified, verify_s = timed(lambda: verify_screen(model, encoded, screened, need[args.k - 1], means, args.batch_size))
    assert all(abs(r["delta_logprob"] - exact_table[r["layer"], r["head"]].item()) < 1e-5
               for r in verified.rows() if r["status"] == "verified"), "verified values differ from the sweep's"
    screens, verifies, exacts = [screen_s], [verify_s], [exact_s]
    for _ in range(args.repeats - 1):
        again, s = timed(screen)
        screens.append(s)
        verifies.append(timed(lambda: verify_screen(model, encoded, again, need[args.k - 1], means, args.batch_size))[1])
        exacts.append(timed(sweep)[1])
    load_after = load_average()
    sides = [a + b for a, b in zip(screens, verifies)]
    ratios = [e / v for e, v in zip(exacts, sides)]
    per_head = statistics.median(exacts) / n_all
    estimated = {m: statistics.median(screens) + need[m] * per_head for m in need}
    write_table(curve.rows(), args.out / f"curve_{task}_{kind}", metadata={"task": task, "kind": kind, "n": args.n})
    return {"task": task, "kind": kind, "n_prompts": args.n, "tokens": max(len(p.ids) for p in encoded),
            "rounds": args.repeats, "exact_s": spread(exacts, "{:.1f}"), "screen_s": spread(screens, "{:.1f}"),
            "per_head_s": round(per_head, 3),
            f"needed_{args.k - 1}of{args.k}": need[args.k - 1], f"needed_{args.k}of{args.k}": need[args.k],
            "to_9_measured_s": spread(sides, "{:.1f}"), "ratio_9_measured": spread(ratios),
            "ratio_9_median": round(statistics.median(ratios), 2),
            "ratio_9_estimated": round(statistics.median(exacts) / estimated[args.k - 1], 2),
            "ratio_10_estimated": round(statistics.median(exacts) / estimated[args.k], 2),
            "top_exact": " ".join(map(str, curve.top_exact)),
            "load_before": format_load(load_before), "load_after": format_load(load_after)}


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    model = load_model(device="cpu")
    print_header(f"bench_verify: {','.join(args.tasks)} x {','.join(args.kinds)} at length {args.length}, "
                 f"{args.n} prompts, all {model.cfg.n_layers * model.cfg.n_heads} heads")
    journal = args.out / "summary.jsonl"
    done = {(r["task"], r["kind"]): r for r in map(json.loads, journal.read_text().splitlines())} if journal.exists() else {}
    args.out.mkdir(parents=True, exist_ok=True)
    for kind in args.kinds:  # zero ablation of every task first: the cheaper kind lands first
        for task in args.tasks:
            if (task, kind) not in done:
                done[(task, kind)] = one_setting(model, task, kind, args)
                with journal.open("a") as f:
                    f.write(json.dumps(done[(task, kind)]) + "\n")
            row = done[(task, kind)]
            print(f"{task} {kind}: " + ", ".join(f"{k} {v}" for k, v in row.items() if k not in ("task", "kind")),
                  flush=True)
    rows = [done[(t, k)] for k in args.kinds for t in args.tasks]
    write_table(rows, args.out / "summary", metadata={"machine": machine_line(), "args": vars(args)})
    print("RESULT " + "; ".join(f"{r['task']} {r['kind']}: 9/10 after {r[f'needed_{args.k - 1}of{args.k}']} "
                                f"exact evaluations, {r['ratio_9_measured']}x" for r in rows))


if __name__ == "__main__":
    sys.exit(run(main))
