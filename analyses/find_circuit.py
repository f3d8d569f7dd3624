"""Circuit discovery: score every edge of the residual-stream graph (EAP, EAP-IG), verify exactly,
select circuits over edge budgets and measure how much of the task they carry.

    python analyses/find_circuit.py --model planted-ub --task UB            # recovers the planted circuit
    python analyses/find_circuit.py --model scratch-ub --task UB --lengths 5 --exact positions --bos yes
    python analyses/find_circuit.py --task UF --format few-shot --shots 5 --lengths 5 --n 8 --steps 2 \\
        --exact none --verify 16 --budget 256,1024,4096,16384 --random 1 --batch-size 2   # SmolLM2: 7 min, 5.5 GB
    python analyses/find_circuit.py --model planted-ub --task UB --counterfactual zero --method eap
    python analyses/find_circuit.py --model planted-ub --task UB --method eap-ig-act --steps 4   # IG over each layer's outputs
    python analyses/find_circuit.py --model planted-ul --task UL --lengths 8

Prompts are the edge-patching copy prompts (single-shot ``<bos> s : c`` by default, the format the
planted and from-scratch models read; ``--format few-shot`` the paper's 11-shot one); the counterfactual
is the same layout with other letters (``corrupt``), or every removed writer zeroed / set to its mean
over those other prompts. The metric is the answer's logit minus the counterfactual answer's
(``--metric logprob``: its log-probability), averaged over the copy. Writes
results/circuit_summary_<model>_<task>, circuit_curve_..., circuit_..., circuit_components_...,
circuit_edges_... and circuit_attention_... (.csv/.json/.md): the last holds the attention-level edges
(a query position reading a key position inside a head, through the key or the value), one row per
head and (query role, key role), and per role pair over every head at once -- the paper's induction and
anti-induction edges are the rows marked in its ``hypothesis`` column (``--attention no`` skips it).
A killed run started again with the same arguments resumes from its finished lengths.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict

import torch

from interp.cli import (Parser, add_model_args, add_output_args, fail, load_model_from_args, non_negative_int, positive_int,
                        positive_int_list, run, seed)
from interp.cli.argtypes import fraction
from interp.core.journal import RowJournal
from interp.core.naming import model_name, result_stem
from interp.core.tables import to_markdown, write_table
from interp.experiments.circuit_study import EXACT_SCOPES, CircuitStudyConfig, circuit_study
from interp.interventions.circuits.scores import METHODS
from interp.interventions.circuits.task import COUNTERFACTUALS, METRICS, RETRIEVAL_TASKS
from interp.interventions.edges.data import FORMATS, TASKS

SUMMARY_COLUMNS = ["model", "task", "length", "method", "n", "edges", "clean_accuracy", "circuit_edges", "circuit_recovered",
                   "circuit_accuracy", "cpr", "cmd", "random_cpr"]


def build_parser() -> Parser:
    parser = Parser(__doc__)
    add_model_args(parser)
    add_output_args(parser)
    parser.add_argument("--task", type=str.upper, choices=TASKS + RETRIEVAL_TASKS, default="UB",
                        help="UF, UB (copying) or UR, UL (retrieval lines x1 .. x(n-1) | q:) (default: UB)")
    parser.add_argument("--lengths", type=positive_int_list, default=[4], help="copy lengths, 2-26 (default: 4)")
    parser.add_argument("--n", type=positive_int, default=16, help="prompts per length (default: 16)")
    parser.add_argument("--method", choices=METHODS, default="eap-ig", help="the score circuits are selected by (default: eap-ig)")
    parser.add_argument("--steps", type=positive_int, default=8, help="EAP-IG integration steps m (default: 8)")
    parser.add_argument("--counterfactual", choices=COUNTERFACTUALS, default="corrupt",
                        help="corrupt (other letters, default), zero or mean")
    parser.add_argument("--exact", choices=EXACT_SCOPES, default="components",
                        help="exact effects of: no edge, every component-level edge (default), every position-resolved edge")
    parser.add_argument("--verify", type=non_negative_int, default=0,
                        help="exact effects of the top K edges by the --method score (a pretrained model's few; default 0)")
    parser.add_argument("--budget", type=positive_int_list, default=None,
                        help="edge budgets of the faithfulness curve (default: 1, 2, 4, ...)")
    parser.add_argument("--target", type=fraction, default=0.9, help="share of the metric gap the circuit must recover (default 0.9)")
    parser.add_argument("--metric", choices=METRICS, default="logit_diff")
    parser.add_argument("--format", choices=FORMATS, default="single-shot")
    parser.add_argument("--shots", type=positive_int, default=None, help="shots of a few-shot prompt (default 11)")
    parser.add_argument("--bos", choices=("model", "yes", "no"), default="model",
                        help="start prompts with BOS: as the model's tokenizer does (default), always, never")
    parser.add_argument("--seed", type=seed, default=0)
    parser.add_argument("--batch-size", type=positive_int, default=8, help="prompts per forward pass (default: 8)")
    parser.add_argument("--random", type=int, default=2, help="random circuits per budget for the baseline (default 2)")
    parser.add_argument("--attention", choices=("yes", "no", "exact"), default="yes",
                        help="also score attention-level edges, query -> key position inside each head (default: yes); "
                             "'exact' with --exact none also measures the rows over every head exactly (the paper's "
                             "two hypotheses among them)")
    return parser


def study_config(parser: Parser, args, bos: bool) -> CircuitStudyConfig:
    if args.format == "single-shot" and args.shots not in (None, 1):
        fail(parser, "--shots", f"expected 1 (or none) with --format single-shot, got {args.shots}")
    if args.method == "eap-ig" and args.counterfactual != "corrupt":
        fail(parser, "--method", "eap-ig interpolates toward the corrupt prompt: use --counterfactual corrupt, or --method eap")
    if args.method == "exact" and args.exact != "positions":
        fail(parser, "--exact", "--method exact ranks every position-resolved edge by its exact effect: pass --exact positions")
    if args.random < 0:
        fail(parser, "--random", f"expected an integer >= 0, got {args.random}")
    shots = args.shots or (1 if args.format == "single-shot" else 11)
    try:
        return CircuitStudyConfig(args.task, tuple(args.lengths), args.n, args.method, args.steps, args.counterfactual,
                                  args.exact, tuple(args.budget) if args.budget else None, args.target, args.random,
                                  args.format, shots, args.seed, args.batch_size, bos, args.metric,
                                  attention=args.attention != "no",
                                  attention_exact=args.attention == "exact", verify=args.verify)
    except ValueError as err:
        fail(parser, "--lengths" if "length" in str(err) else "--method", str(err))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    study_config(parser, args, False)  # every argument checked before the model loads
    started = time.perf_counter()
    model = load_model_from_args(args)
    bos = {"yes": True, "no": False}.get(args.bos, bool(getattr(model.cfg, "default_prepend_bos", False)))
    config = study_config(parser, args, bos)
    label = model_name(model) or args.model
    variant = [config.task] + ([config.counterfactual] if config.counterfactual != "corrupt" else []) \
        + ([config.prompt_format] if config.prompt_format != "single-shot" else [])
    stems = {kind: result_stem(args.out, kind, label, adapter=None, variant=variant)
             for kind in ("circuit_summary", "circuit_curve", "circuit", "circuit_components", "circuit_edges",
                          "circuit_attention")}
    metadata = {"config": asdict(config), "model": label}
    with RowJournal(stems["circuit_summary"], metadata) as journal:
        tables = circuit_study(model, config, model_label=label, journal=journal, progress=not args.quiet)
        written = []
        for kind, key in (("circuit_curve", "curve"), ("circuit", "circuit"), ("circuit_components", "components")):
            written += write_table(tables[key], stems[kind], metadata=metadata)
        # every position-resolved edge: thousands of rows, kept as csv only
        written += write_table(tables["edges"], stems["circuit_edges"], formats=("csv",), metadata=metadata)
        if tables["attention"]:
            written += write_table(tables["attention"], stems["circuit_attention"], formats=("csv", "json"), metadata=metadata)
        written += journal.finish(tables["summary"], metadata=metadata)
    elapsed = time.perf_counter() - started
    extra = [c for c in tables["summary"][0] if c.startswith(("auc_", "pearson_", "spearman_"))]
    print(to_markdown(tables["summary"], SUMMARY_COLUMNS + extra))
    print("\nthe circuit (first 12 edges):\n")
    print(to_markdown(tables["circuit"][:12], ["length", "rank", "role", "reader", "writer", "score", "exact"]))
    if tables["attention"]:
        top = [r for r in tables["attention"] if r["head"] != "all" and r["rank"] <= 6 or r["hypothesis"]]
        print("\nattention-level edges (the paper's two hypotheses and the top heads):\n")
        print(to_markdown(top, ["length", "rank", "head", "kind", "query_role", "key_role", "hypothesis", "entries", "eap"]
                          + [c for c in ("eap_ig", "exact") if c in top[0]]))
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n{elapsed:.0f} s on {os.cpu_count()} CPU cores (load average {load}); wrote {len(written)} files under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
