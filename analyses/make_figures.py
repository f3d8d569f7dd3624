"""Redraw every paper figure from the tables in results/ (no model run).

    python analyses/make_figures.py                       # results/ -> build/figures/ (HTML, PDF, PNG)
    python analyses/make_figures.py --out figures         # the published figures (`make figures`)
    python analyses/make_figures.py --formats html,svg,png --model smollm2-135m

Each saved circuit (results/circuit_*.json, with circuit_ranking_*.csv beside it) is drawn twice: a static
figure (PNG/PDF/SVG, its most important edges) and an interactive page (HTML, a slider over its curve's grid);
circuit tables of an earlier format are not drawn. Figures whose results file is missing are skipped with a
note. Static formats need a local Chromium (scripts/install_chromium.sh); ``--formats html`` needs none.
Exits 1 when a results file is malformed (the message names the file and the problem), after drawing the others.
"""

from __future__ import annotations

import sys
from pathlib import Path

from interp.cli import RUN_FIGURES, Parser, add_quiet_arg, existing_dir, fail, figure_formats, run, writable_dir
from interp.figures import HTML_FORMATS, STATIC_FORMATS, BrowserNotFoundError, make_figures

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = Parser(__doc__)
    parser.add_argument("--results", type=existing_dir, default=ROOT / "results",
                        help="folder with the results CSVs (default results/)")
    parser.add_argument("--out", type=writable_dir, default=str(ROOT / RUN_FIGURES),
                        help=f"output folder (default {RUN_FIGURES}/, git-ignored; `make figures` writes figures/)")
    parser.add_argument("--formats", type=figure_formats, default="html,pdf,png",
                        help=f"comma-separated, from {', '.join(HTML_FORMATS + STATIC_FORMATS)} (default html,pdf,png)")
    parser.add_argument("--model", default=None, help="only this model's figures (default: every model in the files)")
    parser.add_argument("--inline-js", action="store_true",
                        help="inline plotly.js in every HTML file instead of one shared <out>/plotly.min.js")
    add_quiet_arg(parser)
    args = parser.parse_args(argv)
    formats = args.formats
    if not formats:
        fail(parser, "--formats", f"no formats; choose from {', '.join(HTML_FORMATS + STATIC_FORMATS)}")
    results = Path(args.results)
    try:
        written, errors = make_figures(results, args.out, formats, model=args.model, inline_js=args.inline_js,
                                       log=(lambda message: None) if args.quiet else print)
    except BrowserNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # a results entry that cannot be read, or --out stopped being writable after the check
        if err.filename and Path(err.filename).resolve().is_relative_to(results.resolve()):
            fail(parser, "--results", f"cannot read {err.filename} ({err.strerror or err})")
        fail(parser, "--out", f"cannot write into {str(args.out)!r} ({err.strerror or err})")
    if not written and not errors:
        print(f"note: no results files in {results}: nothing to draw")
    for err in errors:
        print(f"error: {err}", file=sys.stderr)
    print(f"{len(written)} files written to {args.out}" + (f"; {len(errors)} results file(s) could not be drawn" if errors else ""))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(run(main))
