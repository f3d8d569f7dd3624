"""Which route a model's copy reads its answer through: at every copy position ``t``, the value each head
reads from ``o(t) - 1`` (the paper's anti-induction route), ``o(t)`` or ``o(t) + 1`` (induction), patched
to the counterfactual prompt's, per prompt; each route's share of the metric gap with a bootstrap
interval over prompts. With a published circuit of the same model, task and format beside it in
``--results``, the patch is also run on the circuit's heads alone (those with a value edge in the circuit).

    python analyses/circuit_routes.py --model scratch-ub --task UB --lengths 5 --bos yes
    python analyses/circuit_routes.py --task UF --lengths 5 --format few-shot --shots 3 --n 16   # SmolLM2

Writes results/circuit_routes_<model>_<task>[_<format>] (.csv/.json/.md): one row per prompt, route and
head set; ``analyses/claims.py`` reads it for the route claims.
"""

from __future__ import annotations

import sys
from pathlib import Path

from interp.cli import Parser, add_model_args, add_output_args, existing_dir, fail, load_model_from_args, positive_int, positive_int_list, run, seed
from interp.core.naming import model_name, result_stem
from interp.core.tables import read_csv, to_markdown, write_table
from interp.experiments.circuit_difference import circuit_value_heads
from interp.experiments.circuit_routes import EXPECTED_ROUTE, route_effects, route_shares
from interp.interventions.circuits.task import copying_task
from interp.interventions.edges.data import FORMATS, TASKS, check_length

ROOT = Path(__file__).resolve().parents[1]


def build_parser() -> Parser:
    parser = Parser(__doc__)
    add_model_args(parser)
    add_output_args(parser)
    parser.add_argument("--task", type=str.upper, choices=TASKS, default="UB", help="UF or UB (default UB)")
    parser.add_argument("--lengths", type=positive_int_list, default=[5], help="copy lengths, 2-26 (default: 5)")
    parser.add_argument("--n", type=positive_int, default=16, help="prompts per length (default: 16)")
    parser.add_argument("--format", choices=FORMATS, default="single-shot")
    parser.add_argument("--shots", type=positive_int, default=None, help="shots of a few-shot prompt (default 11)")
    parser.add_argument("--bos", choices=("model", "yes", "no"), default="model",
                        help="start prompts with BOS: as the model's tokenizer does (default), always, never")
    parser.add_argument("--results", type=existing_dir, default=ROOT / "results",
                        help="where the model's published circuit is read from (for the circuit's heads)")
    parser.add_argument("--seed", type=seed, default=0)
    parser.add_argument("--batch-size", type=positive_int, default=8, help="prompts per forward pass (default: 8)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.format == "single-shot" and args.shots not in (None, 1):
        fail(parser, "--shots", f"expected 1 (or none) with --format single-shot, got {args.shots}")
    for length in args.lengths:
        try:
            check_length(length)
        except ValueError as err:
            fail(parser, "--lengths", str(err))
    shots = args.shots or (1 if args.format == "single-shot" else 11)
    model = load_model_from_args(args)
    bos = {"yes": True, "no": False}.get(args.bos, bool(getattr(model.cfg, "default_prepend_bos", False)))
    label = model_name(model) or args.model
    variant = [args.task] + ([args.format] if args.format != "single-shot" else [])
    circuit_csv = result_stem(args.results, "circuit", label, variant=variant).with_suffix(".csv")
    circuit = read_csv(circuit_csv, required=("length", "pos", "role", "reader", "writer")) if circuit_csv.exists() else []
    heads_per_kv = model.cfg.n_heads // (getattr(model.cfg, "n_key_value_heads", None) or model.cfg.n_heads)
    rows = []
    for length in args.lengths:
        task = copying_task(model.tokenizer, args.task, length, args.n, seed=args.seed, fmt=args.format, n_shots=shots,
                            prepend_bos=bos)
        head_sets = {"all": None}
        mine = [r for r in circuit if int(r["length"]) == length and r.get("counterfactual", "corrupt") == "corrupt"]
        if mine:
            head_sets["circuit"] = circuit_value_heads(mine, heads_per_kv)
        for name, heads in head_sets.items():
            effects = route_effects(model, task, heads, batch_size=args.batch_size)
            rows += [{"model": label, "task": args.task, "length": length, "format": args.format, "shots": shots,
                      "head_set": name} | e.as_row() for e in effects]
            shares = route_shares(effects)
            print(f"{label} {args.task} length {length}, {name} heads ({len(effects) // len(shares)} prompts, "
                  f"expected route {EXPECTED_ROUTE[args.task]}): "
                  + ", ".join(f"{s.route} {s.share:+.2f} [{s.lo:+.2f}, {s.hi:+.2f}]" for s in shares.values()))
    stem = result_stem(args.out, "circuit_routes", label, variant=variant)
    written = write_table(rows, stem, metadata={"model": label, "task": args.task, "n": args.n, "seed": args.seed,
                                                "circuit": circuit_csv.name if circuit else None})
    if not args.quiet:
        print(to_markdown(rows[:6]))
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
