"""The paper's claims x models: one table (and one figure) read from a results folder.

Each claim is a comparison the paper makes; for each model whose tables hold the numbers, the
row gives the number, its 95% interval, the sample size, and a verdict:

* ``supports`` / ``contradicts``: the interval excludes the other side; for "ablation breaks" claims,
  a drop whose interval stays under 0.1 (``NEGLIGIBLE_DROP``) contradicts;
* ``inconclusive``: it does not;
* ``cannot test``: the comparison is empty on this model (e.g. UB at 0.00 before any ablation:
  an ablation cannot lower it), said with the reason.

Proportions carry Wilson intervals; differences of proportions Newcombe's hybrid score interval
(method 10). Head-score claims compare the best head's score with fixed levels (strong >= 0.5,
weak < 0.2; both are mean attention to one position, so 1.0 is a head that always attends there).
The paper's two edge hypotheses (UF copies through induction, the reads at ``o + 1``; UB through
anti-induction, the reads at ``o``) get one row each per model, decided from every instrument that measured
them -- the paper's edge patching, route necessity, route share and the circuit's role edges -- by the rule
of `interp.figures.hypotheses` (docs/findings.md, "How a hypothesis is decided"); the row's ``why`` says which
way the instruments point and, where they disagree, why. A share needs a gap to share: at least
``MIN_ROUTE_PROMPTS`` (8) prompts, a mean gap of at least ``MIN_ROUTE_GAP`` (0.5 logits) and every route's
share within ``MAX_ROUTE_SHARE`` (2) of zero, else no share is shown or used.
Nothing here runs a model: re-running an analysis and then ``analyses/claims.py`` refreshes it
(the table, grid and figure: `interp.figures.claims_figure`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from interp.core.naming import model_label, result_files, split_result_stem
from interp.core.published import read_published
from interp.core.stats import difference_interval
from interp.figures.hypothesis_evidence import MAX_ROUTE_SHARE, MIN_ROUTE_GAP, MIN_ROUTE_PROMPTS  # noqa: F401 (their rule)

STRONG, WEAK = 0.5, 0.2
FLOOR = 0.2  # below this baseline accuracy an ablation or edge removal has nothing to break
# A drop whose 95% interval stays under this is too small for the intervened part to "carry" the task.
NEGLIGIBLE_DROP = 0.1
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
    why: str = ""  # the grid cell's short reason (the hypothesis rows: which way the instruments point, and why)

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


READERS: dict[str, Callable[[str, Rows, str], list[Claim]]] = {
    "directional_bias": _directional_claims, "head_scores": _head_score_claims, "ablation": _ablation_claims,
    "from_scratch": _scratch_claims, "git_history": _realistic_claims, "lorem_ipsum_summary": _realistic_claims,
}
HYPOTHESES_AFTER = "ablation"  # the hypothesis rows follow the ablation rows in the table


def hypothesis_claims(results_dir: str | Path) -> list[Claim]:
    """One row per model and edge hypothesis (UF through induction, UB through anti-induction), decided from the
    paper's edge patching, route necessity, route share and the circuit's role edges together
    (`interp.figures.hypotheses`; absent tables leave their instrument unused, said in the row).

    >>> rows = [{"task": "UB", "length": 5, "condition": c, "accuracy": a, "n_examples": 32, "model": "m"}
    ...         for c, a in (("none", 1.0), ("anti_induction", 0.0))]
    >>> import tempfile
    >>> from interp.core.tables import write_table
    >>> folder = tempfile.mkdtemp()
    >>> _ = write_table(rows, Path(folder) / "edge_patching_m")
    >>> [(c.claim, c.verdict, c.why) for c in hypothesis_claims(folder)]
    [("UB's copy runs through anti-induction (reads at o)", 'supports', 'needed')]
    """
    from interp.figures.hypotheses import decide
    from interp.figures.hypothesis_evidence import gather

    claims = []
    for evidence in gather(results_dir):
        d = decide(evidence)
        claims.append(Claim(evidence.hypothesis.claim, evidence.model, d.value, d.estimate, d.lo, d.hi, d.n, d.verdict,
                            d.source, d.note, d.why))
    return claims


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
        if kind == HYPOTHESES_AFTER:
            claims += hypothesis_claims(results_dir)
    return claims
