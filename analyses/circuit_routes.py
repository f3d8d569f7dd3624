"""Which reads a model's copy needs. At every copy position ``t`` (``o(t)``: the earlier occurrence of
``t``'s token) each head reads ``o(t) + 1`` (the paper's induction edge), ``o(t)`` (the paper's
anti-induction edge: ``o``'s residual holds its previous token) or ``o(t) - 1`` (the answer's position
read directly: a third route), through the source's value (carrying the token) or its key (finding the
position). For each route and kind, per prompt: the copy with only that read removed (necessity), with
every other read of the copy positions removed (sufficiency), and with ``o`` and ``o - 1`` removed
together; under removal-only counterfactuals (``previous_token_cut``, the paper's; ``mean``; ``zero``)
and ``corrupt`` patching (the counterfactual prompt's keys and values, which bring its tokens in).
Metrics: exact copies (teacher-forced), the margin (answer logit minus the largest other), the
log-probability, and the logit difference whose share of the clean-vs-counterfactual gap each route's
value reads carry under ``corrupt`` (the share the claims read). Intervals: Wilson for exact copies,
bootstrap over prompts for the rest. See ``interp.experiments.routes`` for the table and the verdict rule.

    python analyses/circuit_routes.py --model scratch-ub --task UB --lengths 5 --bos yes
    python analyses/circuit_routes.py --model planted-uf --task UF --lengths 4 --n 8 --layers 1
    python analyses/circuit_routes.py --task UF --lengths 5 --format few-shot --shots 3 --n 16   # SmolLM2

Head sets: every layer and head (``all``); with ``--layers``, every head of those layers; with a
published circuit of the same model, task, format and length in ``--results`` (analyses/find_circuit.py's
``circuit_<model>_<task>[_<format>]_L<length>_<method>.json``, corrupt counterfactual; ``masks`` before
``greedy`` before ``top-k``), the circuit's heads: per kind, those with an attention read of that kind in
the circuit, and every query head of a key/value group whose key or value input has a circuit edge. A read
whose source lies before the prompt (``o - 1`` of a string at position 0: ``--format few-shot --shots 1
--bos no``) is skipped and counted (the ``skipped`` column). Cells (lengths x head sets) run one after the other, or with
``--executor ray --workers N`` on N Ray actors (the same table).

Writes <out>/circuit_routes_<model>_<task>[_<format>] (.csv/.json/.md): one row per (length, head
set, route, kind, test, counterfactual, prompt); ``analyses/claims.py`` reads its share rows.
"""

from __future__ import annotations

import sys
from pathlib import Path

from interp.cli import (Parser, add_model_args, add_output_args, at_least, existing_dir, fail, int_list, name_list,
                        positive_int, positive_int_list, run, say, seed)
from interp.cli.args import add_executor_args, executor_from_args, load_model_from_args, model_source_from_args
from interp.core.naming import model_name, result_stem
from interp.core.tables import write_table

# The library's names (interp.experiments.routes, interp.interventions.edges.data), repeated here so that
# arguments are checked before torch is imported; tests/test_routes_script.py holds them equal.
TASKS = ("UF", "UB")
FORMATS = ("few-shot", "single-shot")
MIN_LENGTH, MAX_LENGTH = 2, 26
COUNTERFACTUALS = ("previous_token_cut", "mean", "zero", "corrupt")
READ_KINDS = ("value", "key")
DEFAULT_SHOTS = 11
# Bounds on what a run costs: every prompt takes about 4 x 14 + 3 forward passes per length and head set,
# and a few-shot prompt is shots x (2 x length + 2) tokens long.
MAX_N, MAX_SHOTS = 2000, 64

ROOT = Path(__file__).resolve().parents[1]


def build_parser() -> Parser:
    parser = Parser(__doc__)
    add_model_args(parser)
    add_output_args(parser)
    add_executor_args(parser)
    parser.add_argument("--task", type=str.upper, choices=TASKS, default="UB", help="UF or UB (default UB)")
    parser.add_argument("--lengths", type=positive_int_list, default=[5],
                        help=f"copy lengths, {MIN_LENGTH}-{MAX_LENGTH} (default: 5)")
    parser.add_argument("--n", type=positive_int, default=16,
                        help=f"prompts per length (default: 16; at most {MAX_N}: each costs ~60 forward passes per cell)")
    parser.add_argument("--format", choices=FORMATS, default="single-shot")
    parser.add_argument("--shots", type=positive_int, default=None,
                        help=f"shots of a few-shot prompt (default {DEFAULT_SHOTS}, at most {MAX_SHOTS})")
    parser.add_argument("--bos", choices=("model", "yes", "no"), default="model",
                        help="start prompts with BOS: as the model's tokenizer does (default), always, never")
    parser.add_argument("--counterfactuals", type=name_list(COUNTERFACTUALS, "counterfactuals"), default=list(COUNTERFACTUALS),
                        help=f"what a removed read becomes: {', '.join(COUNTERFACTUALS)} or all (default: all)")
    parser.add_argument("--kinds", type=name_list(READ_KINDS, "read kinds"), default=list(READ_KINDS),
                        help="reads measured: value (carrying the token), key (finding the position) or all (default)")
    parser.add_argument("--layers", type=int_list, default=None,
                        help="also remove reads in every head of these layers only (head set layers_<...>), e.g. 1")
    parser.add_argument("--results", type=existing_dir, default=ROOT / "results",
                        help="where the model's published circuit is read from (for the circuit's heads)")
    parser.add_argument("--seed", type=seed, default=0)
    parser.add_argument("--batch-size", type=positive_int, default=8, help="prompts per forward pass (default: 8)")
    parser.add_argument("--boot", type=at_least(100), default=2000, help="bootstrap resamples (default: 2000)")
    return parser


def check_args(parser: Parser, args) -> int:
    """Every check that needs no model; returns the number of shots."""
    if args.format == "single-shot" and args.shots not in (None, 1):
        fail(parser, "--shots", f"expected 1 (or none) with --format single-shot, got {args.shots}")
    if args.shots is not None and args.shots > MAX_SHOTS:
        fail(parser, "--shots", f"expected at most {MAX_SHOTS} (a prompt is shots x (2 x length + 2) tokens), got {args.shots}")
    if args.n > MAX_N:
        fail(parser, "--n", f"expected at most {MAX_N} prompts (each costs ~60 forward passes per cell), got {args.n}")
    for length in args.lengths:
        if not MIN_LENGTH <= length <= MAX_LENGTH:
            fail(parser, "--lengths", f"expected lengths in {MIN_LENGTH}-{MAX_LENGTH} (distinct letters a-z, at least "
                                      f"2 so that a copy position predicts a scored token), got {length}")
    if len(set(args.lengths)) != len(args.lengths):
        fail(parser, "--lengths", f"a length is given twice in {args.lengths}")
    if args.layers is not None and (not args.layers or min(args.layers) < 0 or len(set(args.layers)) != len(args.layers)):
        fail(parser, "--layers", f"expected distinct layer indices >= 0, got {args.layers}")
    return args.shots or (1 if args.format == "single-shot" else DEFAULT_SHOTS)


def _published_circuits(results: Path, label: str, task: str, lengths: list[int]) -> dict[str, object]:
    """File name -> `Circuit` of the model's published circuits of ``task`` at ``lengths`` (read and checked by
    `interp.figures.circuit_files.read_circuit`; files of an earlier table format are not circuits)."""
    from interp.core.naming import model_label
    from interp.experiments.circuit_pair import published_circuit_files
    from interp.figures.circuit_files import read_circuit

    found = {}
    for file in published_circuit_files(results, model_label(label)):
        if file.task == task and file.length in lengths and (circuit := read_circuit(file.path)) is not None:
            found[file.path.name] = circuit
    return found


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    shots = check_args(parser, args)
    with executor_from_args(parser, args) as executor:  # a missing Ray is refused before the model loads
        return _run(parser, args, shots, executor)


def _run(parser: Parser, args, shots: int, executor) -> int:
    from interp.experiments.routes import EXPECTED_ROUTE, RouteStudyConfig, route_cells, route_report, route_study
    from interp.experiments.routes.study import route_circuits
    from interp.interventions.edges.data import prompt_length

    model = load_model_from_args(args)
    bos = {"yes": True, "no": False}.get(args.bos, bool(getattr(model.cfg, "default_prepend_bos", False)))
    n_ctx = int(getattr(model.cfg, "n_ctx", 0) or 0)
    for length in args.lengths:
        tokens = prompt_length(length, shots, bos, fmt=args.format)
        if n_ctx and tokens > n_ctx:
            fail(parser, "--shots" if args.format == "few-shot" else "--lengths",
                 f"a prompt of length {length} with {shots} shot(s) is {tokens} tokens, past the model's {n_ctx}")
    if args.layers is not None and max(args.layers) >= model.cfg.n_layers:
        fail(parser, "--layers", f"expected layers 0-{model.cfg.n_layers - 1}, got {args.layers}")
    label = model_name(model) or args.model
    variant = [args.task] + ([args.format] if args.format != "single-shot" else [])
    heads_per_kv = model.cfg.n_heads // (getattr(model.cfg, "n_key_value_heads", None) or model.cfg.n_heads)
    published = _published_circuits(args.results, label, args.task, args.lengths)
    circuits = route_circuits(published.values(), label, args.task, args.format, args.lengths, model.cfg.n_layers,
                              model.cfg.n_heads, heads_per_kv)
    circuit_files = [name for name, c in published.items() if any(c is chosen for chosen in circuits.values())]
    cells = route_cells(args.lengths, circuits, args.kinds, heads_per_kv, args.layers, model.cfg.n_heads)
    config = RouteStudyConfig(args.task, args.n, args.seed, args.format, shots, bos, tuple(args.counterfactuals),
                              tuple(args.kinds), args.batch_size, label)
    say(f"{label} {args.task} ({args.format}, {shots} shot(s), BOS {'yes' if bos else 'no'}): {len(cells)} cell(s) of "
        f"{args.n} prompts on {executor.name} ({executor.workers} worker(s))")
    rows = [row.as_row() for row in route_study(model, config, cells, executor=executor,
                                                model_source=model_source_from_args(args), progress=not args.quiet)]
    print("\n".join(route_report(rows, EXPECTED_ROUTE[args.task], args.boot, args.seed)))
    stem = result_stem(args.out, "circuit_routes", label, variant=variant)
    written = write_table(rows, stem, metadata={
        "model": label, "task": args.task, "format": args.format, "shots": shots, "bos": bos, "n": args.n,
        "seed": args.seed, "counterfactuals": args.counterfactuals, "kinds": args.kinds, "layers": args.layers,
        "circuit": circuit_files or None, "layout": "interp.experiments.routes"})
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
