"""`make run`'s ablation study (4 tasks x 11 conditions = 44 cells on the embedded SmolLM2-135M)
and a directional grid (tasks x lengths, one cell each), one cell after the other in this process
vs on a local Ray instance with `--workers` actors, each pinned to its share of the cores:
identical rows (checked), the time ratio (A/B alternated), and where the time goes.

Each Ray round is what a user's run pays: starting the instance and the actors, every actor
loading its own model, the cells, and shutting down; the head scores are computed once (untimed)
and shared by both sides. Then, on one warm pool: the start-up alone, the per-cell overhead of
Ray (a cell that does nothing, in flight two per actor, against the same cells serially) and the
peak resident memory of each actor (VmHWM: one model per worker).

Prints the A/B table, whether the tables are identical, the overhead lines, and a closing
`RESULT` line with the speed-up (median, min-max).

    python benchmarks/bench_executor.py               # n = 30 (make run's), 3 rounds
    python benchmarks/bench_executor.py --n 10 --repeats 5
    python benchmarks/bench_executor.py --studies directional --directional-n 20"""

from __future__ import annotations

import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path

from interp.cli import Parser, name_list, positive_int, positive_int_list, run
from interp.data.tasks import get_task
from interp.core.executor import ModelSource, RayExecutor, SerialExecutor, import_ray
from interp.experiments import AblationConfig, ablation_study, directional_bias
from interp.measure.head_scores import score_heads
from interp.models import load_model

sys.path.insert(0, str(Path(__file__).parent))  # benchmarks/ is no package: its shared modules sit here
from _harness import add_timing_args, compare, print_header  # noqa: E402


def build_parser() -> Parser:
    """The command line, refused in one line (exit 2) before the model is loaded."""
    parser = Parser(__doc__)
    parser.add_argument("--n", type=positive_int, default=30, help="examples per task (default: 30, as make run)")
    parser.add_argument("--workers", type=positive_int, default=2, help="Ray actors (default: 2)")
    parser.add_argument("--score-sequences", type=positive_int, default=100,
                        help="sequences for the head scores (default: 100, as make run)")
    parser.add_argument("--noop-cells", type=positive_int, default=200, help="cells of the overhead probe (default: 200)")
    parser.add_argument("--studies", type=name_list(STUDIES, "studies"), default=list(STUDIES),
                        help="which studies to time (default: ablation,directional)")
    parser.add_argument("--directional-n", type=positive_int, default=20, help="examples per directional cell (default: 20)")
    parser.add_argument("--directional-lengths", type=positive_int_list, default=[5, 10, 20],
                        help="lengths of the directional grid (default: 5,10,20)")
    return add_timing_args(parser)


STUDIES = ("ablation", "directional")
DIRECTIONAL_TASKS = ("UF", "UB", "UR", "UL")


def _noop(model, shared, item):
    return item


def _peak_rss_mb(pid: int) -> float:
    """The peak resident memory of a local process (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _serial_vs_ray(title: str, study, source: ModelSource, args) -> tuple[bool, list[float]]:
    """Alternate ``study()`` here and on a fresh Ray pool; (identical rows, serial / Ray per round)."""
    def on_ray() -> list:
        with RayExecutor(workers=args.workers) as executor:
            return study(executor=executor, model_source=source)

    result = compare("serial, this process", study, f"Ray, {args.workers} actors (start, load, cells, stop)", on_ray,
                     repeats=args.repeats, warmup=args.warmup, flops=False, title=f"{title}: serial vs Ray")
    same = result.a.output == result.b.output
    print(f"{len(result.a.output)} cells; identical rows: {same}")
    return same, [a / b for a, b in zip(result.a.times, result.b.times)]  # > 1: Ray faster


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    import_ray()
    config = AblationConfig(n_examples=args.n)
    source = ModelSource("smollm2 cpu", partial(load_model, device="cpu"))
    print_header(f"bench_executor: tasks {','.join(config.tasks)} at lengths {config.lengths}, n={args.n}, "
                 f"k={config.k}, kinds {','.join(config.kinds)}, random seeds {config.random_seeds}; "
                 f"serial vs Ray with {args.workers} actors")
    model = load_model(device="cpu")
    studies = {}
    if "ablation" in args.studies:
        scores = score_heads(model, n_sequences=args.score_sequences, seed=config.seed, progress=False)
        studies["ablation"] = ("ablation study", partial(ablation_study, model, scores, config))
    if "directional" in args.studies:
        tasks = [get_task(name) for name in DIRECTIONAL_TASKS]
        studies["directional"] = (f"directional grid ({len(tasks)} tasks x lengths {args.directional_lengths}, "
                                  f"n={args.directional_n})",
                                  partial(directional_bias, model, tasks, args.directional_lengths,
                                          n_examples=args.directional_n))
    ratios: dict[str, list[float]] = {}
    same: dict[str, bool] = {}
    for name, (title, study) in studies.items():
        same[name], ratios[name] = _serial_vs_ray(title, study, source, args)

    started = time.perf_counter()
    with RayExecutor(workers=args.workers) as executor:
        list(executor.map(_noop, [0], source))  # instance up, actors up, models loaded
        ready = time.perf_counter() - started
        items = list(range(args.noop_cells))
        ray_cells, serial_cells = [], []
        for _ in range(3):
            t = time.perf_counter()
            list(executor.map(_noop, items, source))
            ray_cells.append((time.perf_counter() - t) / len(items))
            t = time.perf_counter()
            list(SerialExecutor().map(_noop, items, local_model=model))
            serial_cells.append((time.perf_counter() - t) / len(items))
        memory = [_peak_rss_mb(pid) for pid in executor.worker_pids()]
    print(f"start-up (instance, {args.workers} actors, one model each): {ready:.1f} s")
    print(f"per-cell overhead, empty cell: Ray {1e3 * statistics.median(ray_cells):.2f} ms "
          f"({1e3 * min(ray_cells):.2f}-{1e3 * max(ray_cells):.2f}), serial {1e6 * statistics.median(serial_cells):.1f} us")
    print("peak memory per actor (VmHWM): " + ", ".join(f"{m:.0f} MB" for m in memory)
          + f"; this process (serial side): {_peak_rss_mb(os.getpid()):.0f} MB")
    for study, values in ratios.items():
        print(f"RESULT {study}: serial / Ray ({args.workers} actors): median {statistics.median(values):.2f}x "
              f"({min(values):.2f}-{max(values):.2f})")
    if not all(same.values()):
        raise SystemExit("the serial and Ray rows differ: " + ", ".join(k for k, v in same.items() if not v))


if __name__ == "__main__":
    sys.exit(run(main))
