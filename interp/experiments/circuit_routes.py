"""Which route a copy reads its answer through: the names of `interp.experiments.routes` under the
module path the route table has always had (``analyses/circuit_routes.py``, the claims), and
`route_edges`, a route's reads as value or key edges.

See `interp.experiments.routes` for what the table measures (share, necessity and sufficiency of each
route's key and value reads, under removal-only and corrupt counterfactuals) and how it is laid out.
"""

from __future__ import annotations

from interp.experiments.routes import (EXPECTED_ROUTE, READ_KINDS, ROUTE_COUNTERFACTUALS, ROUTES, RouteEffect, RouteRead,
                                       RouteRow, RouteShare, RouteSummary, read_entries, route_effects,
                                       route_preference, route_rows, route_shares, route_summary)
from interp.interventions.circuits.task import CircuitTask
from interp.interventions.edges.patching import Edges

__all__ = ["EXPECTED_ROUTE", "READ_KINDS", "ROUTE_COUNTERFACTUALS", "ROUTES", "RouteEffect", "RouteRow", "RouteShare",
           "RouteSummary", "route_edges", "route_effects", "route_preference", "route_rows", "route_shares",
           "route_summary"]


def route_edges(task: CircuitTask, offset: int) -> Edges:
    """Every copy position that holds an earlier token and predicts the next (the copy's last position
    predicts nothing scored) reading ``o + offset``; a read whose source lies before the prompt (``o - 1``
    of a string starting at position 0) is left out (`interp.experiments.routes.reads.read_entries`
    counts them).

    >>> from interp.models import tiny_tokenizer
    >>> from interp.interventions.circuits.task import copying_task
    >>> t = copying_task(tiny_tokenizer(), "UB", 3, 2)
    >>> e = route_edges(t, -1)
    >>> (t.prompts.string_start, t.prompts.copy_start), e.query[0].tolist(), e.source[0].tolist()  # c0 holds s2, c1 s1
    ((5, 9), [9, 10], [6, 5])
    >>> route_edges(copying_task(tiny_tokenizer(), "UF", 3, 2, fmt="few-shot", n_shots=1), -1).source[0].tolist()
    [0]
    """
    if task.prompts is None:
        raise ValueError(f"task {task.name}: routes need copying prompts (their earlier occurrences)")
    route = next((name for name, value in ROUTES.items() if value == offset), None)
    if route is None:
        raise ValueError(f"offset {offset}; expected one of {sorted(ROUTES.values())} (routes {', '.join(ROUTES)})")
    entries = read_entries(task.prompts, [RouteRead(route, "value")])
    return Edges.shared(entries.query, entries.source, task.n)
