"""Which reads a copy needs: the route table.

At every copy position ``t`` that predicts a scored token, ``o(t)`` is the earlier occurrence of ``t``'s
token. The paper's edges (`interp.interventions.edges.data`): induction reads ``o + 1`` (the answer
itself for UF), anti-induction reads ``o``, whose residual holds its previous token (written there by
a previous-token head: the answer for UB). Reading ``o - 1`` directly is a third route, and a model may
use yet others (scratch-ub reads ``o + 1``, where a two-back head wrote the answer). Each route is
read through the source's **value** (carrying the token) or its **key** (finding the position: the
entry's score is recomputed with the replaced key and the softmax renormalises); the two are kept apart.

For every route, kind and counterfactual, per prompt:

* **necessity** -- the route's reads alone removed: is the copy lost without them? Also the **joint**
  removal of ``o`` and ``o - 1`` (route ``o-1+o``);
* **sufficiency** -- every other read of the copy positions of that kind removed (the copy positions'
  reads of every other source position at or before them), the route's read kept: does the copy
  survive on it alone? With every layer's heads this also removes each copy position's own
  previous-token read (``t -> t - 1``), which some models need besides the route (planted-ub does); the
  ``circuit`` or ``layers_*`` head sets ask the question of the route's heads only;
* **share** -- the necessity rows under ``corrupt``, value reads: the share of the gap
  ``clean - counterfactual prompt`` the route's reads carry (`shares.route_shares`, what the claims read).

Counterfactuals (`removal`): ``previous_token_cut`` (the paper's: a read's key or value from a run with
every previous-token edge cut), ``mean`` (over the counterfactual prompts, per position), ``zero`` --
these take information away without bringing a competitor in -- and ``corrupt`` (the counterfactual
prompt's, which does bring one in). Metrics (`measure`): the logit difference (answer minus
counterfactual answer), the margin (answer minus the largest other logit), the answer's
log-probability, and the exact copy (teacher-forced).

**The table** (``circuit_routes_<model>_<task>[_<format>]``, written by ``analyses/circuit_routes.py``):
one row per (length, head set, route, kind, test, counterfactual, prompt), the fields of
`measure.RouteRow`: ``model, task, length, format, shots, head_set, heads, prompt, route, kind, test,
counterfactual, removed, skipped``, the logit difference as ``clean_metric, counterfactual_metric,
patched_metric`` (the names the share rows always had), ``clean_margin, counterfactual_margin,
patched_margin, clean_logprob, counterfactual_logprob, patched_logprob``, ``correct`` (the clean exact
copy) and ``patched_correct``. `summary.route_summary` turns it into one `summary.RouteSummary` per
removal (Wilson intervals for accuracy, bootstrap intervals over prompts for metrics and shares, a
verdict by the rule in `summary`).

Reads whose source lies before the prompt (``o - 1`` of a string at position 0, in a few-shot prompt
of one shot without BOS) cannot be removed: they are skipped, and ``skipped`` counts them per row.

Modules: `reads` (routes, reads, removals, their attention entries), `removal` (counterfactuals and
patches), `measure` (the per-prompt rows), `shares` (shares of the gap), `summary` (intervals and
verdicts), `study` (cells, executor, circuit heads).
"""

from interp.experiments.routes.measure import METRIC_NAMES, AnswerScores, RouteRow, answer_scores, route_rows
from interp.experiments.routes.reads import (EXPECTED_ROUTE, JOINT_ROUTES, READ_KINDS, ROUTES, TESTS, Entries, Removal,
                                             RouteRead, copy_reads, other_entries, read_entries, removal_entries,
                                             route_removals)
from interp.experiments.routes.removal import (REMOVAL_ONLY, ROUTE_COUNTERFACTUALS, check_counterfactuals, heads_label,
                                              removal_only)
from interp.experiments.routes.shares import (RouteEffect, RouteShare, is_share_row, route_effects, route_preference,
                                              route_shares)
from interp.experiments.routes.study import (ALL_HEADS, HeadSet, RouteCell, RouteStudyConfig, circuit_head_set,
                                             circuit_heads, layer_head_set, route_cell_rows, route_cells, route_study)
from interp.experiments.routes.summary import (FLOOR, MIN_GAP, RouteSummary, route_report, route_summary, summary_lines,
                                               verdict)

__all__ = [
    "ALL_HEADS", "EXPECTED_ROUTE", "FLOOR", "JOINT_ROUTES", "METRIC_NAMES", "MIN_GAP", "READ_KINDS", "REMOVAL_ONLY", "removal_only",
    "ROUTE_COUNTERFACTUALS", "ROUTES", "TESTS", "AnswerScores", "Entries", "HeadSet", "Removal", "RouteCell",
    "RouteEffect", "RouteRead", "RouteRow", "RouteShare", "RouteStudyConfig", "RouteSummary", "answer_scores",
    "check_counterfactuals", "circuit_head_set", "circuit_heads", "copy_reads", "heads_label", "is_share_row",
    "layer_head_set", "other_entries", "read_entries", "removal_entries", "route_cell_rows", "route_cells",
    "route_effects", "route_preference", "route_removals", "route_report", "route_rows", "route_shares", "route_study",
    "route_summary",
    "summary_lines", "verdict",
]
