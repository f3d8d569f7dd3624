"""Two published circuits of one model compared (UF against UB by default): edges one has and the other lacks, by
the role of their position and the kinds of their reader and writer (attention reads by the role they read), and
whether the model's named heads (by default the top 3 of each head score in its head_scores table: induction,
anti-induction, duplicate-token x V-composition) are wired to the answer in each circuit; printed in words.

    python analyses/circuit_difference.py --model smollm2-135m       # the one pair of UF and UB circuits published
    python analyses/circuit_difference.py --model scratch-ub --length 5 --method masks --heads a0.1,a1.2

No model runs: it reads the circuits analyses/find_circuit.py writes,
results/circuit_<model>_<task>[_<format>][_<counterfactual>]_L<length>_<method>.json, and picks the two tasks'
circuits at one format and counterfactual (``--variant``: ``few-shot``; ``''`` for single-shot), length
(``--length``) and method (``--method``): each defaults to the only one both circuits are published under, and
where there are several the error lists them. Every circuit is checked to be the one its file name says (model,
task, method, length, variant) and every edge against the model's head_scores table (its own, or its base
model's for ``model+adapter``): a reader or writer the model lacks, a score that is not a finite number, or a
second task's file holding the first's circuit is refused in one line.

Writes circuit_difference_<model>_<task>-<task>[_<variant>]_L<length>_<method> (one row per group: edges each
circuit has there, shared, one-sided, each circuit's share of its summed |score|) and circuit_wiring_<same> (per
named head and circuit: edges out, in, attention reads, wired to the logits) as .csv/.json/.md.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from interp.cli import Parser, add_output_args, existing_dir, fail, positive_int, run

ROOT = Path(__file__).resolve().parents[1]
HEAD_SCORES = ("induction", "anti_induction", "duplicate_v_composition")
HEAD = re.compile(r"a\d+\.\d+")
# The library's names (interp.experiments.circuit_pair, interp.interventions.circuits.find), repeated so that the
# arguments are checked before torch is imported.
TASKS = ("UF", "UB", "UR", "UL")
METHODS = ("masks", "greedy", "top-k")


def _heads(text: str) -> list[str]:
    heads = [h.strip() for h in text.split(",") if h.strip()]
    if not heads or any(not HEAD.fullmatch(h) for h in heads):
        raise ValueError(f"expected heads as a<layer>.<head> separated by commas (a8.0,a9.3), got {text!r}")
    return heads


def _head_scores(parser: Parser, results: Path, label: str) -> tuple[Path, list[dict]]:
    """The model's head-score table (its base model's for ``model+adapter``: an adapter adds no head)."""
    from interp.core.naming import result_stem
    from interp.core.published import read_published
    from interp.core.tables import stem_file

    names = list(dict.fromkeys([label, label.split("+")[0]]))
    for name in names:
        path = stem_file(result_stem(results, "head_scores", name), "csv")
        if path.exists():
            return path, read_published(path)
    fail(parser, "--model", f"no {' or '.join(f'head_scores_{n}.csv' for n in names)} in {results} to check the circuits' "
                            f"heads against (run analyses/score_heads.py --model {label.split('+')[0]} and publish it)")


def build_parser() -> Parser:
    parser = Parser(__doc__)
    parser.add_argument("--model", required=True, help="the model label of the published circuits (smollm2-135m)")
    parser.add_argument("--tasks", default="UF,UB", help="the two tasks compared, first,second (default UF,UB)")
    parser.add_argument("--variant", default=None,
                        help="the circuits' format and counterfactual in their file names (few-shot; '' for single-shot "
                             "and corrupt); default: the only one both circuits are published under")
    parser.add_argument("--length", type=positive_int, default=None, help="the copy length (default: the only one both have)")
    parser.add_argument("--method", choices=METHODS, default=None, help="the selection method (default: the only one both have)")
    parser.add_argument("--heads", default=None, help="heads to trace, a8.0,a9.3 (default: top 3 of each head score)")
    parser.add_argument("--results", type=existing_dir, default=ROOT / "results", help="folder of the published circuits")
    add_output_args(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    tasks = [t.strip().upper() for t in args.tasks.split(",")]
    if len(tasks) != 2 or len(set(tasks)) != 2 or not set(tasks) <= set(TASKS):
        fail(parser, "--tasks", f"expected two different tasks of {', '.join(TASKS)}, first,second; got {args.tasks!r}")
    heads = None
    if args.heads is not None:
        try:
            heads = _heads(args.heads)
        except ValueError as err:
            fail(parser, "--heads", str(err))
    # the library once the arguments are sound (a circuit's type imports torch)
    from interp.core.naming import model_label, result_stem
    from interp.core.tables import to_markdown, write_table
    from interp.experiments.circuit_difference import circuit_difference, difference_words, head_wiring
    from interp.experiments.circuit_pair import (ModelHeads, check_circuit, check_distinct, choose_pair, heads_per_kv_head,
                                                 published_circuit_files)
    from interp.figures.circuit_files import read_circuit, read_ranking

    label = model_label(args.model)
    try:
        pair = choose_pair(published_circuit_files(args.results, label), tasks, args.variant, args.length, args.method,
                           str(args.results))
    except ValueError as err:
        argument, _, message = str(err).partition(": ")
        fail(parser, argument, message)
    scores_path, scores = _head_scores(parser, args.results, label)
    model = ModelHeads.from_scores(scores, scores_path.name)
    if heads is not None and (problems := [p for h in heads if (p := model.head_problem(h))]):
        fail(parser, "--heads", problems[0])
    circuits, seen = {}, []
    for file in pair:
        circuit = read_circuit(file.path)
        if circuit is None:
            raise ValueError(f"results file {file.path}: not a saved circuit (expected the JSON analyses/find_circuit.py writes)")
        circuits[file.task] = circuit
        ranking = file.path.with_name(f"circuit_ranking_{file.path.stem.removeprefix('circuit_')}.csv")
        seen += list(circuit.edges) + list(read_ranking(ranking) if ranking.is_file() else ())
    group = heads_per_kv_head(seen, model.n_heads)  # the attention reads say which query heads share a key/value head
    for file in pair:
        check_circuit(circuits[file.task], file, model, group)
    check_distinct(circuits, {file.task: file.path for file in pair})
    if heads is None:
        heads = list(dict.fromkeys(f"a{r['layer']}.{r['head']}" for column in HEAD_SCORES if column in scores[0]
                                   for r in sorted(scores, key=lambda r: -float(r[column]))[:3]))
    variant, length, method = pair[0].choice
    meta = {"model": label, "length": length, "method": method}
    difference = [meta | row for row in circuit_difference(circuits[tasks[0]], circuits[tasks[1]], tuple(tasks))]
    wiring = [meta | row for row in head_wiring(circuits, heads, group)]
    metadata = {"model": label, "tasks": tasks, "variant": variant, "length": length, "method": method,
                "heads_per_kv": group, "circuits": [file.path.name for file in pair]}
    parts = [f"{tasks[0]}-{tasks[1]}"] + ([variant] if variant else []) + [f"L{length}", method]
    written = write_table(difference, result_stem(args.out, "circuit_difference", label, variant=parts), metadata=metadata)
    written += write_table(wiring, result_stem(args.out, "circuit_wiring", label, variant=parts), metadata=metadata)
    if not args.quiet:
        print(to_markdown(difference[:12]))
        print()
        print(to_markdown(wiring))
        print()
    print(f"{tasks[0]} against {tasks[1]} on {label} ({variant.replace('_', ', ') or 'single-shot'}, length {length}, {method}): "
          + difference_words(circuits, difference, wiring))
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
