"""Known circuits under noise: every planted model at falling strength of the plant (seeded noise
mixed into its weights), every component-level edge scored by EAP, EAP-IG and its exact effect, and
each score's ranking compared with the planted edges (ROC AUC, planted edges exactly on top).

    python analyses/circuit_sensitivity.py
    python analyses/circuit_sensitivity.py --models planted-ub --strengths 1,0.9 --seeds 0 --methods exact --out /tmp/r

Writes <out>/circuit_sensitivity_planted.* (one row per model, task, strength, seed and score),
<out>/circuit_sensitivity_summary_planted.* (over seeds) and <out>/circuit_sensitivity_stops_planted.*
(where each score stops recovering the planted set, and where the model stops solving the task).
A killed run started again with the same arguments resumes from its finished cells; ``--summarize``
rewrites the last two from the first without a model run.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict

from interp.cli import Parser, add_output_args, fail, fraction_list, name_list, positive_int, run, seed_list
from interp.cli.args import add_executor_args, executor_from_args
from interp.core.journal import RowJournal
from interp.core.naming import result_stem
from interp.core.tables import read_csv, read_table_metadata, row_from_mapping, stem_file, to_markdown, write_table
from interp.experiments.circuit_sensitivity import (SENSITIVITY_METHODS, CircuitSensitivityConfig, CircuitSensitivityRow,
                                                     circuit_sensitivity, recovery_stops, recovery_summary)
from interp.experiments.planted_sensitivity import SensitivityConfig
from interp.interventions.circuits.scores import METHODS
from interp.models.planted import PLANTED_MODELS

VARIANT = "planted"


def main(argv: list[str] | None = None) -> int:
    parser = Parser(__doc__)
    add_output_args(parser)
    parser.add_argument("--models", type=name_list(PLANTED_MODELS, "models"), default=list(PLANTED_MODELS),
                        help="planted models, comma-separated, or all (default)")
    parser.add_argument("--strengths", type=fraction_list, default=list(SensitivityConfig.strengths),
                        help="strengths of the plant, 1 = as planted, 0 = noise (default: 1 to 0 in steps of 0.1)")
    parser.add_argument("--seeds", type=seed_list, default=list(SensitivityConfig.seeds), help="noise seeds (default: 0,1,2)")
    parser.add_argument("--methods", type=name_list(METHODS, "methods"), default=list(SENSITIVITY_METHODS),
                        help="scores, comma-separated: eap, eap-ig, exact (default: all)")
    parser.add_argument("--n", type=positive_int, default=CircuitSensitivityConfig.n, help="prompts per task (default: 4)")
    parser.add_argument("--steps", type=positive_int, default=CircuitSensitivityConfig.steps,
                        help="EAP-IG integration steps (default: 8)")
    add_executor_args(parser)
    parser.add_argument("--summarize", action="store_true",
                        help="only rewrite the summary and stops tables from <out>/circuit_sensitivity_planted.csv (no model run)")
    args = parser.parse_args(argv)
    config = CircuitSensitivityConfig(models=tuple(args.models), strengths=tuple(sorted(set(args.strengths), reverse=True)),
                                      seeds=tuple(args.seeds), methods=tuple(args.methods), n=args.n, steps=args.steps)
    started = time.perf_counter()
    stems = {kind: result_stem(args.out, kind, variant=VARIANT)
             for kind in ("circuit_sensitivity", "circuit_sensitivity_summary", "circuit_sensitivity_stops")}
    metadata = {"config": asdict(config), "machine": "CPU"}
    if args.summarize:
        rows_file = stem_file(stems["circuit_sensitivity"], "csv")
        if not rows_file.exists():
            fail(parser, "--summarize", f"{rows_file} does not exist; run without --summarize first")
        rows = [row_from_mapping(CircuitSensitivityRow, row) for row in read_csv(rows_file)]
        _write_summaries(rows, stems, read_table_metadata(stems["circuit_sensitivity"]) or metadata)
        return 0
    with RowJournal(stems["circuit_sensitivity"], metadata) as journal, executor_from_args(parser, args) as executor:
        rows = circuit_sensitivity(config, progress=not args.quiet, executor=executor, journal=journal)
        written = _write_summaries(rows, stems, metadata)
        written += journal.finish(rows, metadata=metadata)
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n{time.perf_counter() - started:.0f} s on {os.cpu_count()} CPU cores (load average {load}); "
          f"wrote {len(written)} files under {args.out}")
    return 0


def _write_summaries(rows: list[CircuitSensitivityRow], stems: dict, metadata: dict) -> list:
    summary = recovery_summary(rows)
    stops = recovery_stops(summary)
    written = write_table(summary, stems["circuit_sensitivity_summary"], metadata=metadata)
    written += write_table(stops, stems["circuit_sensitivity_stops"], metadata=metadata)
    print(to_markdown(stops))
    return written


if __name__ == "__main__":
    sys.exit(run(main))
