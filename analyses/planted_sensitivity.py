"""How weak a planted circuit each instrument still finds: the planted models (interp.models.planted)
at falling strength, and every instrument (head scores, ablation, exact sweep, attribution screens,
edge patching) asked to find the planted heads.

    python analyses/planted_sensitivity.py
    python analyses/planted_sensitivity.py --strengths 1,0.9,0.8 --seeds 0 --out /tmp/r --figures /tmp/f

Writes <out>/planted_sensitivity.* (one row per circuit, strength, seed and instrument),
<out>/planted_sensitivity_summary.* (share of seeds found) and <figures>/planted_sensitivity.*
(by default build/results and build/figures, git-ignored).
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

from interp.cli import (RUN_FIGURES, Namespace, Parser, add_output_args, fail, figure_formats, fraction_list, positive_int, run,
                        seed_list, writable_dir)
from interp.experiments.planted_sensitivity import (CIRCUITS, SensitivityConfig, found_summary, sensitivity_study,
                                                    weakest_found)
from interp.figures import BrowserNotFoundError, save_figure
from interp.figures.planted import planted_sensitivity_figure
from interp.cli.args import add_executor_args, executor_from_args
from interp.core.naming import result_stem
from interp.core.tables import read_csv, stem_file, to_markdown, write_table

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = Parser(__doc__)
    add_output_args(parser)
    parser.add_argument("--figures", type=writable_dir, default=ROOT / RUN_FIGURES,
                        help=f"figure folder (default: {RUN_FIGURES})")
    parser.add_argument("--strengths", type=fraction_list, default=list(SensitivityConfig.strengths),
                        help="strengths of the plant, 1 = as planted, 0 = noise (default: 1 to 0 in steps of 0.1)")
    parser.add_argument("--seeds", type=seed_list, default=list(SensitivityConfig.seeds), help="noise seeds (default: 0,1,2)")
    parser.add_argument("--circuits", choices=[*CIRCUITS, "all"], default="all", help="UF, UB or all (default)")
    parser.add_argument("--n", type=positive_int, default=SensitivityConfig.n_examples, help="task prompts per cell")
    add_executor_args(parser)
    parser.add_argument("--formats", type=figure_formats, default="html,png", help="figure formats (default: html,png)")
    parser.add_argument("--redraw", action="store_true",
                        help="only redraw the figure from <out>/planted_sensitivity_summary.csv (no model run)")
    args = parser.parse_args(argv)
    if args.redraw:
        summary_file = stem_file(result_stem(args.out, "planted_sensitivity_summary"), "csv")
        if not summary_file.exists():
            fail(parser, "--redraw", f"{summary_file} does not exist; run without --redraw first")
        _save(planted_sensitivity_figure(read_csv(summary_file)), args)
        return 0
    circuits = tuple(CIRCUITS) if args.circuits == "all" else (args.circuits,)
    config = SensitivityConfig(strengths=tuple(sorted(set(args.strengths), reverse=True)), seeds=tuple(args.seeds),
                               circuits=circuits, n_examples=args.n)
    with executor_from_args(parser, args) as executor:
        rows = sensitivity_study(config, progress=not args.quiet, executor=executor)
    meta = {"config": config.__dict__, "machine": "CPU"}
    write_table(rows, result_stem(args.out, "planted_sensitivity"), metadata=meta)
    summary = found_summary(rows)
    write_table(summary, result_stem(args.out, "planted_sensitivity_summary"), metadata=meta)
    _save(planted_sensitivity_figure([asdict(row) for row in summary]), args)
    print(to_markdown(weakest_found(summary)))
    print(f"wrote {result_stem(args.out, 'planted_sensitivity')}.*, {result_stem(args.out, 'planted_sensitivity_summary')}.* and "
          f"{args.figures / 'planted_sensitivity'}.*")
    return 0


def _save(figure, args: Namespace) -> None:
    try:
        save_figure(figure, args.figures / "planted_sensitivity", formats=args.formats)
    except BrowserNotFoundError as err:  # the table is the result; static images need a browser
        save_figure(figure, args.figures / "planted_sensitivity", formats=["html"])
        print(f"wrote HTML only: {err}")


if __name__ == "__main__":
    sys.exit(run(main))
