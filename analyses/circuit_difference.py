"""Two published circuits of one model compared (UF against UB by default): edges one has and the other
lacks, by the role of their position and the kinds of their reader and writer, and whether the model's
named heads (by default the top 3 of each head score in its head_scores table: induction,
anti-induction, duplicate-token x V-composition) are wired to the answer in each circuit.

    python analyses/circuit_difference.py --model smollm2-135m --variant few-shot
    python analyses/circuit_difference.py --model scratch-ub --heads a0.1,a1.2

No model runs: it reads results/circuit_<model>_<task>[_<variant>].csv (analyses/find_circuit.py) and
writes circuit_difference_<model>[_<variant>] and circuit_wiring_<model>[_<variant>] (.csv/.json/.md). Circuits
of different sizes are compared by their top edges, as many as the smaller one has (``edges_each``).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from interp.cli import Parser, add_output_args, existing_dir, fail, run
from interp.core.naming import model_label, result_stem
from interp.core.tables import read_csv, to_markdown, write_table
from interp.experiments.circuit_difference import circuit_difference, head_wiring, heads_per_kv_head

ROOT = Path(__file__).resolve().parents[1]
HEAD_SCORES = ("induction", "anti_induction", "duplicate_v_composition")
HEAD = re.compile(r"a\d+\.\d+")


def _heads(text: str) -> list[str]:
    heads = [h.strip() for h in text.split(",") if h.strip()]
    if not heads or any(not HEAD.fullmatch(h) for h in heads):
        raise ValueError(f"expected heads as a<layer>.<head> separated by commas (a8.0,a9.3), got {text!r}")
    return heads


def main(argv: list[str] | None = None) -> int:
    parser = Parser(__doc__)
    parser.add_argument("--model", required=True, help="the model label of the published circuits (smollm2-135m)")
    parser.add_argument("--tasks", default="UF,UB", help="the two tasks compared, first,second (default UF,UB)")
    parser.add_argument("--variant", default="", help="the circuits' format variant in their file names (few-shot)")
    parser.add_argument("--length", type=int, default=None, help="the copy length compared (default: the first both have)")
    parser.add_argument("--heads", default=None, help="heads to trace, a8.0,a9.3 (default: top 3 of each head score)")
    parser.add_argument("--results", type=existing_dir, default=ROOT / "results", help="folder of the published circuits")
    add_output_args(parser)
    args = parser.parse_args(argv)
    tasks = [t.strip().upper() for t in args.tasks.split(",")]
    if len(tasks) != 2 or len(set(tasks)) != 2:
        fail(parser, "--tasks", f"expected two different tasks, first,second; got {args.tasks!r}")
    heads = None
    if args.heads is not None:
        try:
            heads = _heads(args.heads)
        except ValueError as err:
            fail(parser, "--heads", str(err))
    label = model_label(args.model)
    variant = [args.variant] if args.variant else []
    tables = {}
    for task in tasks:
        path = result_stem(args.results, "circuit", label, variant=[task] + variant).with_suffix(".csv")
        if not path.exists():
            fail(parser, "--model", f"no published circuit {path} (run analyses/find_circuit.py --model {args.model} "
                                    f"--task {task} and publish it)")
        tables[task] = read_csv(path, required=("length", "rank", "pos", "role", "reader", "writer", "score"))
    lengths = sorted({int(r["length"]) for r in tables[tasks[0]]} & {int(r["length"]) for r in tables[tasks[1]]})
    length = args.length if args.length is not None else (lengths[0] if lengths else None)
    if length not in lengths:
        fail(parser, "--length", f"expected a length both circuits have ({lengths or 'none'}), got {length}")
    circuits = {t: [r for r in tables[t] if int(r["length"]) == length and r.get("counterfactual", "corrupt") == "corrupt"]
                for t in tasks}
    # circuits of different sizes differ by size alone: compare each one's top edges, as many as the smaller has
    size = min(len(rows) for rows in circuits.values())
    circuits = {t: [r for r in rows if int(r["rank"]) <= size] for t, rows in circuits.items()}
    labels = {str(r["reader"]) for rows in circuits.values() for r in rows} | {str(r["writer"]) for rows in circuits.values() for r in rows}
    edges_csv = result_stem(args.results, "circuit_edges", label, variant=[tasks[0]] + variant).with_suffix(".csv")
    if edges_csv.exists():  # every reader and writer kind, for the key/value grouping
        labels |= {str(r[c]) for r in read_csv(edges_csv, required=("reader", "writer")) for c in ("reader", "writer")}
    try:
        group = heads_per_kv_head(labels)
    except ValueError:
        group = 1  # no key/value reader in sight: one per head
    if heads is None:
        scores_csv = result_stem(args.results, "head_scores", label).with_suffix(".csv")
        if not scores_csv.exists():
            fail(parser, "--heads", f"no {scores_csv} to take the default heads from; name them with --heads")
        scores = read_csv(scores_csv, required=("layer", "head"))
        heads = list(dict.fromkeys(f"a{r['layer']}.{r['head']}" for column in HEAD_SCORES if column in scores[0]
                                   for r in sorted(scores, key=lambda r: -float(r[column]))[:3]))
    meta = {"model": label, "length": length, "edges_each": size}
    difference = [meta | row for row in circuit_difference(circuits[tasks[0]], circuits[tasks[1]], tuple(tasks))]
    wiring = [meta | row for row in head_wiring(circuits, heads, group)]
    metadata = {"model": label, "tasks": tasks, "length": length, "heads_per_kv": group}
    written = write_table(difference, result_stem(args.out, "circuit_difference", label, variant=variant), metadata=metadata)
    written += write_table(wiring, result_stem(args.out, "circuit_wiring", label, variant=variant), metadata=metadata)
    if not args.quiet:
        print(to_markdown(difference[:12]))
        print()
        print(to_markdown(wiring))
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
