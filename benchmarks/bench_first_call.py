"""Is the first ``evaluate_task`` of a task slower than the next ones? Fresh processes (so nothing
is warm), each loading the model and timing ``evaluate_task`` on two tasks, twice each, in an
order that alternates from one process to the next (A A B B, then B B A A), so that the first
call of the process, the first call of a task that is not the process's first, and repeated
calls are each measured under the same load.

Prints one line per process (its call times), then the medians (min-max) of the three kinds of
call side by side, the load average and the machine, and a closing `RESULT` line: first call of
the process and first call of a task, each against the repeated calls (median ratio).

    python benchmarks/bench_first_call.py
    python benchmarks/bench_first_call.py --tasks UF,UR --length 10 --n 8 --processes 6"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from interp.cli import Parser, positive_int, run, task_list

sys.path.insert(0, str(Path(__file__).parent))  # benchmarks/ is no package: its shared modules sit here
from _machine import format_load, load_average, machine_line  # noqa: E402

# One process's work: load, then time each call; what it prints is one JSON line.
CHILD = """
import json, sys, time
from interp import evaluate_task, load_model
model_name, order, length, n = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), int(sys.argv[4])
model = load_model(model_name, device="cpu")
times = []
for task in order:
    start = time.perf_counter()
    evaluate_task(model, task, length, n_examples=n)
    times.append(time.perf_counter() - start)
print(json.dumps(times))
"""


def call_kinds(order: list[str], times: list[float]) -> dict[str, list[float]]:
    """Each call's time under its kind: the process's first call, a later task's first call, a repeat.

    >>> call_kinds(["UF", "UF", "UB", "UB"], [9.0, 1.0, 3.0, 1.5])
    {'first of process': [9.0], 'first of task': [3.0], 'repeat': [1.0, 1.5]}
    """
    kinds: dict[str, list[float]] = {"first of process": [], "first of task": [], "repeat": []}
    seen: set[str] = set()
    for i, (task, seconds) in enumerate(zip(order, times)):
        kind = "first of process" if i == 0 else "repeat" if task in seen else "first of task"
        kinds[kind].append(seconds)
        seen.add(task)
    return kinds


def main(argv: list[str] | None = None) -> int:
    parser = Parser(__doc__)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--tasks", type=task_list, default=["UF", "UB"], help="two tasks (default UF,UB)")
    parser.add_argument("--length", type=positive_int, default=5)
    parser.add_argument("--n", type=positive_int, default=2, help="examples per call (default 2)")
    parser.add_argument("--processes", type=positive_int, default=4, help="fresh processes (default 4)")
    args = parser.parse_args(argv)
    if len(args.tasks) != 2:
        parser.error(f"argument --tasks: expected two tasks, got {args.tasks}")
    first, second = args.tasks
    load_before = load_average()
    kinds: dict[str, list[float]] = {}
    for p in range(args.processes):
        order = [first, first, second, second] if p % 2 == 0 else [second, second, first, first]
        done = subprocess.run([sys.executable, "-c", CHILD, args.model, ",".join(order), str(args.length), str(args.n)],
                              capture_output=True, text=True, check=True, env=os.environ.copy())
        times = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"process {p + 1}: " + ", ".join(f"{t} {s:.2f} s" for t, s in zip(order, times)), flush=True)
        for kind, values in call_kinds(order, times).items():
            kinds.setdefault(kind, []).extend(values)
    print("\n| call | median s (min-max) | n |\n|---|---|---|")
    for kind, values in kinds.items():
        print(f"| {kind} | {statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f}) | {len(values)} |")
    print(f"\nload before {format_load(load_before)}, after {format_load(load_average())}; "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; {machine_line()}")
    repeat = statistics.median(kinds["repeat"])
    print(f"RESULT first of process / repeat {statistics.median(kinds['first of process']) / repeat:.2f}x, "
          f"first of task / repeat {statistics.median(kinds['first of task']) / repeat:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
