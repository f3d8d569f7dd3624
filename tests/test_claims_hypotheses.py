"""One claims row per edge hypothesis and model, decided from every instrument that measured it (the paper's
edge patching, route necessity, route share, the circuit's role edges), on small hand-made tables whose answer
is known. The cases are the project's own: the UB fine-tune's two rows that contradicted each other (edge
patching "yes +0.12" beside the route share "NO"), an AND of two reads, corrupt patching breaking what removal
does not, removals that disagree, and instruments whose tables are absent."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from interp.core.published import read_published
from interp.core.tables import write_table
from interp.figures.claims import claim_rows
from interp.figures.claims_figure import claims_matrix
from interp.interventions.circuits.circuit import Circuit, CircuitEdge

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analyses"))

UF_CLAIM = "UF's copy runs through induction (reads at o+1)"
UB_CLAIM = "UB's copy runs through anti-induction (reads at o)"
COUNTERFACTUALS = ("previous_token_cut", "mean", "zero", "corrupt")


def edge_table(folder: Path, task: str, clean: int, removed: int, n: int = 128, model: str = "m") -> None:
    """The paper's edge patching: ``clean`` / ``removed`` exact copies of ``n`` without and with its edges."""
    condition = {"UF": "induction", "UB": "anti_induction"}[task]
    write_table([{"model": model, "task": task, "length": 9, "condition": c, "n_examples": n, "accuracy": k / n}
                 for c, k in (("none", clean), (condition, removed))], folder / f"edge_patching_{model}")


def share_table(folder: Path, task: str, shares: dict[str, float], n: int = 16, model: str = "m") -> None:
    """A route table of shares alone (the published format before necessity was measured)."""
    rows = [{"model": model, "task": task, "length": 9, "format": "single-shot", "shots": 1, "head_set": "all", "prompt": i,
             "route": r, "heads": "all", "clean_metric": 3.0, "counterfactual_metric": -1.0,
             "patched_metric": 3.0 - 4.0 * share + (0.05 if i % 2 else -0.05), "correct": True}
            for i in range(n) for r, share in shares.items()]
    write_table(rows, folder / f"circuit_routes_{model}_{task}")


def route_table(folder: Path, task: str, left: Callable[[str, str, str], int], shares: dict[str, float], n: int = 32,
                model: str = "m") -> None:
    """A route table with necessity rows: ``left(route, kind, counterfactual)`` of the ``n`` prompts stay copied
    with that read removed; ``shares`` the value reads' shares of the gap under corrupt patching."""
    rows = []
    for i in range(n):
        for route in ("o-1", "o", "o+1", "o-1+o"):
            for kind in ("value", "key"):
                for cf in COUNTERFACTUALS:
                    share = shares.get(route, 0.0) if (kind, cf) == ("value", "corrupt") else 0.0
                    rows.append({"model": model, "task": task, "length": 9, "format": "single-shot", "shots": 1,
                                 "head_set": "all", "heads": "all", "prompt": i, "route": route, "kind": kind,
                                 "test": "necessity", "counterfactual": cf, "removed": 8, "skipped": 0,
                                 "clean_metric": 3.0, "counterfactual_metric": -1.0,
                                 "patched_metric": 3.0 - 4.0 * share + (0.05 if i % 2 else -0.05),
                                 "clean_margin": 2.0, "counterfactual_margin": -1.0, "patched_margin": 1.0,
                                 "clean_logprob": -0.1, "counterfactual_logprob": -3.0, "patched_logprob": -0.5,
                                 "correct": True, "patched_correct": i < left(route, kind, cf)})
    write_table(rows, folder / f"circuit_routes_{model}_{task}")


def saved_circuit(folder: Path, task: str, edges: tuple[CircuitEdge, ...], recovered: float = 0.95, model: str = "m",
                  stem: str | None = None) -> Path:
    """A circuit as analyses/find_circuit.py publishes it: a table whose JSON holds the whole `Circuit`."""
    c = Circuit(model, task, "masks", "roles", edges, recovered=recovered, accuracy=1.0, clean_accuracy=1.0,
                clean_metric=29.0, empty_metric=-29.0, n_prompts=8, total_edges=1049, config={"length": 5})
    return write_table(c.rows(), folder / (stem or f"circuit_{model}_{task}_L5_masks"), metadata=c.to_json())[1]


def rows_of(folder: Path) -> dict[tuple[str, str], object]:
    claims = claim_rows(folder)
    keys = [(c.claim, c.model) for c in claims]
    assert len(keys) == len(set(keys)), keys  # one row per (claim, model)
    return dict(zip(keys, claims))


def test_edge_patching_and_shares_give_one_row_not_two_that_contradict(tmp_path):
    # the UB fine-tune as published: edge patching 1.00 -> 0.88 (was "anti-induction edges carry UB: yes +0.12"),
    # shares o-1 0.96 / o 0.11 (was "UB's circuit runs through the anti-induction route: NO -0.85")
    edge_table(tmp_path, "UB", 128, 113)
    share_table(tmp_path, "UB", {"o-1": 0.96, "o": 0.11, "o+1": 0.01})
    got = rows_of(tmp_path)
    assert list(got) == [(UB_CLAIM, "m")]
    row = got[(UB_CLAIM, "m")]
    assert row.verdict == "contradicts" and row.why == "carried by o-1 directly; o not needed, though it helps"
    assert abs(row.estimate - 15 / 128) < 1e-9 and row.n == 128  # the drop without the read, the grid's number
    assert "1.00 -> 0.88" in row.value and "o-1 0.96" in row.value and "o 0.11" in row.value
    assert claims_matrix([row])[0]["m"] == "NO +0.12: carried by o-1 directly; o not needed, though it helps"


def test_a_needed_read_with_a_small_share_is_an_and(tmp_path):
    # a model that needs both reads: edge patching 1.00 -> 0.00, shares o-1 0.76 / o 0.25 (once "NO" by share alone)
    edge_table(tmp_path, "UB", 128, 0)
    share_table(tmp_path, "UB", {"o-1": 0.76, "o": 0.25, "o+1": 0.0})
    row = rows_of(tmp_path)[(UB_CLAIM, "m")]
    assert row.verdict == "supports" and row.why == "needed, small share: an AND with o-1" and row.estimate == 1.0


def test_route_necessity_decides_and_corrupt_patching_is_only_beside_it(tmp_path):
    def left(route: str, kind: str, cf: str) -> int:
        if route in ("o-1", "o-1+o"):
            return 0  # the answer's position read directly: needed under every removal
        if route == "o" and kind == "value":
            return {"previous_token_cut": 23, "corrupt": 0}.get(cf, 32)  # 23/32 [0.55, 0.84]: helps, not needed
        return 32

    route_table(tmp_path, "UB", left, {"o-1": 0.9, "o": 0.1, "o+1": 0.0})
    row = rows_of(tmp_path)[(UB_CLAIM, "m")]
    assert row.verdict == "contradicts"
    assert row.why == ("carried by o-1 directly; o not needed, though it helps; corrupt patching breaks it: a "
                       "competitor comes in")
    assert "value, previous-token cut 0.72 [0.55, 0.84]" in row.value and "corrupt patching: value 0.00" in row.value
    assert "not used: no edge patching table" in row.value and "not used: no saved circuit" in row.value


def test_a_necessity_row_with_a_blank_cell_is_refused_by_name(tmp_path, capsys):
    import claims as claims_script

    route_table(tmp_path, "UB", lambda route, kind, cf: 32, {"o": 0.5})
    path = tmp_path / "circuit_routes_m_UB.csv"
    lines = path.read_text().splitlines()
    lines[1] = lines[1].removesuffix(",False").removesuffix(",True") + ","  # patched_correct left blank
    path.write_text("\n".join(lines) + "\n")
    code = claims_script.run(claims_script.main, ["--results", str(tmp_path), "--out", str(tmp_path / "out"),
                                                  "--formats", ""])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "circuit_routes_m_UB.csv: a necessity row (prompt 0, route o-1)" in err[0]
    assert "without patched_correct" in err[0]


def test_removals_that_disagree_are_inconclusive_and_say_which(tmp_path):
    def left(route: str, kind: str, cf: str) -> int:
        return 0 if (route, kind, cf) == ("o", "value", "zero") else 32

    route_table(tmp_path, "UB", left, {"o-1": 0.1, "o": 0.5, "o+1": 0.1})
    row = rows_of(tmp_path)[(UB_CLAIM, "m")]
    assert row.verdict == "inconclusive" and row.why == "value needed under zero, not under mean, previous-token cut"


def test_a_large_share_does_not_make_a_read_needed(tmp_path):
    # removal leaves the copy whole while corrupt patching of the read moves most of the logit difference
    edge_table(tmp_path, "UF", 128, 128)
    share_table(tmp_path, "UF", {"o-1": 0.0, "o": 0.0, "o+1": 0.9})
    row = rows_of(tmp_path)[(UF_CLAIM, "m")]
    assert row.verdict == "contradicts"
    assert row.why == "o+1 not needed, large share: corrupt patching brings a competitor in"


def test_a_saved_circuit_speaks_when_nothing_else_measured(tmp_path):
    read = CircuitEdge("value", "a1.1", "a1.1.v", "c", "o", score=-40.0, loss=0.9)
    saved_circuit(tmp_path, "UB", (read, CircuitEdge("residual", "logits", "a1.1", "c", loss=0.5)))
    row = rows_of(tmp_path)[(UB_CLAIM, "m")]
    assert row.verdict == "supports" and row.why == "in the circuit; no removal or share"
    assert "a1.1 value, largest loss 0.90" in row.value and row.source == "circuit_m_UB_L5_masks.json"


def test_a_needed_read_missing_from_a_faithful_circuit_is_said(tmp_path):
    edge_table(tmp_path, "UB", 128, 0)
    saved_circuit(tmp_path, "UB", (CircuitEdge("value", "a1.1", "a1.1.v", "c", "o-1", loss=0.9),))
    row = rows_of(tmp_path)[(UB_CLAIM, "m")]
    assert row.verdict == "supports" and row.why == "needed; not in the circuit"


def test_an_earlier_circuit_table_is_not_a_circuit_and_a_misnamed_one_is_refused(tmp_path):
    write_table([{"model": "m", "task": "UB", "length": 5, "rank": 1, "reader": "a1.1.v", "writer": "embed", "score": 1.0}],
                tmp_path / "circuit_m_UB", metadata={"model": "m"})  # the per-length tables of earlier runs
    assert claim_rows(tmp_path) == []
    saved_circuit(tmp_path, "UB", (), model="other", stem="circuit_m_UB_L5_masks")
    with pytest.raises(ValueError, match=r"circuit_m_UB_L5_masks.json: a circuit of other UB; expected the model"):
        claim_rows(tmp_path)


def test_a_circuit_that_cannot_say_decides_nothing(tmp_path):
    path = saved_circuit(tmp_path, "UB", (CircuitEdge("value", "a1.1", "a1.1.v", "c", "o-1"),), recovered=0.3)
    row = rows_of(tmp_path)[(UB_CLAIM, "m")]
    assert row.verdict == "cannot test" and "keeps under 0.8 of the gap" in row.note
    data = json.loads(path.read_text())
    data["metadata"]["clean_accuracy"] = float("nan")  # JSON NaN: a number a circuit cannot have
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"circuit_m_UB_L5_masks.json: clean_accuracy is nan, expected a finite number"):
        claim_rows(tmp_path)


def test_a_task_the_model_does_not_copy_cannot_test_the_hypothesis(tmp_path):
    edge_table(tmp_path, "UB", 2, 0)
    row = rows_of(tmp_path)[(UB_CLAIM, "m")]
    assert row.verdict == "cannot test" and row.why == "UB at 0.02 clean"
    assert claims_matrix([row])[0]["m"] == "- (UB at 0.02 clean)"


def test_the_claims_script_writes_tables_that_read_back(tmp_path):
    import claims as claims_script

    edge_table(tmp_path, "UB", 128, 113)
    edge_table(tmp_path, "UF", 2, 0, model="n")
    share_table(tmp_path, "UB", {"o-1": 0.96, "o": 0.11, "o+1": 0.01})
    out = tmp_path / "out"
    out.mkdir()
    page = tmp_path / "README.md"
    page.write_text("<!-- claims-matrix:start -->\nold\n<!-- claims-matrix:end -->\n")
    assert claims_script.main(["--results", str(tmp_path), "--out", str(out), "--formats", "", "--readme", str(page),
                               "--quiet"]) == 0
    claims = read_published(out / "claims.csv")  # the schema checks every cell, "why" included
    matrix = {r["claim"]: r for r in read_published(out / "claims_matrix.csv")}
    assert [c["claim"] for c in claims] == [UB_CLAIM, UF_CLAIM]
    assert matrix[UB_CLAIM]["m"] == "NO +0.12: carried by o-1 directly; o not needed, though it helps"
    assert matrix[UF_CLAIM]["n"] == "- (UF at 0.02 clean)"
    assert "| NO +0.12: carried by o-1 directly; o not needed, though it helps |" in page.read_text()


@pytest.mark.parametrize("cell", ["- [a](javascript:x)", "yes +0.50: <b>", "NO: carried", "- (a) [b]", "yes +0.5: x"])
def test_the_matrix_schema_refuses_what_a_cell_never_holds(tmp_path, cell):
    path = write_table([{"claim": "c", "m": cell}], tmp_path / "claims_matrix")[0]
    with pytest.raises(ValueError, match=r"claims_matrix.csv, line 2: m is"):
        read_published(path)


def test_findings_state_the_rule():
    text = (Path(__file__).resolve().parents[1] / "docs" / "findings.md").read_text()
    section = text.split("## How a hypothesis is decided", 1)[1].split("\n## ", 1)[0]
    for phrase in ("needed", "not needed", "supports", "contradicts", "inconclusive", "cannot test", "corrupt"):
        assert phrase in section
