"""Two published circuits of one model compared (UF against UB by default): edges one has and the other
lacks, by the role of their position and the kinds of their reader and writer, and whether the model's
named heads (by default the top 3 of each head score in its head_scores table: induction,
anti-induction, duplicate-token x V-composition) are wired to the answer in each circuit.

    python analyses/circuit_difference.py --model smollm2-135m            # the variant both circuits have (few-shot)
    python analyses/circuit_difference.py --model scratch-ub --heads a0.1,a1.2

No model runs: it reads results/circuit_<model>_<task>[_<variant>].csv (analyses/find_circuit.py) and
writes circuit_difference_<model>[_<variant>] and circuit_wiring_<model>[_<variant>] (.csv/.json/.md). The
variant (``few-shot``; none for a single-shot run) is the one both circuits are published under, or
``--variant``. Every table is read through the validating reader, and every reader, writer and head
checked against the model's head_scores table (its own, or its base model's for ``model+adapter``).
Circuits of different sizes are compared by their top edges, as many as the smaller one has (``edges_each``).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from interp.cli import Parser, add_output_args, existing_dir, fail, run
from interp.core.naming import model_label, result_stem
from interp.core.published import published_lines, read_published
from interp.core.tables import stem_file, to_markdown, write_table
from interp.experiments.circuit_difference import (ModelHeads, check_circuit, check_distinct, choose_variant,
                                                    circuit_difference, head_wiring, heads_per_kv_head)

ROOT = Path(__file__).resolve().parents[1]
HEAD_SCORES = ("induction", "anti_induction", "duplicate_v_composition")
HEAD = re.compile(r"a\d+\.\d+")
REQUIRED = ("length", "rank", "pos", "role", "reader", "writer", "score")


def _heads(text: str) -> list[str]:
    heads = [h.strip() for h in text.split(",") if h.strip()]
    if not heads or any(not HEAD.fullmatch(h) for h in heads):
        raise ValueError(f"expected heads as a<layer>.<head> separated by commas (a8.0,a9.3), got {text!r}")
    return heads


def _head_scores(parser: Parser, results: Path, label: str) -> tuple[Path, list[dict]]:
    """The model's head-score table (its base model's for ``model+adapter``: an adapter adds no head)."""
    names = list(dict.fromkeys([label, label.split("+")[0]]))
    for name in names:
        path = stem_file(result_stem(results, "head_scores", name), "csv")
        if path.exists():
            return path, read_published(path)
    fail(parser, "--model", f"no {' or '.join(f'head_scores_{n}.csv' for n in names)} in {results} to check the circuits' "
                            f"heads against (run analyses/score_heads.py --model {label.split('+')[0]} and publish it)")


def main(argv: list[str] | None = None) -> int:
    parser = Parser(__doc__)
    parser.add_argument("--model", required=True, help="the model label of the published circuits (smollm2-135m)")
    parser.add_argument("--tasks", default="UF,UB", help="the two tasks compared, first,second (default UF,UB)")
    parser.add_argument("--variant", default=None,
                        help="the circuits' variant in their file names (few-shot; '' for none); default: the one "
                             "variant both circuits are published under")
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
    try:
        chosen = choose_variant(args.results, label, tasks, args.variant)
    except ValueError as err:
        argument, _, message = str(err).partition(": ")
        fail(parser, argument, message)
    variant = [chosen] if chosen else []
    scores_path, scores = _head_scores(parser, args.results, label)
    model = ModelHeads.from_scores(scores, scores_path.name)
    if heads is not None and (problems := [p for h in heads if (p := model.head_problem(h))]):
        fail(parser, "--heads", problems[0])
    paths = {t: stem_file(result_stem(args.results, "circuit", label, variant=[t] + variant), "csv") for t in tasks}
    lines = {t: published_lines(paths[t], "circuit") for t in tasks}
    if missing := [c for c in REQUIRED if c not in lines[tasks[0]][0][1] or c not in lines[tasks[1]][0][1]]:
        raise ValueError(f"results file {paths[tasks[0]]} or {paths[tasks[1]]} lacks column(s) {missing}; "
                         f"expected {', '.join(REQUIRED)}")
    labels = {str(r[c]) for t in tasks for _, r in lines[t] for c in ("reader", "writer")}
    edges_csv = stem_file(result_stem(args.results, "circuit_edges", label, variant=[tasks[0]] + variant), "csv")
    if edges_csv.exists():  # every reader and writer kind, for the key/value grouping
        labels |= {str(r[c]) for r in read_published(edges_csv) for c in ("reader", "writer") if c in r}
    try:  # query heads from the model's grid (a circuit's writer labels are what is being checked)
        group = heads_per_kv_head({x for x in labels if not HEAD.fullmatch(x)} | set(model.labels()))
    except ValueError:
        group = 1  # no key/value reader in sight: one per head
    tables = {t: check_circuit(lines[t], str(paths[t]), model, group) for t in tasks}
    lengths = sorted({int(r["length"]) for r in tables[tasks[0]]} & {int(r["length"]) for r in tables[tasks[1]]})
    length = args.length if args.length is not None else (lengths[0] if lengths else None)
    if length not in lengths:
        fail(parser, "--length", f"expected a length both circuits have ({lengths or 'none'}), got {length}")
    circuits = {t: [r for r in tables[t] if int(r["length"]) == length and r.get("counterfactual", "corrupt") == "corrupt"]
                for t in tasks}
    check_distinct(circuits, {t: str(paths[t]) for t in tasks})
    # circuits of different sizes differ by size alone: compare each one's top edges, as many as the smaller has
    size = min(len(rows) for rows in circuits.values())
    circuits = {t: [r for r in rows if int(r["rank"]) <= size] for t, rows in circuits.items()}
    if heads is None:
        heads = list(dict.fromkeys(f"a{r['layer']}.{r['head']}" for column in HEAD_SCORES if column in scores[0]
                                   for r in sorted(scores, key=lambda r: -float(r[column]))[:3]))
    meta = {"model": label, "length": length, "edges_each": size}
    difference = [meta | row for row in circuit_difference(circuits[tasks[0]], circuits[tasks[1]], tuple(tasks))]
    wiring = [meta | row for row in head_wiring(circuits, heads, group)]
    metadata = {"model": label, "tasks": tasks, "length": length, "heads_per_kv": group, "variant": chosen}
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
