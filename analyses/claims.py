"""The paper's claims x models, read from the results tables (no model run).

    python analyses/claims.py                  # results/ -> build/results/claims.{csv,json,md}, build/figures/claims.{html,png}
    python analyses/claims.py --out results --figures figures --readme README.md   # the published ones (`make claims`)
    python analyses/claims.py --formats html   # no Chromium needed

Each row: a claim, a model, the number read with its 95% interval and sample size, and whether it
supports, contradicts or cannot test the claim (``interp.figures.claims`` says how each is decided). The
paper's two edge hypotheses get one row per model, decided from edge patching, route necessity, route share
and the circuit's role edges together (``interp.figures.hypotheses``); their grid cells say why.
"""

from __future__ import annotations

import sys
from pathlib import Path

from interp.cli import RUN_FIGURES, RUN_RESULTS, Parser, add_quiet_arg, existing_dir, figure_formats, run, writable_dir
from interp.core.naming import result_stem
from interp.core.publish import replace_marked_block
from interp.core.tables import write_table
from interp.figures import save_figure
from interp.figures.claims import claim_rows
from interp.figures.claims_figure import claims_figure, claims_matrix, claims_table

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = Parser(__doc__)
    parser.add_argument("--results", type=existing_dir, default=ROOT / "results", help="folder with the results tables")
    parser.add_argument("--out", type=writable_dir, default=str(ROOT / RUN_RESULTS),
                        help=f"where claims.* goes (default {RUN_RESULTS}/)")
    parser.add_argument("--figures", type=writable_dir, default=str(ROOT / RUN_FIGURES),
                        help=f"where the figure goes (default {RUN_FIGURES}/)")
    parser.add_argument("--formats", type=figure_formats, default="html,png",
                        help="figure formats (default html,png; '' for none)")
    parser.add_argument("--readme", type=Path, default=None,
                        help="also write the matrix into this page between its '<!-- claims-matrix:start -->' "
                             "and '<!-- claims-matrix:end -->' lines (`make claims`: README.md)")
    add_quiet_arg(parser)
    args = parser.parse_args(argv)
    if args.readme is not None and not args.readme.is_file():
        parser.error(f"--readme: expected an existing page with the claims-matrix markers, got {args.readme}")
    formats = args.formats
    claims = claim_rows(args.results)
    if not claims:
        print(f"note: no table in {args.results} speaks to any claim")
        return 0
    write_table(claims_table(claims), result_stem(args.out, "claims"), metadata={"results": str(args.results)})
    matrix = write_table(claims_matrix(claims), result_stem(args.out, "claims_matrix"), metadata={"results": str(args.results)})
    if args.readme is not None:
        try:
            replace_marked_block(args.readme, "claims-matrix", next(p for p in matrix if p.suffix == ".md").read_text())
        except ValueError as err:
            parser.error(f"--readme: {err}")
    if formats:
        save_figure(claims_figure(claims), Path(args.figures) / "claims", formats)
    width = max(len(c.claim) for c in claims)
    for c in claims:
        print(f"{c.claim:<{width}}  {c.model:<22} {c.verdict:<12} {c.value}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
