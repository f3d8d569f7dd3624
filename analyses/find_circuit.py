"""Circuit discovery: the smallest circuit (at most --max-edges edges of the role-level graph) that keeps
--target of the model's clean-vs-counterfactual gap, selected by mask optimization (``masks``, the default),
greedy pruning verified exactly (``greedy``) or the top edges by EAP-IG (``top-k``), then measured over a fixed
grid of edge fractions, with each edge's loss when removed from the circuit.

    python analyses/find_circuit.py --model planted-ub --task UB            # recovers the planted circuit
    python analyses/find_circuit.py --model scratch-ub --task UB --lengths 5 --bos yes --method masks,greedy,top-k
    python analyses/find_circuit.py --task UF --format few-shot --shots 5 --lengths 5 --n 16   # SmolLM2 (see the guide)
    python analyses/find_circuit.py --model planted-ul --task UL --lengths 8

A node of the graph is a component (head, MLP, embedding, logits) at a position role (bos, earlier shots, the
string, the separator, the copy); an edge is a writer feeding a reader at one role, or an attention read (a head
at one role reading another role through its key or its value: the paper's induction edge is
``value c -> o+1``, anti-induction ``value c -> o``). ``--grain positions`` keeps every position apart. The
counterfactual is the same prompt with another test string (``corrupt``), or every removed writer zeroed /
set to its mean. A task the model does not do (gap under 0.5 or clean accuracy under 0.25) is refused;
``--allow-weak`` finds a circuit anyway, marked. Several methods (``--method masks,greedy,top-k``) are
compared at the first one's size in the summary table.

Writes (under --out) circuit_summary_<model>_<task>[_<format>][_<counterfactual>] (one row per length and
method), circuit_curve_... (the grid), and per length and method circuit_..._L<length>_<method> (the circuit,
one row per edge; its .json loads with ``Circuit.load``) and circuit_ranking_... (the method's top 2,000
edges, for the interactive view). A stopped run started again with the same arguments resumes: finished
lengths from the summary's journal, the current length from its stage file (scores are kept before the curve).
"""

from __future__ import annotations

import os
import sys
import time

from interp.cli import Parser, add_model_args, add_output_args, fail, name_list, positive_int, positive_int_list, run, seed
from interp.cli.args import add_executor_args, executor_from_args, load_model_from_args, model_source_from_args
from interp.cli.argtypes import fraction

# The library's names (interp.interventions.circuits), repeated so that arguments are checked before torch is
# imported; tests/test_find_circuit_script.py holds them equal.
TASKS = ("UF", "UB", "UR", "UL")
METHODS = ("masks", "greedy", "top-k")
SCORES = ("eap", "eap-ig", "exact")
GRAINS = ("roles", "positions", "components")
COUNTERFACTUALS = ("corrupt", "zero", "mean")
METRICS = ("logit_diff", "logprob")
FORMATS = ("few-shot", "single-shot")
MIN_LENGTH, MAX_LENGTH = 2, 26
# Bounds on what a run costs (per length): EAP-IG takes a forward and a backward pass of every prompt per step;
# mask optimization one of half the prompts per step; every random circuit and every verified edge one pass of
# the prompts; a few-shot prompt is shots x (2 x length + 2) tokens.
MAX_STEPS, MAX_MASK_STEPS, MAX_RANDOM, MAX_SHOTS, MAX_N = 64, 2000, 20, 64, 2000

SUMMARY_COLUMNS = ["length", "method", "edges", "total_edges", "recovered", "accuracy", "clean_accuracy", "n", "cpr", "cmd",
                   "random_cpr", "unneeded_edges", "recovered_at_common", "accuracy_at_common", "seconds"]


def build_parser() -> Parser:
    parser = Parser(__doc__)
    add_model_args(parser)
    add_output_args(parser)
    add_executor_args(parser)
    parser.add_argument("--task", type=str.upper, choices=TASKS, default="UB", help="UF, UB (copying) or UR, UL (retrieval)")
    parser.add_argument("--lengths", type=positive_int_list, default=[4], help=f"copy lengths, {MIN_LENGTH}-{MAX_LENGTH} (default: 4)")
    parser.add_argument("--n", type=positive_int, default=16, help=f"prompts per length (default: 16, at most {MAX_N})")
    parser.add_argument("--method", type=name_list(METHODS, "methods", allow_all=False), default=["masks"],
                        help="masks (default), greedy, top-k, or several comma-separated (compared at the first one's size)")
    parser.add_argument("--max-edges", type=positive_int, default=200, help="the largest circuit (default: 200 edges)")
    parser.add_argument("--target", type=fraction, default=0.8, help="share of the gap the circuit must keep (default 0.8)")
    parser.add_argument("--accuracy", type=fraction, default=0.0,
                        help="share of the clean accuracy the circuit must keep too (default 0: the gap alone)")
    parser.add_argument("--grain", choices=GRAINS, default="roles", help="edges per position role (default), position, or component")
    parser.add_argument("--score", choices=SCORES, default="eap-ig", help="the first-order score ranking edges (default eap-ig)")
    parser.add_argument("--steps", type=positive_int, default=4, help=f"EAP-IG integration steps (default: 4, at most {MAX_STEPS})")
    parser.add_argument("--mask-steps", type=positive_int, default=100,
                        help=f"mask-optimization steps (default: 100, at most {MAX_MASK_STEPS})")
    parser.add_argument("--candidates", type=int, default=0,
                        help="edges the masks train over, by |score| (default: 20 x --max-edges, at least 2,000)")
    parser.add_argument("--counterfactual", choices=COUNTERFACTUALS, default="corrupt")
    parser.add_argument("--metric", choices=METRICS, default="logit_diff")
    parser.add_argument("--format", choices=FORMATS, default="single-shot")
    parser.add_argument("--shots", type=positive_int, default=None, help=f"shots of a few-shot prompt (default 11, at most {MAX_SHOTS})")
    parser.add_argument("--bos", choices=("model", "yes", "no"), default="model",
                        help="start prompts with BOS: as the model's tokenizer does (default), always, never")
    parser.add_argument("--seed", type=seed, default=0)
    parser.add_argument("--batch-size", type=positive_int, default=8, help="prompts per forward pass (default: 8)")
    parser.add_argument("--random", type=int, default=1, help=f"random circuits per grid point (default 1, at most {MAX_RANDOM})")
    parser.add_argument("--verify", type=int, default=0,
                        help="exact effect in the whole model of the circuit's first K edges (one pass of the prompts each)")
    parser.add_argument("--no-minimality", action="store_true", help="skip each edge's loss when removed from the circuit")
    parser.add_argument("--allow-weak", action="store_true", help="find a circuit even where the model does not do the task")
    return parser


def check_args(parser: Parser, args) -> None:
    """Every argument checked before any model work (and before torch is imported)."""
    for length in args.lengths:
        if not MIN_LENGTH <= length <= MAX_LENGTH:
            fail(parser, "--lengths", f"{length} is out of range: expected {MIN_LENGTH}-{MAX_LENGTH}")
    if len(set(args.lengths)) != len(args.lengths):
        fail(parser, "--lengths", f"{','.join(map(str, args.lengths))} names a length twice")
    bounds = [("--n", args.n, 1, MAX_N), ("--steps", args.steps, 1, MAX_STEPS), ("--mask-steps", args.mask_steps, 2, MAX_MASK_STEPS),
              ("--random", args.random, 0, MAX_RANDOM), ("--verify", args.verify, 0, args.max_edges),
              ("--candidates", args.candidates, 0, 1_000_000)]
    for flag, value, lo, hi in bounds:
        if not lo <= value <= hi:
            fail(parser, flag, f"expected {lo}-{hi}, got {value}" + (" (at most --max-edges)" if flag == "--verify" else ""))
    if args.target == 0:
        fail(parser, "--target", "expected a share of the gap above 0")
    if args.format == "single-shot" and args.shots not in (None, 1):
        fail(parser, "--shots", f"expected 1 (or none) with --format single-shot, got {args.shots}")
    if args.shots is not None and args.shots > MAX_SHOTS:
        fail(parser, "--shots", f"expected at most {MAX_SHOTS}, got {args.shots}")
    if args.task in ("UR", "UL") and args.format != "single-shot":
        fail(parser, "--format", "retrieval tasks (UR, UL) have one prompt format: leave --format at single-shot")
    if args.score == "eap-ig" and args.counterfactual != "corrupt":
        fail(parser, "--score", "eap-ig interpolates toward the corrupt prompt: use --counterfactual corrupt, or --score eap")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_args(parser, args)
    from interp.core.journal import RowJournal
    from interp.core.naming import canonical_name, model_label, model_name, result_stem, with_adapter
    from interp.core.tables import to_markdown, write_table
    from interp.experiments.circuit_study import CircuitStudyConfig, circuit_cells, circuit_study
    from interp.interventions.circuits.circuit import Circuit
    from interp.interventions.circuits.find import CircuitConfig

    started = time.perf_counter()
    bos = {"yes": True, "no": False}.get(args.bos)
    shots = args.shots or (1 if args.format == "single-shot" else 11)
    circuit = CircuitConfig(n=args.n, prompt_format=args.format, n_shots=shots, prepend_bos=bos, seed=args.seed,
                            metric=args.metric, grain=args.grain, target=args.target, keep_accuracy=args.accuracy, max_edges=args.max_edges,
                            score=args.score, steps=args.steps, counterfactual=args.counterfactual,
                            batch_size=args.batch_size, mask_steps=args.mask_steps, candidates=args.candidates,
                            n_random=args.random, minimality=not args.no_minimality, verify=args.verify,
                            allow_weak=args.allow_weak)
    study = CircuitStudyConfig(args.task, tuple(args.lengths), tuple(args.method), circuit)
    executor = executor_from_args(parser, args)
    model = load_model_from_args(args) if executor.name == "serial" else None
    # a model given as a folder is named by the folder's name (in the circuit, its tables and its figures' titles)
    label = model_label((model_name(model) if model is not None else "") or with_adapter(canonical_name(args.model), args.adapter))
    stem = lambda kind, *extra: result_stem(args.out, kind, label, variant=study.variant() + list(extra))  # noqa: E731
    metadata = {"model": label, "task": args.task, "lengths": list(args.lengths), "methods": list(args.method),
                "config": {k: v for k, v in vars(circuit).items() if k != "fractions"} | {"fractions": list(circuit.fractions)}}
    written, summary, curve = [], [], []
    with RowJournal(stem("circuit_summary"), metadata) as journal:
        done = {row["length"]: row for row in journal.done()}
        cells = circuit_cells(study, label, stem("circuit_summary"))
        results = circuit_study(model, study, cells, done=done, executor=executor,
                                source=model_source_from_args(args), progress=not args.quiet)
        for result in results:
            if result["length"] not in done:
                for data, ranked in zip(result["circuits"], result["ranked"]):
                    found = Circuit.from_json(data)
                    extra = [f"L{result['length']}", found.method]
                    written += write_table(found.rows(), stem("circuit", *extra), metadata=found.to_json())
                    written += write_table(ranked, stem("circuit_ranking", *extra), formats=("csv",),
                                           metadata={"model": label, "method": found.method, "length": result["length"]})
                journal.add(result)
            summary += result["summary"]
            curve += result["curve"]
            for data in result["circuits"]:
                print("\n" + Circuit.from_json(data).describe())
        written += write_table(curve, stem("circuit_curve"), metadata=metadata)
        written += journal.finish(summary, metadata=metadata)
    for cell in cells:
        if os.path.exists(cell.stages):
            os.remove(cell.stages)  # every circuit of the cell is written
    print("\n" + to_markdown(summary, [c for c in SUMMARY_COLUMNS if c in summary[0]]))
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n{time.perf_counter() - started:.0f} s on {os.cpu_count()} CPU cores (load average {load}); "
          f"wrote {len(written)} files under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
