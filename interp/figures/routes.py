"""The route table (``circuit_routes_<model>_<task>[_<format>]``, `interp.experiments.routes`) as a figure and a
sentence: for every route (``o - 1``, ``o``, ``o + 1``, and ``o - 1`` with ``o``), the exact-copy accuracy left
when its value or its key read is removed, under each removal-only counterfactual and under corrupt patching,
with 95% Wilson intervals; and beside it each route's share of the logit-difference gap (value reads, corrupt),
with its bootstrap interval. Prompts of every length of one table are pooled; every head (the table's ``all``
head set, else its first). A table of shares alone (written before necessity was measured) gets the share
panel only, and says so.

`route_figures` draws one per table of a results folder (``make figures``; the figure is named as the table);
`route_sentence` is the results page's sentence for a table, from the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.core.naming import result_files
from interp.core.stats import MIN_GAP
from interp.figures.necessity import (COUNTERFACTUAL_NAMES, KINDS, ROUTE_ORDER, Reading, representative,
                                      route_readings, route_verdict, split_text)
from interp.figures.rows import BAD_TABLE_ERRORS, table_error
from interp.figures.style import OKABE_ITO, style

COUNTERFACTUALS = ("previous_token_cut", "mean", "zero", "corrupt")
ROUTES_SHOWN = (*ROUTE_ORDER, "o-1+o")
COLOURS = {"previous_token_cut": OKABE_ITO["blue"], "mean": OKABE_ITO["green"], "zero": OKABE_ITO["orange"],
           "corrupt": OKABE_ITO["vermillion"]}
MIN_SHARE_PROMPTS = 8  # as the claims: a bootstrap over fewer prompts has no spread to speak of
Rows = Sequence[Mapping]


def _head_set(rows: Rows) -> str:
    sets = list(dict.fromkeys(str(r["head_set"]) for r in rows))
    return "all" if "all" in sets else sets[0]


def _readings(rows: Rows) -> list[Reading]:
    """Every removal's necessity reading (pooled over lengths), under every counterfactual."""
    return route_readings([("table", list(rows))], head_set=_head_set(rows), counterfactuals=COUNTERFACTUALS)


def _shares(rows: Rows) -> tuple[dict, float, int]:
    """Each route's share of the gap (value reads, corrupt; prompts of every length pooled), the mean gap and
    the prompts; no shares where the gap or the prompts are too few to carry one."""
    from interp.experiments.routes import is_share_row, route_shares

    head_set = _head_set(rows)
    mine = [r for r in rows if r["head_set"] == head_set and is_share_row(r)]
    if not mine:
        return {}, float("nan"), 0
    index: dict[tuple[int, int], int] = {}
    pooled = [{**r, "prompt": index.setdefault((int(r["length"]), int(r["prompt"])), len(index))} for r in mine]
    gaps = {index[(int(r["length"]), int(r["prompt"]))]: float(r["clean_metric"]) - float(r["counterfactual_metric"])
            for r in mine}
    gap = sum(gaps.values()) / len(gaps)
    if len(gaps) < MIN_SHARE_PROMPTS or not gap >= MIN_GAP:
        return {}, gap, len(gaps)
    return route_shares(pooled), gap, len(gaps)


def _context(rows: Rows) -> str:
    """``16 prompts, length 9, every head; 1.00 copied exactly``."""
    lengths = ",".join(str(n) for n in sorted({int(r["length"]) for r in rows}))
    head_set = _head_set(rows)
    clean = {(int(r["length"]), int(r["prompt"])): bool(r["correct"]) for r in rows if r["head_set"] == head_set}
    heads = "every head" if head_set == "all" else f"head set {head_set}"
    return (f"{len(clean)} prompts, length{'s' if ',' in lengths else ''} {lengths}, {heads}; "
            f"{sum(clean.values()) / len(clean):.2f} copied exactly")


def route_figure(rows: Rows, source: str = "circuit_routes.csv") -> go.Figure:
    """Necessity of each route's value and key reads (accuracy left without them) and its share of the gap.

    >>> rows = [{"model": "m", "task": "UB", "length": 4, "head_set": "all", "prompt": i, "route": r,
    ...          "clean_metric": 2.0, "counterfactual_metric": -2.0, "patched_metric": 0.0, "correct": True}
    ...         for i in range(8) for r in ("o-1", "o", "o+1")]
    >>> [trace.name for trace in route_figure(rows).data]      # a table of shares alone: the share panel only
    ['share of the gap']
    """
    if not rows:
        raise ValueError(f"{source}: no rows to plot")
    readings = _readings(rows)
    shares, gap, n_share = _shares(rows)
    panels = [f"{kind} read removed" for kind in KINDS if any(r.kind == kind for r in readings)]
    fig = make_subplots(rows=1, cols=len(panels) + 1, horizontal_spacing=0.1,
                        subplot_titles=[*panels, "share of the logit-difference gap"])
    for col, kind in enumerate([k for k in KINDS if any(r.kind == k for r in readings)], 1):
        _necessity_panel(fig, [r for r in readings if r.kind == kind], col, first=col == 1)
    col = len(panels) + 1
    if shares:
        routes = [r for r in ROUTE_ORDER if r in shares]
        fig.add_trace(go.Bar(x=routes, y=[shares[r].share for r in routes], name="share of the gap",
                             marker_color=OKABE_ITO["grey"], showlegend=False,
                             error_y=dict(type="data", symmetric=False, array=[shares[r].hi - shares[r].share for r in routes],
                                          arrayminus=[shares[r].share - shares[r].lo for r in routes]),
                             hovertemplate="%{x}: share %{y:.2f}<extra></extra>"), row=1, col=col)
    else:
        why = (f"no share: mean gap {gap:.2g} logits (under {MIN_GAP:g})" if n_share >= MIN_SHARE_PROMPTS
               else f"no share: {n_share} prompts (under {MIN_SHARE_PROMPTS})")
        fig.add_annotation(text=why, xref=f"x{col} domain", yref=f"y{col} domain", x=0.5, y=0.5, showarrow=False)
    fig.update_yaxes(title_text="value reads, corrupt", row=1, col=col)
    fig.update_xaxes(title_text="route", row=1, col=col)
    task, model = rows[0]["task"], rows[0]["model"]
    note = (f"{_context(rows)}. Accuracy: exact copies (teacher-forced) with the read removed, Wilson 95% interval; "
            "dashed: clean accuracy, dotted: half of it (below: needed). Removal-only counterfactuals take information "
            "away (previous-token cut: what previous-token heads wrote; mean; zero, for values: a zero key can pull "
            "attention toward its entry); corrupt brings the other prompt's "
            "token in (hollow). Share: bootstrap 95% interval over prompts.")
    if not readings:
        note = f"{_context(rows)}. Necessity not measured: a table of shares alone. Share: bootstrap 95% interval over prompts."
    fig.update_layout(margin=dict(b=160))  # room for the note under the panels
    return style(fig, f"Which reads {model}'s {task} copy needs", 380 + 340 * len(panels) + (200 if not panels else 0), 580,
                 note=note)


def _necessity_panel(fig: go.Figure, readings: list[Reading], col: int, first: bool) -> None:
    """One read kind: accuracy without the read per route, one marker per counterfactual, side by side."""
    width = 0.16
    for i, counterfactual in enumerate(COUNTERFACTUALS):
        mine = sorted((r for r in readings if r.counterfactual == counterfactual), key=lambda r: ROUTES_SHOWN.index(r.route))
        if not mine:
            continue
        x = [ROUTES_SHOWN.index(r.route) + (i - 1.5) * width for r in mine]
        colour = COLOURS[counterfactual]
        fig.add_trace(go.Scatter(
            x=x, y=[r.accuracy for r in mine], mode="markers", name=COUNTERFACTUAL_NAMES[counterfactual],
            legendgroup=counterfactual, showlegend=first,
            marker=dict(size=9, color="white" if counterfactual == "corrupt" else colour, line=dict(color=colour, width=2)),
            error_y=dict(type="data", symmetric=False, array=[r.hi - r.accuracy for r in mine],
                         arrayminus=[r.accuracy - r.lo for r in mine], color=colour, thickness=1.5, width=3),
            customdata=[[r.route, r.verdict, r.n] for r in mine],
            hovertemplate="%{customdata[0]}: %{y:.2f} left (%{customdata[1]}, n=%{customdata[2]})<extra></extra>"),
            row=1, col=col)
    clean = max((r.clean for r in readings), default=1.0)
    fig.add_hline(y=clean, line=dict(color=OKABE_ITO["black"], dash="dash", width=1), row=1, col=col)
    fig.add_hline(y=clean / 2, line=dict(color=OKABE_ITO["black"], dash="dot", width=1), row=1, col=col)
    fig.update_xaxes(tickvals=list(range(len(ROUTES_SHOWN))), ticktext=list(ROUTES_SHOWN), range=[-0.5, len(ROUTES_SHOWN) - 0.5],
                     title_text="read removed", row=1, col=col)
    fig.update_yaxes(range=[-0.05, 1.05], title_text="exact copies left" if first else None, row=1, col=col)


def _clause(route: str, readings: list[Reading]) -> str:
    verdict = route_verdict(readings)
    shown = representative(readings, verdict if verdict in ("needed", "not needed") else "unclear")
    if shown is None:
        return ""
    left = (f"{shown.accuracy:.2f} [{shown.lo:.2f}, {shown.hi:.2f}] exact copies without its {shown.kind}, "
            f"{COUNTERFACTUAL_NAMES[shown.counterfactual]}")
    if verdict == "needed":
        return f"the read at {route} is needed ({left})"
    if verdict == "not needed":
        return f"the read at {route} is not needed ({left})"
    if verdict == "mixed":
        return f"the read at {route} is needed under some removals only ({split_text(readings)})"
    return f"whether the read at {route} is needed is unclear ({left})"


def route_sentence(rows: Rows) -> str:
    """The table in one or two sentences: which reads the copy needs (removal-only counterfactuals; per route the
    removal that shows it best, `interp.figures.necessity.representative`) and the shares of the gap.

    >>> rows = [{"model": "m", "task": "UB", "length": 4, "head_set": "all", "prompt": i, "route": r,
    ...          "clean_metric": 2.0, "counterfactual_metric": -2.0, "patched_metric": {"o-1": -2.0}.get(r, 2.0),
    ...          "correct": True} for i in range(8) for r in ("o-1", "o", "o+1")]
    >>> route_sentence(rows)  # doctest: +NORMALIZE_WHITESPACE
    'On UB (m, 8 prompts, length 4, every head; 1.00 copied exactly), under corrupt patching the value reads at o-1, o, o+1 carry 1.00
     [1.00, 1.00], 0.00 [0.00, 0.00], 0.00 [0.00, 0.00] of the logit-difference gap. Necessity was not measured
     in this table (a table of shares alone).'
    """
    if not rows:
        return ""
    task, model = rows[0]["task"], rows[0]["model"]
    readings = [r for r in _readings(rows) if r.counterfactual != "corrupt"]
    head = f"On {task} ({model}, {_context(rows)}), "
    shares, gap, n_share = _shares(rows)
    if shares:
        routes = [r for r in ROUTE_ORDER if r in shares]
        share = (f"under corrupt patching the value reads at {', '.join(routes)} carry "
                 + ", ".join(f"{shares[r].share:.2f} [{shares[r].lo:.2f}, {shares[r].hi:.2f}]" for r in routes)
                 + " of the logit-difference gap")
    elif n_share:
        share = (f"the mean logit-difference gap under corrupt patching, {gap:.2g}, is too small to share" if
                 n_share >= MIN_SHARE_PROMPTS else f"{n_share} prompts are too few for a share of the gap")
    else:
        share = ""
    if not readings:
        return head + (share or "nothing was measured") + ". Necessity was not measured in this table (a table of shares alone)."
    clean = max(r.clean for r in readings)
    if all(r.verdict == "cannot test" for r in readings):
        return head + f"the copy is too rare to remove a read from ({task} at {clean:.2f} clean)."
    clauses = [c for route in ROUTE_ORDER if (c := _clause(route, [r for r in readings if r.route == route]))]
    text = head + "removing one read at a time, " + "; ".join(clauses) + "."
    return text + (f" {share[0].upper()}{share[1:]}." if share else "")


def route_figures(results_dir: str | Path, model: str | None = None,
                  log=print) -> tuple[list[tuple[str, go.Figure]], list[str]]:
    """One `route_figure` per route table in ``results_dir`` (``model``'s only, when given), named as the table;
    and the errors (tables the validating reader refuses, one line each).

    >>> figures, errors = route_figures("results", "planted-ub", log=lambda line: None)  # from the repository's root
    >>> [stem for stem, _ in figures], errors
    (['circuit_routes_planted-ub_UB'], [])
    """
    from interp.core.published import read_published

    paths = result_files(results_dir, "circuit_routes")
    if not paths:
        log(f"note: skipping route figures: no {results_dir}/circuit_routes_*.csv (written by analyses/circuit_routes.py)")
    figures, errors = [], []
    for path in paths:
        try:
            rows = read_published(path, "circuit_routes")
            if model is None or str(rows[0]["model"]) == model:
                figures.append((path.stem, route_figure(rows, str(path))))
        except BAD_TABLE_ERRORS as err:
            errors.append(table_error(path, err))
    return figures, errors
