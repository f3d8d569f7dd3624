"""The paper's claims x models: one table (and one figure) read from a results folder.

Each claim is a comparison the paper makes; for each model whose tables hold the numbers, the
row gives the number, its 95% interval, the sample size, and a verdict:

* ``supports`` / ``contradicts``: the interval excludes the other side; for "ablation breaks" and
  "edges carry" claims, a drop whose interval stays under 0.1 (``NEGLIGIBLE_DROP``) contradicts;
* ``inconclusive``: it does not;
* ``cannot test``: the comparison is empty on this model (e.g. UB at 0.00 before any ablation:
  an ablation cannot lower it), said with the reason.

Proportions carry Wilson intervals; differences of proportions Newcombe's hybrid score interval
(method 10). Head-score claims compare the best head's score with fixed levels (strong >= 0.5,
weak < 0.2; both are mean attention to one position, so 1.0 is a head that always attends there).
Route claims (``circuit_routes`` tables) compare the share of the metric gap carried by the paper's
route (value reads from ``o + 1`` for UF, from ``o`` for UB) with the largest other route's, the
difference bootstrapped over prompts. A share needs a gap to share: a verdict needs at least
``MIN_ROUTE_PROMPTS`` (8) prompts, a mean gap (clean - counterfactual metric) of at least
``MIN_ROUTE_GAP`` (0.5 logits), and every route's share within ``MAX_ROUTE_SHARE`` (2) of zero;
otherwise the claim cannot be tested on that table, and no share is shown.
Nothing here runs a model: re-running an analysis and then ``analyses/claims.py`` refreshes it
(the table, grid and figure: `interp.figures.claims_figure`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from interp.core.naming import model_label, result_files, split_result_stem
from interp.core.published import read_published
from interp.core.stats import MIN_GAP, difference_interval

STRONG, WEAK = 0.5, 0.2
FLOOR = 0.2  # below this baseline accuracy an ablation or edge removal has nothing to break
# A drop whose 95% interval stays under this is too small for the intervened part to "carry" the task.
NEGLIGIBLE_DROP = 0.1
# A route's share is a ratio over the metric gap: below 0.5 logits of mean gap (the counterfactual barely
# moves the answer) the ratio is noise, and a bootstrap over fewer than 8 prompts has no spread to speak of.
MIN_ROUTE_GAP = MIN_GAP  # interp.core.stats: shares of a smaller gap are noise
MIN_ROUTE_PROMPTS = 8
# Patching one route's reads moves the metric by a share of the whole clean-to-counterfactual gap; one that
# moves it more than twice that gap (either way) is not carrying a share of it.
MAX_ROUTE_SHARE = 2.0
Rows = list[dict]


@dataclass(frozen=True)
class Claim:
    """One row of the claims table."""

    claim: str
    model: str
    value: str  # the number(s), as read
    estimate: float  # the compared quantity (a difference, a score, an accuracy after intervention)
    lo: float
    hi: float
    n: int
    verdict: str  # supports | contradicts | inconclusive | cannot test
    source: str  # the results file it was read from
    note: str = ""

    def as_row(self) -> dict:
        return asdict(self)


def _proportion(rows: Rows) -> tuple[int, int]:
    """Successes and trials pooled over rows with ``accuracy`` and ``n_examples``."""
    hits = sum(round(float(r["accuracy"]) * int(r["n_examples"])) for r in rows)
    return hits, sum(int(r["n_examples"]) for r in rows)


def _verdict(lo: float, hi: float) -> str:
    return "supports" if lo > 0 else "contradicts" if hi < 0 else "inconclusive"


def _gap_claim(claim: str, model: str, rows: Rows, source: str, better: str, worse: str) -> Claim | None:
    """``better`` beats ``worse`` (pooled over the lengths both were measured at)."""
    lengths = {int(r["length"]) for r in rows if r["task"] == better} & {int(r["length"]) for r in rows if r["task"] == worse}
    if not lengths:
        return None
    a = _proportion([r for r in rows if r["task"] == better and int(r["length"]) in lengths])
    b = _proportion([r for r in rows if r["task"] == worse and int(r["length"]) in lengths])
    d, lo, hi = difference_interval(a, b)
    value = f"{better} {a[0] / a[1]:.2f} vs {worse} {b[0] / b[1]:.2f} (lengths {','.join(map(str, sorted(lengths)))})"
    if a[0] == b[0] == 0:
        return Claim(claim, model, value, d, lo, hi, a[1] + b[1], "cannot test", source, "both at 0")
    return Claim(claim, model, value, d, lo, hi, a[1] + b[1], _verdict(lo, hi), source)


def _score_claim(claim: str, model: str, rows: Rows, source: str, column: str, strong: bool) -> Claim | None:
    scored = [r for r in rows if r.get(column) not in (None, "")]
    if not scored:
        return None
    best = max(scored, key=lambda r: float(r[column]))
    score = float(best[column])
    if strong:
        verdict = "supports" if score >= STRONG else "contradicts" if score < WEAK else "inconclusive"
    else:
        verdict = "supports" if score < WEAK else "contradicts" if score >= STRONG else "inconclusive"
    value = f"best {column} {score:.3f} (head {best['layer']}.{best['head']})"
    return Claim(claim, model, value, score, score, score, len(scored), verdict, source, f"over {len(scored)} heads")


def _drop_claim(claim: str, model: str, before: Rows, after: Rows, control: Rows, source: str, what: str) -> Claim | None:
    """An intervention lowers accuracy below the clean run (and below a control where one exists)."""
    if not before or not after:
        return None
    clean, hit = _proportion(before), _proportion(after)
    d, lo, hi = difference_interval(clean, hit)
    value = f"{what} {clean[0] / clean[1]:.2f} -> {hit[0] / hit[1]:.2f}"
    if clean[0] / clean[1] < FLOOR:
        return Claim(claim, model, value, d, lo, hi, clean[1], "cannot test", source,
                     f"{what} at {clean[0] / clean[1]:.2f} before the intervention")
    note = ""
    if control:
        ctrl = _proportion(control)
        _, clo, _ = difference_interval(ctrl, hit)
        value += f" (random heads {ctrl[0] / ctrl[1]:.2f})"
        if clo <= 0 and lo > 0:
            return Claim(claim, model, value, d, lo, hi, clean[1], "inconclusive", source, "random heads hurt as much")
    verdict = "contradicts" if hi < NEGLIGIBLE_DROP and lo <= 0 else _verdict(lo, hi)
    note = f"the drop is below {NEGLIGIBLE_DROP} at 95%" if verdict == "contradicts" and hi >= 0 else note
    return Claim(claim, model, value, d, lo, hi, clean[1], verdict, source, note)


def _directional_claims(model: str, rows: Rows, source: str) -> list[Claim]:
    found = [_gap_claim("UF > UB (forward beats backward copying)", model, rows, source, "UF", "UB"),
             _gap_claim("UR > UL (right beats left retrieval)", model, rows, source, "UR", "UL")]
    return [c for c in found if c]


def _head_score_claims(model: str, rows: Rows, source: str) -> list[Claim]:
    found = [_score_claim("strong induction heads (paper's score)", model, rows, source, "induction", True),
             _score_claim("weak anti-induction heads (paper's score)", model, rows, source, "anti_induction", False),
             _score_claim("weak backward-copying candidates (duplicate-token x V-composition)", model, rows, source,
                          "duplicate_v_composition", False)]
    return [c for c in found if c]


def _ablation_claims(model: str, rows: Rows, source: str) -> list[Claim]:
    def pick(condition: str, task: str, kind: str | None = None) -> Rows:
        return [r for r in rows if r["condition"] == condition and r["task"] == task
                and (kind is None or r.get("ablation") == kind)]

    found = [_drop_claim("induction-head ablation breaks UF", model, pick("baseline", "UF"), pick("induction", "UF", "zero"),
                         pick("random", "UF", "zero"), source, "UF"),
             _drop_claim("anti-induction-head ablation breaks UB", model, pick("baseline", "UB"),
                         pick("anti_induction", "UB", "zero"), pick("random", "UB", "zero"), source, "UB")]
    return [c for c in found if c]


def _edge_claims(model: str, rows: Rows, source: str) -> list[Claim]:
    def pick(condition: str, task: str) -> Rows:
        return [{"accuracy": r["accuracy"], "n_examples": r.get("n_examples") or r.get("n")} for r in rows
                if r.get("condition") == condition and r.get("task") == task]

    found = [_drop_claim("induction edges carry UF", model, pick("none", "UF"), pick("induction", "UF"), [], source, "UF"),
             _drop_claim("anti-induction edges carry UB", model, pick("none", "UB"), pick("anti_induction", "UB"), [], source, "UB")]
    return [c for c in found if c]


def _scratch_claims(model: str, rows: Rows, source: str) -> list[Claim]:
    """Expressible tasks keep their accuracy beyond the training lengths; inexpressible ones lose it."""
    ood = [r for r in rows if r.get("split") == "ood"]
    if not ood:
        return []
    claims = []
    for positional in sorted({r["positional"] for r in ood}):
        mine = [r for r in ood if r["positional"] == positional]
        yes = [float(r["accuracy"]) for r in mine if str(r["expressible"]) in ("True", "true", "1")]
        no = [float(r["accuracy"]) for r in mine if str(r["expressible"]) not in ("True", "true", "1")]
        if not yes or not no:
            continue
        gap = sum(yes) / len(yes) - sum(no) / len(no)
        worst_yes, best_no = min(yes), max(no)
        verdict = "supports" if worst_yes > best_no else "contradicts" if gap < 0 else "inconclusive"
        value = (f"{positional}: expressible OOD mean {sum(yes) / len(yes):.2f} (min {worst_yes:.2f}), "
                 f"inexpressible {sum(no) / len(no):.2f} (max {best_no:.2f})")
        claims.append(Claim("expressible tasks length-generalize from scratch, inexpressible do not", f"{model} ({positional})",
                            value, gap, worst_yes - best_no, gap, len(mine), verdict, source, "lo = min expressible - max inexpressible"))
    return claims


# The paper's Lorem Ipsum scores (Llama-3.1-8B, unambiguous / ambiguous transitions), quoted beside ours.
LOREM_REFERENCE = "Llama-3.1-8B .9996 / .9643"


def _realistic_claims(model: str, rows: Rows, source: str) -> list[Claim]:
    """The realistic tasks: git history (revert, a forward copy, beats cherry-pick, a backward one,
    at each history length N) and Lorem Ipsum (copying is more accurate at unambiguous positions,
    whose token has one successor in the paragraph, than at ambiguous ones).

    >>> git = [{"task": t, "n_commits": 10, "n_examples": 20, "accuracy": a} for t, a in (("revert", 0.9), ("cherry-pick", 0.1))]
    >>> [(c.claim, c.verdict) for c in _realistic_claims("m", git, "git_history_m.csv")]
    [('git history: revert > cherry-pick (forward beats backward copy), N=10', 'supports')]
    """
    if rows and "n_commits" in rows[0]:
        claims = []
        for n in sorted({int(r["n_commits"]) for r in rows}):
            forward = [r for r in rows if r["task"] == "revert" and int(r["n_commits"]) == n]
            backward = [r for r in rows if r["task"] == "cherry-pick" and int(r["n_commits"]) == n]
            if forward and backward:
                found = _gap_claim(f"git history: revert > cherry-pick (forward beats backward copy), N={n}", model,
                                   [{**r, "task": "revert", "length": n} for r in forward]
                                   + [{**r, "task": "cherry-pick", "length": n} for r in backward],
                                   source, "revert", "cherry-pick")
                claims.append(replace(found, value=found.value.replace(f" (lengths {n})", "")))
        return claims
    claims = []
    for r in rows:
        if not r.get("n_ambiguous_positions") or not r.get("n_unambiguous_positions"):
            continue  # a summary written before the position counts were kept
        clear = (round(float(r["tf_accuracy_unambiguous"]) * int(r["n_unambiguous_positions"])), int(r["n_unambiguous_positions"]))
        ambiguous = (round(float(r["tf_accuracy_ambiguous"]) * int(r["n_ambiguous_positions"])), int(r["n_ambiguous_positions"]))
        d, lo, hi = difference_interval(clear, ambiguous)
        value = (f"unambiguous {clear[0] / clear[1]:.4f} vs ambiguous {ambiguous[0] / ambiguous[1]:.4f} "
                 f"({LOREM_REFERENCE}); exact copies {round(float(r['accuracy']) * int(r['n_paragraphs']))}/{int(r['n_paragraphs'])}")
        claims.append(Claim("Lorem Ipsum: copying is more accurate at unambiguous than at ambiguous positions", model,
                            value, d, lo, hi, clear[1] + ambiguous[1], _verdict(lo, hi), source,
                            f"teacher-forced positions pooled over {int(r['n_paragraphs'])} paragraphs "
                            "(not independent within one: the interval is optimistic)"))
    return claims


ROUTE_CLAIMS = {"UF": "UF's circuit runs through the induction route (value reads from o+1)",
                "UB": "UB's circuit runs through the anti-induction route (value reads from o)"}


def _route_units(rows: Rows, source: str) -> dict[tuple[int, int], Rows]:
    """The rows of each (length, prompt): every route once, one clean and one counterfactual run."""
    from interp.experiments.circuit_routes import ROUTES

    units: dict[tuple[int, int], Rows] = {}
    for r in rows:
        units.setdefault((int(r["length"]), int(r["prompt"])), []).append(r)
    for (length, prompt), mine in units.items():
        where = f"results file {source}: prompt {prompt} of length {length} ({mine[0]['head_set']} heads)"
        if sorted(str(r["route"]) for r in mine) != sorted(ROUTES):
            raise ValueError(f"{where} has routes {', '.join(str(r['route']) for r in mine)}; expected each of "
                             f"{', '.join(ROUTES)} once")
        for column in ("clean_metric", "counterfactual_metric", "correct"):
            if len({r[column] for r in mine}) > 1:
                raise ValueError(f"{where}: {column} differs between its routes ({', '.join(str(r[column]) for r in mine)}); "
                                 "expected one value per prompt (one clean and one counterfactual run)")
    return units


def _route_gap_problem(n: int, mean_gap: float) -> str | None:
    """Why a gap of ``mean_gap`` over ``n`` prompts carries no share, or None."""
    if n < MIN_ROUTE_PROMPTS:
        return f"{n} prompt(s); a verdict needs at least {MIN_ROUTE_PROMPTS}"
    if not mean_gap >= MIN_ROUTE_GAP:
        return (f"mean gap (clean - counterfactual metric) {mean_gap:.3g} logits; a share of it needs at least "
                f"{MIN_ROUTE_GAP:g}")
    return None


def _route_claims(model: str, rows: Rows, source: str) -> list[Claim]:
    """A copy runs through the paper's route when that route's value reads carry more of the metric gap
    than either other route's (`interp.experiments.circuit_routes.route_preference`: the share
    difference, its bootstrap interval over prompts); the circuit's heads where the table has them.
    Too few prompts, too small a gap or a share beyond any route's reach give no verdict and no share.

    >>> rows = [{"task": "UB", "length": 5, "head_set": "all", "prompt": i, "route": r, "clean_metric": 2.0,
    ...          "counterfactual_metric": -2.0, "correct": True,
    ...          "patched_metric": {"o": -1.5, "o-1": 2.0, "o+1": 1.5 + 0.1 * (i % 2)}[r]} for i in range(8)
    ...         for r in ("o-1", "o", "o+1")]
    >>> c = _route_claims("m", rows, "circuit_routes_m_UB.csv")[0]
    >>> c.verdict, round(c.estimate, 2), c.n
    ('supports', 0.76, 8)
    >>> c = _route_claims("m", [{**r, "counterfactual_metric": 2.0} for r in rows], "circuit_routes_m_UB.csv")[0]
    >>> c.verdict, c.note
    ('cannot test', 'mean gap (clean - counterfactual metric) 0 logits; a share of it needs at least 0.5')
    """
    from interp.experiments.circuit_routes import EXPECTED_ROUTE, route_preference, route_shares
    from interp.experiments.routes import is_share_row

    claims = []
    for task in sorted({str(r["task"]) for r in rows} & set(ROUTE_CLAIMS)):
        # the share rows: each route's value reads alone, patched to the corrupt prompt's
        mine = [r for r in rows if r["task"] == task and is_share_row(r)]
        head_set = "circuit" if any(r["head_set"] == "circuit" for r in mine) else "all"
        units = _route_units([r for r in mine if r["head_set"] == head_set], source)
        # prompts of every length pooled: one resampling unit per (length, prompt)
        mine = [{**r, "prompt": length * 1_000_000 + prompt} for (length, prompt), unit in units.items() for r in unit]
        expected = EXPECTED_ROUTE[task]
        gaps = [float(unit[0]["clean_metric"]) - float(unit[0]["counterfactual_metric"]) for unit in units.values()]
        accuracy = sum(bool(unit[0]["correct"]) for unit in units.values()) / len(units)
        lengths = ",".join(str(x) for x in sorted({length for length, _ in units}))
        context = f"{head_set} heads; {task} {accuracy:.2f} clean, lengths {lengths}"
        nan = math.nan  # no share is shown where none could be measured
        gap_value = f"mean gap {sum(gaps) / len(gaps):.3g} logits over {len(units)} prompt(s) ({context})"
        if problem := _route_gap_problem(len(units), sum(gaps) / len(gaps)):
            claims.append(Claim(ROUTE_CLAIMS[task], model, gap_value, nan, nan, nan, len(units), "cannot test", source,
                                problem))
            continue
        preference, shares = route_preference(mine, expected), route_shares(mine)
        value = ("share of the gap " + ", ".join(f"{s.route} {s.share:.2f} [{s.lo:.2f}, {s.hi:.2f}]" for s in shares.values())
                 + f" ({context})")
        wild = [s for s in shares.values() if not abs(s.share) <= MAX_ROUTE_SHARE]
        if wild or not all(math.isfinite(x) for x in (preference.share, preference.lo, preference.hi)):
            shown = wild[0] if wild else preference
            claims.append(Claim(ROUTE_CLAIMS[task], model, gap_value, nan, nan, nan, preference.n, "cannot test", source,
                                f"route {shown.route}'s share {shown.share:.3g} lies beyond +-{MAX_ROUTE_SHARE:g}: the patch "
                                "moves the metric further than the whole gap it would be a share of"))
            continue
        if accuracy < FLOOR:
            claims.append(Claim(ROUTE_CLAIMS[task], model, value, preference.share, preference.lo, preference.hi,
                                preference.n, "cannot test", source, f"{task} at {accuracy:.2f}: no copy to route"))
            continue
        claims.append(Claim(ROUTE_CLAIMS[task], model, value, preference.share, preference.lo, preference.hi, preference.n,
                            _verdict(preference.lo, preference.hi), source,
                            f"estimate: {expected}'s share minus the largest other; bootstrap over prompts"))
    return claims


READERS: dict[str, Callable[[str, Rows, str], list[Claim]]] = {
    "directional_bias": _directional_claims, "head_scores": _head_score_claims, "ablation": _ablation_claims,
    "edge_patching": _edge_claims, "from_scratch": _scratch_claims,
    "git_history": _realistic_claims, "lorem_ipsum_summary": _realistic_claims, "circuit_routes": _route_claims,
}


def heads_chosen_by(rows: Sequence[Mapping]) -> str:
    """The head scores, other than the paper's, that chose a table's ablated heads (its rows'
    ``selected_by``), or ``""`` for the paper's choice or a table without that column.

    >>> heads_chosen_by([{"condition": "anti_induction", "selected_by": "duplicate_v_composition"},
    ...                  {"condition": "induction", "selected_by": "induction"}])
    'duplicate_v_composition'
    """
    return ", ".join(sorted({str(r["selected_by"]) for r in rows
                             if r.get("selected_by") and r.get("condition") in ("induction", "anti_induction")
                             and r["selected_by"] != r["condition"]}))


def claim_rows(results_dir: str | Path) -> list[Claim]:
    """Every claim the tables in ``results_dir`` can speak to, for every model they hold.

    >>> rows = claim_rows("results")  # doctest: +SKIP
    >>> {c.verdict for c in rows} <= {"supports", "contradicts", "inconclusive", "cannot test"}  # doctest: +SKIP
    True
    """
    results_dir = Path(results_dir)
    claims: list[Claim] = []
    for kind, reader in READERS.items():
        for path in result_files(results_dir, kind):
            rows = read_published(path, kind)  # refuses what would give a confident wrong verdict
            rest = split_result_stem(path.stem)[1]  # a name read_published has checked
            if kind == "from_scratch":  # a table of its own models, named by its preset
                raw = "from scratch" + (f", {rest}" if rest else "")
            else:
                raw = str(rows[0].get("model") or rest)
            model = model_label(raw) if "/" in raw else raw  # a model loaded from a folder is named by the folder
            found = reader(model, rows, path.name)
            chosen = heads_chosen_by(rows)
            if chosen:  # another choice of heads (ablate_heads.py --anti-heads-by): its own claim rows
                found = [replace(c, claim=f"{c.claim} (heads by {chosen})") for c in found]
            claims += found
    return claims
