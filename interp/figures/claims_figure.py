"""The claims read from the results tables (`interp.figures.claims`) as a table, a claims x models
grid, and a figure: colour the verdict, text the number compared."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from interp.core.published import VERDICTS as VERDICT_ORDER
from interp.figures.claims import Claim


def claims_table(claims: Sequence[Claim]) -> list[dict]:
    """The claims as table rows, one per (claim, model), every field a column.

    >>> row = claims_table([Claim("UF > UB", "m", "UF 1.00 vs UB 0.00", 1.0, 0.9, 1.0, 40, "supports", "x.csv")])[0]
    >>> row["claim"], row["verdict"], row["n"], row["note"]
    ('UF > UB', 'supports', 40, '')
    """
    return [c.as_row() for c in claims]


MARKS = {"supports": "yes", "contradicts": "NO", "inconclusive": "?", "cannot test": "-"}


def claims_matrix(claims: Sequence[Claim]) -> list[dict]:
    """The claims x models grid as rows (one per claim, one column per model): the verdict and the
    number compared, e.g. ``yes +0.80``; ``-`` where the model cannot test the claim (with the number
    where one was measured); a hypothesis row adds why, e.g. ``NO +0.12: carried by o-1 directly; o not needed``,
    or ``- (UB at 0.00 clean)`` without a number.

    >>> claims_matrix([Claim("UF > UB", "m", "UF 1.00 vs UB 0.00", 1.0, 0.9, 1.0, 40, "supports", "x.csv")])
    [{'claim': 'UF > UB', 'm': 'yes +1.00'}]
    >>> claims_matrix([Claim("UB via o", "m", "", float("nan"), 0, 0, 0, "cannot test", "x.csv", why="UB at 0.00 clean")])
    [{'claim': 'UB via o', 'm': '- (UB at 0.00 clean)'}]
    """
    models = list(dict.fromkeys(c.model for c in claims))
    rows = []
    for name in dict.fromkeys(c.claim for c in claims):
        cells = {c.model: c for c in claims if c.claim == name}
        rows.append({"claim": name, **{m: _matrix_cell(cells[m]) if m in cells else "" for m in models}})
    return rows


def _matrix_cell(claim: Claim) -> str:
    mark = MARKS[claim.verdict]
    if not math.isfinite(claim.estimate):  # no number: the reason in brackets (a cell never starts "-:", a formula)
        return f"{mark} ({claim.why})" if claim.why else mark
    return f"{mark} {claim.estimate:+.2f}" + (f": {claim.why}" if claim.why else "")


def _figure_number(claim: Claim) -> str:
    if not math.isfinite(claim.estimate):
        return ""  # no number was measured (a route share of too small a gap)
    return f"{claim.estimate:+.2f}" if claim.lo != claim.hi else f"{claim.estimate:.2f}"


def _hover(claim: Claim) -> str:
    """The claim's numbers (and why), wrapped: a hypothesis row lists every instrument's."""
    import textwrap

    text = f"{claim.why}: {claim.value}" if claim.why else claim.value
    return "<br>".join(textwrap.wrap(text, 100)) or text


def claims_figure(claims: Sequence[Claim]):
    """A claims x models grid: colour = verdict, text = the number read.

    >>> fig = claims_figure([Claim("UF > UB", "m", "UF 1.00 vs UB 0.00", 1.0, 0.9, 1.0, 40, "supports", "x.csv"),
    ...                      Claim("UR > UL", "m", "UR 0.50 vs UL 0.45", 0.05, -0.1, 0.2, 40, "inconclusive", "x.csv")])
    >>> [trace.name for trace in fig.data], list(fig.data[1].text)
    (['supports', 'inconclusive'], ['+0.05'])
    """
    from html import escape

    import plotly.graph_objects as go

    from interp.figures.style import OKABE_ITO, style

    colours = {"supports": OKABE_ITO["green"], "contradicts": OKABE_ITO["vermillion"],
               "inconclusive": OKABE_ITO["yellow"], "cannot test": OKABE_ITO["grey"]}
    # plotly renders a subset of HTML in labels: names from tables are shown as text, never as tags
    claims = [replace(c, claim=escape(c.claim), model=escape(c.model), value=escape(c.value), why=escape(c.why))
              for c in claims]
    names = list(dict.fromkeys(c.claim for c in claims))
    models = list(dict.fromkeys(c.model for c in claims))
    fig = go.Figure()
    for verdict in VERDICT_ORDER:
        hits = [c for c in claims if c.verdict == verdict]
        if hits:
            fig.add_trace(go.Scatter(x=[c.model for c in hits], y=[c.claim for c in hits], mode="markers+text",
                                     marker=dict(symbol="square", size=46, color=colours[verdict]), name=verdict,
                                     text=[_figure_number(c) for c in hits],
                                     textfont=dict(size=10),
                                     hovertext=[_hover(c) for c in hits]))
    fig.update_xaxes(categoryorder="array", categoryarray=models, tickangle=-30)
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(names)))
    style(fig, title="The paper's claims, per model (number: the compared quantity)", width=260 + 110 * len(models),
          height=160 + 60 * len(names))
    return fig
